"""HardwareMachine: the MachineModel protocol with caches, coherence, contention, bus, SMT."""

from __future__ import annotations

import math
import sys

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from warmcore.models.cache import survivors_lru
from warmcore.models.hardware import EFFECTS, HardwareMachine
from warmcore.models.presets import IDEAL, PRESETS, Preset
from warmcore.simcore.machine import IdealMachine, MachineModel
from warmcore.simcore.work import (
    C_COHER,
    C_COMPUTE,
    C_CONTEND,
    C_CYC,
    C_DUR,
    C_L1L,
    C_L1M,
    C_LLCL,
    C_LLCM,
    C_RELOAD,
    CODE,
    COST_FIELDS,
    SHARED,
    TASK,
    THREAD,
    Footprint,
    Segment,
)

ALL_OFF = dict.fromkeys(EFFECTS, False)
# Deterministic physics: no governor, no energy bookkeeping.
FIXED = {"dvfs": False, "energy": False}

# 1 socket, 4 cores x 2 threads, 2 LLC domains of 2 cores; Linux numbering (sibling of
# cpu N is N + 4): cpu 0,4 = core 0; 1,5 = core 1 (LLC 0); 2,6 = core 2; 3,7 = core 3 (LLC 1).
TEST = Preset(
    name="test-2ccx", description="test machine", sockets=1, cores_per_socket=4,
    threads_per_core=2, llc_domains_per_socket=2, pstates_ghz=(1.0, 2.0, 3.0),
    base_ipc=1.0, l1d_kib=32, l1d_ways=8, l2_kib=256, l2_ways=8, llc_mib=2, llc_ways=16,
    l1_lat_cyc=4, l2_lat_cyc=12, llc_lat_cyc=42, dram_ns=80.0, mlp=2.0,
    c2c_smt_ns=7.0, c2c_llc_ns=40.0, c2c_cross_llc_ns=100.0, c2c_socket_ns=130.0,
    smt_throughput=(1.0, 1.25), mem_bw_gbs=20.0, mem_channels=2,
    ctx_switch_us=3.8, futex_wake_us=1.5, wake_latency_idle_us=30.0, wake_latency_busy_us=5.0,
)


def machine(preset=TEST, idle_governor=None, **eff) -> HardwareMachine:
    return HardwareMachine(preset, effects={**FIXED, **eff}, idle_governor=idle_governor)


# ----------------------------------------------------------------------------- protocol
def test_implements_every_protocol_member():
    m = HardwareMachine(TEST)
    for name in ("n_cpus", "cpu_core", "cpu_llc", "cpu_socket", "nominal_ips"):
        assert hasattr(m, name)
    for name, member in vars(MachineModel).items():
        if callable(member) and not name.startswith("_"):
            assert callable(getattr(m, name)), name


def test_topology_and_nominal_ips():
    m = HardwareMachine(TEST)
    assert m.n_cpus == 8
    assert list(m.cpu_core) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert list(m.cpu_llc) == [0, 0, 1, 1, 0, 0, 1, 1]
    assert list(m.cpu_socket) == [0] * 8
    assert m.nominal_ips == 1.0 * 3.0e9


def test_unknown_effect_is_an_error():
    with pytest.raises(ValueError, match="unknown effects"):
        HardwareMachine(TEST, effects={"cache": True})


segments = st.builds(
    Segment,
    instructions=st.floats(0, 1e7),
    footprint=st.lists(st.builds(Footprint, kind=st.sampled_from([TASK, THREAD, CODE, SHARED]),
                                 key=st.integers(0, 5), lines=st.floats(0, 1e4),
                                 writes=st.booleans()), max_size=4).map(tuple),
    contended_ops=st.integers(0, 100),
    contended_line=st.sampled_from(["lock", None]),
)


@settings(max_examples=150, deadline=None)
@given(segs=st.lists(st.tuples(st.integers(0, 3), segments), min_size=1, max_size=8),
       idle=st.floats(0, 1.0))
