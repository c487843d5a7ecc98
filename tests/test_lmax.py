"""The LMAX Disruptor paper's two tests, as LMAX ran them (LMAX-Exchange/disruptor
src/docs/asciidoc/en/disruptor.adoc, "Throughput Performance Testing" and "Latency
Performance Testing"): its published direction and order of magnitude.

* Throughput, events injected as fast as possible on a Nehalem quad-core without HT
  (`lmax-throughput`): on every topology the Disruptor moves several times the
  events ArrayBlockingQueue does (published, Nehalem 2.8 GHz: 4.9x unicast, 7.9x
  pipeline, 2.4x sequencer, 8.7x multicast, 7.6x diamond; Sandy Bridge 2.2 GHz:
  5.5x, 7.9x, 7.1x, 41.7x, 7.3x).
* Latency, the three-stage pipeline fed one event every microsecond on a Sandy
  Bridge quad-core (`lmax-latency`): mean 52 ns against 32,757 ns for
  ArrayBlockingQueue, three orders of magnitude.
"""

from __future__ import annotations

import pytest

from warmcore.build import simulate_once
from warmcore.simcore.config import Scenario

TOPOLOGIES = ("unicast", "pipeline", "sequencer", "multicast", "diamond")


def strategy_params(params: dict) -> dict:
    """``params`` as single keys over the scenario's own (its ring_size 8192, LMAX's
    BUFFER_SIZE, stays; a whole ``strategy.params`` table would replace them, and a
    changed strategy starts from its defaults anyway)."""
    return {f"strategy.params.{k}": v for k, v in params.items()}


def throughput(strategy: str, topology: str, **params) -> float:
    sc = Scenario.load("lmax-throughput").with_(
        {"workload.jobs": 10000, **strategy_params({"topology": topology, **params})},
        strategy=strategy, requests=10000)
    return simulate_once(sc, 1)["throughput_rps"]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_disruptor_moves_several_times_the_events_of_array_blocking_queue(topology):
    # the wait strategy of LMAX's perf test for the topology: YieldingWaitStrategy,
    # BusySpinWaitStrategy for the 3P-1C sequencer
    wait = "busy-spin" if topology == "sequencer" else "yielding"
    d = throughput("disruptor", topology, wait=wait)
    q = throughput("abq", topology)
    assert d > 3.0 * q, (topology, d, q)


def latency_run(strategy: str, rate: float = 1e6, **params) -> dict:
    sc = Scenario.load("lmax-latency").with_(
        {"workload.rate_per_s": rate,
         **strategy_params({"topology": "pipeline", "producer_idle": "spin", **params})},
        strategy=strategy, requests=10000)
    return simulate_once(sc, 1)


def latency(strategy: str, rate: float = 1e6, **params) -> dict:
    return latency_run(strategy, rate, **params)["latency_us"]


def test_array_blocking_queue_keeps_up_with_one_event_per_microsecond():
    """LMAX's queue pipeline moved about 2 M events/s (published pipeline throughput,
    2,006,903 on the Sandy Bridge), so one event per microsecond is about half its
    load: the simulated one serves what is offered (a consumer woken after a park
    takes what queued meanwhile one by one without parking again; a producer whose put
    meets a take's 0.05 us critical section gets the lock before AQS would park it),
    and each event still waits for the wake-ups of parked consumers: a mean of
    microseconds, not the milliseconds of a saturated queue."""
    res = latency_run("abq")
    assert res["throughput_rps"] == pytest.approx(1e6, rel=0.01)
    assert 3.0 < res["latency_us"]["mean"] < 100.0      # three parked hand-offs


def per_hop(mean_us: float) -> float:
    """A three-stage mean as LMAX printed it: per hop (LatencyStepEventHandler and
    LatencyStepQueueProcessor, commit 1bbbeea7: ``duration /= 3``). LMAX also subtracted
    the measured cost of one System.nanoTime() call from each hop; the simulated events
    carry no nanoTime call, so there is nothing to subtract (docs/strategies.md)."""
    return mean_us / 3


