"""A run in which every thread waits and no event is left ends cleanly, with the
reason in the result, instead of hanging or raising (warmcore.build.run_built)."""

from __future__ import annotations

import warmcore
from warmcore.strategies.base import REGISTRY, Strategy


class Deaf(Strategy):
    """Parks its one thread and ignores every arrival: nothing can ever happen."""

    name = "deaf-test-only"

    def start(self) -> None:
        self.kernel.spawn(self.ctx.server, "deaf", self._sleep)

    def on_arrival(self, conn) -> None:
        pass

    def _sleep(self, t):
        yield t.park()


def test_a_deadlocked_run_reports_that_it_stalled(monkeypatch):
    monkeypatch.setitem(REGISTRY, Deaf.name, Deaf)
    sc = warmcore.Scenario.load("mmc").with_(
        {"workload": {"kind": "closed", "clients": 3, "think_us": 10.0}},
        strategy=Deaf.name, requests=100)
    r = warmcore.simulate(sc)
    assert r.requests == 0 and r.stop_reason == "stalled"
    assert any("stalled" in w for w in r.warnings)
