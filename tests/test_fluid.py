"""Rates that change during work (the fluid model): hand-computed makespans.

A running segment holds its remaining work; when what it shares changes (an SMT
sibling starts or stops, the clock changes, its memory-bus share changes), the
rest goes on at the new rate from that instant."""

from __future__ import annotations

import math

import pytest
import simpy

from warmcore.models.hardware import HardwareMachine
from warmcore.models.membus import maxmin_shares, md1_wait
from warmcore.models.presets import Preset
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.work import TASK, Footprint, Segment

MS = 1e-3
EFFECTS = ("caches", "coherence", "contention", "membus", "smt", "dvfs", "switch_costs",
           "energy")


def only(*on):
    return {e: e in on for e in EFFECTS}


SMT2 = Preset(name="test-smt", description="2 cores x 2 threads", cores_per_socket=2,
              threads_per_core=2, smt_throughput=(1.0, 1.25), pstates_ghz=(2.0,),
              base_ipc=2.0)


def run_jobs(machine, jobs, until=1.0):
    """jobs: (start_s, cpu, segment); returns each job's end time and the kernel."""
    env = simpy.Environment()
    k = Kernel(env, machine)
    machine.bind(env, None)
    p = k.process("p")
    ends = {}

    def body(i, seg):
        def gen(t):
            yield t.run(seg)
            ends[i] = env.now
        return gen

    for i, (start, cpu, seg) in enumerate(jobs):
        def spawn(_e=None, i=i, cpu=cpu, seg=seg):
            k.spawn(p, f"job{i}", body(i, seg), cpus=[cpu])
        if start == 0.0:
            spawn()
        else:
            env.timeout(start).callbacks.append(spawn)
    env.run(until=until)
    return ends, k


def test_two_jobs_on_smt_siblings_that_start_at_different_times():
    # 4e6 instructions at IPC 2 and 2 GHz: 1 ms alone; two siblings each run at
    # s(2) = 1.25 / 2 = 0.625 of that. A starts at 0, B (its sibling) at 0.5 ms:
    # A has 2e6 left, done at 0.625 x 4e9 ins/s -> 0.8 ms -> ends at 1.3 ms; B did
    # 2e6 by then and runs its last 2e6 alone in 0.5 ms -> ends at 1.8 ms.
    m = HardwareMachine(SMT2, effects=only("smt"))
    ends, k = run_jobs(m, [(0.0, 0, Segment(4e6)), (0.5 * MS, 2, Segment(4e6))])
    assert ends[0] == pytest.approx(1.3 * MS, rel=1e-12)
    assert ends[1] == pytest.approx(1.8 * MS, rel=1e-12)
    c = k.counters_now()["processes"]["p"]
    assert c["task_clock_s"] == pytest.approx(1.3 * MS + 1.3 * MS, rel=1e-12)
    assert c["instructions"] == pytest.approx(8e6)
    # cycles: 4e6 instructions at IPC 2 alone, at IPC 2 x 0.625 shared: A ran
    # 2e6 alone and 2e6 shared, B 2e6 shared and 2e6 alone
    assert c["cycles"] == pytest.approx(2 * (1e6 + 2e6 / 1.25 * 2 / 2), rel=1e-12)


def test_the_old_fixed_cost_would_have_been_wrong():
    # Without the sibling, both jobs alone: 1 ms each (the shared rate is not kept
    # once the sibling leaves: B at 0.625 for its whole length would end at 2.1 ms).
    m = HardwareMachine(SMT2, effects=only("smt"))
    ends, k = run_jobs(m, [(0.0, 0, Segment(4e6)), (1.5 * MS, 2, Segment(4e6))])
    assert ends == {0: pytest.approx(1.0 * MS), 1: pytest.approx(2.5 * MS)}
    assert k.rerates == 0          # nothing changed during a segment: no re-rating


CLOCKED = Preset(name="test-clock", description="1 core, 1 or 2 GHz", cores_per_socket=1,
                 pstates_ghz=(1.0, 2.0), base_ipc=2.0, transition_latency_us=10.0)