def test_three_stage_pipeline_latency_is_orders_of_magnitude_below_the_queue():
    """Published per hop: the Disruptor 52 ns, ArrayBlockingQueue 32,757 ns (630x)."""
    d = latency("disruptor", wait="busy-spin")["mean"]
    q = latency("abq")["mean"]
    assert d < 1.0                       # under a microsecond (published: 52 ns)
    assert q > 100 * d                   # at least two orders of magnitude (published: 630x)
    assert per_hop(q) > 100 * per_hop(d)     # the same, hop against hop as LMAX printed


def test_no_simulated_queue_thread_waits_for_a_cpu_so_no_event_waits_milliseconds():
    """What the 139x (published 630x) leaves out. LMAX's histogram says at least 1%
    of the queue's events took over 3.1 ms end to end ("99% < 2,097,152" a hop:
    Histogram.getUpperBoundForFactor, commit 1bbbeea7), a backlog of thousands of
    events behind a consumer that could not run for milliseconds while the publisher
    kept putting (its pause is counted from the end of each put, so a held-up
    publisher makes no burst). In the simulated run no thread ever waits for a CPU
    and none moves: each event's latency is the cycle of parks and wake-ups, tens of
    microseconds at most (docs/strategies.md, "abq's latency", for the Linux 2.6.38
    path that could stall a consumer and why it is not modelled)."""
    res = latency_run("abq")
    assert res["runqueue_max"] == 0
    assert res["cpu_migrations"] == 0
    assert res["latency_us"]["max"] < 100.0      # published: 15.2 ms (5,069,086 a hop)


def test_a_busy_spin_hop_costs_its_counted_instructions_and_line_transfers():
    """The three-stage pipeline at one event per microsecond, hop by hop on the i5-2400
    (3.1 GHz, 1.3 instructions a cycle, a line between cores in 22 ns, an LLC hit 28 - 4
    cycles over L1, MLP 1.75), every event alike:

    * the producer's translator (13 instructions) writes the event's entry, which the
      ring's construction left in the LLC (8192 entries, LMAX's BUFFER_SIZE: 10,000
      events wrap it once, and the producer's L2 no longer holds what it wrote 8192
      events before): an LLC hit;
    * the cursor's store reaches the first consumer's spin 22 ns later;
    * its batch: BatchEventProcessor's loop, 27 instructions a batch and 21 an event,
      reading the cursor its spin just loaded (an L1 hit, not a second transfer);
    * its handler: the scenario's 0.0032 us (12.9 instructions at the nominal 4.03e9 a
      second) and the entry, modified on the producer's core: one transfer over MLP;
    * its sequence's store reaches the next stage's spin 22 ns later; that stage's batch
      also reads the sequence it is gated on (8 more instructions, the line an L1 hit);
      its handler finds the entry shared in the LLC (the first reader made it clean).
    """
    from warmcore.models.presets import get_preset
    from warmcore.strategies.disruptor import (
        BATCH_INSTRUCTIONS, EVENT_INSTRUCTIONS, GATE_INSTRUCTIONS, TRANSLATE_INSTRUCTIONS)

    pre = get_preset("i5-2400")
    ghz = 3.1
    ins = 1 / (pre.base_ipc * ghz)                          # ns an instruction
    mlp = min(pre.mlp, pre.extra.fill_buffers)
    llc_hit = (pre.llc_lat_cyc - pre.l1_lat_cyc) / ghz / mlp
    c2c = pre.c2c_llc_ns
    handler = 0.0032e-6 * 4.03e9 * ins
    translate = TRANSLATE_INSTRUCTIONS * ins + llc_hit
    first = c2c + (BATCH_INSTRUCTIONS + EVENT_INSTRUCTIONS) * ins + handler + c2c / mlp
    gated = (c2c + (BATCH_INSTRUCTIONS + GATE_INSTRUCTIONS + EVENT_INSTRUCTIONS) * ins
             + handler + llc_hit)
    lat = latency("disruptor", wait="busy-spin")     # the scenario's ring, 8192 entries
    assert lat["min"] == pytest.approx(lat["max"], rel=1e-9)
    assert lat["mean"] * 1e3 == pytest.approx(translate + first + 2 * gated, rel=1e-6)
    assert per_hop(lat["mean"]) < 0.1                       # published: 52 ns a hop


