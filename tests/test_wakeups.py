"""The scheduler's optional wake-up behaviours (simcore.kernel): CFS wake-up preemption
(`kernel.wakeup_preemption`) and sync wake-ups from a socket's receive softirq, and
the stream's loopback TCP (`workload.tcp`) that uses them."""

from __future__ import annotations

import pytest
import simpy

from tests.helpers import run
from warmcore.models.presets import get_preset
from warmcore.models.syscalls import SyscallCosts
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.machine import IdealMachine
from warmcore.simcore.work import Segment

US = 1e-6
MS = 1e-3


def kernel(cpus=1, wakeup_preemption=False):
    env = simpy.Environment()
    machine = IdealMachine(cores=cpus, ghz=1.0)           # 1 instruction = 1 ns
    return env, Kernel(env, machine, wakeup_preemption=wakeup_preemption)


def seg(us):
    return Segment(us * 1000.0)


def _sleeper_woken_at(wake_at, wakeup_preemption):
    """One CPU: a sleeper parks after 10 us, a hog then runs 10 us segments; the
    sleeper is woken at ``wake_at``. Returns (when the sleeper ran again, kernel)."""
    env, k = kernel(1, wakeup_preemption)
    p = k.process("p")
    ran = []

    def sleeper(t):
        yield t.run(seg(10))
        yield t.park()
        ran.append(env.now)
        yield t.run(seg(10))

    def hog(t):
        while env.now < 20 * MS:
            yield t.run(seg(10))

    s = k.spawn(p, "sleeper", sleeper)
    k.spawn(p, "hog", hog)
    env.run(until=wake_at)
    k.wake(s)
    env.run(until=30 * MS)
    return ran[0], k, s


def test_a_sleeper_further_behind_than_the_wakeup_granularity_preempts_at_once():
    """check_preempt_wakeup: on one CPU the granularity is 1 ms; a sleeper woken 2 ms
    into the hog's run is ~2 ms behind it and runs at the hog's next segment
    boundary, where without wake-up preemption it waits for the hog's slice
    (sched_latency 6 ms / 2 runnable, counted from the hog's dispatch at 10 us)."""
    with_wp, k, _ = _sleeper_woken_at(2 * MS, True)
    without, _, _ = _sleeper_woken_at(2 * MS, False)
    assert k.wakeup_gran == pytest.approx(1 * MS)
    assert with_wp == pytest.approx(2 * MS, abs=10 * US + 1e-12)
    assert without == pytest.approx(10 * US + k.sched_latency / 2, abs=10 * US + 1e-12)


def test_a_sleeper_within_the_wakeup_granularity_waits_for_the_slice():
    """Woken 0.5 ms into the hog's run the sleeper is only ~0.5 ms behind it (less
    than the 1 ms granularity): no preemption, it runs when the hog's slice ends."""
    ran, k, _ = _sleeper_woken_at(0.5 * MS, True)
    assert ran == pytest.approx(10 * US + k.sched_latency / 2, abs=10 * US + 1e-12)


def test_a_long_sleepers_credit_is_half_the_latency_behind_min_vruntime():
    """place_entity (GENTLE_FAIR_SLEEPERS): a thread that slept while the hog ran 15
    ms comes back at the run queue's min_vruntime less sched_latency / 2, not at
    the virtual runtime it went to sleep with (which would let it run 15 ms)."""
    _, k, s = _sleeper_woken_at(15 * MS, True)
    cpu = k.cpus[0]
    assert cpu.min_vruntime == pytest.approx(15 * MS - 10 * US, abs=10 * US)
    assert s.vruntime >= cpu.min_vruntime - k.sched_latency / 2 - 1e-12
    assert s.vruntime < cpu.min_vruntime     # and still ran at once: 3 ms behind


