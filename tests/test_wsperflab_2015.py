"""The RxNetty-vs-Tomcat study at its own scale (examples/wsperflab-2015/testa.toml:
testA's five backend calls to the mock on the same machine, wrk on it too) against
the study's staircase (docs/data/wsperflab-2015/curves.csv, read off its slides)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run, study_loop_migrations_per_request

EXAMPLE = str(Path(__file__).parents[1] / "examples" / "wsperflab-2015" / "testa.toml")


def _testa(strategy: str, clients: int) -> dict:
    return run(EXAMPLE, {"strategy.name": strategy, "workload.clients": clients},
               requests=2000)


def _machine_migrations(r) -> float:
    """Migrations a request of every process on the machine (server, wrk, the mock),
    as the study's perf stat counted them."""
    return sum(p["cpu_migrations"] for p in r["processes"].values()) / r["requests"]


def test_the_example_is_fitted_to_the_studys_first_steps():
    """The example's two fitted defaults hold (docs/model.md "The study at its own
    scale"): RxNetty's CPU a request at 100 clients, 0.690 ms in the study, and the
    mock's at the first steps, 0.62 ms (the howto's row: 11,330 ms for 18,245
    requests), each within 3%; and at 100 clients the closed clients are latency
    bound, 100 / 155.5 ms = 643 requests/s (the study: 641 read off its chart)."""
    r = _testa("event-loop", 100)
    per_ms = lambda name: r["processes"][name]["task_clock_ms"] / r["requests"]  # noqa: E731
    assert per_ms("server") == pytest.approx(0.690, rel=0.03)
    assert per_ms("backend") == pytest.approx(0.62, rel=0.03)
    assert r["throughput_rps"] == pytest.approx(100 / (r["latency_us"]["mean"] * 1e-6),
                                                rel=0.01)
    assert 154_000 < r["latency_us"]["mean"] < 160_000      # testA's longest chain, 154 ms


def test_at_its_own_scale_the_loop_migrates_less_per_request_from_the_first_steps():
    """The study's shape that `web` misses (its strict xfail): counted over the whole
    machine, the event loop's migrations a request fall from 100 to 200 to 400 clients,
    as the study's did (8.85 -> 8.29 -> 5.89, 400 against 100: 0.67); measured here
    (2,000 requests a step) 6.94 -> 6.49 -> 4.04 (0.58). Asserted: each step below the
    one before, and 400 clients below 0.8 of 100. The thread pool migrates more a
    request than the loop at each step, as Tomcat did (13.49, 12.84, 10.08)."""
    study = study_loop_migrations_per_request()
    assert study[200] < study[100] and study[400] < 0.8 * study[100]
    loop = {c: _machine_migrations(_testa("event-loop", c)) for c in (100, 200, 400)}
    assert loop[200] < loop[100] and loop[400] < loop[200]
    assert loop[400] < 0.8 * loop[100], loop
    pool = {c: _machine_migrations(_testa("thread-pool", c)) for c in (100, 400)}
    assert all(pool[c] > 1.5 * loop[c] for c in pool), (pool, loop)