def test_all_effects_off_on_ideal_equals_ideal_machine(segs, idle):
    hw = HardwareMachine(IDEAL, effects=ALL_OFF)
    ideal = IdealMachine(cores=4, ghz=1.0, cpi=1.0)
    for name in ("n_cpus", "nominal_ips"):
        assert getattr(hw, name) == getattr(ideal, name)
    for name in ("cpu_core", "cpu_llc", "cpu_socket"):
        assert list(getattr(hw, name)) == list(getattr(ideal, name))
    now = 0.0
    for cpu, seg in segs:
        hw.cpu_busy(cpu, now)
        ideal.cpu_busy(cpu, now)
        a = hw.execute(cpu, seg, "t", now)
        b = ideal.execute(cpu, seg, "t", now)
        assert a == b                                     # the very same numbers
        now += a[C_DUR]
        hw.cpu_idle(cpu, now)
    assert hw.switch_cost(0, "a", "b") == ideal.switch_cost(0, "a", "b")
    assert hw.wake_latency(1, idle, idle + 1.0) == ideal.wake_latency(1, idle, idle + 1.0)
    assert hw.wake_latency(1, -1.0, 1.0) == ideal.wake_latency(1, -1.0, 1.0)
    assert hw.futex_wake_cost() == ideal.futex_wake_cost()
    fa, fb = hw.finish(now), ideal.finish(now)
    assert fa["joules"] == fb["joules"] and fa["cpu_ghz"] == fb["cpu_ghz"]
    assert fa["freq_changes"] == 0


# ----------------------------------------------------------------------------- costs
def test_duration_is_the_sum_of_its_parts_and_cycles_include_stalls():
    m = HardwareMachine(TEST)   # everything on, governor of the preset
    seg = Segment(5e4, (Footprint(TASK, 1, 300, True), Footprint(THREAD, None, 50, True),
                        Footprint(CODE, "c", 200), Footprint(SHARED, "q", 2, True)), 5, "q")
    now = 0.0
    for i in range(20):
        c = m.execute(i % 8, seg, f"t{i % 3}", now)
        assert len(c) == len(COST_FIELDS)
        parts = c[C_COMPUTE] + c[C_RELOAD] + c[C_COHER] + c[C_CONTEND]
        assert c[C_DUR] == pytest.approx(parts, rel=1e-12)
        stall = c[C_DUR] - c[C_COMPUTE]
        ghz = m.clock.ghz(i % 8, now)
        assert c[C_CYC] == pytest.approx(c[C_COMPUTE] * ghz * 1e9 + stall * ghz * 1e9)
        assert all(math.isfinite(x) and x >= 0.0 for x in c)
        assert c[C_L1M] <= c[C_L1L] and c[C_LLCL] <= c[C_L1M] + 1e-9
        assert c[C_LLCM] <= c[C_LLCL] + 1e-9
        now += c[C_DUR]


def test_l1d_loads_are_instructions_times_load_fraction():
    m = machine()
    c = m.execute(0, Segment(1e5, (Footprint(TASK, 1, 100),)), "t", 0.0)
    assert c[C_L1L] == pytest.approx(0.33 * 1e5)
    # never fewer loads than data lines touched
    c = m.execute(0, Segment(10, (Footprint(TASK, 2, 100),)), "t", 0.0)
    assert c[C_L1L] == pytest.approx(100)


def _producer_consumer(cpu, task_lines, thread_lines=0.0, code_lines=0.0, ins=1e4, **eff):
    m = machine(**eff)
    prod = Segment(ins, (Footprint(TASK, 1, task_lines, True),
                         Footprint(THREAD, None, thread_lines, True),
                         Footprint(CODE, "parse", code_lines)))
    cons = Segment(ins, (Footprint(TASK, 1, task_lines, False),
                         Footprint(THREAD, None, thread_lines, True),
                         Footprint(CODE, "handle", code_lines)))
    p = m.execute(0, prod, "producer", 0.0)
    return m, m.execute(cpu, cons, "consumer", p[C_DUR])


@settings(max_examples=60, deadline=None)
@given(task=st.floats(1, 6000), thread=st.floats(0, 300), code=st.floats(0, 400),
       ins=st.floats(0, 1e5))
def test_consumer_on_another_core_costs_more_than_on_the_producing_core(task, thread, code,
                                                                         ins):
    _, same = _producer_consumer(0, task, thread, code, ins)
    _, sib = _producer_consumer(4, task, thread, code, ins)       # SMT sibling of cpu 0
    _, other = _producer_consumer(1, task, thread, code, ins)     # same LLC domain
    _, far = _producer_consumer(2, task, thread, code, ins)       # other LLC domain
    # the SMT sibling shares the core's L1/L2: exactly the producing core's cost
    assert sib == same
    for c in (other, far):
        assert c[C_DUR] > same[C_DUR]
        assert c[C_L1M] >= same[C_L1M] - 1e-9
        assert c[C_LLCL] >= same[C_LLCL] - 1e-9
    assert far[C_DUR] >= other[C_DUR]
    assert far[C_LLCM] >= other[C_LLCM] - 1e-9


