"""``simulate(scenario) -> Result``: the one entry point the CLI, the app, sweeps
and calibration all call."""

from __future__ import annotations

import contextlib
import gc
import math
import time

import numpy as np
import simpy

from warmcore.simcore.config import ConfigError, Scenario, kind_of
from warmcore.simcore.context import SimContext
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.machine import EFFECTS, IdealMachine
from warmcore.simcore.recorder import Recorder
from warmcore.simcore.rng import Streams
from warmcore.simcore.work import CAUSES

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}


def build_machine(cfg: Scenario):
    from warmcore.models.presets import get_preset, with_overrides

    m = cfg.machine
    try:
        preset = get_preset(m.preset)
    except KeyError as e:
        raise ConfigError("machine.preset", e.args[0]) from None
    # TOML lists arrive as lists; presets hold tuples.
    changes = {k: tuple(v) if isinstance(v, list) else v for k, v in m.overrides.items()}
    if m.cores is not None:
        changes["cores_per_socket"] = m.cores
    if m.threads_per_core is not None:
        changes["threads_per_core"] = m.threads_per_core
        if len(preset.smt_throughput) != m.threads_per_core:
            changes.setdefault("smt_throughput", _stretch_smt(preset.smt_throughput,
                                                              m.threads_per_core))
    if m.sockets is not None:
        changes["sockets"] = m.sockets
    if m.turbo is not None:
        changes["turbo"] = m.turbo
    if changes:
        try:
            preset = with_overrides(preset, **changes)
        except ConfigError as e:
            raise e.under("machine.overrides", PRESET_FIELD_KEYS) from None
    default_on = preset.name != "ideal"
    effects = {e: (getattr(m.effects, e) if getattr(m.effects, e) is not None else default_on)
               for e in EFFECTS}
    from warmcore.models.dvfs import GOVERNORS

    if m.governor is not None and m.governor not in GOVERNORS:
        raise ConfigError("machine.governor", f"unknown governor {m.governor!r}; known: "
                          f"{', '.join(GOVERNORS)}")
    if m.governor == "userspace" and m.frequency_ghz is None:
        raise ConfigError("machine.frequency_ghz", "the userspace governor needs a frequency")
    if preset.name == "ideal" and not any(effects.values()) and m.frequency_ghz is None:
        return IdealMachine(cores=preset.sockets * preset.cores_per_socket *
                            preset.threads_per_core, ghz=preset.pstates_ghz[-1])
    from warmcore.models.hardware import HardwareMachine

    try:
        return HardwareMachine(preset, effects=effects, governor=m.governor,
                               userspace_ghz=m.frequency_ghz, governor_params=m.governor_params,
                               idle_governor=m.idle_governor,
                               idle_next_timer_us=m.idle_next_timer_us)
    except ConfigError as e:
        raise e.under("machine", {"userspace_ghz": "machine.frequency_ghz"}) from None
    except ValueError as e:             # no field of its own: the machine as a whole
        raise ConfigError("machine", str(e)) from None


# Preset fields that the scenario sets through a machine key of its own.
PRESET_FIELD_KEYS = {"cores_per_socket": "machine.cores",
                     "threads_per_core": "machine.threads_per_core",
                     "sockets": "machine.sockets", "turbo": "machine.turbo"}


def _stretch_smt(curve, k):
    curve = list(curve) + [curve[-1]] * k
    return tuple(curve[:k])


