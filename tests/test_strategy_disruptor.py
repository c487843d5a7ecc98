"""disruptor (LMAX): ring order, wrap waits, batching, wait strategies."""

from __future__ import annotations

import pytest

from warmcore.simcore.config import ConfigError
from warmcore.simcore.kernel import K_TASK
from warmcore.build import simulate_once
from tests.strategy_checks import (
    assert_conserved,
    cfg_for,
    fingerprint,
    pipelined,
    run_tracked,
)

D = "disruptor"


def d_cfg(params=None, sets=None, **run):
    return cfg_for(D, params, sets, **run)


def enable_logs(ctx):
    for c in ctx.strategy.consumers:
        c.log = []


@pytest.mark.parametrize("params", [{"consumers": 3},
                                    {"consumers": 3, "producers": 2, "ring_size": 16},
                                    {"consumers": 2, "wait": "sleeping", "ring_size": 8}])
def test_no_event_lost_or_reordered_per_consumer(params):
    cfg = d_cfg(params, {"workload.service_us": 300.0, "workload.rate_per_s": 9000.0,
                         "workload.connections": 5, "work.produce_us": 20.0}, requests=3000)
    ctx, res, handled = run_tracked(cfg, before=enable_logs)
    assert_conserved(ctx, res, handled)
    s = ctx.strategy
    n = len(s.consumers)
    seen = []
    for c in s.consumers:
        seqs = [q for q, _rid in c.log]
        assert seqs == sorted(set(seqs)), "a consumer handled out of order or twice"
        assert all(q % n == c.index for q in seqs), "an event went to the wrong shard"
        # no own event skipped: a gap-free run of the shard, covering everything up to
        # the consumer's published sequence (it may be part-way into its next batch)
        assert seqs == list(range(c.index, seqs[-1] + 1, n))
        assert seqs[-1] >= c.seq - n + 1
        seen.extend(seqs)
        if s.p.producers == 1:       # one producer publishes in arrival order
            rids = [rid for _q, rid in c.log]
            assert rids == sorted(rids)
    assert len(seen) == len(set(seen)) == sum(handled.values())
    assert max(seen) <= s.cursor


def test_producer_waits_at_the_wrap_point_and_never_overruns_the_ring():
    """Ring of 8, a consumer far slower than the arrivals: the producer must stop
    8 events ahead of it."""
    cfg = d_cfg({"ring_size": 8, "timer_slack_us": 5.0},
                {"workload.service": "deterministic", "workload.service_us": 200.0,
                 "workload.rate_per_s": 10000.0}, requests=1000)
    ctx, res, handled = run_tracked(cfg, before=enable_logs)
    assert_conserved(ctx, res, handled)
    st = ctx.strategy.stats
    assert st["producer_waits"] > 100
    assert st["max_outstanding"] == 8
    assert ctx.strategy.claimed - ctx.strategy.min_gating() <= 8


def test_producer_wait_by_wakeup_also_respects_the_ring():
    cfg = d_cfg({"ring_size": 4, "producer_wait": "wake"},
                {"workload.service_us": 200.0, "workload.rate_per_s": 10000.0}, requests=1000)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    assert ctx.strategy.stats["producer_waits"] > 100
    assert ctx.strategy.stats["max_outstanding"] == 4


def consumer_cpu_per_event(rate, seed=1):
    cfg = d_cfg({"batch_us": 5.0}, {"workload.service": "deterministic",
                                    "workload.service_us": 10.0,
                                    "workload.rate_per_s": rate}, requests=4000)
    ctx, res, handled = run_tracked(cfg, seed)
    assert_conserved(ctx, res, handled)
    c = ctx.strategy.consumers[0]
    return c.thread.ctr[K_TASK] / c.handled, c.handled / c.batches


