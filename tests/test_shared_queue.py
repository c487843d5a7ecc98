"""shared-queue: work-conserving, no lost wake-ups (also on a real preset, where
wake-ups take time and arrivals are delivered late by event elision)."""

from __future__ import annotations

import pytest

from warmcore.simcore.kernel import PARKED
from warmcore.build import build, finish, run_built
from tests.helpers import scenario


@pytest.mark.parametrize("preset", ["ideal", "i7-3770"])
def test_every_parked_worker_is_registered_idle(preset):
    cfg = scenario("mmc", {"machine.preset": preset, "workload.rate_per_s": 20000.0,
                           "workload.service_us": 100.0}, requests=4000)
    ctx = build(cfg, 1)
    env, strat = ctx.env, ctx.strategy
    lost = []

    def probe():
        while True:
            yield env.timeout(0.0013)
            parked = {t.tid for t in ctx.kernel.threads if t.state is PARKED}
            if parked - {t.tid for t in strat.idle}:
                lost.append(env.now)

    env.process(probe())
    r = finish(ctx, run_built(ctx))
    assert not lost
    # Work conserving: with 8 workers at ~30% load, queueing is a small part of latency.
    assert r["breakdown_us"]["queue_wait"] < 0.5 * r["breakdown_us"]["compute"]
