"""Invariants of the engine on random scenarios (Hypothesis).

Each example builds a small random scenario (workload kind, CPUs, threads,
affinity, service distribution), runs it with the event trace on, and checks:
requests are conserved, no CPU is over 100% busy, a thread runs only inside its
affinity mask, no two threads execute on one hardware thread at once, Little's
law holds within the bound set by requests at the window edges, and the same
seed gives the same JSON.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from warmcore.build import build, finish, run_built
from tests.helpers import scenario

KINDS = ["open", "closed", "batch", "connections", "saturating"]


@st.composite
def scenarios(draw):
    kind = draw(st.sampled_from(KINDS))
    cores = draw(st.integers(1, 4))
    threads = draw(st.integers(1, 6))
    service = draw(st.sampled_from(["exponential", "deterministic", "lognormal"]))
    wl = {"kind": kind, "service": service,
          "service_us": draw(st.sampled_from([50.0, 200.0, 1000.0]))}
    wl.update({"open": {"rate_per_s": draw(st.sampled_from([500.0, 2000.0, 8000.0]))},
               "connections": {"connections": draw(st.integers(2, 50)), "rate_per_s": 1500.0},
               "closed": {"clients": draw(st.integers(1, 12)),
                          "think_us": draw(st.sampled_from([0.0, 500.0]))},
               "batch": {"jobs": draw(st.integers(1, 30))},
               "saturating": {"connections": draw(st.integers(1, 3))}}[kind])
    sets = {"machine.cores": cores, "strategy.params.threads": threads}
    if draw(st.booleans()):
        cpus = draw(st.lists(st.integers(0, cores - 1), min_size=1, max_size=cores, unique=True))
        sets["server.cpus"] = sorted(cpus)
    if kind in ("open", "connections") and draw(st.booleans()):
        sets["work.backend_us"] = 300.0   # blocking waits inside the handler
    cfg = scenario("mmc", sets, workload=wl, requests=draw(st.integers(50, 400)),
                   trace_events=100_000)
    return cfg


def run_ctx(cfg, seed=3):
    ctx = build(cfg, seed)
    stalled = run_built(ctx)
    return ctx, finish(ctx, stalled)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_engine_invariants_hold_on_random_scenarios(cfg):
    ctx, res = run_ctx(cfg)
    rec, kernel = ctx.recorder, ctx.kernel
    # Requests are conserved.
    assert rec.arrived == rec.completed + rec.in_system
    assert res["stop_reason"] != "stalled"
    # Utilisation never exceeds 1 per CPU.
    assert all(u <= 1.0 + 1e-9 for u in res["cpu_utilization"]), res["cpu_utilization"]
    assert res["cpus_utilized"] <= kernel.machine.n_cpus + 1e-9
    # Threads run only inside their affinity masks; one thread per CPU at a time.
    allowed = {t.tid: t.allowed_set for t in kernel.threads}
    busy_until: dict[int, float] = {}
    for t0, cpu, tid, kind, _label, dur, _rid in kernel.trace:
        if kind == "freq":                      # a CPU's clock change: no thread
            continue
        assert cpu in allowed[tid], (tid, cpu, allowed[tid])
        if kind == "run":
            assert t0 >= busy_until.get(cpu, 0.0) - 1e-12, (cpu, t0, busy_until[cpu])
            busy_until[cpu] = t0 + dur
    assert len(kernel.trace) < 100_000          # the trace was not truncated
    # Little's law: L*T and the measured sojourn times differ only by the requests
    # straddling the window's edges.
    if res["requests"]:
        lhs = res["mean_in_system"] * res["sim_seconds"]
        rhs = res["throughput_rps"] * res["latency_us"]["mean"] * 1e-6 * res["sim_seconds"]
        edge = (rec.in_system_at_measure + rec.in_system) * (res["sim_seconds"] + 1e-12)
        assert abs(lhs - rhs) <= edge + 1e-9 * max(lhs, 1)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_same_seed_gives_identical_json(cfg):
    a = json.dumps(run_ctx(cfg, seed=5)[1], sort_keys=True, default=str)
    b = json.dumps(run_ctx(cfg, seed=5)[1], sort_keys=True, default=str)
    assert a == b


def test_different_seeds_give_different_results():
    cfg = scenario("mmc", requests=2000)
    assert run_ctx(cfg, 1)[1]["latency_us"]["mean"] != run_ctx(cfg, 2)[1]["latency_us"]["mean"]


def test_littles_law_tight_on_long_run():
    cfg = scenario("mmc", requests=50_000)
    _, res = run_ctx(cfg)
    lam_w = res["throughput_rps"] * res["latency_us"]["mean"] * 1e-6
    assert abs(res["mean_in_system"] - lam_w) / lam_w < 0.01


def test_a_run_batches_garbage_collection_and_restores_the_thresholds():
    import gc

    import warmcore.build as run_mod

    before = gc.get_threshold()
    seen = []
    cfg = scenario(requests=300)
    ctx = run_mod.build(cfg, 1)
    ctx.env.process(_record_threshold(ctx.env, seen))
    run_built(ctx)
    assert seen and seen[0][0] == run_mod.GC_GEN0_THRESHOLD
    assert gc.get_threshold() == before


def _record_threshold(env, seen):
    import gc

    yield env.timeout(0)
    seen.append(gc.get_threshold())
