"""Jetty's BlockingArrayQueue and the ReentrantLocks behind it (strategies/pools.py),
step by step on a machine with no caches or clock changes: who parks, who is woken
and when, what each lock acquisition costs, and the switch a thread pays when it
sleeps and wakes on an otherwise idle CPU."""

from __future__ import annotations

import pytest
import simpy

from warmcore.models.hardware import HardwareMachine
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.work import Segment
from warmcore.strategies.pools import BlockingArrayQueue, ParkingLock, PoolThread, TimedWaits

US = 1e-6
OFF = {"caches": False, "coherence": False, "dvfs": False, "smt": False, "membus": False,
       "energy": False}


def machine():
    """The i7-3770 (3.4 GHz, 1.3 instructions a cycle: 4.42e9 a second) without caches
    or clock changes: a switch costs ctx_switch_us 2.0, a futex_wait 0.35 us, a wake-up
    of an idle CPU 4 + 2 us (wake_latency_busy_us + cstate_shallow_exit_us)."""
    env = simpy.Environment()
    m = HardwareMachine("i7-3770", effects=OFF, idle_governor="hindsight")  # 4 + 2 us
    k = Kernel(env, m)
    m.bind(env, None)
    return env, m, k


def work(us):
    return Segment(4.42e9 * us * US)


def queue(queue_us=0.0):
    """A BlockingArrayQueue on that machine (queue_us of work under each lock) and a
    process for the threads that use it."""
    env, m, k = machine()
    q = BlockingArrayQueue(k, "q", 4.42e9, queue_us, TimedWaits(env, k), None)
    return env, k, q, k.process("p")


def test_a_contender_parks_and_the_unlock_wakes_it():
    """A holds the lock for 10 us; B, on the other CPU, finds it held and parks
    (FUTEX_WAIT); A's unlock wakes B (a futex wake A pays), which then holds it."""
    env, m, k = machine()
    lock = ParkingLock("l", None)
    got = {}

    def body(name, hold_us):
        def run(t):
            yield from lock.acquire(t)
            got[name] = env.now
            yield t.run(work(hold_us))
            lock.unlock(t)
        return run

    p = k.process("p")
    a = k.spawn(p, "a", body("a", 10))
    b = k.spawn(p, "b", body("b", 10))
    env.run()
    assert lock.sem.acquires == 2 and lock.sem.waits == 1 and lock.sem.free == 1
    assert (a.futex_wakes, b.futex_wakes) == (1, 0)
    # b holds the lock after a's 10 us (and a's switch onto its CPU) plus b's wake-up
    assert got["b"] > got["a"] + 10 * US
    assert b.cs == a.cs + 1             # its park (both count their exit)


def test_a_running_thread_barges_past_a_woken_waiter():
    """Nonfair: A holds; B parks; A unlocks and wakes B; C, running, takes the lock
    before B (still waking) retries; B finds it held and parks again at the head of the
    queue; C's unlock wakes B, which gets it. B parks twice and is woken twice.

    By hand (us): each starts on an idle CPU (6) and pays its switch-in (2). A holds
    8..18; B asks at 9 and parks; A's unlock at 18 wakes B on an idle CPU (6 us): B
    runs at 24 and first finishes what it owes, its futex_wait 0.35 and switch-in 2
    (AQS retries only once parkAndCheckInterrupt has returned), so it retries at
    26.35; C asks at 8 + 12.5 = 20.5, finds the lock free and holds it to 30.5: B's
    retry fails."""
    env, m, k = machine()
    lock = ParkingLock("l", None)
    order = []

    def holder(name, start_us, hold_us):
        def run(t):
            yield t.run(work(start_us))
            yield from lock.acquire(t)
            order.append(name)
            yield t.run(work(hold_us))
            lock.unlock(t)
        return run

    p = k.process("p")
    a = k.spawn(p, "a", holder("a", 0.0, 10))
    b = k.spawn(p, "b", holder("b", 1.0, 1))
    # c asks right after a's unlock, while b still wakes (an idle CPU: 6 us)
    c = k.spawn(p, "c", holder("c", 12.5, 10))
    env.run()
    assert order == ["a", "c", "b"]
    assert lock.sem.waits == 1          # b's acquire; its failed retry re-queues it
    assert b.cs == c.cs + 2             # b parked twice (all three count their exit)
    assert (a.futex_wakes, c.futex_wakes) == (1, 1)