def simulate(cfg: Scenario, seed: int | None = None, max_wall: float | None = None,
             should_stop=None) -> dict:
    """Run one scenario (all replications) and return the result as a plain dict.

    ``max_wall``: a wall-clock budget in seconds for the whole call; when it runs out
    the run in progress stops, the replications not begun are left out, and the
    result says ``partial``. ``should_stop(fraction_done) -> bool``: asked about every
    WATCHDOG_WALL_S of wall time with the fraction of the call done (0..1); True
    stops it the same way (stop_reason "stopped")."""
    deadline = _deadline(max_wall)
    check_compared(cfg)
    if should_stop is not None and not callable(should_stop):
        raise ConfigError("should_stop", f"must be callable (got {should_stop!r})")
    reps = cfg.run.replications
    base = cfg.seed if seed is None else seed
    if reps == 1:
        return simulate_once(cfg, base, deadline, should_stop)
    seeds = np.random.SeedSequence(base).generate_state(reps).tolist()
    runs = []
    for i, s in enumerate(seeds):
        ask = None if should_stop is None else \
            (lambda f, i=i: should_stop((i + f) / reps))
        runs.append(simulate_once(cfg, int(s), deadline, ask))
        if runs[-1].get("partial"):
            break
    out = combine_replications(runs)
    if any(r.get("partial") for r in runs) or len(runs) < reps:
        out["partial"] = True
    if len(runs) < reps:
        why = "it was stopped" if runs[-1]["stop_reason"] == "stopped" else \
            "the wall-clock budget ran out"
        out["warnings"] = [*out["warnings"], f"partial: {len(runs)} of {reps} replications "
                           f"ran before {why}"]
    return out


def check_compared(cfg: Scenario) -> None:
    """ConfigError for a name in ``strategy.compare`` that no strategy has (the
    core's schema cannot know the registry's names)."""
    from warmcore.registry import strategies

    known = strategies()
    for name in cfg.strategy.compare or ():
        if name not in known:
            raise ConfigError("strategy.compare", f"unknown strategy {name!r}; known: "
                                                  f"{', '.join(known)}")


def _deadline(max_wall: float | None) -> float:
    if max_wall is None:
        return math.inf
    if not (isinstance(max_wall, (int, float)) and math.isfinite(max_wall) and max_wall > 0):
        raise ConfigError("max_wall", f"must be a positive number of seconds (got {max_wall!r})")
    return time.monotonic() + max_wall


def simulate_once(cfg: Scenario, seed: int, deadline: float = math.inf,
                  should_stop=None) -> dict:
    """One replication: build, run to the limit (or to the wall-clock ``deadline``, a
    time.monotonic() value, or until ``should_stop(fraction_done)`` is true), and
    report."""
    ctx = build(cfg, seed)
    if deadline != math.inf or should_stop is not None:
        ctx.recorder.deadline = deadline
        ctx.recorder.should_stop = should_stop
        ctx.env.process(_watchdog(ctx.env, ctx.recorder))
    return finish(ctx, run_built(ctx))


WATCHDOG_WALL_S = 0.05      # aim: one wall-clock check per 50 ms of computing


def _watchdog(env, rec):
    """Checks the wall-clock budget (and asks should_stop) as simulated time passes,
    at a simulated interval that adapts so a check comes about every WATCHDOG_WALL_S
    of wall time (the recorder checks too, every few thousand requests, for runs
    whose simulated time barely moves). It leaves when it is the last thing
    scheduled, so a stalled run still ends as stalled."""
    interval = 1e-4
    last = time.monotonic()
    while not rec.stopped:
        yield env.timeout(interval)
        if env.peek() == math.inf:      # nothing else will ever happen: a stall
            return
        rec.check_wall()
        now = time.monotonic()
        wall = now - last
        last = now
        interval *= 2.0 if wall <= 0 else min(2.0, max(0.5, WATCHDOG_WALL_S / wall))