def wait_means(rate: float) -> tuple[float, dict, float]:
    means = {w: latency("disruptor", rate, wait=w)["mean"]
             for w in ("busy-spin", "yielding", "sleeping", "blocking")}
    return means.pop("busy-spin"), means, means.pop("blocking")


def test_busy_spin_is_the_fastest_wait_strategy_and_blocking_the_slowest():
    """At one event per microsecond (the paper's test) a busy-spinning consumer sees
    each event one line transfer after its store. YieldingWaitStrategy and
    SleepingWaitStrategy count 100 turns of a loop with no PAUSE (100 x 2 cycles,
    65 ns at 3.1 GHz) and then call Thread.yield() (sched_yield, 165 ns on the
    i5-2400) in a loop: an event published during a call is seen when it returns,
    so they are slower, and alike (sleeping's 100 yields outlast the microsecond:
    it never reaches its parkNanos here). Blocking, which parks, is the slowest by
    far. The same order at one event every 5 us, still below saturation."""
    for rate in (1e6, 2e5):
        spin, others, block = wait_means(rate)
        for w, m in others.items():
            assert spin < 0.8 * m, (rate, w, spin, m)
            assert block > 10 * m, (rate, w, block, m)
        assert others["sleeping"] == pytest.approx(others["yielding"], rel=1e-9)


# -- ArrayBlockingQueue's lock and conditions, step by step (strategies/abq.py) ---------

US = 1e-6


def machine(coherence: bool):
    """The i7-3770 (3.4 GHz, 1.3 instructions a cycle: 4.42e9 a second) without clock
    changes, as tests/test_pool_queue.py: a switch costs 2.0 us, a wake-up of an idle
    CPU 4 + 2 us; with ``coherence`` (and the caches it needs), a line moves between
    its cores in 22 ns (c2c_llc_ns); without, no caches."""
    import simpy

    from warmcore.models.hardware import HardwareMachine
    from warmcore.simcore.kernel import Kernel

    env = simpy.Environment()
    m = HardwareMachine("i7-3770", effects={
        "caches": coherence, "coherence": coherence, "dvfs": False, "smt": False,
        "membus": False, "energy": False}, idle_governor="hindsight")   # 4 + 2 us
    k = Kernel(env, m)
    m.bind(env, None)
    return env, m, k


def work(us):
    from warmcore.simcore.work import Segment
    return Segment(4.42e9 * us * US)


def contend(hold_us: float):
    """A takes a ReentrantLock and holds it ``hold_us``; B, on another core, asks for
    it 0.01 us after A took it. Returns (A's unlock time, B's lock time, the lock,
    A, B)."""
    from warmcore.strategies.pools import ParkingLock

    env, m, k = machine(coherence=True)
    lock = ParkingLock("l", None, line=k.spin_line("l"))
    at = {}

    def a_body(t):
        yield from lock.acquire(t)
        yield t.run(work(hold_us))
        at["unlock"] = env.now
        lock.unlock(t)

    def b_body(t):
        yield t.run(work(0.01))
        yield from lock.acquire(t)
        at["b"] = env.now
        lock.unlock(t)

    p = k.process("p")
    a = k.spawn(p, "a", a_body)
    b = k.spawn(p, "b", b_body)
    env.run()
    assert a.cpu is None and b.last_cpu is not a.last_cpu      # two cores
    return at["unlock"], at["b"], lock, a, b


def test_a_contender_sees_a_short_critical_section_end_before_it_parks():
    """JDK 8 AQS: after NonfairSync.lock's failed CAS a contender goes through
    tryAcquire, addWaiter's tail CAS, shouldParkAfterFailedAcquire's SIGNAL CAS and a
    last tryAcquire before it parks: 3 trips of a line between the cores, 66 ns on the
    i7-3770. A holds 0.03 us, B asks 0.01 us in: A's unlock (the store of state 0)
    reaches B 22 ns later, inside B's 66 ns, so B takes the lock then, without
    parking and without a futex wake."""
    unlock, got, lock, a, b = contend(0.03)
    assert got == pytest.approx(unlock + 22e-9, abs=1e-12)
    assert lock.sem.waits == 0 and a.futex_wakes == 0


