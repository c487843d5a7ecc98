"""The simulated OS on its own: wake-ups, time slices, preemption, yields, exits."""

from __future__ import annotations

import pytest
import simpy

from warmcore.simcore.kernel import BLOCKED, PARKED, Kernel
from warmcore.simcore.machine import IdealMachine
from warmcore.simcore.work import Segment

US = 1e-6


def kernel(cpus=1):
    env = simpy.Environment()
    return env, Kernel(env, IdealMachine(cores=cpus, ghz=1.0))   # 1 instruction = 1 ns


def seg(us):
    return Segment(us * 1000.0)


def test_a_futex_wake_does_not_cut_a_blocking_wait_short():
    env, k = kernel()
    p = k.process("p")
    done = []

    def sleeper(t):
        yield t.block(100 * US)
        done.append(env.now)

    t = k.spawn(p, "sleeper", sleeper)
    env.run(until=10 * US)
    assert t.state is BLOCKED
    assert k.wake(t) is False
    env.run()
    assert done == [pytest.approx(100 * US)]


def test_back_to_back_short_segments_yield_to_a_queued_thread_within_a_slice():
    env, k = kernel(1)
    p = k.process("p")
    ran = []

    def hog(t):
        while env.now < 0.1:
            yield t.run(seg(10))       # 10 us segments, never parks

    def late(t):
        ran.append(env.now)
        yield t.run(seg(10))

    k.spawn(p, "hog", hog)
    env.run(until=1e-3)
    k.spawn(p, "late", late)
    env.run(until=0.05)
    # CFS on 1 CPU: sched_latency 6 ms / 2 runnable = 3 ms slice, counted since the
    # hog's dispatch, so the newcomer runs within one slice of arriving.
    assert ran and ran[0] - 1e-3 <= k.sched_latency / 2 + 10 * US


def test_a_cpu_going_idle_pulls_a_thread_queued_elsewhere():
    env, k = kernel(2)
    p = k.process("p")
    where = {}

    def hog(t):
        for _ in range(100):
            yield t.run(seg(100))

    def pinned(t):
        yield t.run(seg(300))           # CPU 1 busy for 300 us, then free

    def late(t):
        yield t.run(seg(10))
        where["late"] = (env.now, t.cpu.id)

    k.spawn(p, "hog", hog)              # CPU 0
    k.spawn(p, "pinned", pinned, cpus=[1])
    env.run(until=50 * US)
    k.spawn(p, "late", late)            # both busy: queued (on CPU 0, the first allowed)
    env.run()
    t, cpu = where["late"]
    assert cpu == 1 and t == pytest.approx(310 * US)   # pulled when CPU 1 went idle


def test_a_wake_up_before_a_queued_waiter_sleeps_is_not_lost():
    """FUTEX_WAIT queues the waiter before schedule(): a futex wake in between makes
    its sleep return at once (prepare_park, then park). Without prepare_park a wake
    of a running thread does nothing, as before."""
    env, k = kernel(2)
    p = k.process("p")
    resumed = {}

    def waiter(t):
        t.prepare_park()
        yield t.run(seg(10))            # the futex_wait's kernel work, still on the CPU
        yield t.park()
        resumed["at"] = env.now

    def waker(t):
        yield t.run(seg(5))
        resumed["woke"] = k.wake(w, t)
        resumed["again"] = k.wake(w, t)  # one wake-up is kept, not two
        yield t.run(seg(1))

    w = k.spawn(p, "waiter", waiter)
    v = k.spawn(p, "waker", waker)
    env.run()
    assert resumed == {"woke": True, "again": False, "at": pytest.approx(10 * US)}
    assert v.futex_wakes == 1 and w.cs == 1      # it never slept: exited, one switch
    assert not w.futex_queued and not w.wake_pending

    env, k = kernel(1)
    p = k.process("p")

    def runner(t):
        yield t.run(seg(10))

    r = k.spawn(p, "runner", runner)
    env.run(until=5 * US)
    assert k.wake(r) is False and not r.wake_pending