def test_batching_lowers_the_consumer_cpu_per_event_at_high_load():
    """Per batch 5 us of overhead, per event 10 us: at low load batches hold one
    event (15 us each); at high load they grow and the overhead is shared."""
    low, low_batch = consumer_cpu_per_event(1000.0)
    high, high_batch = consumer_cpu_per_event(85000.0)
    assert low_batch == pytest.approx(1.0, abs=0.05)
    assert low == pytest.approx(15e-6, rel=0.02)
    assert high_batch > 2.0
    assert high < 0.85 * low
    assert high == pytest.approx(10e-6 + 5e-6 / high_batch, rel=0.02)


def idle_run(wait, pin=True):
    cfg = d_cfg({"wait": wait, "pin": pin},
                {"workload.service": "deterministic", "workload.service_us": 1.0,
                 "workload.rate_per_s": 200.0}, requests=60)
    cfg.run.duration_s = 2.0        # stop a spinner that starves the producer
    cfg.run.warmup = 0.0
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    return res


def test_busy_spin_keeps_the_consumer_cpu_at_100_percent_with_no_load():
    res = idle_run("busy-spin")
    assert res["cpu_utilization"][0] > 0.99     # consumer 0 is pinned to CPU 0
    blocking = idle_run("blocking")
    assert blocking["cpu_utilization"][0] < 0.01


def test_yielding_also_burns_its_cpu_while_idle():
    assert idle_run("yielding")["cpu_utilization"][0] > 0.99


def test_sleeping_leaves_the_cpu_idle_but_adds_sleep_latency():
    res = idle_run("sleeping")
    blocking = idle_run("blocking")
    assert res["cpu_utilization"][0] < 0.05
    # an event that arrives while the consumer sleeps waits for the rest of the
    # ~50 us sleep (100 ns + timer slack): about half of it on average
    extra = res["latency_us"]["mean"] - blocking["latency_us"]["mean"]
    assert 15 < extra < 40


def test_busy_spinner_gives_way_to_a_thread_queued_on_its_cpu():
    """Two consumers spinning on a 2-CPU machine plus the producer: the producer
    only runs when a spinner is preempted, so the run must still complete."""
    cfg = d_cfg({"wait": "busy-spin", "consumers": 2, "pin": True},
                {"machine.cores": 2, "workload.service": "deterministic",
                 "workload.service_us": 5.0, "workload.rate_per_s": 2000.0}, requests=300)
    cfg.run.duration_s = 1.0        # a starved producer would otherwise spin forever
    cfg.run.warmup = 0.0
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    # Spinners never park: every switch of theirs is the kernel preempting them.
    spinners = [t for t in ctx.kernel.threads if t.name.startswith("disruptor-consumer")]
    assert spinners and sum(t.cs for t in spinners) > 0


def test_multi_producer_claims_with_a_contended_op_single_does_not():
    def claims(params):
        cfg = d_cfg(params, {"workload.rate_per_s": 500.0, "run.trace_events": 100000},
                    requests=200)
        res = simulate_once(cfg, 1)
        return sum(1 for e in res["trace"] if e[3] == "run" and e[4] == "claim")

    assert claims({"producers": 2}) > 150
    assert claims({"producers": 1}) == 0


def test_ring_size_must_be_a_power_of_two():
    with pytest.raises(ConfigError, match="ring_size"):
        simulate_once(d_cfg({"ring_size": 1000}, requests=10), 1)


@pytest.mark.parametrize("params", [{}, {"wait": "busy-spin"}, {"wait": "yielding"},
                                    {"wait": "sleeping", "consumers": 4, "producers": 3},
                                    {"ring_size": 2, "consumers": 2, "pin": True}])
def test_conserves_requests_without_deadlock_when_overloaded(params):
    cfg = d_cfg(params, {"workload.rate_per_s": 9000.0, "workload.connections": 4,
                         "work.produce_us": 10.0}, requests=2000)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    assert ctx.recorder.in_system > 100


@pytest.mark.parametrize("params", [{"consumers": 2}, {"wait": "busy-spin", "ring_size": 4}])
def test_conserves_requests_on_pipelined_connections(params):
    cfg = pipelined(d_cfg(params, {"work.produce_us": 5.0}, requests=3000))
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)