def test_a_frequency_step_in_the_middle_of_a_segment():
    # 4e6 instructions at IPC 2: 1 ms at 2 GHz. The governor decides 1 GHz at 0.49 ms,
    # effective 10 us later (transition latency): at 0.5 ms half is done; the other
    # 2e6 instructions at 1 GHz take 1 ms: the job ends at 1.5 ms.
    m = HardwareMachine(CLOCKED, effects=only("dvfs"), governor="ondemand",
                        governor_params={"sampling_rate_us": 10_000_000})
    ctl = m.clock
    assert m.fluid

    def decide(_e):              # what DvfsController.sample does when it picks 1 GHz
        now = m.env.now
        ctl._pending[0] = (now + ctl.latency_s, 1.0)
        ctl.due_at[0] = now + ctl.latency_s
        ctl.on_pending(0, now + ctl.latency_s)

    env = simpy.Environment()
    k = Kernel(env, m)
    m.bind(env, None)
    p = k.process("p")
    ends = []

    def job(t):
        yield t.run(Segment(4e6))
        ends.append(env.now)

    k.spawn(p, "job", job)
    env.timeout(0.49 * MS).callbacks.append(decide)
    env.run(until=0.1)
    assert ends == [pytest.approx(1.5 * MS, rel=1e-12)]
    c = k.counters_now()["processes"]["p"]
    assert c["task_clock_s"] == pytest.approx(1.5 * MS, rel=1e-12)
    assert c["cycles"] == pytest.approx(2e6, rel=1e-12)     # no stalls: ins / IPC
    assert k.rerates == 1


BUS = Preset(name="test-bus", description="2 cores, a narrow memory bus", cores_per_socket=2,
             pstates_ghz=(1.0,), base_ipc=1.0, dram_ns=100.0, mlp=1.0, mem_bw_gbs=0.96,
             mem_channels=1, llc_mib=8, l2_kib=256)


def test_a_memory_bound_job_whose_bus_share_changes_when_a_second_one_starts():
    # 10,000 cold lines, 100 ns each, MLP 1: 1 ms alone, a demand of 1e7 lines/s; the
    # bus carries 0.96e9 / 64 = 1.5e7 lines/s. B starts at 0.5 ms with its own M/D/1
    # wait (from the bus's load over the last 100 us, an exponential average), so it
    # asks lam_b = L / (1 ms + wait) < 0.75e7 lines/s; both together ask more than the
    # bus carries: max-min gives B its demand and A the rest, 1.5e7 - lam_b. A's last
    # 5,000 lines go at that share; B, never bus-bound, runs at its own pace.
    L = 10_000
    m = HardwareMachine(BUS, effects=only("caches", "membus"))
    cap = 0.96e9 / 64
    lam_a = L / 1e-3
    jobs = [(0.0, 0, Segment(0.0, (Footprint(TASK, 1, L, False),))),
            (0.5 * MS, 1, Segment(0.0, (Footprint(TASK, 2, L, False),)))]
    ends, k = run_jobs(m, jobs)
    u = lam_a / cap * (1 - math.exp(-0.5 * MS / 100e-6))      # utilisation B sees
    service_ns = 64 / 0.96
    wait_b = L * md1_wait(u, service_ns) * 1e-9
    d_b = 1e-3 + wait_b
    lam_b = L / d_b
    share = maxmin_shares([lam_a, lam_b], cap)
    assert share[1] == lam_b and share[0] == pytest.approx(cap - lam_b) and share[0] < lam_a
    end_a = 0.5 * MS + (L / 2) / share[0]
    end_b = 0.5 * MS + d_b
    assert end_a > 1.0 * MS
    assert ends[0] == pytest.approx(end_a, rel=1e-9)
    assert ends[1] == pytest.approx(end_b, rel=1e-9)
    assert k.rerates == 1          # A, when B joined (B's pace never depended on A)


def test_maxmin_shares_water_filling():
    assert maxmin_shares([1.0, 5.0, 5.0], 7.0) == pytest.approx([1.0, 3.0, 3.0])
    assert maxmin_shares([1.0, 2.0], 10.0) == [1.0, 2.0]
    assert maxmin_shares([4.0, 4.0, 4.0, 4.0], 4.0) == pytest.approx([1.0] * 4)


def test_with_nothing_changing_results_are_those_of_fixed_rates():
    """A run in which no rate changes during a segment (one server CPU, its sibling
    idle, a fixed clock) gives the same JSON with the fluid machinery on and off,
    and re-rates nothing."""
    import json

    from tests.helpers import scenario
    from warmcore.build import build, finish, run_built

    cfg = scenario("hello", {"machine.governor": "performance", "server.cpus": [0],
                           "machine.effects.membus": False, "workload.rate_per_s": 3000.0},
                   requests=2000)

    def once(fluid):
        ctx = build(cfg, 1)
        if not fluid:
            ctx.kernel.fluid = False
            ctx.machine.rate_hook = None
        res = finish(ctx, run_built(ctx))
        return json.dumps(res, sort_keys=True), ctx.kernel.rerates

    on, n_on = once(True)
    off, n_off = once(False)
    assert n_on == 0 and n_off == 0
    assert on == off


# -- a segment preempted on one CPU resumes on another (the parts move with it) ---------

