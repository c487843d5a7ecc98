"""virtual-threads (Loom): blocking unmounts, bounded resources, start cost."""

from __future__ import annotations

import pytest

from warmcore.models.workloads.closed_loop import ClosedLoopCfg as ClosedLoop
from warmcore.build import simulate_once
from tests.strategy_checks import (
    assert_conserved,
    cfg_for,
    fingerprint,
    pipelined,
    run_tracked,
)

VT = "virtual-threads"
BACKEND_US = 2000.0


def saturating_cfg(params=None, requests=4000):
    """256 clients without think time (256 requests in flight) on 4 CPUs; each
    handler computes 5 us and then waits on a 2 ms (mean) backend call."""
    cfg = cfg_for(VT, params, {"work.backend_us": BACKEND_US}, requests=requests)
    cfg.workload = ClosedLoop(kind="closed", clients=256, think="deterministic", think_us=0.0,
                              service="deterministic", service_us=5.0)
    return cfg


def test_blocking_unmounts_so_four_carriers_serve_far_more_concurrent_calls():
    ctx, res, handled = run_tracked(saturating_cfg())
    assert_conserved(ctx, res, handled)
    assert len(ctx.server.threads) == 4                  # only the carriers are kernel threads
    assert ctx.strategy.stats["max_in_call"] > 200       # requests blocked at once
    per_carrier_bound = 4 / (BACKEND_US * 1e-6)          # 2000 req/s if carriers blocked
    assert res["throughput_rps"] > 30 * per_carrier_bound
    # Little: ~256 in flight over ~2 ms each
    assert res["throughput_rps"] == pytest.approx(256 / (BACKEND_US * 1e-6), rel=0.15)


def test_pinned_blocking_holds_the_carrier():
    """JDK 21 pinning (blocking inside synchronized): the carrier blocks with the
    virtual thread, so throughput falls to carriers / backend time."""
    ctx, res, handled = run_tracked(saturating_cfg({"pinned": True}, requests=1500))
    assert_conserved(ctx, res, handled)
    assert ctx.strategy.stats["max_in_call"] <= 4
    assert res["throughput_rps"] == pytest.approx(4 / (BACKEND_US * 1e-6), rel=0.12)


@pytest.mark.parametrize("kernel_threads", [False, True])
def test_permits_cap_the_calls_in_flight_and_the_throughput(kernel_threads):
    permits = 8
    ctx, res, handled = run_tracked(saturating_cfg({"permits": permits,
                                                    "kernel_threads": kernel_threads},
                                                   requests=3000))
    assert_conserved(ctx, res, handled)
    st = ctx.strategy.stats
    assert st["max_in_call"] == permits
    assert st["permit_waits"] > 1000
    assert res["throughput_rps"] == pytest.approx(permits / (BACKEND_US * 1e-6), rel=0.1)


def light(params):
    cfg = cfg_for(VT, params, {"workload.service": "deterministic", "workload.service_us": 10.0,
                               "workload.rate_per_s": 200.0}, requests=400)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    return res


def test_virtual_thread_start_is_cheaper_than_a_kernel_thread_start():
    v = light({})
    k = light({"kernel_threads": True})
    cpu_v = v["task_clock_ms"] * 1e3 / v["requests"]
    cpu_k = k["task_clock_ms"] * 1e3 / k["requests"]
    assert cpu_v == pytest.approx(10 + 10, rel=0.01)          # start 10 us + handle 10 us
    assert cpu_k == pytest.approx(140 + 10, rel=0.01)         # start 140 us + handle 10 us
    assert k["latency_us"]["mean"] - v["latency_us"]["mean"] == pytest.approx(130, rel=0.02)


def test_kernel_threads_stay_below_their_cap_when_overloaded():
    cfg = cfg_for(VT, {"kernel_threads": True, "max_kernel_threads": 50},
                  {"workload.rate_per_s": 20000.0, "work.backend_us": 500.0}, requests=2000)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    assert ctx.strategy.stats["max_live_kernel_threads"] == 50
    assert len(ctx.strategy.backlog) > 100


@pytest.mark.parametrize("params", [{}, {"permits": 3}, {"kernel_threads": True},
                                    {"kernel_threads": True, "permits": 2},
                                    {"pinned": True, "permits": 2, "carriers": 2}])
def test_conserves_requests_without_deadlock_when_overloaded(params):
    cfg = cfg_for(VT, params, {"workload.rate_per_s": 9000.0, "workload.service_us": 500.0,
                               "work.backend_us": 300.0, "work.produce_us": 10.0,
                               "workload.connections": 3}, requests=2000)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    assert ctx.recorder.in_system > 100


@pytest.mark.parametrize("params", [{"permits": 2}, {"kernel_threads": True, "permits": 3}])
def test_conserves_requests_on_pipelined_connections(params):
    cfg = pipelined(cfg_for(VT, params, {"work.produce_us": 5.0, "work.backend_us": 100.0},
                            requests=3000))
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)


def test_deterministic_under_a_seed():
    cfg = cfg_for(VT, {"permits": 6}, {"workload.rate_per_s": 3000.0, "work.backend_us": 800.0},
                  requests=2000)
    a, b, c = (fingerprint(simulate_once(cfg, s)) for s in (5, 5, 6))
    assert a == b and a != c
