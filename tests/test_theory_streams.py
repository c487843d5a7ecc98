"""Request streams as real servers see them, against queueing theory (issue 31):
heavy-tailed service (H2, Coxian), bursty arrivals (MMPP, batches), bounded queues
(Erlang B, M/M/c/K) and clients that time out. Each case builds a 99% Student-t
interval from independent replications (tests/helpers.py) and requires the formula
inside it; seeds are fixed, so a pass is reproducible."""

from __future__ import annotations

import pytest

from warmcore.simcore.distributions import distribution
from warmcore.simcore.theory import mg1_wait
from tests.helpers import ci, replicate, scenario

WAIT = lambda r: r["wait_us"]["mean"] * 1e-6       # noqa: E731


def mg1_cfg(rho: float, service: str, cv: float, requests: int = 40_000, **sets):
    rate = rho / 1e-3
    return scenario("mmc", {"machine.cores": 1, "workload.rate_per_s": rate,
                            "workload.service": service, "workload.service_cv": cv,
                            "workload.service_us": 1000.0, **sets},
                    requests=requests, warmup=0.2), rate


@pytest.mark.parametrize("service, cv", [("hyperexponential", 2.0), ("coxian", 1.5)])
def test_mg1_heavy_tailed_service_matches_pollaczek_khinchine(service, cv):
    """M/H2/1 and M/Cox2/1 at rho 0.5: Wq = rho (1 + cv^2) E[S] / (2 (1 - rho)), the
    second moment the fit's own (2.5 ms for H2 at cv 2, 1.625 ms for Cox2 at 1.5)."""
    cfg, rate = mg1_cfg(0.5, service, cv)
    scv = distribution(service, 1e-3, cv).scv
    theory = mg1_wait(rate, 1e-3, scv)
    mean, half = ci(replicate(cfg, WAIT, 10))
    assert abs(mean - theory) <= half, (mean, theory, half)
    assert half < 0.1 * theory          # the interval is tight enough to mean something


# -- bursty arrivals -----------------------------------------------------------------

def test_mmpp_dispersion_by_hand():
    """On/off at 1000 req/s with equal 10 ms periods: 2000 req/s while on, r1 = r2 =
    100/s, so K = 2 x 100 x 100 x 2000^2 / (200^2 x 2000 x 100) = 10: IDC 11 in the
    limit, 1 + 10 (1 - 1/200) = 10.95 over a second."""
    from warmcore.simcore.arrivals import mmpp_dispersion, mmpp_rates

    assert mmpp_rates(1000.0, 0.01, 0.01, 0.0) == (2000.0, 0.0)
    assert mmpp_dispersion(1000.0, 0.01, 0.01, 0.0) == pytest.approx(11.0)
    assert mmpp_dispersion(1000.0, 0.01, 0.01, 0.0, t=1.0) == pytest.approx(10.95, abs=1e-6)


