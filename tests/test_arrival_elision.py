"""Event elision for open-loop arrivals (docs/architecture.md) changes speed only:
with it switched off (every arrival gets an event of its own, as if the strategy
always answered "an arrival would wake a thread now"), every figure is the same to
the last digit."""

from __future__ import annotations

import pytest

import warmcore
from warmcore.models.workloads.open_loop import OpenLoop
from warmcore.strategies.shared_queue import SharedQueue


def _json(sc) -> str:
    return warmcore.simulate(sc).to_json()


@pytest.mark.parametrize("rate, cores", [(3200.0, 4), (3900.0, 4), (900.0, 1)])
def test_results_are_identical_with_one_event_per_arrival(monkeypatch, rate, cores):
    sc = warmcore.Scenario.load("mmc").with_(
        {"workload.rate_per_s": rate, "machine.cores": cores}, requests=20000)
    elided = _json(sc)
    calls = []
    monkeypatch.setattr(SharedQueue, "arrival_wakes",
                        lambda self: calls.append(1) or True)
    every_event = _json(sc)
    assert len(calls) > 20000           # the switch took: every arrival asked
    assert every_event == elided


def test_elision_really_skips_events(monkeypatch):
    """The mechanism is on by default: at rho 0.97 most arrivals find every worker
    busy and are delivered without an event of their own."""
    events = []
    original = OpenLoop._arrival_event
    monkeypatch.setattr(OpenLoop, "_arrival_event",
                        lambda self, ev: events.append(1) or original(self, ev))
    r = warmcore.simulate(warmcore.Scenario.load("mmc").with_({"workload.rate_per_s": 3900.0},
                                                              requests=20000))
    assert r.arrived > 20000
    assert len(events) < 0.5 * r.arrived