def test_a_contender_parks_when_the_critical_section_outlasts_the_aqs_enqueue():
    """A holds 1 us: B's 66 ns pass first, B queues and parks (FUTEX_WAIT), and A's
    unlock wakes it: B holds the lock only after its CPU's wake-up (4 + 2 us) and its
    switch back."""
    unlock, got, lock, a, b = contend(1.0)
    assert lock.sem.waits == 1 and a.futex_wakes == 1
    assert got >= unlock + 6 * US


def test_array_blocking_queue_costs_a_wake_only_when_the_consumer_is_parked():
    """ArrayBlockingQueue (queue_us 0.1 under the lock, the lock's RMW an L1 hit of 4
    cycles): C takes from the empty queue and parks in notEmpty.await(); P puts two
    events 20 us later. P's first put signals, and its unlock wakes C: that put costs
    0.1 us + the RMW + the futex wake (1.2 us on this machine), paid after the unlock,
    outside the lock; the second finds nobody parked: 0.1 us + the RMW. C returns
    from its first take after its CPU's wake-up (6 us), the switch back (2 us) and the
    take (0.1 us + the RMW on a line P's core wrote last, a 22 ns transfer); it finds
    the second event queued and takes it without parking again, 0.1 us + RMW later."""
    from warmcore.simcore.work import Request
    from warmcore.strategies.abq import BlockingQueue

    env, m, k = machine(coherence=False)
    q = BlockingQueue("q", 8, 4.42e9, 0.1, k)
    took, put = [], []

    def consumer(t):
        for _ in range(2):
            yield from q.take(t)
            took.append(env.now)

    def producer(t):
        yield t.run(work(20))
        for i in range(2):
            t0 = env.now
            yield from q.put(t, Request(i, env.now))
            put.append((t0, env.now))

    p = k.process("p")
    k.spawn(p, "c", consumer)
    k.spawn(p, "p", producer)
    env.run()
    rmw = 4 / 3.4e9
    fw = m.futex_wake_cost()
    assert fw == pytest.approx(1.2 * US)
    (s1, e1), (s2, e2) = put
    assert e1 - s1 == pytest.approx(0.1 * US + rmw + fw, rel=1e-9)
    assert e2 - s2 == pytest.approx(0.1 * US + rmw, rel=1e-9)
    woken = e1 - fw                       # P's unlock
    # the take's RMW finds the lock's line last written on P's core: 22 ns to bring it
    assert took[0] == pytest.approx(woken + 6 * US + 2 * US + 0.1 * US + 22e-9, rel=1e-9)
    assert took[1] - took[0] == pytest.approx(0.1 * US + rmw, rel=1e-9)
    assert q.signals == 1


@pytest.mark.parametrize("yielding", [False, True])
def test_a_spinner_sees_a_store_on_the_transfer_or_when_its_sched_yield_returns(yielding):
    """W stores to a line 0.25 us after S starts waiting on it from another core.
    BusySpinWaitStrategy's loop sees it when the line arrives, 22 ns after the store;
    YieldingWaitStrategy's Thread.yield() loop reads the line between sched_yield
    calls, so it sees it at the end of the call in progress: the first multiple of
    the call's cost (the machine's sched_yield) at or after the line's arrival,
    counted from the loop's start."""
    import math

    env, m, k = machine(coherence=True)
    line = k.spin_line("seq")
    at = {}

    def spinner(t):
        at["start"] = env.now
        yield t.spin(line, yielding=yielding)
        at["seen"] = env.now

    def writer(t):
        yield t.run(work(0.25))
        at["store"] = env.now
        line.written(t)

    p = k.process("p")
    k.spawn(p, "s", spinner)
    k.spawn(p, "w", writer)
    env.run()
    arrive = at["store"] + 22e-9
    if not yielding:
        assert at["seen"] == pytest.approx(arrive, abs=1e-12)
        return
    turn = m.syscall_cost("sched_yield")
    t0 = at["start"] + 2 * US             # its loop starts after its switch onto the CPU
    assert at["seen"] == pytest.approx(t0 + math.ceil((arrive - t0) / turn) * turn,
                                       abs=1e-12)
    assert at["seen"] > arrive + 1e-9