def test_chips_without_private_l2_send_l1_misses_to_the_llc():
    two_level = Preset(name="c2q", description="L1 + shared L2 as LLC", cores_per_socket=2,
                       pstates_ghz=(2.0,), l1_lat_cyc=3, l2_lat_cyc=3, llc_lat_cyc=14,
                       extra={"private_l2": False})
    m = machine(two_level)
    m.execute(0, Segment(0, (Footprint(TASK, 1, 400),)), "t", 0.0)
    m.execute(0, Segment(0, (Footprint(TASK, 2, 2000),)), "t", 1e-4)   # flushes the L1
    c = m.execute(0, Segment(0, (Footprint(TASK, 1, 400),)), "t", 2e-4)
    assert c[C_L1M] > 390 and c[C_LLCL] == pytest.approx(c[C_L1M])
    assert c[C_RELOAD] == pytest.approx(c[C_L1M] * (14 - 3) / 2e9 / 1.75, rel=1e-6)


def test_lines_held_by_the_writer_are_core_to_core_transfers():
    m, c = _producer_consumer(1, 100)
    # all 100 lines still in core 0's L2: 100 transfers at 40 ns, overlapped by mlp 2
    assert c[C_COHER] == pytest.approx(100 * 40e-9 / 2.0, rel=1e-3)
    assert c[C_LLCM] == pytest.approx(0.0, abs=1e-6)   # a snoop inside the LLC domain hits
    assert m.c2c_lines == pytest.approx(100, rel=1e-3)
    _, far = _producer_consumer(2, 100)
    assert far[C_COHER] == pytest.approx(100 * 100e-9 / 2.0, rel=1e-3)
    assert far[C_LLCM] == pytest.approx(100, rel=1e-3)  # from another L3: an LLC miss
    # without the coherence effect the same read is plain misses (here: DRAM)
    _, plain = _producer_consumer(1, 100, coherence=False)
    assert plain[C_COHER] == 0.0 and plain[C_RELOAD] > 0.0


def test_lines_read_once_are_shared_afterwards():
    m, first = _producer_consumer(1, 100)
    again = m.execute(1, Segment(0, (Footprint(TASK, 1, 100),)), "consumer", 1e-3)
    assert again[C_COHER] == 0.0 and again[C_L1M] < 1.0   # now warm and valid here
    # a third core gets them from the shared LLC, not from core 0 (no longer dirty)
    third = m.execute(3, Segment(0, (Footprint(TASK, 1, 100),)), "x", 2e-3)
    assert third[C_COHER] == 0.0


def test_a_write_invalidates_other_copies():
    m, _ = _producer_consumer(1, 100)
    m.execute(0, Segment(0, (Footprint(TASK, 1, 100, True),)), "producer", 1e-3)
    c = m.execute(1, Segment(0, (Footprint(TASK, 1, 100),)), "consumer", 2e-3)
    assert c[C_COHER] > 0.0 and c[C_L1M] == pytest.approx(100)


def test_warmth_decays_as_other_threads_touch_lines():
    """The indirect cost of a context switch comes from the cache model: thread A's
    reload after thread B ran grows with B's footprint; the direct cost is constant."""
    reloads, misses = [], []
    for b_lines in (0, 200, 800, 3200, 12800):
        m = machine()
        a = Segment(1e4, (Footprint(THREAD, None, 300, True),))
        m.execute(0, a, "A", 0.0)
        if b_lines:
            m.execute(0, Segment(1e4, (Footprint(THREAD, None, b_lines, True),)), "B", 1e-4)
        c = m.execute(0, a, "A", 1e-3)
        reloads.append(c[C_RELOAD])
        misses.append(c[C_L1M])
        assert m.switch_cost(0, "B", "A") == pytest.approx(3.8e-6)
    assert reloads == sorted(reloads) and len(set(reloads)) == len(reloads)
    # alone, only the lines that do not fit their set miss (300 lines, 64 sets x 8 ways)
    assert misses[0] == pytest.approx(300 - survivors_lru(0, 300, 64, 8), rel=1e-3)
    assert misses[0] < 10 and misses[-1] > 250


