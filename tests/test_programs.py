"""Request programs: a request's handling as steps (compute, blocking call,
acquire/release of a named semaphore), validated, run by every strategy; the pooled
platform-thread executor; the `loom` scenario (docs/MODEL.md phenomenon 7)."""

from __future__ import annotations

import pytest

from tests.helpers import ci, replicate, run, scenario
from warmcore.build import simulate
from warmcore.simcore.config import ConfigError, load
from warmcore.simcore.theory import mmc_wait

WAIT = lambda r: r["wait_us"]["mean"] * 1e-6


def test_a_program_of_two_service_shares_is_the_one_step_request_bit_for_bit():
    sets = {"machine.cores": 1, "workload.rate_per_s": 800.0, "workload.service_us": 1000.0}
    one = run("mmc", sets, requests=5000)
    two = run("mmc", {**sets, "work.program": [{"service_share": 0.4},
                                               {"service_share": 0.6}]}, requests=5000)
    for k in ("throughput_rps", "wait_us", "task_clock_ms", "instructions"):
        assert two[k] == pytest.approx(one[k], rel=1e-12)


def test_mm1_with_service_split_into_two_steps_matches_erlang_c():
    rate = 800.0
    cfg = scenario("mmc", {"machine.cores": 1, "workload.rate_per_s": rate,
                           "workload.service_us": 1000.0,
                           "work.program": [{"service_share": 0.3}, {"service_share": 0.7}]},
                   requests=40_000, warmup=0.2)
    mean, half = ci(replicate(cfg, WAIT, 8))
    theory = mmc_wait(rate, 1e-3, 1)
    assert abs(mean - theory) <= half, (mean, theory, half)


def test_a_semaphore_of_k_permits_in_front_of_exponential_service_is_mmk():
    # 16 threads on 16 CPUs, so only the 3 permits queue: M/M/3 at rho 0.8.
    k, rate = 3, 2400.0
    cfg = scenario("mmc", {"machine.cores": 16, "server.threads": 16,
                           "workload.rate_per_s": rate, "workload.service_us": 1000.0,
                           "work.program": [{"acquire": "pool"}, {"service_share": 1.0},
                                            {"release": "pool"}],
                           "resources.pool.permits": k, "resources.pool.op_us": 0.0},
                   requests=40_000, warmup=0.2)
    mean, half = ci(replicate(cfg, WAIT, 8))
    theory = mmc_wait(rate, 1e-3, k)
    assert abs(mean - theory) <= half, (mean, theory, half)
    assert theory > 0.5e-3          # the permits, not the CPUs, make the queue


def test_a_blocking_call_between_two_computes_gives_the_right_breakdown():
    r = run("mmc", {"machine.cores": 1, "workload.rate_per_s": 50.0,
                    "workload.service": "deterministic", "workload.service_us": 300.0,
                    "work.program": [{"service_share": 1 / 3}, {"call_us": 500.0},
                                     {"service_share": 2 / 3}]}, requests=3000)
    bd = r["breakdown_us"]
    assert bd["compute"] == pytest.approx(300.0, rel=1e-9)
    assert bd["blocked_io"] == pytest.approx(500.0, rel=1e-9)
    assert bd["dispatch"] == 0.0
    # the CPU is free during the call: another request may compute meanwhile, so
    # a request waits only for the CPU (M/D/1-like, light load): small and >= 0
    assert 0.0 <= bd["queue_wait"] < 20.0
    assert r["latency_us"]["min"] == pytest.approx(800.0, rel=1e-6)
    assert r["service_us"]["min"] == pytest.approx(800.0, rel=1e-6)
    assert r["task_clock_ms"] * 1e3 / r["requests"] == pytest.approx(300.0, rel=1e-9)


@pytest.mark.parametrize("program, resources, field", [
    ([{"acquire": "db"}], {}, "work.program[0]"),
    ([{"release": "db"}], {"db": {"permits": 1}}, "work.program[0]"),
    ([{"acquire": "db"}, {"compute_us": 1.0}], {"db": {"permits": 1}}, "work.program"),
    ([{"compute_us": 1.0, "call_us": 2.0}], {}, "work.program.0"),
    ([{"acquire": "db"}, {"acquire": "db"}, {"release": "db"}], {"db": {"permits": 1}},
     "work.program[1]"),
    ([], {}, "work.program"),
])
def test_programs_are_validated(program, resources, field):
    sets = [f"work.program={_toml(program)}"]
    for name, r in resources.items():
        sets.append(f"resources.{name}.permits={r['permits']}")
    with pytest.raises(ConfigError) as e:
        load("mmc", sets)
    assert e.value.field == field, str(e.value)


def test_backend_us_and_a_program_do_not_mix():
    with pytest.raises(ConfigError) as e:
        load("mmc", ["work.backend_us=100", "work.program=[{compute_us=1.0}]"])
    assert e.value.field == "work.backend_us"


def _toml(v):
    if isinstance(v, list):
        return "[" + ",".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}={_toml(x)}" for k, x in v.items()) + "}"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


POOL = {"strategy.params.kernel_threads": True, "strategy.params.pool": 200}


@pytest.fixture(scope="module")
def loom():
    small = {"workload.jobs": 3000}
    return run("loom", small), run("loom", {**small, **POOL})


def test_loom_virtual_threads_use_more_cpu_per_task_than_a_pool(loom):
    vt, pool = loom
    per = lambda r: r["task_clock_ms"] * 1e3 / r["requests"]
    assert vt["requests"] == pool["requests"] == 3000
    assert per(vt) > 1.1 * per(pool), (per(vt), per(pool))
    # the same work: the same compute and the same database time per task
    for r in (vt, pool):
        assert r["breakdown_us"]["blocked_io"] == pytest.approx(
            vt["breakdown_us"]["blocked_io"], rel=1e-9)
    assert vt["instructions"] > pool["instructions"]   # mounts, unmounts, starts


def test_the_pool_is_bounded_and_queues_tasks_in_order():
    cfg = load("loom", ["workload.jobs=400", "strategy.params.kernel_threads=true",
                        "strategy.params.pool=8"])
    from warmcore.build import build, finish, run_built

    ctx = build(cfg, 1)
    r = finish(ctx, run_built(ctx))
    assert r["requests"] == 400
    assert len(ctx.server.threads) == 8               # no thread started per task
    assert ctx.kernel.resources["db"].waits == 0      # 8 threads never exceed 100 permits


def test_every_strategy_runs_programs():
    from warmcore.registry import strategies

    for name in sorted(strategies()):
        r = simulate(load("loom", ["workload.jobs=200"], strategy=name))
        assert r["requests"] == 200, name
        assert r["breakdown_us"]["blocked_io"] > 800, name      # 200 + 200 + 500 us mean