def test_park_with_timeout_reports_which_ended_it():
    env, k = kernel()
    p = k.process("p")
    out = []

    def waiter(t):
        yield t.park(timeout=50 * US)
        out.append((env.now, t.timed_out))
        yield t.park(timeout=50 * US)
        out.append((env.now, t.timed_out))

    t = k.spawn(p, "w", waiter)
    env.run(until=70 * US)
    assert t.state is PARKED and k.wake(t)
    env.run()
    assert out == [(pytest.approx(50 * US), True), (pytest.approx(70 * US), False)]


def test_yield_cpu_lets_the_queued_thread_run_first():
    env, k = kernel(1)
    p = k.process("p")
    order = []

    def a(t):
        yield t.run(seg(5))
        k.spawn(p, "b", b)          # queued behind a on the only CPU
        yield t.yield_cpu()
        order.append("a")

    def b(t):
        order.append("b")
        yield t.run(seg(5))

    k.spawn(p, "a", a)
    env.run()
    assert order == ["b", "a"]


def test_exited_threads_are_forgotten_but_their_counters_kept():
    env, k = kernel(1)
    p = k.process("p")

    def short(t):
        yield t.run(seg(10))

    for i in range(50):
        k.spawn(p, f"t{i}", short)
    env.run()
    assert p.threads == [] and k.threads == []
    c = k.counters_now()["processes"]["p"]
    assert c["task_clock_s"] == pytest.approx(50 * 10 * US)
    assert c["instructions"] == pytest.approx(50 * 10_000)


# ----------------------------------------------------------------------------- run-ahead
@pytest.mark.parametrize("name, sets", [
    ("pipeline", {}),                                    # one busy thread: mostly run-ahead
    ("pipeline", {"strategy.name": "pec"}),              # hand-offs between threads
    ("mmc", {}),
    ("hello", {"strategy.name": "work-stealing"}),
    ("contended", {}),
])
def test_run_ahead_gives_exactly_the_results_of_one_event_per_segment(monkeypatch, name, sets):
    """segment_done skips the event queue only when its timeout would be the next
    event anyway; with it switched off (always a timeout) every number is the same."""
    import json

    import warmcore.simcore.kernel.accounting as accounting   # where the hot path calls it
    import warmcore.simcore.kernel.fastpath as fastpath
    from warmcore.build import simulate
    from tests.helpers import scenario

    cfg = scenario(name, sets, requests=1500)
    ahead = json.dumps(simulate(cfg), sort_keys=True, default=str)
    calls = []

    def always_a_timeout(env, delay):
        calls.append(delay)
        return fastpath.fast_timeout(env, delay)

    monkeypatch.setattr(accounting, "segment_done", always_a_timeout)
    queued = json.dumps(simulate(scenario(name, sets, requests=1500)), sort_keys=True,
                        default=str)
    assert calls and ahead == queued


def test_run_ahead_moves_the_clock_only_when_nothing_is_due_before():
    from warmcore.simcore.kernel import segment_done

    env = simpy.Environment()
    ev = segment_done(env, 2.0)                 # empty queue: straight on
    assert env.now == 2.0 and ev.callbacks is None
    env.timeout(1.0)                            # due at 3.0
    ev = segment_done(env, 1.0)                 # would end at 3.0, a tie: must queue
    assert env.now == 2.0 and ev.callbacks == []
    env.run()
    assert env.now == 3.0


def test_the_machine_cost_record_has_the_named_layout():
    """Machines return SegmentCost's layout (a plain tuple on the hot path)."""
    from warmcore.simcore.machine import IdealMachine
    from warmcore.simcore.work import COST_FIELDS, Segment, SegmentCost

    cost = SegmentCost(*IdealMachine(cores=1, ghz=2.0).execute(0, Segment(2000.0), 1, 0.0))
    assert len(COST_FIELDS) == 13
    assert cost.instructions == 2000.0 and cost.duration_s == pytest.approx(1e-6)
    assert cost.compute_s == cost.duration_s
    assert cost.reload_s == cost.coherence_s == cost.contention_s == 0.0
    assert cost.llc_stores == cost.llc_store_misses == 0.0     # no caches