def build(cfg: Scenario, seed: int) -> SimContext:
    """Everything a run needs, wired and started but not yet run (tests inspect it)."""
    from warmcore.models.workloads import build_workload
    from warmcore.registry import get_strategy

    env = simpy.Environment()
    streams = Streams(seed)
    machine = build_machine(cfg)
    kernel = Kernel(env, machine, trace_limit=cfg.run.trace_events,
                    wakeup_preemption=cfg.kernel.wakeup_preemption)
    kernel.resources = make_resources(cfg, machine)
    run = cfg.run
    if kind_of(cfg.workload).makespan:     # every job measured: its makespan
        warm_n, measure_n, warm_s, measure_s = 0, cfg.workload.jobs, None, None
    elif run.requests is not None:
        warm_n = int(run.requests * run.warmup)
        measure_n, warm_s = run.requests, None
        measure_s = run.duration_s
    else:
        warm_n, measure_n = 0, None
        warm_s, measure_s = run.duration_s * run.warmup, run.duration_s
    recorder = Recorder(env, warmup_requests=warm_n, measure_requests=measure_n,
                        warmup_s=warm_s, measure_s=measure_s, max_in_flight=run.max_in_flight)
    ctx = SimContext(cfg, env, machine, kernel, streams, recorder)
    ctx.seed = seed
    ctx.snapshot = {}
    recorder.on_measure_start.append(lambda: ctx.snapshot.update(_snapshot(kernel, env)))
    if recorder.measuring:
        ctx.snapshot.update(_snapshot(kernel, env))
    machine.bind(env, streams)
    if cfg.jvm.young_mib is not None:      # a JVM that allocates: its young generation
        from warmcore.models.jvm_heap import JvmHeap
        ctx.heap = JvmHeap(ctx, cfg.jvm)
    ctx.strategy = get_strategy(cfg.strategy.name)(ctx, dict(cfg.strategy.params))
    mock = _backend_mock(ctx)
    ctx.workload = build_workload(ctx)
    if ctx.call_plan is not None and not ctx.strategy.makes_call_plans:
        raise ConfigError("work.backend_calls", f"strategy {cfg.strategy.name!r} makes one "
                          "backend call a request (backend_us); a call plan is made by "
                          "event-loop's non-blocking client and by thread-pool's executor")
    ctx.done = ctx.workload.finished
    ctx.reject = ctx.workload.rejected
    ctx.strategy.start()
    if mock is not None:
        mock.start()
    ctx.workload.start()
    return ctx


def _backend_mock(ctx):
    """The backend mock on this machine (work.backend_mock_us), answering the calls
    the kernel's blocking segments and the event loop's client make; None without
    one. A strategy that times its backend calls itself (``own_backend_calls``) is
    refused with it."""
    if ctx.cfg.work.backend_mock_us is None:
        return None
    if ctx.strategy.own_backend_calls:
        raise ConfigError("work.backend_mock_us", f"strategy {ctx.cfg.strategy.name!r} "
                          "waits for its backend calls its own way; the mock on this "
                          "machine answers the blocking calls of kernel threads and the "
                          "event loop's non-blocking client")
    from warmcore.models.workloads.backend_mock import BackendMock

    mock = BackendMock(ctx)
    ctx.kernel.backend = mock
    return mock


def make_resources(cfg: Scenario, machine) -> dict:
    """The scenario's named semaphores / connection pools ([resources])."""
    from warmcore.simcore.kernel import Semaphore
    from warmcore.simcore.work import SHARED, Footprint, Segment

    out = {}
    for name, r in cfg.resources.items():
        op = None
        if r.op_us:
            line = f"sem-{name}"
            op = Segment(r.op_us * 1e-6 * machine.nominal_ips, (Footprint(SHARED, line, 2, True),),
                         contended_ops=1, contended_line=line, label=f"sem-{name}")
        out[name] = Semaphore(name, r.permits, op, fair=r.fair)
    return out


# Young-generation threshold of the cyclic GC while a run is in progress. A run
# allocates millions of short-lived objects (events, requests, tuples of costs) and
# keeps tens of thousands of long-lived ones (cache and directory entries); with
# CPython's default of 700 the collector spent ~10% of the full model's time
# re-traversing the long-lived ones (perf record, pipeline). Cycles still get
# collected, only in larger batches: at most this many extra objects wait.
GC_GEN0_THRESHOLD = 50_000


@contextlib.contextmanager
def _batched_gc():
    old = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, max(old[1], 20), max(old[2], 20))
    try:
        yield
    finally:
        gc.set_threshold(*old)


# Events between wall-clock checks of a budgeted run. A check is one monotonic clock
# read, nothing beside an event's cost; but an event can be slow (a carrier that
# scans the queues of 30,000 others), and 65,536 such events outlasted a budget of 8 s
# by minutes (the fuzz case `compare contended --strategies virtual-threads --set
# server.threads=100000 --max-wall 8`), so the check comes every 1,024.
CHECK_EVENTS = 1 << 10