def test_migration_leaves_private_state_behind():
    m = machine()
    seg = Segment(1e4, (Footprint(THREAD, None, 200, True),))
    m.execute(0, seg, "A", 0.0)
    home = m.execute(0, seg, "A", 1e-4)
    moved = m.execute(1, seg, "A", 2e-4)     # the stack is dirty in core 0's L2
    assert moved[C_DUR] > home[C_DUR] and moved[C_COHER] > 0.0


def test_contended_ops_on_four_cores_stall_more_than_on_one():
    def run(cpus):
        m = machine()
        seg = Segment(100, contended_ops=50, contended_line="counter")
        now = stall = 0.0
        for _ in range(200):
            durs = []
            for i in range(4):
                cpu = cpus[i % len(cpus)]
                t = now if len(cpus) > 1 else now + sum(durs)
                c = m.execute(cpu, seg, f"t{i}", t)
                stall += c[C_CONTEND]
                durs.append(c[C_DUR])
            now += max(durs) if len(cpus) > 1 else sum(durs)
        return stall, now

    stall4, wall4 = run([0, 1, 2, 3])
    stall1, wall1 = run([0])
    assert stall4 > 10 * stall1
    assert wall1 < wall4
    m = machine(contention=False)
    c = m.execute(0, Segment(100, contended_ops=50, contended_line="x"), "t", 0.0)
    assert c[C_CONTEND] == 0.0


def test_memory_bus_load_raises_dram_latency():
    def stream(cores, **eff):
        m = machine(**eff)
        now, last = 0.0, None
        for r in range(40):
            for cpu in cores:
                seg = Segment(1e3, (Footprint(TASK, (r, cpu), 2000, True),))
                last = m.execute(cpu, seg, f"t{cpu}", now)
            now += last[C_DUR]
        return last

    busy = stream([0, 1, 2, 3])
    alone = stream([0])
    assert busy[C_CONTEND] > alone[C_CONTEND] > 0.0
    assert stream([0, 1, 2, 3], membus=False)[C_CONTEND] == 0.0


def test_dram_time_does_not_scale_with_the_clock_but_cache_hits_do():
    def run(ghz):
        m = HardwareMachine(TEST, effects={"energy": False}, governor="userspace",
                            userspace_ghz=ghz)
        cold = m.execute(0, Segment(3e4, (Footprint(TASK, 1, 1000),)), "t", 0.0)
        m.execute(0, Segment(0, (Footprint(TASK, 2, 600),)), "t", 1e-4)   # evicts L1 only
        l2hit = m.execute(0, Segment(0, (Footprint(TASK, 1, 1000),)), "t", 2e-4)
        return cold, l2hit

    cold1, l2_1 = run(1.0)
    cold3, l2_3 = run(3.0)
    assert cold1[C_COMPUTE] == pytest.approx(3 * cold3[C_COMPUTE])
    assert cold1[C_RELOAD] == pytest.approx(cold3[C_RELOAD])           # DRAM ns
    assert l2_1[C_RELOAD] == pytest.approx(3 * l2_3[C_RELOAD], rel=1e-6)  # cycles
    assert l2_1[C_CYC] == pytest.approx(l2_3[C_CYC], rel=1e-6)


# ----------------------------------------------------------------------------- OS costs
def test_switch_wake_and_futex_costs():
    m = machine(idle_governor="hindsight")    # the rule by idle time (models/cpuidle.py: menu)
    assert m.switch_cost(0, "a", "b") == pytest.approx(3.8e-6)
    assert m.futex_wake_cost() == pytest.approx(1.5e-6)
    assert m.wake_latency(0, -1.0, 1.0) == pytest.approx(5e-6)          # CPU busy
    assert m.wake_latency(0, 0.9999, 1.0) == pytest.approx(7e-6)        # shallow C-state
    assert m.wake_latency(0, 0.5, 1.0) == pytest.approx(30e-6)          # deep C-state
    off = machine(switch_costs=False, idle_governor="hindsight")
    assert (off.switch_cost(0, "a", "b"), off.futex_wake_cost(),
            off.wake_latency(0, 0.0, 1.0), off.wake_latency(0, -1.0, 1.0)) == (0, 0, 0, 0)


