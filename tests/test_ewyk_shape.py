"""The eat-what-you-kill benchmark's shape (data/ewyk-benchmark.md) on the built-in
``ewyk`` scenario: 8 saturating connections of independent requests on the
server-2015 preset, the benchmark's handler (simcore/scenarios/ewyk.toml).

Published (Jetty 9.3 development, machine and workload unpublished):
  * ProduceConsume reached almost 8x the throughput of ProduceExecuteConsume;
  * ProduceExecuteConsume used a lot less CPU (idle during dispatch delays) and,
    normalised for CPU, was still ~30% below ProduceConsume;
  * ExecuteProduceConsume achieved better throughput than ProduceConsume because it
    could use more cores, and normalised for CPU was near identical to it.
The tests assert every part's direction with a margin; the two parts of PEC's
slowness (several times slower than PC, on a lot less CPU) are strict expected
failures: the model lacks their mechanism (issue 29 item 3; docs/model.md "Known
departures" records the figures it gives and why).
"""

from __future__ import annotations

import pytest

from warmcore.simcore.config import load
from warmcore.build import simulate_once

REQUESTS = 5000


@pytest.fixture(scope="module")
def runs():
    return {s: simulate_once(load("ewyk", strategy=s, requests=REQUESTS), 1)
            for s in ("pc", "pec", "epc")}


def per_cpu(r):
    return r["throughput_rps"] / r["cpus_utilized"]


def test_ewyk_scenario_runs_on_the_2015_server_with_pc_by_default():
    cfg = load("ewyk")
    assert cfg.machine.preset == "server-2015" and cfg.strategy.name == "pc"
    assert cfg.workload.kind == "saturating" and cfg.workload.connections == 8


# Issue 29 item 3 (open): the model no longer has what made PEC slow in the report.
# PC several times PEC, on a fraction of PC's CPUs, came from kernel work charged
# inside the QueuedThreadPool's head lock (issue 36 item 1: a woken thread's switch-in
# and futex_wait, a waker's futex wake, held under the lock: 3.7 us a hold instead of
# 0.25, and a convoy of parked takers). With that work done before the lock, as Linux
# and AQS do, and the lock's pre-park retries (JDK 8 acquireQueued), pec reaches
# 543k req/s on 19 CPUs against pc's 308k on 8 (docs/model.md "Known departures").
# Strict: these fail the suite the day a mechanism makes them pass.
PEC_SLOWNESS_MISSING = pytest.mark.xfail(strict=True, reason=(
    "issue 29 item 3: the mechanism behind PEC's 'dispatch delays' in the report is not "
    "modelled; the convoy that gave PC 3.8x PEC was a defect (issue 36 item 1)"))


@PEC_SLOWNESS_MISSING
def test_pc_reaches_several_times_the_throughput_of_pec(runs):
    assert runs["pc"]["throughput_rps"] > 3 * runs["pec"]["throughput_rps"]


@PEC_SLOWNESS_MISSING
def test_pec_uses_a_lot_less_cpu_than_pc(runs):
    assert runs["pec"]["cpus_utilized"] < 0.6 * runs["pc"]["cpus_utilized"]


def test_pec_cpu_normalised_throughput_below_pc(runs):
    assert per_cpu(runs["pec"]) < 0.85 * per_cpu(runs["pc"])


def test_epc_reaches_more_than_pc_by_using_more_cores(runs):
    assert runs["epc"]["throughput_rps"] > 1.1 * runs["pc"]["throughput_rps"]
    assert runs["epc"]["cpus_utilized"] > 1.2 * runs["pc"]["cpus_utilized"]


def test_epc_cpu_normalised_throughput_within_25_percent_of_pc(runs):
    ratio = per_cpu(runs["epc"]) / per_cpu(runs["pc"])
    assert 0.75 <= ratio <= 1.25, ratio


def test_no_kernel_work_runs_inside_the_pool_queues_locks(monkeypatch):
    """Issue 36 item 1 on the whole benchmark: every segment run under the
    QueuedThreadPool's head or tail lock starts owing no kernel work (a woken waiter
    finishes its switch-in and futex_wait, a waker its futex wake, a handler its
    stat calls, before it takes the lock: Thread.settle_owed), so the locks are held
    for the queue operation only and pec's takes rarely park (about one in ten)."""
    from warmcore.build import build, finish, run_built
    from warmcore.simcore.kernel.threads import Thread

    ctx = build(load("ewyk", strategy="pec", requests=REQUESTS), 1)
    q = ctx.strategy.pool.queue
    locked = {id(q.head.seg), id(q.tail.seg)}
    owed = []
    run = Thread.run

    def watched(self, seg, req=None):
        if id(seg) in locked:
            owed.append(self.pending_busy + self.pending_stall)
        return run(self, seg, req)

    monkeypatch.setattr(Thread, "run", watched)
    n = finish(ctx, run_built(ctx))["requests"]
    assert len(owed) > 2 * n and max(owed) == 0.0
    assert q.head.sem.waits < 0.2 * q.head.sem.acquires


def test_every_run_completed_its_requests(runs):
    for r in runs.values():
        assert r["stop_reason"] == "request limit" and r["requests"] == REQUESTS


def test_saturating_depth_is_a_validated_workload_parameter():
    """workload.depth: requests each saturating connection keeps in flight (default 8,
    what the scenario always used; the EWYK benchmark's client submits 1, 2 or 4)."""
    from warmcore.simcore.config import ConfigError
    assert load("ewyk").workload.depth == 8
    assert load("ewyk", ["workload.depth=2"]).workload.depth == 2
    with pytest.raises(ConfigError):
        load("ewyk", ["workload.depth=0"])


def test_depth_one_non_serial_keeps_one_request_per_connection_in_flight():
    r = simulate_once(load("ewyk", ["workload.depth=1", "workload.serial=false",
                                    "workload.connections=2"], strategy="pec",
                           requests=200), 1)
    assert r["requests"] == 200 and r["stop_reason"] == "request limit"


def test_batches_send_the_next_batch_only_when_all_are_answered():
    """workload.batches=[3]: one connection holds at most 3 requests, and a run of 300
    completes (300 = 100 whole batches)."""
    r = simulate_once(load("ewyk", ["workload.batches=[3]", "workload.serial=false",
                                    "workload.connections=1"], strategy="pec",
                           requests=300), 1)
    assert r["requests"] == 300 and r["stop_reason"] == "request limit"
    assert 0 < r["mean_in_system"] <= 3.0


def test_batches_are_deterministic_and_validated():
    from warmcore.simcore.config import ConfigError
    sets = ["workload.batches=[4,2,2,1,1,1,1,1]", "workload.serial=false"]
    a = simulate_once(load("ewyk", sets, strategy="epc", requests=400), 1)
    b = simulate_once(load("ewyk", sets, strategy="epc", requests=400), 1)
    assert a["throughput_rps"] == b["throughput_rps"]
    with pytest.raises(ConfigError):
        load("ewyk", ["workload.batches=[]"])
    with pytest.raises(ConfigError):
        load("ewyk", ["workload.batches=[0]"])