@pytest.mark.parametrize("strategy", ["pc", "pec", "thread-pool", "virtual-threads"])
def test_the_ideal_machine_reads_its_own_clock_with_kernel_work(strategy):
    """On the ideal 1 GHz machine every busy second, kernel work included, runs at
    1 GHz (cycles from time), and instructions are the user part only: task-clock =
    instructions x CPI / GHz + sys, whether segments ran on the fast path or in chunks."""
    import warmcore

    r = warmcore.simulate(warmcore.Scenario.load("mmc", ["machine.cores=1",
                                                         "workload.rate_per_s=900.0"])
                          .with_(strategy=strategy), requests=300, seed=3724890594)
    assert r.ghz == pytest.approx(1.0, rel=1e-12)
    if strategy == "pec":              # the case that read 0.9996 GHz before the fix
        assert r.sys_s > 0
    assert r.instructions * 1e-9 + r.sys_s == pytest.approx(r.task_clock_ms * 1e-3, rel=1e-9)


def _wake_across_cores(by_thread: bool, sleeper_cpus=(1,), waker_cpu=0, hog_cpu=None,
                       preset=None):
    """A sleeper parked on its first allowed CPU woken by a thread on ``waker_cpu`` (or
    by no thread), with ``hog_cpu`` kept busy by a thread of its own if given, on
    ``preset`` (default: test-2ccx with wake_lines_by_part): the machine, the waker (or
    None), the sleeper, and what the sleeper paid from the wake-up on (system seconds,
    LLC loads)."""
    from tests.test_hardware import BY_PART, machine
    from warmcore.simcore.kernel import K_LLCL, K_SYS

    env = simpy.Environment()
    m = machine(preset or BY_PART, smt=False, membus=False)
    k = Kernel(env, m)

    def sleeper(t):
        yield t.park()
        yield t.run(Segment(0.0))

    def waker(t):
        yield t.run(Segment(0.0))
        k.wake(slept, t)
        yield t.run(Segment(0.0))

    def hog(t):
        yield t.run(Segment(1e9))

    slept = k.spawn(k.process("q", cpus=list(sleeper_cpus)), "sleeper", sleeper)
    env.run(until=1e-3)
    assert slept.state is PARKED and slept.last_cpu.id == sleeper_cpus[0]
    if hog_cpu is not None:
        k.spawn(k.process("h", cpus=[hog_cpu]), "hog", hog)
    before = list(slept.ctr)
    w = None
    if by_thread:
        w = k.spawn(k.process("p", cpus=[waker_cpu]), "waker", waker)
    else:
        k.wake(slept)
    env.run(until=2e-3)
    return m, w, slept, (slept.ctr[K_SYS] - before[K_SYS],
                         slept.ctr[K_LLCL] - before[K_LLCL])


def test_a_futex_wake_across_cores_charges_both_sides_the_wake_up_lines():
    """Kernel.wake with wake_lines_by_part, sleeper on CPU 1, waker on CPU 0, one LLC
    (test-2ccx: cores 0 and 1 share one): the waker pays the futex wake plus the wait
    structures the sleeper's core wrote (wake_wait_lines, 10) and the target run queue
    it enqueues on under its lock (wake_rq_lines, 7: the target is CPU 1); the sleeper,
    where it resumes, reads
    back from the waker's core its task_struct, futex_q and Parker (wake_resume_lines,
    7) and its run queue (wake_resume_rq_lines, 5): 17 and 12 LLC loads, each line
    40 ns (c2c_llc_ns). A wake-up with no waker thread (an interrupt, a timeout) moves
    none."""
    from tests.test_hardware import BY_PART
    from warmcore.simcore.kernel import K_LLCL, K_SYS

    m, w, _, (sys_s, llc) = _wake_across_cores(True)
    _, _, _, (sys_alone, llc_alone) = _wake_across_cores(False)
    x = BY_PART.extra
    assert (x.wake_wait_lines, x.wake_rq_lines) == (10.0, 7.0)
    assert (x.wake_resume_lines, x.wake_resume_rq_lines) == (7.0, 5.0)
    assert w.ctr[K_LLCL] == 17.0
    assert w.ctr[K_SYS] == pytest.approx(m.switch_cost(0, -1, w.tid) + m.futex_wake_cost()
                                         + 17 * 40e-9)
    assert llc - llc_alone == 12.0
    assert sys_s - sys_alone == pytest.approx(12 * 40e-9)
    assert llc_alone == 0.0