# ----------------------------------------------------------------------------- DVFS, energy
def test_dvfs_off_runs_at_the_max_clock():
    turbo = Preset(name="t", description="t", pstates_ghz=(1.0, 2.0), turbo_ghz=3.5,
                   turbo=True)
    m = HardwareMachine(turbo, effects={"dvfs": False})
    c = m.execute(0, Segment(3.5e9), "t", 0.0)
    assert c[C_COMPUTE] == pytest.approx(1.0)
    assert m.finish(1.0)["cpu_ghz"] == [3.5] * m.n_cpus


def test_finish_reports_energy_clock_and_frequency_changes():
    m = HardwareMachine(TEST, governor="ondemand")
    env = simpy.Environment()
    m.bind(env, None)
    m.cpu_busy(0, 0.0)
    c = m.execute(0, Segment(1e6), "t", 0.0)
    m.cpu_idle(0, c[C_DUR])
    env.run(until=0.1)                           # idle: ondemand drops the clock
    out = m.finish(0.1)
    assert set(out) >= {"joules", "cpu_ghz", "freq_changes"}
    assert out["joules"] > 0.0
    assert len(out["cpu_ghz"]) == 8 and min(out["cpu_ghz"]) < 3.0
    assert out["freq_changes"] >= 1
    off = HardwareMachine(TEST, effects={"energy": False}, governor="ondemand")
    assert off.finish(0.1)["joules"] == 0.0


# ----------------------------------------------------------------------------- structure
def _count_lines(fn):
    """Python lines executed by fn() (all frames): an operation count, not a timing."""
    n = 0

    def tracer(frame, event, arg):
        nonlocal n
        if event == "line":
            n += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return n


