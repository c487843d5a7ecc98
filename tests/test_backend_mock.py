"""The backend mock on the server's machine (work.backend_mock_us;
models/workloads/backend_mock.py), checked by hand on ideal CPUs (free system calls
and switches, no caches): a call costs its latency exactly the mock's CPU, and the
mock's process exactly that CPU per call."""

from __future__ import annotations

import pytest

from tests.helpers import run
from warmcore.simcore.config import ConfigError


def _calls(strategy="shared-queue", mock_us=None, clients=1, cores=8, threads=None, **work):
    """One or more closed clients elsewhere, a deterministic 10 us service and a backend
    call of 100 us (exponential, the same draws with and without the mock: same seed)
    on the mmc machine with ``cores`` ideal CPUs."""
    sets = {"machine.cores": cores, "strategy.name": strategy,
            "work.backend_us": 100.0, "work.backend_async": True}
    if strategy == "shared-queue":
        sets["strategy.params.threads"] = threads or cores
    if mock_us is not None:
        sets["work.backend_mock_us"] = mock_us
    sets.update({f"work.{k}": v for k, v in work.items()})
    return run("mmc", sets, workload={
        "kind": "closed", "clients": clients, "think": "deterministic", "think_us": 0.0,
        "service": "deterministic", "service_us": 10.0}, requests=2000, warmup=0.1)


@pytest.mark.parametrize("strategy", ["shared-queue", "event-loop"])
def test_a_call_to_the_mock_adds_its_cpu_to_the_latency(strategy):
    """By hand: one client, every CPU idle when the mock works: each call waits its
    backend_us draw (the same draws as without the mock) plus the mock's 6 us (3 us
    reading the call on a loop, 3 us writing the answer on a timer thread); the mock's
    process is busy 6 us a request, the server's as without it. The blocked worker
    (shared-queue) and the event loop's non-blocking client both go through it."""
    off = _calls(strategy)
    on = _calls(strategy, mock_us=6.0)
    assert on["requests"] == off["requests"]
    assert on["latency_us"]["mean"] == pytest.approx(off["latency_us"]["mean"] + 6.0,
                                                     rel=1e-9)
    assert on["latency_us"]["max"] == pytest.approx(off["latency_us"]["max"] + 6.0, rel=1e-9)
    mock_s = on["processes"]["backend"]["task_clock_ms"] * 1e-3
    assert mock_s / on["requests"] == pytest.approx(6e-6, rel=1e-3)
    assert on["processes"]["server"]["task_clock_ms"] == pytest.approx(
        off["processes"]["server"]["task_clock_ms"], rel=1e-3)
    assert "backend" not in off["processes"]


def test_a_call_due_sooner_wakes_the_timer_thread_waiting_for_a_later_one():
    """By hand: 8 clients, ONE loop and ONE timer thread. While the timer thread waits
    for its earliest deadline, a new call due sooner must wake it (the delayed queue
    signals its taker), so no answer waits for a later one. Then each call costs its
    latency the mock's 6 us plus what the two single threads queue: calls come at about
    8 / 116 us = 69,000/s, each 3 us on the loop and 3 us on the timer thread (each
    about 21% busy), an M/D/1 wait of 0.21 / (2 x 0.79) x 3 us = 0.40 us on each: about
    6.8 us in all (6.70 measured). Without the early wake-up an answer due sooner waits
    for the deadline the thread slept to: 11.0 us measured."""
    off = _calls(clients=8)
    on = _calls(clients=8, mock_us=6.0, backend_mock_loops=1, backend_mock_timers=1)
    extra = on["latency_us"]["mean"] - off["latency_us"]["mean"]
    assert 6.0 < extra < 7.5, extra


def test_the_mock_shares_the_servers_cpus():
    """By hand: one CPU for everything, 8 clients and 8 workers, no think: per request
    10 us of service and 20 us of mock on the same CPU, so at most 1 / 30 us = 33,333
    requests/s; the backend's 100 us waits overlap (8 requests in flight need 8 x 30 =
    240 us of CPU a round, more than the 130 us a request takes alone), so the CPU is
    the bound and it is busy all the time."""
    r = _calls(clients=8, cores=1, threads=8, mock_us=20.0)
    assert r["throughput_rps"] == pytest.approx(1e6 / 30.0, rel=0.01)
    assert r["cpus_utilized"] + r["processes"]["backend"]["task_clock_ms"] * 1e-3 / r[
        "sim_seconds"] == pytest.approx(1.0, rel=0.01)


def test_the_mock_needs_a_backend_call_and_a_strategy_that_makes_it():
    with pytest.raises(ConfigError, match="backend_mock_us"):
        _calls(mock_us=6.0, backend_us=0.0)
    with pytest.raises(ConfigError, match="backend_mock_us.*virtual-threads"):
        _calls("virtual-threads", mock_us=6.0)
    with pytest.raises(ConfigError, match="backend_mock_us: not with a program"):
        _calls(mock_us=6.0, backend_us=0.0, program=[{"compute_us": 5.0}])