def test_by_default_a_wake_up_moves_one_count_of_lines_each_way():
    """Without wake_lines_by_part (the default): the waker pays futex_wake_lines (12)
    from the sleeper's core, the sleeper as many from the waker's, 40 ns each."""
    from tests.test_hardware import TEST
    from warmcore.simcore.kernel import K_LLCL, K_SYS

    m, w, _, (sys_s, llc) = _wake_across_cores(True, preset=TEST)
    _, _, _, (sys_alone, _) = _wake_across_cores(False, preset=TEST)
    assert TEST.extra.futex_wake_lines == 12.0
    assert w.ctr[K_LLCL] == 12.0 and llc == 12.0
    assert w.ctr[K_SYS] == pytest.approx(m.switch_cost(0, -1, w.tid) + m.futex_wake_cost()
                                         + 12 * 40e-9)
    assert sys_s - sys_alone == pytest.approx(12 * 40e-9)


def test_a_wake_up_into_another_llc_goes_through_the_wake_list():
    """Linux 3.x ``ttwu_queue``: a target CPU outside the waker's LLC is not enqueued
    by the waker; ``ttwu_queue_remote`` puts the task on its ``wake_list`` (one line,
    wake_remote_lines) and the target enqueues it itself. Sleeper on CPU 2 (the other
    CCX of test-2ccx), waker on CPU 0: the waker pays 10 + 1 lines, the sleeper 7 + 1,
    each 100 ns (c2c_cross_llc_ns), LLC loads (another LLC's lines are LLC misses only
    across sockets)."""
    from warmcore.simcore.kernel import K_LLCL, K_SYS

    m, w, _, (sys_s, llc) = _wake_across_cores(True, sleeper_cpus=(2,))
    _, _, _, (sys_alone, _) = _wake_across_cores(False, sleeper_cpus=(2,))
    assert w.ctr[K_LLCL] == 11.0
    assert w.ctr[K_SYS] == pytest.approx(m.switch_cost(0, -1, w.tid) + m.futex_wake_cost()
                                         + 11 * 100e-9)
    assert llc == 8.0
    assert sys_s - sys_alone == pytest.approx(8 * 100e-9)


def test_a_woken_thread_that_moves_reads_its_stack_back_from_its_old_core():
    """One LLC of four cores (test-2ccx made one LLC): the sleeper slept on CPU 1, which
    a hog keeps busy, so the wake-up places it on idle CPU 2 (select_idle_sibling). The
    waker (CPU 0) pays the wait structures from CPU 1's core (10), CPU 2's run queue
    (7), and the run queues select_idle_sibling read on its way there
    (wake_scan_lines, 2 each): CPU 1 (the target wake_affine chose, busy) and CPU 6
    (CPU 2's SMT sibling, read to find the whole core idle): 10 + 7 + 4 = 21. The
    sleeper on CPU 2 pays what the waker wrote (7 + 5) and, having moved, its kernel
    stack's return path and thread state from CPU 1's core (wake_migrate_lines, 7): 19
    lines. All at 40 ns."""
    from tests.test_hardware import BY_PART
    from warmcore.simcore.kernel import K_LLCL

    one_llc = BY_PART.model_copy(update={"llc_domains_per_socket": 1, "name": "test-1llc"})
    m, w, slept, (sys_s, llc) = _wake_across_cores(True, sleeper_cpus=(1, 2), hog_cpu=1,
                                                   preset=one_llc)
    _, _, _, (sys_alone, _) = _wake_across_cores(False, sleeper_cpus=(1, 2), hog_cpu=1,
                                                 preset=one_llc)
    assert slept.migrations == 1 and slept.last_cpu.id == 2
    assert w.ctr[K_LLCL] == 21.0
    assert llc == 19.0
    # the no-waker run moves too (a migration, but no waker: no line of the wake-up)
    assert sys_s - sys_alone == pytest.approx(19 * 40e-9)


