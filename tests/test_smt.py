"""SMT: per-thread speed from the core's total-throughput curve."""

from __future__ import annotations

import pytest

from warmcore.models.hardware import HardwareMachine
from warmcore.models.presets import Preset
from warmcore.models.smt import fine_grained_factor, pipe_share, smt_speed, smt_total, speed_table
from warmcore.simcore.work import TASK, Footprint, Segment

BIG = (1.0, 1.25)
THROUGHPUT = (1.0, 1.9, 2.7, 3.4)


def test_speed_is_curve_over_k():
    assert smt_speed(1, BIG) == 1.0
    assert smt_speed(2, BIG) == pytest.approx(0.625)
    for k in range(1, 5):
        assert smt_speed(k, THROUGHPUT) == pytest.approx(THROUGHPUT[k - 1] / k)


def test_totals_are_the_curve():
    for curve in (BIG, THROUGHPUT, (1.0,)):
        for k in range(1, len(curve) + 1):
            assert smt_total(k, curve) == pytest.approx(curve[k - 1])
    assert smt_total(0, BIG) == 0.0


def test_beyond_the_curve_total_stays_flat_and_k0_is_a_lone_thread():
    assert smt_total(3, BIG) == pytest.approx(1.25)
    assert smt_speed(0, BIG) == 1.0
    assert smt_speed(4, ()) == 1.0


def test_speed_table():
    assert speed_table(THROUGHPUT, 4) == pytest.approx([1.0, 1.0, 0.95, 0.9, 0.85])


SMT2 = Preset(name="test-smt", description="2 cores x 2 threads", cores_per_socket=2,
              threads_per_core=2, smt_throughput=BIG, pstates_ghz=(2.0,), base_ipc=2.0)
ONLY_SMT = {e: e == "smt" for e in ("caches", "coherence", "contention", "membus", "smt",
                                    "dvfs", "switch_costs", "energy")}


def _compute(m, cpu):
    return m.execute(cpu, Segment(1e6), "t", 0.0)[7]


def test_two_busy_siblings_each_get_s2():
    m = HardwareMachine(SMT2, effects=ONLY_SMT)
    lone = 1e6 / 2.0 / 2e9
    m.cpu_busy(0, 0.0)
    assert _compute(m, 0) == pytest.approx(lone)
    m.cpu_busy(2, 0.0)                       # sibling of CPU 0 (cpu + n_cores)
    assert _compute(m, 0) == pytest.approx(lone / smt_speed(2, BIG))
    assert _compute(m, 2) == pytest.approx(lone / smt_speed(2, BIG))
    m.cpu_busy(1, 0.0)                       # another core: no effect on core 0
    assert _compute(m, 0) == pytest.approx(lone / smt_speed(2, BIG))
    m.cpu_idle(2, 1.0)
    assert _compute(m, 0) == pytest.approx(lone)
    # a CPU not marked busy counts itself: its busy sibling still shares the core
    m.cpu_idle(0, 1.0)
    m.cpu_busy(2, 1.0)
    assert _compute(m, 0) == pytest.approx(lone / smt_speed(2, BIG))


def test_smt_effect_off_ignores_siblings():
    eff = dict(ONLY_SMT, smt=False)
    m = HardwareMachine(SMT2, effects=eff)
    m.cpu_busy(0, 0.0)
    m.cpu_busy(2, 0.0)                       # sibling of CPU 0
    assert _compute(m, 0) == pytest.approx(1e6 / 2.0 / 2e9)


# Fine-grained multithreading (models/smt.py): the UltraSPARC T1's threads fill only
# each other's memory stalls.

FG = Preset(name="test-fgmt", description="1 core x 4 threads, fine-grained", cores_per_socket=1,
            threads_per_core=4, smt_throughput=(1.0, 1.0, 1.0, 1.0), smt_policy="fine-grained",
            pstates_ghz=(1.0,), base_ipc=1.0, mlp=1.0, dram_ns=100.0,
            extra={"private_l2": False, "stream_ahead_lines": 0.0})
CACHES_AND_SMT = {e: e in ("smt", "caches") for e in ONLY_SMT}


def test_pipe_share_and_factor_by_hand():
    assert pipe_share(1.0, 0.0) == 1.0 and pipe_share(1.0, 1.0) == 0.5
    assert pipe_share(0.0, 0.0) == 1.0
    # four compute-bound threads: U = 4 on one pipe, each 4x slower: the core 1x
    assert fine_grained_factor(4.0, 1.0) == 4.0
    # four 50%-stalled threads: U = 2, each 2x slower: the core 4 / 2 = 2x
    assert fine_grained_factor(2.0, 1.0) == 2.0
    # two 50%-stalled threads fill each other's stalls exactly: no slowdown
    assert fine_grained_factor(1.0, 1.0) == 1.0


def _busy(m, cpus):
    for c in cpus:
        m.cpu_busy(c, 0.0)


def test_four_compute_bound_threads_deliver_one_thread():
    m = HardwareMachine(FG, effects=ONLY_SMT)
    lone = 1e6 / 1.0 / 1e9                    # 1 ms: 1e6 instructions at 1 IPC, 1 GHz
    _busy(m, [0])
    assert m.execute(0, Segment(1e6), "t", 0.0)[0] == pytest.approx(lone)
    _busy(m, [1, 2, 3])
    for cpu in range(4):                      # every thread 4x: the core delivers 1x
        m.execute(cpu, Segment(1e6), "t", 0.0)
    assert m.execute(0, Segment(1e6), "t", 0.0)[0] == pytest.approx(4 * lone)
    assert m.execute(0, Segment(1e6), "t", 0.0)[7] == pytest.approx(4 * lone)


def _half_stalled(m, cpu, key):
    # 1e5 instructions (100 us at 1 IPC, 1 GHz) and 1000 cold lines from DRAM
    # (1000 x 100 ns / MLP 1 = 100 us): stall share 0.5
    return m.execute(cpu, Segment(1e5, (Footprint(TASK, key, 1000.0),)), "t", 0.0)


def test_four_half_stalled_threads_deliver_two_threads():
    m = HardwareMachine(FG, effects=CACHES_AND_SMT)
    _busy(m, [0])
    alone = _half_stalled(m, 0, "a")
    assert alone[0] == pytest.approx(200e-6) and alone[8] == pytest.approx(100e-6)
    _busy(m, [1])                             # U = 0.5 + 0.5: the pipe still keeps up
    assert _half_stalled(m, 1, "b")[0] == pytest.approx(200e-6)
    _busy(m, [2, 3])
    for cpu, key in ((2, "c"), (3, "d")):
        _half_stalled(m, cpu, key)
    four = _half_stalled(m, 0, "e")           # U = 2: each 2x slower, the core 2x
    assert four[0] == pytest.approx(400e-6)
    assert four[7] == pytest.approx(300e-6)   # the wait for the pipe counts as compute
    assert four[8] == pytest.approx(100e-6)   # the DRAM time stays what it was


def test_a_siblings_new_segment_rerates_the_others():
    m = HardwareMachine(FG, effects=CACHES_AND_SMT)
    seen = []
    m.rate_hook = lambda cpu, now: seen.append(cpu)
    _busy(m, [0, 1])
    seen.clear()
    _half_stalled(m, 0, "a")                  # CPU 0's pipe share 1.0 -> 0.5
    assert seen == [1]
    seen.clear()
    _half_stalled(m, 0, "b")                  # the same share: nothing to re-rate
    assert seen == []
