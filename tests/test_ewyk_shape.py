"""The eat-what-you-kill benchmark's shape on the built-in ``ewyk`` scenario: 8
saturating connections of independent requests on the server-2015 preset, the handler
of jetty-util's 2018 benchmark (simcore/scenarios/ewyk.toml), and the mechanisms of
``ewyk-2015``, the benchmark the 2015 report ran, whose published figures (PC almost 8x
PEC, on a lot less CPU; EPC above PC on more cores, near identical per CPU) are
asserted in tests/test_phenomena.py.

On ``ewyk`` (no published figures: the report's shape as directions): PEC normalised
for CPU below PC, EPC above PC by using more cores and within 25% of it per CPU. PC
several times PEC does not happen there: nothing in that benchmark blocks, so PEC's
pool runs its tasks on as many cores as they need (docs/model.md "Known departures").
"""

from __future__ import annotations

import pytest

from warmcore.simcore.config import load
from warmcore.build import simulate_once

REQUESTS = 5000


@pytest.fixture(scope="module")
def runs():
    return {s: simulate_once(load("ewyk", strategy=s, requests=REQUESTS), 1)
            for s in ("pc", "pec", "epc")}


def per_cpu(r):
    return r["throughput_rps"] / r["cpus_utilized"]


def test_ewyk_scenario_runs_on_the_2015_server_with_pc_by_default():
    cfg = load("ewyk")
    assert cfg.machine.preset == "server-2015" and cfg.strategy.name == "pc"
    assert cfg.workload.kind == "saturating" and cfg.workload.connections == 8


def test_pec_cpu_normalised_throughput_below_pc(runs):
    assert per_cpu(runs["pec"]) < 0.85 * per_cpu(runs["pc"])


def test_epc_reaches_more_than_pc_by_using_more_cores(runs):
    assert runs["epc"]["throughput_rps"] > 1.1 * runs["pc"]["throughput_rps"]
    assert runs["epc"]["cpus_utilized"] > 1.2 * runs["pc"]["cpus_utilized"]


def test_epc_cpu_normalised_throughput_within_25_percent_of_pc(runs):
    ratio = per_cpu(runs["epc"]) / per_cpu(runs["pc"])
    assert 0.75 <= ratio <= 1.25, ratio


def test_no_kernel_work_runs_inside_the_pool_queues_locks(monkeypatch):
    """Issue 36 item 1 on the whole benchmark: every segment run under the
    QueuedThreadPool's head or tail lock starts owing no kernel work (a woken waiter
    finishes its switch-in and futex_wait, a waker its futex wake, a handler its
    stat calls, before it takes the lock: Thread.settle_owed), so the locks are held
    for the queue operation only and pec's takes rarely park (about one in ten)."""
    from warmcore.build import build, finish, run_built
    from warmcore.simcore.kernel.threads import Thread

    ctx = build(load("ewyk", strategy="pec", requests=REQUESTS), 1)
    q = ctx.strategy.pool.queue
    locked = {id(q.head.seg), id(q.tail.seg)}
    owed = []
    run = Thread.run

    def watched(self, seg, req=None):
        if id(seg) in locked:
            owed.append(self.pending_busy + self.pending_stall)
        return run(self, seg, req)

    monkeypatch.setattr(Thread, "run", watched)
    n = finish(ctx, run_built(ctx))["requests"]
    assert len(owed) > 2 * n and max(owed) == 0.0
    assert q.head.sem.waits < 0.2 * q.head.sem.acquires


def test_every_run_completed_its_requests(runs):
    for r in runs.values():
        assert r["stop_reason"] == "request limit" and r["requests"] == REQUESTS


def test_saturating_depth_is_a_validated_workload_parameter():
    """workload.depth: requests each saturating connection keeps in flight (default 8,
    what the scenario always used; the EWYK benchmark's client submits 1, 2 or 4)."""
    from warmcore.simcore.config import ConfigError
    assert load("ewyk").workload.depth == 8
    assert load("ewyk", ["workload.depth=2"]).workload.depth == 2
    with pytest.raises(ConfigError):
        load("ewyk", ["workload.depth=0"])


