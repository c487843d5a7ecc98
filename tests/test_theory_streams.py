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