def _run_budgeted(env, stop, rec) -> None:
    """``env.run(until=stop)`` with the wall clock checked every CHECK_EVENTS events
    as well: a run stuck at one instant (events at zero delay, forever) lets no
    simulated time pass for the watchdog and completes no requests, but it still
    spends events, so its budget still ends it. SimPy's own loop, with a count."""
    if stop.callbacks is None:          # already processed
        return
    stop.callbacks.append(simpy.core.StopSimulation.callback)
    step = env.step
    try:
        while True:
            for _ in range(CHECK_EVENTS):
                step()
            rec.check_wall()
    except simpy.core.StopSimulation:
        return
    except simpy.core.EmptySchedule:
        raise RuntimeError(f'No scheduled events left but "until" event was not '
                           f'triggered: {stop}') from None


def run_built(ctx: SimContext) -> bool:
    """Run until the recorder stops the run; False if it stalled (no events left)."""
    rec = ctx.recorder
    stop = rec.stop
    budgeted = rec.deadline != math.inf or rec.should_stop is not None
    try:
        with _batched_gc():
            if budgeted:
                _run_budgeted(ctx.env, stop, rec)
            else:
                ctx.env.run(until=stop)     # no budget: SimPy's loop, nothing to count
        stalled = False
    except RuntimeError:
        # SimPy raises when its queue empties before ``until`` triggers: every thread
        # parked and nothing left to happen (a deadlock). Told apart from any other
        # RuntimeError by the environment's public state, not by the message.
        if stop.triggered or ctx.env.peek() != math.inf:
            raise
        stalled = True
    ctx.recorder.close()
    return stalled


def finish(ctx: SimContext, stalled: bool) -> dict:
    return _result(ctx.cfg, ctx.seed, ctx, ctx.snapshot, stalled)


def _snapshot(kernel, env) -> dict:
    """The counters at the measured window's start; the machine marks its own
    (joules, clocks) there too, so that every figure covers the same window."""
    c = kernel.counters_now()
    mark = getattr(kernel.machine, "measure_from", None)
    if mark is not None:
        mark(env.now)
    return {"t": env.now, "counters": c}


def _diff(now: dict, then: dict | None) -> dict:
    if then is None:
        return dict(now)
    return {k: now[k] - then.get(k, 0) for k in now}


