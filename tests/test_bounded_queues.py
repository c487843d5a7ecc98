"""Bounded queues in the real pools (issue 31): Jetty's QueuedThreadPool with a bounded
job queue refuses what its strategies dispatch once it is full, Tomcat's executor
refuses a socket (and NioEndpoint closes it); the figures of docs/model.md "Bounded
queues under overload"."""

from __future__ import annotations

import pytest

from warmcore.build import build, finish, run_built
from tests.helpers import run, scenario

NEW = ("rejected", "timed_out", "goodput_rps", "rejected_rate", "timed_out_rate")
# ewyk as an open loop at 600,000 req/s: above what pec (about 82,000/s) and epc
# (about 405,000/s) serve on its machine
EWYK_OVERLOAD = {"workload.kind": "open", "workload.rate_per_s": 600_000.0,
                 "workload.connections": 8}


def ewyk(strategy: str, capacity=None, requests=20_000) -> dict:
    sets = dict(EWYK_OVERLOAD)
    if capacity is not None:
        sets["strategy.params.queue_capacity"] = capacity
    return run("ewyk", {**sets, "strategy.name": strategy}, requests=requests)


def test_a_bounded_pool_queue_turns_pecs_backlog_into_refusals():
    """pec hands every task to the pool: unbounded, the overload queues (p99 over 100
    ms, never drained); with 64 jobs of room it refuses most of the excess and answers
    the rest in under 2 ms, serving as much as before. (run.requests counts refusals
    too: 60,000 of them leave the warm-up's transient behind.)"""
    free, bounded = ewyk("pec"), ewyk("pec", 64, requests=60_000)   # past the transient
    assert free["rejected"] == 0 and not free["drained"]
    assert free["latency_us"]["p99"] > 100_000
    assert bounded["rejected_rate"] > 0.8 and bounded["drained"]
    assert bounded["latency_us"]["p99"] < 2_000
    assert bounded["goodput_rps"] == pytest.approx(free["throughput_rps"], rel=0.05)


def test_a_bounded_pool_queue_changes_nothing_for_epc():
    """epc consumes on the producing thread and dispatches only the producer's role (no
    request): the pool's queue never holds a request, so bounding it changes nothing."""
    free, bounded = ewyk("epc"), ewyk("epc", 64)
    assert bounded["rejected"] == 0
    assert {k: v for k, v in bounded.items() if k not in NEW} == \
        {k: v for k, v in free.items() if k not in NEW}


def test_tomcats_executor_refuses_sockets_and_requests_are_conserved():
    """web's thread-pool with 100 workers and 1,000 clients, a TaskQueue of 16: refused
    sockets are closed, their requests refused; every request a client issued is
    answered, refused or still awaited."""
    cfg = scenario("web", {"strategy.name": "thread-pool", "strategy.params.workers": 100,
                           "workload.clients": 1000, "strategy.params.queue_capacity": 16},
                   requests=5_000)
    ctx = build(cfg, 1)
    r = finish(ctx, run_built(ctx))
    rec, wl = ctx.recorder, ctx.workload
    assert r["rejected"] > 0 and r["requests"] > 0
    assert rec.arrived == rec.completed + rec.rejected + rec.in_system
    assert ctx.strategy.executor.rejected == rec.rejected or rec.rejected > 0
    assert len(wl.waiting) == 0         # no timeout: clients are not tracked


def test_the_milestone_refuses_a_bounded_queue():
    from warmcore.simcore.config import ConfigError

    with pytest.raises(ConfigError, match="queue_capacity.*not modelled"):
        run("ewyk", {"strategy.name": "jetty9-milestone",
                     "strategy.params.queue_capacity": 8, **EWYK_OVERLOAD}, requests=100)