def test_kernel_work_owed_is_done_before_the_lock_is_taken():
    """Issue 36 item 1. A thread owes kernel work it has done by the time it takes a
    lock: a woken waiter its futex_wait and switch-in (AQS retries its CAS after
    parkAndCheckInterrupt returns), a waker the futex wake it made in its last unlock.
    So a lock is held only for the work under it.

    By hand (us): both start on idle CPUs (a 6 us wake-up). A pays its switch-in 2 and
    holds L 8..18; B asks at 6 + 2 + 1 = 9 and parks; A's unlock at 18 wakes B (A owes
    the futex wake, 1.2) and A takes M at once: it pays the 1.2 first, so it holds M
    from 19.2 for its 4 us of work, to 23.2. B runs at 24 on its idle CPU, pays
    futex_wait 0.35 + switch-in 2 and holds L from 26.35 to 27.35 (1 us of work)."""
    env, m, k = machine()
    lock_l = ParkingLock("l", None)
    lock_m = ParkingLock("m", None)
    held = {}

    def a(t):
        yield from lock_l.acquire(t)
        yield t.run(work(10))
        lock_l.unlock(t)                       # wakes b: a owes the futex wake
        yield from lock_m.acquire(t)
        t0 = env.now
        yield t.run(work(4))
        held["a"] = (t0, env.now)
        lock_m.unlock(t)

    def b(t):
        yield t.run(work(1.0))
        yield from lock_l.acquire(t)           # held: parks
        t0 = env.now
        yield t.run(work(1))
        held["b"] = (t0, env.now)
        lock_l.unlock(t)

    p = k.process("p")
    k.spawn(p, "a", a)
    k.spawn(p, "b", b)
    env.run()
    assert held["a"] == (pytest.approx(19.2 * US), pytest.approx(23.2 * US))
    assert held["b"] == (pytest.approx(26.35 * US), pytest.approx(27.35 * US))


def test_each_acquisition_runs_its_work_under_the_lock():
    """lock(t) = acquire, then the segment under the lock: queue_us (0.1 us) of
    instructions plus the read-modify-write on the lock's line, which uncontended and
    without caches costs an L1 hit (4 cycles at the i7-3770's 3.4 GHz)."""
    env, k, q, p = queue(0.1)
    done = []

    def producer(t):
        t.data = PoolThread()
        for i in range(3):
            yield from q.offer(t, ("job", i))
        done.append(env.now)

    k.spawn(p, "producer", producer)
    env.run()
    # tail lock three times, the head lock once (signal: the queue was empty, no waiter)
    assert q.tail.sem.acquires == 3 and q.head.sem.acquires == 1
    c = k.counters_now()["processes"]["p"]
    rmw = 4 / 3.4e9
    assert c["task_clock_s"] == pytest.approx(4 * (0.1 * US + rmw) + 2.0 * US, rel=1e-9)
    assert c["sys_s"] == pytest.approx(2.0 * US, rel=1e-9)      # the switch onto the CPU
    assert len(q.jobs) == 3 and q.signals == 0 and done


def test_offer_to_an_empty_queue_wakes_the_longest_waiter_through_the_head_lock():
    """Two idle pool threads wait in poll(timeout), the first longest. An offer to the
    empty queue signals: the first waiter moves to the head lock's queue and the
    offerer's unlock wakes it (one futex wake); it takes the head lock again and the
    job. The second waiter is not woken."""
    env, k, q, p = queue()
    got = {}

    def idle(name):
        def run(t):
            t.data = PoolThread()
            job = yield from q.poll_wait(t, 60.0)
            got[name] = (job, env.now)
        return run

    def producer(t):
        t.data = PoolThread()
        yield t.run(work(20))                # both are waiting by then
        yield from q.offer(t, "job-1")

    w1 = k.spawn(p, "w1", idle("w1"))
    w2 = k.spawn(p, "w2", idle("w2"))
    prod = k.spawn(p, "producer", producer)
    env.run(until=1e-3)
    assert got == {"w1": ("job-1", pytest.approx(got["w1"][1]))}
    assert list(q.cond) == [w2] and q.signals == 1
    assert prod.futex_wakes == 1 and w1.futex_wakes == 0
    # the head lock: w1 and w2 before they waited, the producer's signal, w1's retake
    assert q.head.sem.acquires == 3 and q.head.sem.waits == 0