def test_with_no_idle_cpu_the_waker_reads_one_run_queue_of_each_core_it_may_use():
    """Linux 3.x ``select_idle_sibling`` with every CPU busy: the target's and the
    previous CPU's ``idle_cpu``, then the first CPU of each core group of the LLC the
    thread may use, each found busy. One LLC (test-2ccx made one), the waker on CPU 0,
    a hog on each of CPUs 1 to 7; the sleeper slept on CPU 1 and may run on 1, 2, 3.
    The target is CPU 1 (wake_affine: the waker's CPU is not allowed), kept (no run
    queue is shorter); the search read CPUs 1, 2 and 3: the waker pays the wait
    structures (10) and CPU 1's run queue (7) and 2 lines from each of CPUs 2 and 3
    (wake_scan_lines): 21 LLC loads."""
    from tests.test_hardware import BY_PART, machine
    from warmcore.simcore.kernel import K_LLCL

    one_llc = BY_PART.model_copy(update={"llc_domains_per_socket": 1, "name": "test-1llc"})
    env = simpy.Environment()
    k = Kernel(env, machine(one_llc, smt=False, membus=False))

    def sleeper(t):
        yield t.park()
        yield t.run(Segment(0.0))

    def hog(t):
        yield t.run(Segment(1e9))

    def waker(t):
        yield t.run(Segment(0.0))
        k.wake(slept, t)

    slept = k.spawn(k.process("q", cpus=[1, 2, 3]), "sleeper", sleeper)
    env.run(until=1e-3)
    assert slept.last_cpu.id == 1
    for cpu in range(1, 8):
        k.spawn(k.process(f"h{cpu}", cpus=[cpu]), "hog", hog)
    env.run(until=1.5e-3)
    w = k.spawn(k.process("p", cpus=[0]), "waker", waker)
    env.run(until=2e-3)
    assert w.ctr[K_LLCL] == 21.0


def test_a_wake_up_on_the_same_cpu_or_an_smt_sibling_loads_nothing_from_the_llc():
    """The waker on the sleeper's own CPU (it slept on CPU 1 and may run on 1 only;
    the waker takes CPU 1 while it sleeps): every line is where it was, no LLC load, no
    time. On the SMT sibling (CPU 5 shares core 1's L1 and L2): no LLC load, each line
    c2c_smt_ns (7 ns): the waker 17 lines, the sleeper 12."""
    from warmcore.simcore.kernel import K_LLCL, K_SYS

    m, w, _, (sys_s, llc) = _wake_across_cores(True, waker_cpu=1)
    _, _, _, (sys_alone, _) = _wake_across_cores(False)
    assert w.ctr[K_LLCL] == 0.0 and llc == 0.0
    assert w.ctr[K_SYS] == pytest.approx(m.switch_cost(1, -1, w.tid) + m.futex_wake_cost())
    m, w, _, (sys_s, llc) = _wake_across_cores(True, waker_cpu=5)
    assert w.ctr[K_LLCL] == 0.0 and llc == 0.0
    assert w.ctr[K_SYS] == pytest.approx(m.switch_cost(5, -1, w.tid) + m.futex_wake_cost()
                                         + 17 * 7e-9)
    assert sys_s - sys_alone == pytest.approx(12 * 7e-9)


def test_wake_up_lines_are_off_on_the_ideal_machine():
    from tests.test_hardware import machine
    assert kernel(2)[1].wake_lines is False
    assert Kernel(simpy.Environment(), machine()).wake_lines is True