def test_deterministic_under_a_seed():
    cfg = d_cfg({"consumers": 2, "producers": 2}, {"workload.rate_per_s": 1500.0,
                                                    "workload.connections": 4}, requests=1500)
    a, b, c = (fingerprint(simulate_once(cfg, s)) for s in (5, 5, 6))
    assert a == b and a != c


def test_busy_spinner_sees_a_publish_one_line_transfer_after_the_store():
    """Busy-spin on a modelled machine (i7-920, Nehalem): the consumer's spin ends
    exactly when the cursor's line reaches its core, the producer's publish plus one
    core-to-core transfer (the topology's latency), whatever the spin's length."""
    cfg = d_cfg({"wait": "busy-spin", "pin": True},
                {"machine.preset": "i7-920", "workload.service": "deterministic",
                 "workload.service_us": 2.0, "workload.rate_per_s": 2000.0,
                 "run.trace_events": 200000}, requests=200)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    topo = ctx.machine.topology
    rows = list(ctx.kernel.trace)
    cons = ctx.strategy.consumers[0].thread.tid
    # the cursor is stored as the publish segment starts (its cost follows the store)
    publishes = [(r[0], r[1]) for r in rows if r[3] == "run" and r[4] == "publish"]
    spins = [(r[0] + r[5], r[1]) for r in rows
             if r[3] == "run" and r[4] == "spin" and r[2] == cons]
    assert len(spins) > 100
    seen = 0
    for end, cpu in spins:
        before = [p for p in publishes if p[0] <= end + 1e-12]
        if not before:
            continue
        pub_end, pub_cpu = before[-1]
        if end - pub_end > 1e-6:
            continue                  # a spin that ended by preemption, not a publish
        xfer = topo.transfer_ns(pub_cpu, cpu) * 1e-9
        assert xfer > 0
        assert end - pub_end == pytest.approx(xfer, abs=1e-12)
        seen += 1
    assert seen > 100


def test_blocking_signal_all_wakes_consumers_one_after_another():
    """BlockingWaitStrategy with 4 parked consumers: the producer's unlock wakes one
    (one futex wake per signalling publish), and each woken consumer wakes the next
    (AQS: signalAll moves the waiters to the lock's queue, unlock unparks its head)."""
    cfg = d_cfg({"consumers": 4},
                {"machine.cores": 8, "workload.service": "deterministic",
                 "workload.service_us": 1.0, "workload.rate_per_s": 1000.0}, requests=500)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    s = ctx.strategy
    producer = s.producers[0].thread
    signals = s.stats["signals"]
    assert signals > 400
    assert producer.futex_wakes == signals           # exactly one wake per signalAll
    chained = sum(c.thread.futex_wakes for c in s.consumers)
    # every parked consumer but the first is woken by the one before it
    assert chained == pytest.approx(3 * signals, rel=0.02)


@pytest.mark.parametrize("topology", ["unicast", "pipeline", "sequencer", "multicast",
                                      "diamond"])
@pytest.mark.parametrize("wait", ["blocking", "busy-spin", "yielding"])
def test_every_handler_of_a_topology_handles_every_event_in_order(topology, wait):
    """The paper's topologies: each handler sees every event once and in order, a
    gated handler never before the ones it is gated on, the request done once."""
    cfg = d_cfg({"topology": topology, "wait": wait, "ring_size": 16},
                {"machine.cores": 4, "workload.rate_per_s": 20000.0,
                 "workload.connections": 3, "workload.service_us": 20.0}, requests=1500)
    ctx, res, handled = run_tracked(cfg, before=enable_logs)
    assert_conserved(ctx, res, handled)
    s = ctx.strategy
    for c in s.consumers:
        seqs = [q for q, _rid in c.log]
        assert seqs == list(range(len(seqs)))
        for d in c.deps:
            assert len(d.log) >= len(c.log)
    assert len(s.producers) == (3 if topology == "sequencer" else 1)