@pytest.mark.parametrize("on_s, off_s, frac", [(0.01, 0.01, 0.0), (0.002, 0.008, 0.25)])
def test_mmpp_rate_and_index_of_dispersion_match_their_formulas(on_s, off_s, frac):
    """Counts of the open loop's own MMPP gap sampler in 0.2 s windows: their mean rate
    and their index of dispersion (variance / mean) each inside a 99% interval over 10
    independent streams, around the long-run rate and Heffes-Lucantoni's IDC(t)."""
    import numpy as np

    from warmcore.simcore.arrivals import mmpp_dispersion, mmpp_gaps

    rate, window, windows = 1000.0, 0.2, 400
    rates, idcs = [], []
    for seed in range(10):
        gap = mmpp_gaps(np.random.default_rng(seed), rate, on_s, off_s, frac)
        times = np.cumsum([gap() for _ in range(int(rate * window * windows * 1.2))])
        counts = np.bincount((times // window).astype(int))[:windows]
        rates.append(counts.mean() / window)
        idcs.append(counts.var(ddof=1) / counts.mean())
    for values, theory in ((rates, rate), (idcs, mmpp_dispersion(rate, on_s, off_s, frac,
                                                                  t=window))):
        mean, half = ci(values)
        assert abs(mean - theory) <= half, (mean, theory, half)
        assert half < 0.1 * theory


def test_an_mmpp_run_arrives_at_its_mean_rate():
    """End to end: an MMPP open loop's arrivals in the window over its length."""
    cfg, rate = mg1_cfg(0.5, "exponential", 1.0, requests=20_000, **{
        "workload.arrival": "mmpp"})
    per_s = replicate(cfg, lambda r: r["arrived"] / r["sim_seconds"], 8)
    mean, half = ci(per_s)
    assert abs(mean - rate) <= half, (mean, rate, half)


@pytest.mark.parametrize("sizes, mean_x", [("geometric", 4.0), ("constant", 3.0)])
def test_batch_arrivals_mx_m1_match_their_formula(sizes, mean_x):
    """M^X/M/1 at rho 0.5: geometric batches of mean 4 (E[X^2] = 28: Wq = 4 + 3 = 7 ms)
    and constant batches of 3 (E[X^2] = 9: 500/3 batches/s x 12 ms^2 / 1 = 2 ms as a
    batch, plus (9 - 3) / 6 = 1 service ahead in it: Wq = 3 ms)."""
    from warmcore.simcore.arrivals import batch_moments
    from warmcore.simcore.theory import mxg1_wait

    cfg, rate = mg1_cfg(0.5, "exponential", 1.0, **{
        "workload.arrival": "batch", "workload.batch_size": mean_x,
        "workload.batch_sizes": sizes})
    ex, ex2 = batch_moments(mean_x, sizes)
    theory = mxg1_wait(rate, 1e-3, 1.0, ex, ex2)
    assert theory == pytest.approx(7e-3 if sizes == "geometric" else 3e-3)
    mean, half = ci(replicate(cfg, WAIT, 10))
    assert abs(mean - theory) <= half, (mean, theory, half)
    assert half < 0.1 * theory


def connections_cfg(arrival: str, requests: int = 40_000, **sets):
    """mg1_cfg's M/./1 at rho 0.5 with its stream spread over 100 keep-alive connections
    (the connections kind; not serial, so no connection holds a request back)."""
    wl = {"kind": "connections", "connections": 100, "serial": False, "rate_per_s": 500.0,
          "service": "exponential", "service_us": 1000.0, "arrival": arrival, **sets}
    return scenario("mmc", {"machine.cores": 1}, workload=wl, requests=requests,
                    warmup=0.2), 500.0


def test_connections_mmpp_run_arrives_at_its_mean_rate():
    """The connections kind's MMPP (one on/off environment switching every connection's
    stream): its arrivals in the window over its length are the long-run rate."""
    cfg, rate = connections_cfg("mmpp", requests=20_000)
    per_s = replicate(cfg, lambda r: r["arrived"] / r["sim_seconds"], 8)
    mean, half = ci(per_s)
    assert abs(mean - rate) <= half, (mean, rate, half)


def test_connections_batch_arrivals_match_mx_m1():
    """Batches over the connections kind: the superposed stream is M^X, so one server
    at rho 0.5 with geometric batches of mean 4 waits Wq = 7 ms, as on the open kind."""
    from warmcore.simcore.arrivals import batch_moments
    from warmcore.simcore.theory import mxg1_wait

    cfg, rate = connections_cfg("batch")
    ex, ex2 = batch_moments(4.0, "geometric")
    theory = mxg1_wait(rate, 1e-3, 1.0, ex, ex2)
    mean, half = ci(replicate(cfg, WAIT, 10))
    assert abs(mean - theory) <= half, (mean, theory, half)
    assert half < 0.1 * theory


def test_connections_mmpp_waits_more_than_poisson_at_the_same_rate():
    """Bursts at the same mean rate: an on/off source sends at twice its rate while on
    (rho 1 for 10 ms at a time), so the wait grows far above M/M/1's 1 ms."""
    cfg, _ = connections_cfg("mmpp", requests=20_000)
    mean, half = ci(replicate(cfg, WAIT, 6))
    assert mean - half > 3 * 1e-3, (mean, half)


# -- bounded queues --------------------------------------------------------------------

REJECTED = lambda r: r["rejected_rate"]            # noqa: E731


def mmc_bounded(c: int, offered: float, capacity: int, requests: int = 40_000):
    rate = offered / 1e-3
    return scenario("mmc", {"machine.cores": c, "workload.rate_per_s": rate,
                            "strategy.params.queue_capacity": capacity},
                    requests=requests, warmup=0.2), rate


def test_erlang_b_by_hand():
    """B(1, 1) = 1/2; B(2, 1) = (1/2) / (2 + 1/2) = 1/5; M/M/4/4 at 3.2 Erlangs: 0.22814."""
    from warmcore.simcore.theory import erlang_b, mmck

    assert erlang_b(1, 1.0) == 0.5 and erlang_b(2, 1.0) == pytest.approx(0.2)
    assert erlang_b(4, 3.2) == pytest.approx(0.228145, abs=1e-6)
    assert mmck(4, 4, 3.2)[0] == pytest.approx(erlang_b(4, 3.2))
    # M/M/1/2 at a = 1: p0 = p1 = p2 = 1/3, one waiting with probability 1/3
    assert mmck(1, 2, 1.0) == (pytest.approx(1 / 3), pytest.approx(1 / 3))


def test_mmcc_blocking_equals_erlang_b():
    """The issue's case: 4 CPUs, 3.2 Erlangs, no waiting room (queue_capacity = 0): the
    share refused within 3% of Erlang B, and Erlang B inside the 99% interval."""
    from warmcore.simcore.theory import erlang_b

    cfg, _ = mmc_bounded(4, 3.2, 0)
    theory = erlang_b(4, 3.2)
    mean, half = ci(replicate(cfg, REJECTED, 8))
    assert abs(mean - theory) <= half, (mean, theory, half)
    assert abs(mean - theory) / theory < 0.03, (mean, theory)


@pytest.mark.parametrize("c, offered, capacity", [(2, 2.5, 3), (1, 0.8, 2)])
def test_mmck_blocking_and_wait_equal_the_closed_form(c, offered, capacity):
    """M/M/2/5 overloaded (a = 2.5 > c: a bounded queue keeps it stable) and M/M/1/3:
    the share refused and the admitted requests' mean wait (Little: Lq / (lambda (1 -
    p_K))) each inside a 99% interval of the closed form."""
    from warmcore.simcore.theory import mmck

    cfg, rate = mmc_bounded(c, offered, capacity)
    p_block, lq = mmck(c, c + capacity, offered)
    runs = replicate(cfg, lambda r: (r["rejected_rate"], r["wait_us"]["mean"] * 1e-6), 8)
    for values, theory in ((runs[:, 0], p_block), (runs[:, 1], lq / (rate * (1 - p_block)))):
        mean, half = ci(values)
        assert abs(mean - theory) <= half, (mean, theory, half)


def test_default_queue_is_unbounded_and_refuses_nothing():
    r = replicate(mmc_bounded(4, 3.9, 0)[0].set("strategy.params", {}),
                  lambda r: (r["rejected"], r["goodput_rps"] == r["throughput_rps"]), 1)
    assert r[0, 0] == 0 and r[0, 1]


# -- client timeouts -----------------------------------------------------------------

def test_open_loop_timeouts_equal_the_sojourn_tail():
    """M/M/1 at rho 0.5 (mu = 1000/s): the sojourn time is exponential of rate mu -
    lambda = 500/s, so a 2 ms timeout catches e^-1 = 36.8% of requests; open clients
    do not change what the server does, so goodput is throughput less them."""
    import math

    cfg, rate = mg1_cfg(0.5, "exponential", 1.0, **{"workload.timeout_us": 2000.0})
    runs = replicate(cfg, lambda r: (r["timed_out_rate"],
                                     r["goodput_rps"] / r["throughput_rps"]), 8)
    mean, half = ci(runs[:, 0])
    assert abs(mean - math.exp(-1)) <= half, (mean, math.exp(-1), half)
    # answered in time: the rest (the window counts a timeout at its deadline, an answer
    # at its completion, so the two shares agree to the window's edges: 1%)
    assert abs(runs[:, 1].mean() - (1 - math.exp(-1))) < 0.01, runs[:, 1]


@pytest.mark.parametrize("retries", [0, 3])
def test_a_closed_system_with_timeouts_conserves_requests(retries):
    """Every request a closed client issues is answered, timed out, refused or still
    awaited, over the whole run: answered + timed_out + rejected + in flight =
    issued. 40 clients over 4 workers with a 2 ms timeout against 1 ms service and a
    waiting room of 8: all four outcomes happen."""
    from warmcore.build import build, run_built, finish

    cfg = scenario("mmc", {"workload": {"kind": "closed", "clients": 40, "think_us": 500.0,
                                        "service_us": 1000.0, "timeout_us": 2000.0,
                                        "retries": retries, "retry_backoff_us": 1000.0},
                           "strategy.params.queue_capacity": 8}, requests=20_000)
    ctx = build(cfg, 3)
    r = finish(ctx, run_built(ctx))
    rec, wl = ctx.recorder, ctx.workload
    assert rec.answered and rec.timed_out and rec.rejected and wl.waiting
    assert rec.answered + rec.timed_out + rec.rejected + len(wl.waiting) == rec.arrived
    # each client waits for one request at a time, or thinks, or backs off
    assert len(wl.waiting) <= 40
    assert r["rejected"] > 0 and r["timed_out"] > 0
    assert r["goodput_rps"] < r["throughput_rps"]


# -- open-loop clients with one request in flight (wrk-style) that time out ----------

def held_cfg(closes: bool, sets: dict | None = None, **run):
    """mmc's open loop over 8 serial connections, one request in flight each (wrk),
    clients that stop waiting after 2 ms (``closes``: and close their connection)."""
    wl = {"kind": "open", "rate_per_s": 1000.0, "connections": 8, "serial": True,
          "pipelined": False, "client_turnaround_us": 50.0, "service": "exponential",
          "service_us": 1000.0, "timeout_us": 2000.0, "timeout_closes": closes}
    return scenario("mmc", {"machine.cores": 1, **(sets or {})}, workload=wl,
                    **(run or {"requests": 20_000}))


def conserved(ctx) -> None:
    """Every request issued is answered in time, timed out, refused or still awaited
    (the clients' view), and arrived = completed + refused (heard or not) + withdrawn
    + in the system (the recorder's)."""
    rec, wl = ctx.recorder, ctx.workload
    assert rec.answered + rec.timed_out + rec.rejected + len(wl.waiting) == rec.arrived
    assert rec.completed + rec.rejected + rec.refused_unheard + rec.abandoned \
        + rec.in_system == rec.arrived


@pytest.mark.parametrize("closes", [False, True])
def test_held_open_loop_clients_with_timeouts_conserve_requests(closes):
    """One server at rho 1 (1000 req/s of 1 ms) behind a waiting room of 4: answers,
    timeouts and refusals all happen; nothing is lost or counted twice, whether the
    clients wait for late answers (wrk) or close their connection (an HTTP client)."""
    from warmcore.build import build, finish, run_built

    ctx = build(held_cfg(closes, {"strategy.params.queue_capacity": 4}), 3)
    r = finish(ctx, run_built(ctx))
    rec = ctx.recorder
    assert rec.answered and rec.timed_out and rec.rejected
    conserved(ctx)
    assert bool(rec.abandoned) == closes      # only a closing client withdraws requests
    assert r["goodput_rps"] < r["throughput_rps"]


def reached_server(ctx) -> int:
    """Requests that left their client: issued less those still held or withdrawn."""
    wl = ctx.workload
    return ctx.recorder.arrived - sum(map(len, wl.held)) - ctx.recorder.abandoned


@pytest.mark.parametrize("closes", [False, True])
def test_a_stuck_server_holds_a_waiting_client_but_not_a_closing_one(closes):
    """A server stuck for 100 ms per request (deterministic), 1000 req/s over 8
    connections for 0.3 s. Either way the generator keeps its schedule (about 300
    issued). wrk's clients wait for each late answer on the same connection, so
    after the first 8 only the few answered connections send again (under 30 reach
    the server); clients that close on a 2 ms timeout send on a new connection, and
    nearly every request that was not withdrawn reaches the server (over 250)."""
    from warmcore.build import build, finish, run_built

    ctx = build(held_cfg(closes, {"workload.service": "deterministic",
                                  "workload.service_us": 100_000.0},
                         duration_s=0.3, warmup=0.0), 5)
    finish(ctx, run_built(ctx))
    rec, wl = ctx.recorder, ctx.workload
    assert 250 < rec.arrived < 350
    conserved(ctx)
    if closes:
        assert reached_server(ctx) > 250
        assert len(wl.connections) > 200     # a new connection per timed-out request
    else:
        assert reached_server(ctx) < 30
        assert len(wl.connections) == 8
