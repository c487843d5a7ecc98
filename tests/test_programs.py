"""Request programs: a request's handling as steps (compute, blocking call,
acquire/release of a named semaphore), validated, run by every strategy; the pooled
platform-thread executor; the `loom` scenario (docs/design/MODEL.md phenomenon 7)."""

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


# -- nonfair locks (resources with fair = false) ---------------------------------------

def test_a_nonfair_lock_lets_a_newcomer_barge_and_wakes_one_waiter_at_a_time():
    from warmcore.simcore.kernel import Semaphore

    m = Semaphore("m", 1, fair=False)
    assert m.acquire("a")
    assert not m.acquire("b") and not m.acquire("c")      # queued, in order
    assert m.release() == "b"          # frees the permit and wakes the first waiter
    assert m.acquire("d")              # a newcomer takes it before b runs (barging)
    assert m.release() is None         # b's wake-up is under way: no second wake
    assert m.retry("b")                # b runs and takes the free permit
    assert list(m.waiters) == ["c"]
    assert m.release() == "c"
    assert m.acquire("e")              # barges again
    assert not m.retry("c")            # c lost: queued again at the head
    assert not m.acquire("f")
    assert list(m.waiters) == ["c", "f"]
    assert m.release() == "c"
    assert (m.acquires, m.waits, m.max_waiting) == (6, 3, 2)   # a lost retry is the same wait

    fair = Semaphore("f", 1)
    assert fair.acquire("a") and not fair.acquire("b")
    assert fair.release() == "b"       # handed over: b owns the permit when it wakes
    assert not fair.acquire("c")       # nobody barges a fair semaphore


def _store_locked(cpus: int, fair: bool):
    """`contended` with its handling under one mutex (a 1-permit resource): the run's
    result and the mutex."""
    from warmcore.build import build, finish, run_built

    cfg = scenario("contended", {
        "server.cpus": cpus, "resources.store": {"permits": 1, "fair": fair},
        "work.program": [{"acquire": "store"}, {"service_share": 1.0},
                         {"release": "store"}]}, requests=3000)
    ctx = build(cfg, cfg.seed)
    return finish(ctx, run_built(ctx)), ctx.kernel.resources["store"]


def test_a_nonfair_mutex_is_free_on_one_cpu_and_parks_its_contenders_on_several():
    """glibc's mutex and a nonfair ReentrantLock on 16 threads: on one CPU a holder is
    rarely preempted inside its critical section, so almost nobody waits (a fair lock
    there forms a convoy: each release hands the lock to a parked thread, which the
    next comer must then wait for); on four CPUs the threads meet at the lock and
    each meeting parks one (a futex wait, a wake, two switches), so the same work
    costs more CPU per message and more system time. (Measured: 15 of 3316
    acquisitions wait on one CPU, 467 on four, 1956 with the fair lock on one.)"""
    one, m1 = _store_locked(1, fair=False)
    four, m4 = _store_locked(4, fair=False)
    convoy, f1 = _store_locked(1, fair=True)
    assert m1.waits < 0.02 * m1.acquires, (m1.waits, m1.acquires)
    assert f1.waits > 0.5 * f1.acquires, (f1.waits, f1.acquires)
    assert m4.waits > max(10 * m1.waits, 0.1 * m4.acquires), (m4.waits, m1.waits)
    per = lambda r, k: r[k] / r["requests"]  # noqa: E731
    assert per(four, "context_switches") > 10 * per(one, "context_switches")
    assert per(four, "futex_wakes") > 2 * per(one, "futex_wakes")
    assert per(four, "sys_s") > 1.5 * per(one, "sys_s")
    assert per(four, "task_clock_ms") > 1.5 * per(one, "task_clock_ms")
    assert one["throughput_rps"] > 1.5 * four["throughput_rps"]
    assert convoy["throughput_rps"] < 0.8 * one["throughput_rps"]


@pytest.mark.parametrize("kernel_threads", [False, True])
def test_a_nonfair_semaphore_lets_newcomers_take_released_permits(kernel_threads):
    """loom's 100-permit semaphore, fair (a release hands the permit to the longest
    waiter, so once a queue forms every acquirer joins it) and nonfair (Java's default
    `new Semaphore(100)`: a released permit goes to whoever asks first, the woken
    waiter retries): far fewer acquisitions wait, for virtual threads (the strategy's
    own semaphores) and for a pool of kernel threads (simcore.kernel.Semaphore).
    Measured at 2000 tasks: 5885 against 2026 waits, and 5880 against 1125."""
    from warmcore.build import build, finish, run_built

    def waits(fair):
        cfg = load("loom", ["workload.jobs=2000", f"resources.db.fair={str(fair).lower()}",
                            f"strategy.params.kernel_threads={str(kernel_threads).lower()}",
                            "strategy.params.pool=200"])
        ctx = build(cfg, 1)
        assert finish(ctx, run_built(ctx))["requests"] == 2000
        if kernel_threads:
            return ctx.kernel.resources["db"].waits
        return ctx.strategy.stats["permit_waits"]

    fair, nonfair = waits(True), waits(False)
    assert nonfair < 0.5 * fair, (fair, nonfair)
    assert fair > 0.9 * 3 * 2000            # nearly every one of the 3 acquisitions a task queues
