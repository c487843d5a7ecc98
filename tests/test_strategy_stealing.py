"""work-stealing (Tokio / Go): steal half, LIFO slot, runnext, global-queue fairness."""

from __future__ import annotations

from collections import Counter, deque
from types import SimpleNamespace

import pytest

from warmcore.models.workloads.batch import BatchCfg as Batch
from warmcore.build import build, run_built, simulate_once
from warmcore.strategies.work_stealing import CONSUME, PRODUCE, WHOLE, Task
from tests.strategy_checks import (
    assert_conserved,
    cfg_for,
    fingerprint,
    pipelined,
    run_tracked,
)

WS = "work-stealing"


def ws_cfg(params=None, sets=None, **run):
    return cfg_for(WS, params, sets, **run)


def built(params=None, cores=2, **sets):
    cfg = ws_cfg(params, {"machine.cores": cores, "workload.rate_per_s": 1.0, **sets},
                 requests=10)
    return build(cfg, 1)


@pytest.mark.parametrize("k", range(1, 10))
def test_steal_takes_ceil_half_oldest_first_and_runs_the_last_taken(k):
    """Tokio steal_into2 and Go runqgrab both take n - n/2 = ceil(n/2) tasks from the
    head; the last one taken is returned to run, the rest queue at the thief."""
    s = built().strategy
    thief, victim = s.workers
    tasks = [Task(SimpleNamespace(id=i), WHOLE) for i in range(k)]
    victim.local = deque(tasks)
    task, m = s.steal_from(thief, victim)
    assert m == (k + 1) // 2
    assert list(victim.local) == tasks[m:]
    assert task is tasks[m - 1]
    assert list(thief.local) == tasks[:m - 1]
    assert all(t.stolen for t in tasks[:m]) and not any(t.stolen for t in tasks[m:])


def test_steal_one_mode_takes_a_single_task_like_forkjoinpool():
    s = built({"steal": "one"}).strategy
    thief, victim = s.workers
    victim.local = deque(Task(SimpleNamespace(id=i), WHOLE) for i in range(6))
    task, m = s.steal_from(thief, victim)
    assert m == 1 and task.req.id == 0 and len(victim.local) == 5 and not thief.local


def test_idle_workers_steal_from_the_worker_that_gets_all_arrivals():
    """Every arrival lands in worker 0's queue (one connection, arrivals by
    connection); at 3 CPUs' worth of load only stealing keeps up."""
    cfg = ws_cfg({"arrivals": "connection", "split": False},
                 {"workload.rate_per_s": 3000.0}, requests=4000)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    st = ctx.strategy.stats
    assert st["steals"] > 50
    assert st["stolen_tasks"] >= st["steals"]
    assert res["throughput_rps"] == pytest.approx(3000, rel=0.08)
    by = Counter(r.consumed_by for r in ctx.handled_reqs)
    worker_tids = {w.thread.tid for w in ctx.strategy.workers}
    assert set(by) == worker_tids
    assert min(by.values()) > 0.1 * len(ctx.handled_reqs)


def continuation_run(locality, seed=1):
    """Parse 50 us + handle 200 us (two tasks), 4 workers at ~80% load."""
    cfg = ws_cfg({"locality": locality},
                 {"work.produce_us": 50.0, "workload.service_us": 200.0,
                  "workload.rate_per_s": 12800.0}, requests=4000)
    ctx, res, handled = run_tracked(cfg, seed, before=lambda c: setattr(c.strategy, "log", []))
    return ctx, res, handled, ctx.handled_reqs


def test_lifo_slot_continuation_runs_next_on_its_waker_and_is_never_stolen():
    ctx, res, handled, reqs = continuation_run("lifo-slot")
    assert_conserved(ctx, res, handled)
    st = ctx.strategy.stats
    assert st["steals"] > 0, "no stealing happened: the check below would be vacuous"
    assert st["stolen_continuations"] == 0 and st["stolen_lifo"] == 0
    assert all(r.produced_by == r.consumed_by for r in reqs)
    # On each worker, a produce task is immediately followed by its continuation,
    # taken from the LIFO slot.
    per_worker: dict[int, list] = {}
    for w, source, rid, kind in ctx.strategy.log:
        per_worker.setdefault(w, []).append((source, rid, kind))
    pairs = 0
    for seq in per_worker.values():
        for (_s, rid, kind), nxt in zip(seq, [*seq[1:], None], strict=True):
            if kind == PRODUCE and nxt is not None:
                assert nxt == ("lifo", rid, CONSUME)
                pairs += 1
    assert pairs > 3000


def test_without_locality_continuations_are_stolen_and_move_cpu():
    ctx, res, handled, reqs = continuation_run("none")
    assert_conserved(ctx, res, handled)
    assert ctx.strategy.stats["stolen_continuations"] > 20
    moved = sum(r.produced_by != r.consumed_by for r in reqs)
    assert moved > 20