def _result(cfg: Scenario, seed: int, ctx: SimContext, snap: dict, stalled: bool) -> dict:
    env, rec, kernel, machine = ctx.env, ctx.recorder, ctx.kernel, ctx.machine
    t0 = snap.get("t", rec.t_measure)
    window = env.now - t0
    end = kernel.counters_now()
    start = snap.get("counters", {"processes": {}, "cpu_busy_s": [0.0] * machine.n_cpus})
    procs = {name: _diff(c, start["processes"].get(name)) for name, c in end["processes"].items()}
    busy = [b - a for a, b in zip(start["cpu_busy_s"], end["cpu_busy_s"], strict=True)]
    fin = machine.finish(env.now)
    srv = procs.get("server", {})
    n = rec.measured
    h = rec.hist
    task_clock = srv.get("task_clock_s", 0.0)
    cycles = srv.get("cycles", 0.0)
    ins = srv.get("instructions", 0.0)
    joules = fin.get("joules", 0.0)
    in_flight = rec.in_system
    warnings = []
    drained = True
    if stalled:
        warnings.append("the run stalled: every thread waits and no event is left")
    if rec.stop_reason.startswith("in-flight"):
        warnings.append(rec.stop_reason)
    if rec.stop_reason == "wall-clock budget":
        warnings.append(f"partial: the wall-clock budget ran out after {rec.measured} "
                        "measured requests")
    if rec.stop_reason == "stopped":
        warnings.append(f"partial: stopped after {rec.measured} measured requests")
    offered = _offered_rate(cfg)
    thr = n / window if window > 0 else 0.0
    arrived_window = rec.arrived - rec.arrived_at_measure
    if not kind_of(cfg.workload).makespan:
        grew = in_flight - rec.in_system_at_measure
        if offered and thr < 0.98 * offered and grew > max(10, 0.01 * n):
            drained = False
            warnings.append(f"overloaded: offered {offered:.6g} req/s, served {thr:.6g} req/s; "
                            f"the queue never drained ({in_flight} requests in flight at the end)")
        above = _served_above_offered(n, arrived_window, window, offered)
        if above:
            warnings.append(above)
        if n == 0 and not rec.partial:
            warnings.append(f"no request completed in the measured window ({window:.3g} "
                            "simulated s): nothing measured; lengthen the run (run.requests "
                            "or run.duration_s)")
    lat = _percentiles(h, n)
    service = _percentiles(rec.service, n)
    bd = {cause: _us(s / n) if n else math.nan
          for cause, s in zip(CAUSES, rec.bd_sums(), strict=True)}
    res = {
        "scenario": cfg.name,
        "strategy": cfg.strategy.name,
        "machine": cfg.machine.preset,
        "seed": seed,
        "requests": n,
        "sim_seconds": window,
        "throughput_rps": thr,
        "offered_rps": offered,
        "latency_us": lat,
        "service_us": service,
        "wait_us": {"mean": _us(rec.wait_sum / n) if n else math.nan},
        "cpus_utilized": task_clock / window if window > 0 else 0.0,
        "task_clock_ms": task_clock * 1e3,
        "user_s": task_clock - srv.get("sys_s", 0.0),
        "sys_s": srv.get("sys_s", 0.0),
        "cycles": cycles,
        "instructions": ins,
        "ipc": ins / cycles if cycles else math.nan,
        "ghz": cycles / task_clock / 1e9 if task_clock else math.nan,
        "l1d_loads": srv.get("l1d_loads", 0.0),
        "l1d_misses": srv.get("l1d_misses", 0.0),
        "llc_loads": srv.get("llc_loads", 0.0),
        "llc_misses": srv.get("llc_misses", 0.0),
        "llc_stores": srv.get("llc_stores", 0.0),
        "llc_store_misses": srv.get("llc_store_misses", 0.0),
        "context_switches": srv.get("context_switches", 0),
        "cpu_migrations": srv.get("cpu_migrations", 0),
        "futex_wakes": srv.get("futex_wakes", 0),
        "joules": joules,
        "joules_per_request": joules / n if n else math.nan,
        "makespan_s": rec.last_done if kind_of(cfg.workload).makespan else None,
        "breakdown_us": bd,
        "mean_in_system": (rec.area - rec.area_at_measure) / window if window > 0 else math.nan,
        "arrived": arrived_window,
        **_outcomes(rec, ctx.workload, arrived_window, window),
        "in_flight_at_end": in_flight,
        "drained": drained,
        "stop_reason": rec.stop_reason or ("stalled" if stalled else ""),
        "processes": {k: _clean(v) for k, v in procs.items()},
        "cpu_utilization": [b / window if window > 0 else 0.0 for b in busy],
        "cpu_ghz": fin.get("cpu_ghz"),
        "runqueue_max": kernel.runqueue_max,
        "warnings": warnings,
    }
    if rec.partial:
        res["partial"] = True
    if kernel.trace is not None:
        rows = [list(e) for e in kernel.trace]
        if rows:        # each CPU's clock at the window's start, then the window
            t0 = min(r[0] for r in rows)
            rows[:0] = [[t0, c, -1, "clock", ghz, 0.0, -1]
                        for c, ghz in enumerate(kernel.trace.ghz0)]
        res["trace"] = rows
    return res


def _outcomes(rec, workload, arrived: int, window: float) -> dict:
    """What the window's clients got: refusals (a full queue), timeouts, goodput (answers
    in time per second) and the first two per request that arrived."""
    answered, timed_out, rejected = rec.outcomes_window(not workload.timeout_s)
    return {
        "rejected": rejected,
        "timed_out": timed_out,
        "goodput_rps": answered / window if window > 0 else 0.0,
        "rejected_rate": rejected / arrived if arrived else math.nan,
        "timed_out_rate": timed_out / arrived if arrived else math.nan,
    }


# How far above its offered rate an open loop's measured throughput may read before it
# is flagged: this many standard deviations of the count of Poisson arrivals in the
# window (sqrt(rate x window)). At 3 a run in steady state is flagged about once in
# 700 by chance alone; a window that serves the warm-up's backlog reads far above.
OFFERED_SIGMAS = 3.0