def test_depth_one_non_serial_keeps_one_request_per_connection_in_flight():
    r = simulate_once(load("ewyk", ["workload.depth=1", "workload.serial=false",
                                    "workload.connections=2"], strategy="pec",
                           requests=200), 1)
    assert r["requests"] == 200 and r["stop_reason"] == "request limit"


def test_batches_send_the_next_batch_only_when_all_are_answered():
    """workload.batches=[3]: one connection holds at most 3 requests, and a run of 300
    completes (300 = 100 whole batches)."""
    r = simulate_once(load("ewyk", ["workload.batches=[3]", "workload.serial=false",
                                    "workload.connections=1"], strategy="pec",
                           requests=300), 1)
    assert r["requests"] == 300 and r["stop_reason"] == "request limit"
    assert 0 < r["mean_in_system"] <= 3.0


def test_batches_are_deterministic_and_validated():
    from warmcore.simcore.config import ConfigError
    sets = ["workload.batches=[4,2,2,1,1,1,1,1]", "workload.serial=false"]
    a = simulate_once(load("ewyk", sets, strategy="epc", requests=400), 1)
    b = simulate_once(load("ewyk", sets, strategy="epc", requests=400), 1)
    assert a["throughput_rps"] == b["throughput_rps"]
    with pytest.raises(ConfigError):
        load("ewyk", ["workload.batches=[]"])
    with pytest.raises(ConfigError):
        load("ewyk", ["workload.batches=[0]"])


# -- ewyk-2015's mechanisms (the report's benchmark) --------------------------------------

def test_ewyk_2015_is_the_reports_benchmark_setup():
    cfg = load("ewyk-2015")
    wl = cfg.workload
    assert (wl.connections, wl.batches, wl.in_memory) == (2000, [15, 16, 17, 18, 19], True)
    assert cfg.strategy.shared_params and cfg.strategy.params["selectors"] == 2000
    sleep = cfg.work.program[1]
    assert sleep.distribution == "empirical" and len(sleep.values_us) == 400
    assert sleep.values_us.count(0.0) == 301 and max(sleep.values_us) == 99_050.0


def test_shared_params_carry_to_every_strategy_that_has_them():
    """strategy.shared_params: the setup's thread counts stay when another strategy
    runs the scenario (compare, --strategy); a strategy without them ignores them; a
    scenario without the flag resets them, as before."""
    assert load("ewyk-2015", strategy="pec").strategy.params["max_threads"] == 2256
    r = simulate_once(load("ewyk-2015", strategy="thread-pool", requests=300), 1)
    assert r["requests"] == 300
    plain = load("ewyk", ["strategy.params.selectors=3"])
    assert plain.edit(strategy="pec").strategy.params == {}


def test_epc_on_an_executor_that_is_not_a_jetty_thread_pool_never_falls_back():
    """jetty-util 9.3 ExecuteProduceConsume asks isLowOnThreads() only of a Jetty
    ThreadPool; the benchmark's TestServer wraps a ThreadPoolExecutor. On ewyk-2015 the
    pool's threads all sleep, so with a QueuedThreadPool's check EPC produces and
    executes nearly every task (as PEC); without it, never."""
    from warmcore.build import build, finish, run_built

    def low_share(flag):
        ctx = build(load("ewyk-2015", [f"strategy.params.thread_pool_executor={flag}"],
                         strategy="epc", requests=20_000), 1)
        finish(ctx, run_built(ctx))
        ss = [sel.strategy for sel in ctx.strategy.selectors]
        return sum(s.low_threads_tasks for s in ss) / sum(
            s.low_threads_tasks + s.tasks for s in ss)

    assert low_share("true") == 0.0
    assert low_share("false") > 0.9


def test_in_memory_connections_make_no_system_calls():
    """workload.in_memory: no read, write or epoll_wait (pc on ewyk: its selectors never
    park on 8 saturating connections, so no system time at all); with a client's
    turnaround it is refused with one line naming the field."""
    from warmcore.simcore.config import ConfigError
    sockets = simulate_once(load("ewyk", strategy="pc", requests=2000), 1)
    memory = simulate_once(load("ewyk", ["workload.in_memory=true"], strategy="pc",
                                requests=2000), 1)
    assert sockets["sys_s"] > 0 and memory["sys_s"] == 0.0
    with pytest.raises(ConfigError, match="in_memory"):
        load("ewyk", ["workload.in_memory=true", "workload.client_us=5"])