def test_runnext_continuation_runs_on_its_waker_unless_stolen():
    """Go: runnext normally runs next on its waker. Unlike Tokio's slot it can leave:
    the 61-tick global check comes before runnext, the global task's own continuation
    kicks the old one to the run queue (stealable), and a thief may take a running
    P's runnext after its 3 us back-off."""
    ctx, res, handled, reqs = continuation_run("runnext")
    assert_conserved(ctx, res, handled)
    st = ctx.strategy.stats
    moved = sum(r.produced_by != r.consumed_by for r in reqs)
    assert moved == st["stolen_continuations"]
    assert moved < 0.01 * len(reqs)
    assert st["stolen_lifo"] == st["runnext_steals"]
    # Go wakes an idle P on every ready(): more notifications than with Tokio's slot.
    lifo_ctx = continuation_run("lifo-slot")[0]
    assert ctx.strategy.stats["notifies"] > lifo_ctx.strategy.stats["notifies"]


def test_runnext_is_stolen_only_after_the_backoff():
    """A thief that finds only a running victim's runnext sleeps 3 us (Go usleep(3))
    before taking it."""
    ctx = built({"locality": "runnext"}, cores=2)
    s = ctx.strategy
    env = ctx.env
    env.run(until=1e-6)                       # both workers start and park
    victim = s.workers[0]
    req = ctx.workload.factory.make(env.now)
    ctx.recorder.arrive(req)
    victim.lifo = Task(req, CONSUME, 0)
    victim.current = Task(SimpleNamespace(id=-1), WHOLE)   # "running" (_Prunning)
    t_set = env.now
    s._notify(None)                           # wakes the other worker (stack: last parked)
    env.run(until=t_set + 2.9e-6)
    assert victim.lifo is not None and s.stats["runnext_steals"] == 0
    env.run(until=t_set + 1e-3)
    assert s.stats["runnext_steals"] == 1 and s.stats["stolen_lifo"] == 1
    assert req.consumed_by == s.workers[1].thread.tid
    assert req.t_start >= t_set + 3e-6 - 1e-12


def fairness_ctx(interval):
    """One worker; 300 jobs all queued on it at t=0: 256 fill the local queue, the
    257th spills the oldest 128 plus itself to the inject queue."""
    cfg = ws_cfg({"arrivals": "connection", "split": False, "global_queue_interval": interval},
                 {"machine.cores": 1}, requests=300)
    cfg.workload = Batch(kind="batch", jobs=300, service="deterministic", service_us=10.0)
    ctx = build(cfg, 1)
    ctx.strategy.log = []
    return ctx


def test_full_local_queue_spills_half_to_the_inject_queue():
    s = fairness_ctx(61).strategy
    w = s.workers[0]
    assert s.stats["overflows"] == 1
    assert len(s.inject) == 129 and len(w.local) == 171
    assert [t.req.id for t in s.inject] == [*range(128), 256]


def sources(ctx):
    run_built(ctx)
    return [src for _w, src, _rid, _k in ctx.strategy.log]


def test_global_queue_is_polled_every_61_ticks_under_a_busy_local_queue():
    src = sources(fairness_ctx(61))
    busy = src[:171]              # the local queue never empties in these ticks
    polls = [i for i, s in enumerate(busy) if s == "global"]
    assert len(polls) >= 3
    assert max(b - a for a, b in zip([0, *polls], [*polls, len(busy)], strict=True)) <= 61
    assert len(src) == 300


def test_a_long_global_interval_starves_the_inject_queue_while_local_work_lasts():
    src = sources(fairness_ctx(1000))
    assert src[1:171].count("global") == 0


@pytest.mark.parametrize("params", [{}, {"locality": "none", "mode": "lifo"},
                                    {"locality": "runnext", "arrivals": "connection"}])
def test_conserves_requests_without_deadlock_when_overloaded(params):
    cfg = ws_cfg(params, {"work.produce_us": 100.0, "workload.rate_per_s": 6000.0,
                          "workload.connections": 7}, requests=3000)
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)
    assert ctx.recorder.in_system > 100          # it really was overloaded


@pytest.mark.parametrize("params", [{}, {"arrivals": "connection", "locality": "runnext"}])
def test_conserves_requests_on_pipelined_connections(params):
    cfg = pipelined(ws_cfg(params, {"work.produce_us": 5.0}, requests=3000))
    ctx, res, handled = run_tracked(cfg)
    assert_conserved(ctx, res, handled)


def test_deterministic_under_a_seed():
    cfg = ws_cfg({}, {"work.produce_us": 50.0, "workload.rate_per_s": 3000.0}, requests=2000)
    a, b, c = (fingerprint(simulate_once(cfg, s)) for s in (5, 5, 6))
    assert a == b and a != c