def _woken_from_cpu0(sync: bool) -> int:
    """Two CPUs, both busy: the waker alone on CPU 0, a pinned hog on CPU 1, where
    the sleeper last ran. Returns the CPU whose run queue the sleeper joined."""
    env, k = kernel(2)
    p = k.process("p")
    where = []

    def waker(t):
        yield t.run(seg(100))
        if sync:
            k.deliver_from(t, lambda: k.wake(s))     # a socket's receive softirq
        else:
            k.wake(s, t)                            # a futex wake
        where.append(next(c.id for c in k.cpus if s in c.rq))
        for _ in range(100):
            yield t.run(seg(10))

    def sleeper(t):
        yield t.run(seg(1))
        yield t.park()
        yield t.run(seg(1))

    def hog(t):
        for _ in range(100):
            yield t.run(seg(10))

    k.spawn(p, "waker", waker, cpus=[0])
    s = k.spawn(p, "sleeper", sleeper)                  # CPU 1, the idle one
    env.run(until=5 * US)
    k.spawn(p, "hog", hog, cpus=[1])
    env.run()
    return where[0]


def test_a_sync_wake_up_goes_to_the_wakers_cpu_when_the_waker_is_alone_there():
    """wake_affine_idle: `sync && this_rq->nr_running == 1` makes the waker's CPU the
    target (the waker is about to sleep); with no idle CPU in the LLC the sleeper
    queues there. A futex wake keeps it on its previous CPU (both queues empty)."""
    assert _woken_from_cpu0(sync=True) == 0
    assert _woken_from_cpu0(sync=False) == 1


def _contended(sets, requests=3000):
    from warmcore.build import build, finish, run_built
    from warmcore.simcore.config import load

    cfg = load("contended", sets=[f"{k}={v}" for k, v in sets.items()], requests=requests)
    ctx = build(cfg, cfg.seed)
    return finish(ctx, run_built(ctx)), ctx.workload


def test_the_streams_loopback_tcp_charges_every_end_and_batches_the_consumers_reads():
    """`workload.tcp` on `contended` (server on one CPU, clients elsewhere): the
    producer pays a write per message (transmit and the server side's receive),
    the server a read and a write, the consumer a read; socket wake-ups are not
    futex calls (none charged to the server); off, the stream pays none of it.
    With everything on one CPU the consumer finds many messages per wake-up and
    reads them with one call (a read returns all the socket holds)."""
    sets = {"server.cpus": 1}
    tcp, _ = _contended({**sets, "workload.tcp": "true"})
    plain = run("contended", {**sets, "workload.tcp": False}, requests=3000)
    costs = SyscallCosts(get_preset("i7-920"))
    write, read = costs.cost("write", kib=0.2), costs.cost("read", kib=0.2)
    sys_per = lambda r, p: r["processes"][p]["sys_s"] / r["requests"]  # noqa: E731
    assert sys_per(tcp, "producer") >= 0.9 * write
    assert sys_per(tcp, "server") >= 0.9 * (read + write)
    assert sys_per(tcp, "consumer") >= 0.9 * read
    assert tcp["processes"]["server"]["futex_wakes"] == 0
    assert plain["processes"]["server"]["futex_wakes"] > 0.3 * plain["requests"]
    assert sys_per(plain, "producer") < 0.5 * write
    one_cpu = {"server.cpus": "[0]", "producer.cpus": "[0]", "consumer.cpus": "[0]"}
    shared, stream = _contended({**one_cpu, "workload.tcp": "true"})
    consumed = shared["arrived"] - shared["in_flight_at_end"]
    assert 0 < stream.consumer_reads < 0.5 * consumed, (stream.consumer_reads, consumed)