def test_cost_per_call_is_independent_of_core_count():
    small = Preset(name="s", description="2 cores", cores_per_socket=2,
                   pstates_ghz=(1.0, 2.0))
    big = Preset(name="b", description="4 x 32 cores", sockets=4, cores_per_socket=32,
                 pstates_ghz=(1.0, 2.0))
    counts = []
    for p in (small, big):
        # the hindsight idle rule: under menu, the package's C6 start is a max over
        # its idle cores kept in a heap (models/energy.py _socket_deep_at), whose
        # cost grows as log(cores)
        m = HardwareMachine(p, governor="ondemand", idle_governor="hindsight")
        seg = [Segment(1e4, (Footprint(TASK, i, 100, i % 2 == 0),
                             Footprint(THREAD, None, 30, True), Footprint(CODE, "c", 50),
                             Footprint(SHARED, "q", 2, True)), 3, "q") for i in range(40)]

        def work(m=m, seg=seg):
            for i, s in enumerate(seg):
                cpu = i % 2
                m.cpu_busy(cpu, i * 1e-5)
                m.execute(cpu, s, f"t{cpu}", i * 1e-5)
                m.cpu_idle(cpu, i * 1e-5 + 5e-6)
                m.switch_cost(cpu, "a", "b")
                m.wake_latency(cpu, i * 1e-5, i * 1e-5 + 1e-6)

        counts.append(_count_lines(work))
    assert counts[0] == counts[1] > 0


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_runs_with_all_effects(name):
    m = HardwareMachine(PRESETS[name])
    env = simpy.Environment()
    m.bind(env, None)
    now = 0.0
    for i in range(30):
        cpu = (i * 5) % m.n_cpus
        m.cpu_busy(cpu, now)
        seg = Segment(1e4, (Footprint(TASK, i // 2, 64, i % 2 == 0),
                            Footprint(THREAD, None, 20, True), Footprint(CODE, "h", 80),
                            Footprint(SHARED, "q", 1, True)), 2, "q")
        c = m.execute(cpu, seg, f"t{i % 3}", now)
        assert all(math.isfinite(x) and x >= 0.0 for x in c)
        assert c[C_DUR] == pytest.approx(c[C_COMPUTE] + c[C_RELOAD] + c[C_COHER]
                                         + c[C_CONTEND], rel=1e-12)
        now += c[C_DUR]
        m.cpu_idle(cpu, now)
    out = m.finish(now)
    assert len(out["cpu_ghz"]) == m.n_cpus and out["joules"] > 0.0


def test_code_footprints_live_in_the_l1i_not_the_l1d():
    m = machine()
    code = Segment(1000, (Footprint(CODE, "handler", 64, False),))
    data = Segment(1000, (Footprint(TASK, 1, 64, True),))
    m.execute(0, code, 1, 0.0)
    m.execute(0, data, 1, 1e-6)
    core = m.cpu_core[0]
    owner = m.hierarchy.owner
    assert (CODE, "handler") in [owner(k) for k in m.l1i[core].owners]
    assert [owner(k) for k in m.l1d[core].owners] == [(TASK, 1)]
    # Warm code then costs no L1 data misses on the next run.
    again = m.execute(0, code, 1, 2e-6)
    assert again[C_L1M] == 0


# ------------------------------------------------------------------ wake-up line transfers
def test_a_wake_up_moves_its_lines_at_the_topologys_transfer_cost():
    """wake_transfer(a, b) = futex_wake_lines x transfer_ns(a, b), serial (no MLP):
    nothing on one CPU; SMT siblings share L1/L2 (time, no LLC load); another core of
    the LLC, another LLC: LLC loads; another socket: LLC misses too."""
    m = machine()
    n = TEST.extra.futex_wake_lines
    assert n == 12.0 and not TEST.extra.wake_lines_by_part
    assert m.wake_transfer(0, 0) == (0.0, 0.0, 0.0)
    assert m.wake_transfer(0, 4) == pytest.approx((n * 7e-9, 0.0, 0.0))      # SMT sibling
    assert m.wake_transfer(0, 1) == pytest.approx((n * 40e-9, n, 0.0))       # same LLC
    assert m.wake_transfer(0, 2) == pytest.approx((n * 100e-9, n, n))        # other LLC
    two = TEST.model_copy(update={"sockets": 2, "name": "two-socket"})
    m2 = machine(two)
    assert m2.wake_transfer(0, 4) == pytest.approx((n * 130e-9, n, n))       # other socket


# TEST with a wake-up's lines counted part by part (PresetExtra.wake_lines_by_part)
BY_PART = TEST.model_copy(update={"extra": TEST.extra.model_copy(
    update={"wake_lines_by_part": True})})


def test_each_part_of_a_wake_up_moves_its_own_count_of_lines():
    """With wake_lines_by_part, wake_transfer(a, b, part): the part's PresetExtra count
    (wake_wait_lines 10, wake_rq_lines 7, wake_remote_lines 1, wake_resume_lines 7,
    wake_resume_rq_lines 5, wake_migrate_lines 7, wake_scan_lines 2) x transfer_ns(a,
    b); wake_lines is their sum (39). Without it (the default), futex_wake_lines (12)
    for the waker's part and the woken thread's, nothing for the others (24)."""
    from warmcore.simcore.machine import WAKE_PART_FIELDS, WAKE_PARTS

    m = machine(BY_PART)
    counts = (10.0, 7.0, 1.0, 7.0, 5.0, 7.0, 2.0)
    assert len(WAKE_PARTS) == len(WAKE_PART_FIELDS) == len(counts)
    assert tuple(getattr(BY_PART.extra, f) for f in WAKE_PART_FIELDS) == counts
    assert m.wake_lines == 39.0
    for part, n in enumerate(counts):
        assert m.wake_transfer(0, 1, part) == pytest.approx((n * 40e-9, n, 0.0)), part
        assert m.wake_transfer(0, 4, part) == pytest.approx((n * 7e-9, 0.0, 0.0)), part
        assert m.wake_transfer(3, 3, part) == (0.0, 0.0, 0.0)
    none = BY_PART.model_copy(update={"extra": BY_PART.extra.model_copy(
        update={"wake_rq_lines": 0.0})})
    assert machine(none).wake_transfer(0, 1, 1) == (0.0, 0.0, 0.0)
    assert machine(none).wake_transfer(0, 1, 0) == pytest.approx((10 * 40e-9, 10.0, 0.0))
    off = machine()
    assert off.wake_lines == 24.0
    for part, n in enumerate((12.0, 0.0, 0.0, 12.0, 0.0, 0.0, 0.0)):
        assert off.wake_transfer(0, 1, part) == pytest.approx((n * 40e-9, n, 0.0)), part


def test_wake_up_lines_follow_the_knob_and_the_effects():
    lines = TEST.model_copy(update={"extra": TEST.extra.model_copy(
        update={"futex_wake_lines": 30.0})})
    assert machine(lines).wake_transfer(0, 1) == pytest.approx((30 * 40e-9, 30.0, 0.0))
    for off in ("coherence", "caches", "switch_costs"):
        m = machine(**{off: False})
        assert m.wake_lines == 0.0 and m.wake_transfer(0, 1) == (0.0, 0.0, 0.0), off
    assert IdealMachine(cores=2).wake_transfer(0, 1) == (0.0, 0.0, 0.0)
