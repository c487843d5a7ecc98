"""The engine on the ideal machine against queueing theory.

Each case runs independent replications, builds a 99% Student-t confidence
interval for the mean waiting time from them, and requires the theoretical value
inside it. Long-horizon cases also require < 2% relative error. Seeds are fixed,
so a pass is reproducible, not lucky-by-retry.
"""

from __future__ import annotations

import pytest

from warmcore.simcore.theory import mg1_wait, mmc_wait
from tests.helpers import ci, replicate, scenario

WAIT = lambda r: r["wait_us"]["mean"] * 1e-6


def mmc_cfg(c: int, rho: float, service_us: float = 1000.0, service="exponential",
            requests=40_000):
    rate = rho * c / (service_us * 1e-6)
    return scenario("mmc", {"machine.cores": c, "workload.rate_per_s": rate,
                            "workload.service_us": service_us, "workload.service": service},
                    requests=requests, warmup=0.2), rate


# Replications x requests per case: more at high utilisation, where the waiting
# time's variance grows like 1/(1-rho)^4.
# The long ones carry the `slow` marker (pyproject); CI runs them all, and
# `pytest -m "not slow"` skips them for a quick local loop.
CASES = [(0.5, 8, 20_000), (0.8, 8, 40_000),
         pytest.param(0.95, 10, 150_000, marks=pytest.mark.slow)]


def assert_wait_in_ci(cfg, theory_s: float, reps: int) -> None:
    mean, half = ci(replicate(cfg, WAIT, reps))
    assert abs(mean - theory_s) <= half, (mean, theory_s, half)


@pytest.mark.parametrize("rho,reps,n", CASES)
def test_mm1_mean_wait_matches_theory(rho, reps, n):
    cfg, rate = mmc_cfg(1, rho, requests=n)
    assert_wait_in_ci(cfg, mmc_wait(rate, 1e-3, 1), reps)


@pytest.mark.parametrize("rho,reps,n", CASES)
def test_mmc_mean_wait_matches_erlang_c(rho, reps, n):
    cfg, rate = mmc_cfg(4, rho, requests=n)
    assert_wait_in_ci(cfg, mmc_wait(rate, 1e-3, 4), reps)


@pytest.mark.parametrize("rho,reps,n", CASES)
def test_md1_mean_wait_matches_pollaczek_khinchine(rho, reps, n):
    cfg, rate = mmc_cfg(1, rho, service="deterministic", requests=n)
    assert_wait_in_ci(cfg, mg1_wait(rate, 1e-3, 0.0), reps)


def test_mg1_lognormal_matches_pollaczek_khinchine():
    cfg, rate = mmc_cfg(1, 0.7, service="lognormal", requests=40_000)
    cfg.workload.service_cv = 0.5
    assert_wait_in_ci(cfg, mg1_wait(rate, 1e-3, 0.25), 8)


@pytest.mark.slow
@pytest.mark.parametrize("c,rho,service", [(4, 0.8, "exponential"), (1, 0.5, "exponential"),
                                           (1, 0.5, "deterministic")])
def test_long_horizon_relative_error_below_two_percent(c, rho, service):
    cfg, rate = mmc_cfg(c, rho, service=service, requests=250_000)
    waits = replicate(cfg, WAIT, 4, base_seed=11)
    theory = mmc_wait(rate, 1e-3, c) if service == "exponential" else mg1_wait(rate, 1e-3, 0)
    assert abs(waits.mean() - theory) / theory < 0.02, (waits.mean(), theory)


def test_cli_example_matches_erlang_c():
    """The issue's example: 4 cores, 3200 req/s, 1 ms exponential service."""
    from warmcore.build import simulate

    cfg, _ = mmc_cfg(4, 0.8, requests=200_000)
    r = simulate(cfg)
    theory = mmc_wait(3200, 1e-3, 4) * 1e6
    assert abs(r["wait_us"]["mean"] - theory) / theory < 0.05
    assert r["throughput_rps"] == pytest.approx(3200, rel=0.02)
    assert r["cpus_utilized"] == pytest.approx(3.2, rel=0.02)