def _placed_on(sync: bool, busy: tuple[int, ...], preset: str = "core2-quad",
               waker_cpu: int = 0, prev_cpu: int = 2) -> int:
    """On ``preset`` (all effects off: placement only), a sleeper last ran on
    ``prev_cpu``; hogs keep the CPUs ``busy`` running; the waker alone on
    ``waker_cpu`` wakes it, by a loopback socket's softirq (``sync``) or a futex
    wake. Returns the CPU the sleeper runs or queues on."""
    from warmcore.models.hardware import HardwareMachine
    from warmcore.simcore.machine import EFFECTS

    env = simpy.Environment()
    m = HardwareMachine(preset, effects=dict.fromkeys(EFFECTS, False))
    k = Kernel(env, m)
    m.bind(env, None)
    p = k.process("p")
    where = []

    def waker(t):
        yield t.run(seg(100))
        if sync:
            k.deliver_from(t, lambda: k.wake(s))
        else:
            k.wake(s, t)
        where.append(s.cpu.id if s.cpu is not None
                     else next(c.id for c in k.cpus if s in c.rq))
        yield t.run(seg(10))

    def sleeper(t):
        yield t.run(seg(1))
        yield t.park()
        yield t.run(seg(1))

    def hog(t):
        yield t.run(seg(1000))

    s = k.spawn(p, "sleeper", sleeper, cpus=[prev_cpu])
    env.run(until=5 * US)
    s.allowed = tuple(range(m.n_cpus))             # free to move from now on
    s.allowed_set = frozenset(s.allowed)
    for c in busy:
        k.spawn(p, f"hog{c}", hog, cpus=[c])
    k.spawn(p, "waker", waker, cpus=[waker_cpu])
    env.run()
    return where[0]


def test_a_sync_wake_up_takes_an_idle_cpu_in_the_wakers_llc_not_its_old_one():
    """core2-quad: LLCs {0, 1} and {2, 3}. The sleeper last ran on CPU 2 (idle); the
    waker, alone on CPU 0, wakes it through a socket (sync). wake_affine_idle: sync
    and nr_running == 1 -> target CPU 0; select_idle_sibling(prev 2, target 0):
    CPU 0 is busy, CPU 2 does not share its cache, CPU 1 in its LLC is idle -> 1.
    (Before issue 35 the idle previous CPU 2 was kept.)"""
    assert _placed_on(sync=True, busy=()) == 1


def test_a_wake_up_finding_its_targets_llc_busy_queues_there():
    """As above with CPU 1 busy: the target's LLC has no idle CPU, so the sleeper
    queues on the sync waker's CPU 0 (which is about to sleep), although CPUs 2 and
    3 in the other LLC are idle: select_idle_sibling does not look outside the
    target's LLC (before issue 35: any idle CPU anywhere, here CPU 2)."""
    assert _placed_on(sync=True, busy=(1,)) == 0


def test_a_futex_wake_keeps_an_idle_previous_cpu_in_another_llc():
    """Not sync: wake_affine_idle returns the idle previous CPU (2), as before."""
    assert _placed_on(sync=False, busy=()) == 2


def test_wake_affine_weight_moves_a_wakee_whose_old_cpu_is_loaded():
    """Not sync, CPU 2 running one hog with another queued: wake_affine_weight,
    this CPU 0 with the wakee (1 + 1) x 100 = 200 against CPU 2's 2 x 108 = 216 ->
    target CPU 0; select_idle_sibling finds CPU 1 idle in its LLC. With one hog on
    CPU 2 (108 < 200) the previous CPU is the target and CPU 3, idle in its LLC,
    is taken."""
    assert _placed_on(sync=False, busy=(2, 2)) == 1
    assert _placed_on(sync=False, busy=(2,)) == 3


@pytest.mark.parametrize("preset, waker, prev, expect", [
    ("epyc-zen3", 0, 8, 1),       # CCX 0 = CPUs 0-7 (+ 32-39), CCX 1 = 8-15
    ("server-2015", 0, 12, 1),    # socket 0 = CPUs 0-11 (+ 24-35), socket 1 = 12-23
])
def test_sync_wake_ups_stay_in_the_wakers_llc_on_multi_llc_presets(preset, waker, prev,
                                                                   expect):
    """The same rule on a Zen 3 CCX and across sockets: the idle CPU next to the
    sync waker (a whole idle core first), not the idle previous CPU in another LLC."""
    assert _placed_on(sync=True, busy=(), preset=preset, waker_cpu=waker,
                      prev_cpu=prev) == expect