def _served_above_offered(served: int, arrived: int, window: float, offered) -> str | None:
    """A warning when the window served more than was offered beyond the noise of the
    arrivals, by serving requests that arrived before it (the warm-up's backlog): in
    the long run an open loop cannot serve more than it is offered, so such a figure
    is a transient, not the server's throughput. None when the figure is plausible."""
    if not offered or window <= 0 or served <= arrived:
        return None
    expected = offered * window
    ceiling = expected + OFFERED_SIGMAS * math.sqrt(expected)
    if served <= ceiling:
        return None
    return (f"served {served / window:.6g} req/s, more than the {offered:.6g} req/s offered "
            f"(beyond its {OFFERED_SIGMAS:g}-sigma noise, {ceiling / window:.6g}): the "
            f"window served {served - arrived} requests that arrived before it (the "
            "warm-up's backlog), so this is a transient, not a steady state; run longer "
            "(run.requests) or warm up longer (run.warmup)")


def _percentiles(h, n: int) -> dict:
    """min, mean, the QUANTILES and max of a histogram, in us."""
    d = {"min": _us(h.min if n else math.nan), "mean": _us(h.mean)}
    for k, q in QUANTILES.items():
        d[k] = _us(h.quantile(q))
    d["max"] = _us(h.max if n else math.nan)
    return d


def _offered_rate(cfg: Scenario):
    return kind_of(cfg.workload).offered_rate(cfg.workload)


def _us(x: float) -> float:
    return x * 1e6


def _clean(d: dict) -> dict:
    out = dict(d)
    out["task_clock_ms"] = out.pop("task_clock_s") * 1e3
    out["user_s"] = out["task_clock_ms"] * 1e-3 - out["sys_s"]
    return out


CI_KEYS = ("throughput_rps", "cpus_utilized", "ipc", "ghz", "joules_per_request")


def t975(df: int) -> float:
    """Student-t's 97.5% quantile with ``df`` degrees of freedom (a two-sided 95%
    interval's multiplier). SciPy is imported here, not with the module: it takes
    seconds to import, and a run without replications needs none of it."""
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def combine_replications(runs: list[dict]) -> dict:
    """Mean of each figure over replications, with Student-t 95% intervals for the
    main ones; the first run's structure carries everything else."""
    out = dict(runs[0])
    r = len(runs)

    def ci(values):
        a = np.asarray(values, dtype=float)
        m = float(a.mean())
        if r < 2 or not np.all(np.isfinite(a)):
            return m, [m, m]
        half = float(t975(r - 1) * a.std(ddof=1) / math.sqrt(r))
        return m, [m - half, m + half]

    cis = {}
    for k in CI_KEYS:
        out[k], cis[k] = ci([x[k] for x in runs])
    for group in ("latency_us", "service_us", "wait_us", "breakdown_us"):
        out[group] = {}
        for k in runs[0][group]:
            out[group][k], cis[f"{group}.{k}"] = ci([x[group][k] for x in runs])
    for k in ("requests", "sim_seconds", "task_clock_ms", "user_s", "sys_s", "cycles",
              "instructions", "l1d_loads",
              "l1d_misses", "llc_loads", "llc_misses", "llc_stores", "llc_store_misses",
              "context_switches", "cpu_migrations",
              "futex_wakes", "joules", "mean_in_system"):
        out[k] = float(np.mean([x[k] for x in runs]))
    # The outcomes (issue 31): means, outside ci95 (whose keys stay as they were).
    for k in ("rejected", "timed_out", "goodput_rps", "rejected_rate", "timed_out_rate"):
        out[k] = float(np.mean([x[k] for x in runs]))
    out["replications"] = r
    out["seeds"] = [x["seed"] for x in runs]
    out["ci95"] = cis
    out["drained"] = all(x["drained"] for x in runs)
    out["warnings"] = sorted({w for x in runs for w in x["warnings"]})
    return out


__all__ = ["SimContext", "build_machine", "simulate", "simulate_once"]