@pytest.mark.parametrize("in_cache_model", [True, False])
def test_a_spinner_reads_the_line_its_spin_loaded_without_a_second_miss(in_cache_model):
    """W stores to a sequence's line (a segment writing it) while S spins on it from
    another core; S then reads the line in a segment of no instructions (what
    BatchEventProcessor does with the sequence waitFor returned). The spin's load
    brought the written line into S's core, 22 ns after the store (c2c_llc_ns): the
    read is an L1 hit and costs nothing. A spin line the cache model does not know
    (no footprint: a flag only spun on) leaves the read to find the line modified on
    W's core: one transfer, 22 ns over the machine's memory-level parallelism
    (min(mlp, fill_buffers) misses in flight)."""
    from warmcore.models.presets import get_preset
    from warmcore.simcore.work import SHARED, Footprint, Segment

    env, m, k = machine(coherence=True)
    fp = (Footprint(SHARED, "seq", 1, False),)
    line = k.spin_line("seq", fp if in_cache_model else None)
    at = {}

    def spinner(t):
        yield t.spin(line)
        at["seen"] = env.now
        yield t.run(Segment(0.0, fp))
        at["read"] = env.now - at["seen"]

    def writer(t):
        yield t.run(Segment(4.42e9 * 0.25 * US, (Footprint(SHARED, "seq", 1, True),)))
        at["store"] = env.now
        line.written(t)

    p = k.process("p")
    k.spawn(p, "s", spinner)
    k.spawn(p, "w", writer)
    env.run()
    assert at["seen"] == pytest.approx(at["store"] + 22e-9, abs=1e-12)
    pre = get_preset("i7-3770")
    miss = 22e-9 / min(pre.mlp, pre.extra.fill_buffers)
    assert at["read"] == pytest.approx(0.0 if in_cache_model else miss, abs=1e-15)


# -- a topology fixes its threads: a conflicting count is refused, not replaced -------

@pytest.mark.parametrize("args, field, reason", [
    (["--set", "strategy.params.producers=2"], "strategy.params.producers",
     "the pipeline topology has 1 producer (got 2)"),
    (["--set", "strategy.params.consumers=2"], "strategy.params.consumers",
     "the pipeline topology has 3 consumers (got 2)"),
    (["--set", "strategy.params.topology=sequencer"], "workload.connections",
     "the sequencer topology's 3 producers"),
    (["--strategy", "abq", "--set", "strategy.params.topology=sequencer"],
     "workload.connections", "1 would leave 2 of them idle"),
])
def test_a_count_the_topology_fixes_is_refused_in_one_line(capsys, args, field, reason):
    """The pipeline has 1 producer and 3 consumers, the sequencer 3 producers, each
    publishing its own sources' events (connection % 3): another count, or fewer
    sources than producers, would be silently replaced or left idle. The run is
    refused with one line naming the field, exit 2."""
    from warmcore.cli import main

    assert main(["run", "lmax-latency", "--requests", "200", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warmcore: {field}: "), err
    assert reason in err[0]


def test_the_topology_s_own_counts_and_the_sharded_choice_are_honoured():
    """The same counts the topology has are accepted; topology = 'sharded' takes the
    user's; three sources let the sequencer's three producers all publish."""
    from warmcore.strategies.disruptor import Params

    p = Params.model_validate({"topology": "pipeline", "producers": 1, "consumers": 3})
    assert (p.producers, p.consumers) == (1, 3)
    p = Params.model_validate({"topology": "sharded", "producers": 2, "consumers": 4})
    assert (p.producers, p.consumers) == (2, 4)
    sc = Scenario.load("lmax-latency").with_(
        {"workload.connections": 3,
         "strategy.params": {"topology": "sequencer", "wait": "busy-spin"}}, requests=3000)
    assert simulate_once(sc, 1)["throughput_rps"] == pytest.approx(1e6, rel=0.01)
