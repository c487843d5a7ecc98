"""Checks every strategy must pass: requests conserved, no deadlock, determinism.

``run_tracked`` builds a scenario, counts every ``ctx.done`` per request and
runs it; ``assert_conserved`` then requires that no request was handled twice
and that the requests the strategy still holds (its ``outstanding()``), with
those still waiting in their connection, are exactly the ones the recorder
counts as in the system (server workloads; not ``stream``, whose consumer
process holds messages too).
"""

from __future__ import annotations

import json
from collections import Counter

from warmcore.build import build, finish, run_built
from tests.helpers import scenario


def cfg_for(strategy: str, params: dict | None = None, sets: dict | None = None, **run):
    s = {"strategy.name": strategy}
    for k, v in (params or {}).items():
        s[f"strategy.params.{k}"] = v
    s.update(sets or {})
    return scenario("mmc", s, **run)


def run_tracked(cfg, seed: int = 1, before=None):
    """(ctx, result, handled) where handled counts ctx.done calls per request id and
    ctx.handled_reqs lists the handled requests in completion order. ``before(ctx)``
    runs after the build, before the run."""
    ctx = build(cfg, seed)
    if before is not None:
        before(ctx)
    handled: Counter = Counter()
    reqs = []
    inner = ctx.done

    def done(req, thread):
        handled[req.id] += 1
        reqs.append(req)
        inner(req, thread)

    ctx.done = done
    ctx.handled_reqs = reqs
    stalled = run_built(ctx)
    return ctx, finish(ctx, stalled), handled


def assert_conserved(ctx, res, handled) -> None:
    assert res["stop_reason"] == "request limit", res["stop_reason"]
    assert handled and max(handled.values()) == 1, "a request was handled twice"
    held = [r.id for r in ctx.strategy.outstanding()]
    # requests not yet readable (a serial connection busy with an earlier one)
    held += [r.id for c in ctx.workload.connections for r in c.inbox]
    assert len(held) == len(set(held)), "a request is held twice"
    assert not set(held) & set(handled), "a handled request is still held"
    assert len(held) == ctx.recorder.in_system, (len(held), ctx.recorder.in_system)
    assert ctx.recorder.arrived == ctx.recorder.completed + ctx.recorder.in_system


def fingerprint(res: dict) -> str:
    return json.dumps(res, sort_keys=True, default=str)


def pipelined(cfg, connections: int = 6, service_us: float = 50.0):
    """``cfg`` with its workload replaced by saturating pipelined connections."""
    from warmcore.models.workloads.saturating import SaturatingCfg as Saturating

    cfg.workload = Saturating(kind="saturating", connections=connections, service_us=service_us)
    return cfg