def run_spawned(machine, threads, until=1.0, probes=()):
    """threads: (name, allowed cpus, segment, request or None), spawned at t=0 in this
    order, each in its own process; probes: (time, fn) called then. Returns each
    thread's end time, the CPUs it ran on, and the kernel."""
    env = simpy.Environment()
    k = Kernel(env, machine)
    machine.bind(env, None)
    ends, ran_on = {}, {}

    def body(name, seg, req):
        def gen(t):
            ran_on[name] = [t.cpu.id]
            yield t.run(seg, req)
            ran_on[name].append(t.cpu.id)
            ends[name] = env.now
        return gen

    for name, cpus, seg, req in threads:
        k.spawn(k.process(name), name, body(name, seg, req), cpus=cpus)
    for when, fn in probes:
        env.timeout(when).callbacks.append(lambda _e, fn=fn: fn(k))
    env.run(until=until)
    return ends, ran_on, k


TWO_CLOCKS = Preset(name="test-2clk", description="2 cores, a clock each", cores_per_socket=2,
                    pstates_ghz=(1.0, 2.0), base_ipc=2.0, freq_domain="core")


def test_a_segment_preempted_at_one_clock_finishes_at_the_clock_it_resumes_on():
    # Core 0 at 2 GHz, core 1 at 1 GHz (per-core clock domains; the governor samples
    # too rarely to change them). A (may use both) starts a 4e7-instruction segment
    # on CPU 0 (IPC 2: 2e7 cycles, 10 ms at 2 GHz); B, pinned to CPU 0, waits in its
    # queue. With 2 CPUs sched_latency is 12 ms, so A's slice with one waiter is
    # 6 ms: at 6 ms it has done 1.2e7 cycles (2.4e7 instructions) and is preempted;
    # CPU 1 is idle and it resumes there: 1.6e7 instructions = 8e6 cycles at 1 GHz
    # = 8 ms: it ends at 14 ms (its old rates would have ended it at 10 ms).
    m = HardwareMachine(TWO_CLOCKS, effects=only("dvfs"), governor="ondemand",
                        governor_params={"sampling_rate_us": 10_000_000})
    m.clock.cpu_ghz[:] = [2.0, 1.0]
    assert m.fluid
    ends, ran_on, k = run_spawned(m, [("A", [0, 1], Segment(4e7), None),
                                      ("B", [0], Segment(2e6), None)])
    assert ran_on["A"] == [0, 1] and k.moves == 1
    assert ends["A"] == pytest.approx(14 * MS, rel=1e-12)
    c = k.counters_now()["processes"]["A"]
    assert c["task_clock_s"] == pytest.approx(14 * MS, rel=1e-12)
    assert c["instructions"] == pytest.approx(4e7, rel=1e-12)
    assert c["cycles"] == pytest.approx(2e7, rel=1e-12)        # no stalls: ins / IPC
    assert ends["B"] == pytest.approx(6 * MS + 0.5 * MS, rel=1e-12)


def test_a_segment_preempted_beside_a_busy_sibling_runs_alone_where_it_resumes():
    # SMT2: CPUs 0 and 2 are core 0's threads, 1 and 3 core 1's. A (CPUs 0 or 1)
    # starts on CPU 0 (a whole idle core), S then runs a long segment on its sibling
    # CPU 2, B waits for CPU 0. A's 8e7 instructions: 20 ms alone (4e9 ins/s),
    # 2.5e9 ins/s beside a busy sibling (s(2) = 0.625). With 4 CPUs sched_latency is
    # 18 ms, A's slice 9 ms: 2.25e7 instructions shared; preempted, it resumes on
    # idle CPU 1 (core 1 idle) and runs the other 5.75e7 alone: 14.375 ms, ending at
    # 23.375 ms (at the shared rate it kept before, 32 ms).
    from warmcore.simcore.work import Request

    m = HardwareMachine(SMT2, effects=only("smt"))
    req = Request(0, 0.0)
    ends, ran_on, k = run_spawned(m, [("A", [0, 1], Segment(8e7), req),
                                      ("S", [2], Segment(1e9), None),
                                      ("B", [0], Segment(1e6), None)], until=0.1)
    assert ran_on["A"] == [0, 1] and k.moves == 1
    end = 9 * MS + 5.75e7 / 4e9
    assert ends["A"] == pytest.approx(end, rel=1e-12)
    c = k.counters_now()["processes"]["A"]
    assert c["task_clock_s"] == pytest.approx(end, rel=1e-12)
    assert c["instructions"] == pytest.approx(8e7, rel=1e-12)
    # cycles: 2.25e7 instructions at IPC 2 x 0.625, 5.75e7 at IPC 2
    assert c["cycles"] == pytest.approx(2.25e7 / 1.25 + 5.75e7 / 2, rel=1e-12)
    # the request's breakdown: compute is the time computing (the wait in no queue:
    # A went straight to the idle CPU), credited piecewise
    assert req.bd[2] == pytest.approx(end, rel=1e-12)
    assert sum(req.bd) == pytest.approx(end, rel=1e-12)
    assert req.t_acc == pytest.approx(end, rel=1e-12)