def test_poll_of_an_empty_queue_takes_no_lock_and_a_running_taker_barges():
    """poll() with nothing queued returns at once without the lock. A job offered to
    the empty queue wakes the waiter through the head lock; a thread that polls
    meanwhile takes the lock first (nonfair) and the job with it, and the waiter,
    retaking the lock after its wake-up, gets the job queued after it."""
    env, k, q, p = queue()
    seen = {}

    def waiter(t):
        t.data = PoolThread()
        seen["w"] = yield from q.poll_wait(t, 60.0)

    def taker(t):
        t.data = PoolThread()
        before = q.head.sem.acquires
        seen["empty"] = yield from q.poll(t)
        seen["poll_acquires"] = q.head.sem.acquires - before
        yield t.run(work(20))
        q.offer_now("a")                     # the waiter is signalled and woken
        q.jobs.append("b")
        seen["t"] = yield from q.poll(t)

    k.spawn(p, "w", waiter)
    k.spawn(p, "t", taker)
    env.run(until=1e-3)
    assert seen["empty"] is None and seen["poll_acquires"] == 0     # no lock taken
    assert (seen["t"], seen["w"]) == ("a", "b")
    assert q.signals == 1 and q.head.sem.waits == 0 and not q.jobs


def test_a_taker_that_leaves_jobs_behind_signals_the_next_waiter():
    """Three jobs reach the empty queue at once with two threads waiting: the first
    waiter is signalled; taking a job with two left, it signals the second
    (BlockingArrayQueue.poll: signal while jobs remain), which takes the next."""
    env, k, q, p = queue()
    got = []

    def idle(t):
        t.data = PoolThread()
        got.append((t.name, (yield from q.poll_wait(t, 60.0))))

    k.spawn(p, "w1", idle)
    k.spawn(p, "w2", idle)
    env.timeout(20 * US).callbacks.append(
        lambda _e: (q.offer_now("a"), q.jobs.extend(["b", "c"])))
    env.run(until=1e-3)
    assert sorted(got) == [("w1", "a"), ("w2", "b")]
    assert q.signals == 2 and list(q.jobs) == ["c"]


def test_a_thread_that_sleeps_and_wakes_on_an_idle_cpu_pays_the_switch():
    """A thread alone on its CPU parks and is woken 50 us later: it runs its halves of
    the switch away and back (ctx_switch_us, 2.0 us, system time) as well as the switch
    onto the CPU when it started; perf counts one context switch."""
    env, m, k = machine()
    p = k.process("p")

    def sleeper(t):
        yield t.park()
        yield t.run(work(1))

    th = k.spawn(p, "s", sleeper)
    env.timeout(50 * US).callbacks.append(lambda _e: k.wake(th))
    env.run()
    assert th.cs == 2                    # its park, and its exit
    c = k.counters_now()["processes"]["p"]
    assert c["sys_s"] == pytest.approx(2 * 2.0 * US, rel=1e-9)


def test_a_futile_wake_up_reads_the_queue_lines_the_dispatcher_wrote():
    """The milestone's futile wake-up, on the i7-3770 with caches and coherence on: B
    (CPU 1) waits in poll(timeout); A (CPU 0) offers a job, which signals B and wakes it
    with the head lock's unlock, and takes the job back at once with poll() before B
    has the lock again. B, woken, finds nothing and waits again. What B pays in LLC
    loads, by hand: the wake-up's lines the waker's core wrote (futex_wake_lines, 12, by
    default; 7 + 5 with wake_lines_by_part: one LLC, no migration) and, under the head
    lock, the queue's
    lines A wrote last (BlockingArrayQueue.poll(time): the head lock's 2 lines, which
    hold the condition's waiters too, and _size, on the tail lock's lines: three
    core-to-core transfers) plus the lock word's CAS, a contended op on a line A owned
    (one transfer): 12 + 4 = 16."""
    from warmcore.simcore.kernel import K_LLCL, PARKED
    from warmcore.strategies.pools import LOCK_LINES, SIZE_LINES

    env = simpy.Environment()
    m = HardwareMachine("i7-3770", effects={**OFF, "caches": True, "coherence": True,
                                            "contention": True})
    k = Kernel(env, m)
    m.bind(env, None)
    q = BlockingArrayQueue(k, "q", m.nominal_ips, 0.1, TimedWaits(env, k), None)
    taken = []

    def b(t):
        t.data = PoolThread()
        taken.append(("b", (yield from q.poll_wait(t, 1.0))))

    def a(t):
        yield t.run(work(0.2))
        yield from q.offer(t, ("job", None))
        taken.append(("a", (yield from q.poll(t))))

    tb = k.spawn(k.process("b", cpus=[1]), "B", b)
    env.run(until=100 * US)
    before = tb.ctr[K_LLCL]
    k.spawn(k.process("a", cpus=[0]), "A", a)
    env.run(until=500 * US)
    assert taken == [("a", ("job", None))]          # A took its own job back
    assert tb.state is PARKED and tb.cs == 2        # B woke, found nothing, waits again
    x = m.preset.extra
    kernel = x.futex_wake_lines
    assert (kernel, LOCK_LINES + SIZE_LINES) == (12.0, 3)
    assert tb.ctr[K_LLCL] - before == kernel + 3 + 1
