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