BUS2 = Preset(name="test-bus2", description="2 sockets x 2 cores, narrow memory buses",
              sockets=2, cores_per_socket=2, pstates_ghz=(1.0,), base_ipc=1.0, dram_ns=100.0,
              mlp=1.0, mem_bw_gbs=0.96, mem_channels=1, llc_mib=8, l2_kib=256)


def test_a_memory_bound_segment_takes_its_bus_flow_to_the_socket_it_resumes_on():
    # Sockets 0 (CPUs 0, 1) and 1 (CPUs 2, 3); each bus carries 1.5e7 lines/s. A
    # (CPUs 0 or 2) fetches L = 2e5 cold lines, 100 ns each at MLP 1: 20 ms alone, a
    # demand of 1e7 lines/s. D on CPU 1 (same socket) asks as much from t=0: max-min
    # gives each 0.75e7 lines/s, A's whole segment would take L / 0.75e7 = 26.67 ms.
    # Its first chunk, 9 ms of its 20 ms at its own pace (w = 0.45 of the work), is
    # stretched by the share to 0.45 x 26.67 = 12 ms; then, B waiting for CPU 0, it
    # is preempted and resumes on idle CPU 2 (socket 1), where it is alone on the
    # bus: 0.55 x 20 ms = 11 ms, ending at 23 ms.
    L, LD = 2e5, 1e6
    m = HardwareMachine(BUS2, effects=only("caches", "membus"))
    assert m.cpu_socket == [0, 0, 1, 1]
    bus = m.bus
    seen = {}

    def probe(name):
        def fn(k):
            seen[name] = ({s: dict(bus.flows[s]) for s in (0, 1)},
                          [bus.rate[0], bus.rate[1]], [bus.lines_total[0], bus.lines_total[1]])
        return fn

    ends, ran_on, k = run_spawned(
        m, [("A", [0, 2], Segment(0.0, (Footprint(TASK, 1, L, False),)), None),
            ("D", [1], Segment(0.0, (Footprint(TASK, 2, LD, False),)), None),
            ("B", [0], Segment(1e5), None)],
        until=0.05, probes=[(6 * MS, probe("before")), (15 * MS, probe("after"))])
    assert ran_on["A"] == [0, 2] and k.moves == 1
    assert ends["A"] == pytest.approx(23 * MS, rel=1e-9)
    flows, rate, total = seen["before"]
    assert set(flows[0]) == {0, 1} and not flows[1]
    assert rate == [pytest.approx(1.0), 0.0]                  # socket 0 saturated
    assert total == [L + LD, 0.0]
    flows, rate, total = seen["after"]
    assert set(flows[0]) == {1} and set(flows[1]) == {2}      # A's flow moved with it
    assert rate[0] == pytest.approx(1e7 / 1.5e7)              # D alone again: own pace
    assert rate[1] == pytest.approx(1e7 / 1.5e7)              # A at its own pace
    assert flows[1][2][3] == pytest.approx(23 * MS, rel=1e-9)  # its registered end
    assert total == [pytest.approx(0.45 * L + LD), pytest.approx(0.55 * L)]
    c = k.counters_now()["processes"]["A"]
    assert c["task_clock_s"] == pytest.approx(23 * MS, rel=1e-9)
    assert c["llc_misses"] == pytest.approx(L, rel=1e-12)     # counted once


def test_a_segment_preempted_and_resumed_at_the_same_rates_is_not_re_rated():
    # Both clocks 2 GHz: A moves from CPU 0 to CPU 1 at 6 ms but its rates are the
    # same there; it ends at 10 ms, as it would have without the move, and its
    # counters are those of one 10 ms segment.
    m = HardwareMachine(TWO_CLOCKS, effects=only("dvfs"), governor="ondemand",
                        governor_params={"sampling_rate_us": 10_000_000})
    ends, ran_on, k = run_spawned(m, [("A", [0, 1], Segment(4e7), None),
                                      ("B", [0], Segment(2e6), None)])
    assert ran_on["A"] == [0, 1] and k.moves == 1 and k.rerates == 0
    assert ends["A"] == pytest.approx(10 * MS, rel=1e-12)
    c = k.counters_now()["processes"]["A"]
    assert c["instructions"] == pytest.approx(4e7, rel=1e-12)
    assert c["cycles"] == pytest.approx(2e7, rel=1e-12)
