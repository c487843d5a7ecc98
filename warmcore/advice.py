"""``warmcore advise``: which strategy is best for an objective, up to what offered
load, by how much, and why (docs/api.md, Advice).

The loads come from the scenario's own capacity: a probe doubles the offered load
from the scenario's until every strategy is saturated, and the grid runs from a
light load to past that point. Every point runs each strategy with the same seeds
(common random numbers), so the strategies are compared seed by seed: the margin
of the best over the runner-up is the mean of the paired differences, with a
Student-t 95% interval. Where that interval holds zero the answer is "no
significant difference", not a winner. Where the answer changes between two loads
a bisection on the load narrows the flip (a ``crossover``) to an interval, and the
figures that differ most between the two strategies there say why.

The same machinery answers "what should I change?": ``tune`` compares the values of
one tunable (a pool's threads, the Disruptor's ring, pinning, the governor) at one
load. Runs go through ``warmcore.executor`` (local processes, or a Dask cluster).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, field, replace

from warmcore.build import t975
from warmcore.comparison import load_field, with_strategy
from warmcore.registry import get_strategy
from warmcore.result import Result
from warmcore.simcore.config import ConfigError, Scenario

# A probe doubles the load at most this many times looking for saturation.
MAX_DOUBLINGS = 12
# The grid's loads as fractions of the probed capacity (the lowest load at which
# every strategy was saturated): light load, the knee's neighbourhood, overload.
GRID = (0.05, 0.15, 0.3, 0.45, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2)
SATURATED = 0.9            # served below this fraction of the offered load
LATENCY = ("p50", "p99")
# The smallest margin called a win, relative to the runner-up. A simulated margin
# below 1% could not be confirmed on a real machine, whose repeated benchmark runs
# differ by more (WSPerfLab's two Netty runs of one day: 3.2% rms, docs/calibration.md),
# so a margin of 0.02% that every seed agrees on is a tie to a performance engineer.
# A choice, not a published figure: ``min_margin`` (``--min-margin``) changes it.
MIN_MARGIN = 0.01


# --------------------------------------------------------------------------- objective

@dataclass(frozen=True)
class Objective:
    """What "best" means. ``figure``: the per-request figure (Result.per_request);
    ``sense`` +1 to maximise it, -1 to minimise; ``slo_us``: an SLO on p99 latency,
    and then the figure is the throughput served within it."""

    name: str
    figure: str
    sense: int
    slo_us: float | None = None
    min_margin: float = MIN_MARGIN   # the smallest margin called a win

    def with_min_margin(self, min_margin: float) -> Objective:
        """This objective with another smallest winning margin (a fraction, 0 to 1)."""
        if isinstance(min_margin, bool) or not isinstance(min_margin, (int, float)) or not (
                0 <= min_margin < 1):
            raise ConfigError("min_margin", f"must be a fraction from 0 to below 1 "
                                            f"(got {min_margin!r})")
        return replace(self, min_margin=float(min_margin))

    def score(self, r: Result) -> float:
        """Larger is better: the figure, negated when it is minimised."""
        row = r.per_request()
        if self.slo_us is not None:
            met = row["p99_us"] is not None and row["p99_us"] <= self.slo_us
            return float(row["throughput_rps"]) if met else 0.0
        value = row[self.figure]
        return self.sense * float(value) if value is not None else -math.inf

    def value(self, score: float) -> float:
        """The figure back from a score."""
        return score if self.slo_us is not None else self.sense * score

    @property
    def latency(self) -> bool:
        return self.name in LATENCY or self.slo_us is not None

    def describe(self) -> str:
        if self.slo_us is not None:
            return f"throughput with p99 <= {self.slo_us:g} us (higher is better)"
        return f"{OBJECTIVES[self.name][2]} ({'higher' if self.sense > 0 else 'lower'} is better)"


OBJECTIVES = {
    # name: (figure, sense, what it is)
    "throughput": ("throughput_rps", +1, "throughput req/s"),
    "p50": ("p50_us", -1, "p50 latency us"),
    "p99": ("p99_us", -1, "p99 latency us"),
    "cpu": ("cpu_us_per_req", -1, "CPU us per request"),
    "energy": ("uj_per_req", -1, "energy uJ per request"),
}
_SLO = re.compile(r"^p99\s*<=\s*(?P<us>[0-9.eE+-]+)\s*(us)?$")


def parse_objective(text: str) -> Objective:
    """``throughput``, ``p50``, ``p99``, ``cpu``, ``energy``, or an SLO ``p99<=500``
    (us: then the most throughput whose p99 stays within it)."""
    text = text.strip()
    if text in OBJECTIVES:
        figure, sense, _ = OBJECTIVES[text]
        return Objective(text, figure, sense)
    m = _SLO.match(text)
    if m:
        try:
            us = float(m["us"])
        except ValueError:
            us = math.nan
        if not (math.isfinite(us) and us > 0):
            raise ConfigError("--objective", f"the SLO's p99 bound must be a positive "
                                             f"number of us, not {m['us']!r}")
        return Objective("slo", "throughput_rps", +1, slo_us=us)
    raise ConfigError("--objective", f"{text!r} is not one of {', '.join(OBJECTIVES)} "
                                     "or an SLO such as p99<=500")


# --------------------------------------------------------------------------- doubts

def doubts(r: Result, objective: Objective | None = None) -> list[str]:
    """Why a run's figures are not to be trusted as a steady state (empty if they
    are); a run with doubts is never named best."""
    out = []
    if r.partial:
        out.append(f"stopped early ({r.stop_reason})")
    if r.requests < MIN_REQUESTS:
        out.append(f"only {r.requests} requests measured (at least {MIN_REQUESTS})")
    if r.offered_rps and r.requests > r.arrived + 3 * math.sqrt(max(r.arrived, 1)):
        out.append(f"served {r.requests:,} requests while {r.arrived:,} arrived in its "
                   "window: the window is too short for this load (it measured the "
                   "warm-up's backlog)")
    if objective is not None and objective.latency and overloaded(r):
        out.append("overloaded: its latency grows with the run's length")
    return out


MIN_REQUESTS = 200


def overloaded(r: Result) -> bool:
    """An open loop served below the offered load by more than its arrivals' noise,
    with the backlog left over: its queue grows without bound."""
    if not r.offered_rps or not r.throughput_rps:
        return False
    noise = 3 / math.sqrt(max(r.arrived, 1))
    # a bounded queue's refusals leave no backlog: they count with what was served
    refused = r.rejected / r.sim_seconds if r.rejected and r.sim_seconds else 0.0
    return (r.throughput_rps + refused < r.offered_rps * (1 - noise)
            and r.in_flight_at_end > 0)


# --------------------------------------------------------------------------- runs

@dataclass(frozen=True, eq=False)      # compared and hashed as itself
class Candidate:
    """One thing to compare: a strategy, or a strategy with one tunable set."""

    label: str
    strategy: str
    changes: tuple[tuple[str, object], ...] = ()

    def scenario(self, base: Scenario, load) -> Scenario:
        sc = with_strategy(base, self.strategy, load)
        return sc.edit(dict(self.changes)) if self.changes else sc


def _run_one(toml: str, seed: int, max_wall: float | None = None) -> dict:
    """One run in a worker: the scenario's TOML in, the result's dict out (both
    pickle as plain data, for local processes and Dask alike). ``max_wall`` bounds its
    wall-clock seconds (a run it stops is partial, so in doubt)."""
    from warmcore import build

    return build.simulate(Scenario.from_toml(toml), seed, max_wall=max_wall)


@dataclass
class Runner:
    """Runs (candidate, load, seed) once each, in parallel when given an executor,
    and keeps the results."""

    base: Scenario
    seeds: list[int]
    executor: object | None = None
    progress: Callable[[int], None] | None = None
    max_wall: float | None = None
    done: dict = field(default_factory=dict)

    def results(self, cand: Candidate, load) -> list[Result]:
        self.run([(cand, load)])
        return [self.done[(cand, load, s)] for s in self.seeds]

    def first(self, cand: Candidate, load) -> Result:
        """The run with the first seed only (the capacity probe's)."""
        self.run([(cand, load)], self.seeds[:1])
        return self.done[(cand, load, self.seeds[0])]

    def run(self, pairs: Iterable[tuple[Candidate, object]],
            seeds: Sequence[int] | None = None) -> None:
        todo = [(c, ld, s) for c, ld in pairs for s in (seeds or self.seeds)
                if (c, ld, s) not in self.done]
        if not todo:
            return
        jobs = {key: key[0].scenario(self.base, key[1]).to_toml() for key in todo}
        if self.executor is None:
            for key, toml in jobs.items():
                self._keep(key, _run_one(toml, key[2], self.max_wall))
            return
        futures = {self.executor.submit(_run_one, toml, key[2], self.max_wall): key
                   for key, toml in jobs.items()}
        for f in as_completed(futures):
            self._keep(futures[f], f.result())

    def _keep(self, key, d: dict) -> None:
        r = Result.from_dict(d)
        if key[1] is not None:
            r = r.model_copy(update={"load": key[1]})
        self.done[key] = r
        if self.progress:
            self.progress(len(self.done))


# --------------------------------------------------------------------------- verdicts

@dataclass
class Verdict:
    """At one load: the best candidate (None when the difference is inside the noise)
    and its margin over the runner-up, relative to the runner-up's figure."""

    load: object
    best: str | None
    leader: str
    runner_up: str | None
    margin: float
    interval95: tuple[float, float]
    values: dict[str, float]
    doubts: dict[str, list[str]]
    served: dict[str, float] = field(default_factory=dict)

    @property
    def answer(self) -> str | None:
        return self.best


def paired_margin(a: Sequence[float], b: Sequence[float]) -> tuple[float, tuple[float, float]]:
    """Mean of the paired differences a - b relative to b's mean, and its Student-t
    95% interval (the difference's interval over |mean b|). One pair: no interval
    (nan, nan)."""
    scale = abs(sum(b) / len(b)) or 1.0
    # differences within rounding of the figures are none (a deterministic tie)
    d = [0.0 if abs(x - y) <= ROUNDING * scale else x - y for x, y in zip(a, b, strict=True)]
    mean = sum(d) / len(d)
    if len(d) < 2:
        return mean / scale, (math.nan, math.nan)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    half = t975(len(d) - 1) * sd / math.sqrt(len(d))
    return mean / scale, ((mean - half) / scale, (mean + half) / scale)


ROUNDING = 1e-9


def verdict(runner: Runner, cands: Sequence[Candidate], load, objective: Objective) -> Verdict:
    scores, doubted, served = {}, {}, {}
    for c in cands:
        rs = runner.results(c, load)
        scores[c.label] = [objective.score(r) for r in rs]
        served[c.label] = _mean([r.throughput_rps or 0.0 for r in rs])
        doubted[c.label] = sorted({d for r in rs for d in doubts(r, objective)})
    trusted = [c.label for c in cands if not doubted[c.label]]
    ranked = sorted(trusted, key=lambda n: -_mean(scores[n]))
    values = {n: objective.value(_mean(s)) for n, s in scores.items()}
    if not ranked:
        return Verdict(load, None, "", None, math.nan, (math.nan, math.nan), values, doubted,
                       served)
    leader = ranked[0]
    if len(ranked) == 1:
        return Verdict(load, leader, leader, None, math.inf, (math.inf, math.inf), values,
                       doubted, served)
    second = ranked[1]
    margin, (lo, hi) = paired_margin(scores[leader], scores[second])
    significant = (lo > 0 or (math.isnan(lo) and margin > 0)) and margin >= objective.min_margin
    return Verdict(load, leader if significant else None, leader, second, margin, (lo, hi),
                   values, doubted, served)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


# --------------------------------------------------------------------------- loads

def probe_capacity(runner: Runner, cands: Sequence[Candidate], start: float,
                   integer: bool) -> float:
    """The lowest load, doubling from ``start``, at which every candidate is saturated
    (serves below 90% of an open loop's offered load, doubts its window, or, for a
    closed loop, gains under 5% from doubling)."""
    load, prev = start, {}
    for _ in range(MAX_DOUBLINGS):
        load = round(load) if integer else load
        runner.run([(c, load) for c in cands], runner.seeds[:1])
        served = {c.label: runner.first(c, load).throughput_rps or 0.0 for c in cands}
        if all(_saturated(runner, c, load, served, prev, integer) for c in cands):
            return load
        prev = served
        load = load * 2
    return load


def _saturated(runner, c, load, served, prev, integer) -> bool:
    r = runner.first(c, load)
    if integer:
        before = prev.get(c.label)
        return before is not None and served[c.label] < 1.05 * before
    return bool(doubts(r)) or served[c.label] < SATURATED * load


def grid(capacity: float, integer: bool, own) -> list:
    """The loads to compare at: GRID's fractions of the capacity, and the scenario's
    own load (and, for a count of clients or connections, one)."""
    if integer:
        return sorted({1, int(own), *(max(1, round(capacity * f)) for f in GRID)})
    return sorted({float(own), *(capacity * f for f in GRID)})


# --------------------------------------------------------------------------- advice

def advise(scenario, strategies: Sequence[str], objective: str | Objective = "throughput",
           *, loads: Sequence[float] | None = None, replications: int = 3,
           seed: int | None = None, requests: int | None = None, refine: int = 4,
           workers: int | None = 1, scheduler: str | None = None,
           progress: Callable[[int], None] | None = None,
           max_wall: float | None = None, min_margin: float | None = None) -> dict:
    """Which of ``strategies`` is best for ``objective`` at each offered load, where
    the answer flips, and why. The dict documented in docs/api.md (``ranges``,
    ``crossovers``, ``objective``, ``why``...). ``progress(runs done)`` is called after
    each run (an exception it raises stops the advice); ``max_wall`` bounds each run's
    wall-clock seconds; a strategy is named best only by ``min_margin`` or more (a
    fraction of the runner-up's figure; None: the objective's, ``MIN_MARGIN`` unless
    it was given another) as well as at 95%."""
    from warmcore.api import as_scenario

    obj = objective if isinstance(objective, Objective) else parse_objective(objective)
    obj = _with_margin(obj, min_margin)
    sc = _prepared(as_scenario(scenario), requests, replications, refine)
    field_ = load_field(sc)
    integer = field_ != "rate_per_s"
    cands = [Candidate(n, n) for n in _strategies(strategies)]
    seeds = _seeds(sc, seed, replications)
    with _executor(workers, scheduler) as ex:
        runner = Runner(sc, seeds, ex, progress, max_wall)
        cap = None
        if loads is None:
            own = getattr(sc.workload, field_)
            cap = probe_capacity(runner, cands, float(own), integer)
            loads = grid(cap, integer, own)
        answer = answer_over(runner, cands, loads, obj, integer, refine)
    return {
        "scenario": sc.name, "objective": obj.name, "objective_text": obj.describe(),
        "slo_p99_us": obj.slo_us, "min_margin": obj.min_margin,
        "load_field": f"workload.{field_}",
        "strategies": [c.label for c in cands], "replications": len(seeds), "seeds": seeds,
        "capacity": cap, **answer, "runs": len(runner.done),
    }


def answer_over(runner: Runner, cands: Sequence[Candidate], loads: Sequence, obj: Objective,
                integer: bool, refine: int) -> dict:
    """The verdict at every load, merged into ranges, and each flip between two loads
    narrowed to a crossover with its why."""
    loads = sorted(set(loads))
    runner.run([(c, ld) for ld in loads for c in cands])
    verdicts = [verdict(runner, cands, ld, obj) for ld in loads]
    flips = [crossover(runner, cands, a, b, obj, integer, refine)
             for a, b in zip(verdicts, verdicts[1:], strict=False) if a.best != b.best]
    flips = [f for f in flips if f is not None]
    out = {"loads": loads, "points": [_point(v) for v in verdicts],
           "ranges": ranges(verdicts), "crossovers": flips,
           "why": [f["why"] for f in flips]}
    if obj.slo_us is not None:
        out["slo_holds_up_to"] = {c.label: _slo_limit(runner, c, loads, obj) for c in cands}
    return out


def _slo_limit(runner: Runner, c: Candidate, loads: Sequence, obj: Objective):
    """The highest of ``loads`` up to which every run of ``c`` kept p99 within the SLO
    (and was not in doubt); None if it missed at the lightest."""
    best = None
    for ld in loads:
        rs = runner.results(c, ld)
        if all(obj.score(r) > 0 and not doubts(r, obj) for r in rs):
            best = ld
        else:
            break
    return best


def tune(scenario, path: str, values: Sequence, objective: str | Objective = "throughput",
         *, load=None, replications: int = 3, seed: int | None = None,
         requests: int | None = None, workers: int | None = 1,
         scheduler: str | None = None,
         progress: Callable[[int], None] | None = None,
         min_margin: float | None = None) -> dict:
    """The best value of one setting (``path``, a --set path such as
    ``strategy.params.threads`` or ``machine.governor``) at one load, with its margin
    over the runner-up and a 95% interval (best only by ``min_margin`` or more)."""
    from warmcore.api import as_scenario

    obj = objective if isinstance(objective, Objective) else parse_objective(objective)
    obj = _with_margin(obj, min_margin)
    sc = _prepared(as_scenario(scenario), requests, replications, 0)
    if load is not None:
        load_field(sc)
    cands = [Candidate(f"{path}={v}", sc.strategy.name, ((path, v),)) for v in values]
    if len(cands) < 2:
        raise ConfigError("--tune", "give at least two values to compare")
    for c in cands:                      # every setting validated before anything runs
        c.scenario(sc, load)
    seeds = _seeds(sc, seed, replications)
    with _executor(workers, scheduler) as ex:
        runner = Runner(sc, seeds, ex, progress)
        runner.run([(c, load) for c in cands])
        v = verdict(runner, cands, load, obj)
    return {"scenario": sc.name, "objective": obj.name, "objective_text": obj.describe(),
            "min_margin": obj.min_margin,
            "path": path, "load": load, "replications": len(seeds), "seeds": seeds,
            **_point(v)}


def _with_margin(obj: Objective, min_margin: float | None) -> Objective:
    """The objective with ``min_margin`` if one is given; else as it is (an Objective
    passed in keeps the margin it carries)."""
    return obj if min_margin is None else obj.with_min_margin(min_margin)


def _prepared(sc: Scenario, requests, replications: int, refine: int) -> Scenario:
    if replications < 1 or replications > 100:
        raise ConfigError("--replications", "must be between 1 and 100")
    if refine < 0 or refine > 20:
        raise ConfigError("--refine", "must be between 0 and 20")
    return sc.with_(requests=requests) if requests is not None else sc


def _strategies(names: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    if len(names) < 2:
        raise ConfigError("--strategies", "name at least two strategies to compare")
    for n in names:
        try:
            get_strategy(n)
        except ConfigError as e:
            raise ConfigError("--strategies", e.reason) from None
    return names


def _seeds(sc: Scenario, seed: int | None, n: int) -> list[int]:
    first = sc.seed if seed is None else seed
    return [first + i for i in range(n)]


def _executor(workers: int | None, scheduler: str | None):
    """In this process for one worker (no pool to start), else warmcore.executor's."""
    import contextlib

    from warmcore.executor import make_executor

    if scheduler is None and workers == 1:
        return contextlib.nullcontext(None)
    return make_executor(workers=workers, scheduler=scheduler)


def _point(v: Verdict) -> dict:
    return {"load": v.load, "best": v.best, "leader": v.leader or None,
            "runner_up": v.runner_up, "margin": _num(v.margin),
            "interval95": [_num(x) for x in v.interval95], "values": v.values,
            "served": v.served, "doubts": {k: d for k, d in v.doubts.items() if d}}


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def ranges(verdicts: Sequence[Verdict]) -> list[dict]:
    """Consecutive loads with the same answer, merged. A winner's range carries the
    margin and interval of its weakest load (the smallest margin); a range with no
    significant difference those of its first load, between its leader and the
    runner-up."""
    out: list[dict] = []
    for v in verdicts:
        here = {"margin": _num(v.margin), "interval95": [_num(x) for x in v.interval95],
                "versus": v.runner_up, "leader": v.leader or None}
        if out and out[-1]["best"] == v.best:
            r = out[-1]
            r["to"] = v.load
            if v.best is not None and here["margin"] is not None and (
                    r["margin"] is None or here["margin"] < r["margin"]):
                r.update(here)
            continue
        out.append({"from": v.load, "to": v.load, "best": v.best, **here})
    return out


def crossover(runner: Runner, cands: Sequence[Candidate], left: Verdict, right: Verdict,
              obj: Objective, integer: bool, steps: int) -> dict | None:
    """Narrow the flip between two loads whose answers differ: each step bisects the
    widest gap between neighbouring loads whose answers differ. The interval runs from
    the last load where the left answer held to the first where the right one did
    (each at 95%; a load between them had "no significant difference" or another
    answer), and the crossover is its middle."""
    seen = {left.load: left.best, right.load: right.best}
    for _ in range(steps):
        loads = sorted(seen)
        gaps = [(b - a, a, b) for a, b in zip(loads, loads[1:], strict=False)
                if seen[a] != seen[b]]
        width, a, b = max(gaps)
        mid = (a + b) // 2 if integer else (a + b) / 2
        if mid in (a, b):
            break
        runner.run([(c, mid) for c in cands])
        seen[mid] = verdict(runner, cands, mid, obj).best
    hi = min(ld for ld, ans in seen.items() if ans == right.best)
    lo = max(ld for ld, ans in seen.items() if ans == left.best and ld < hi)
    first, second = _pair(left, right)
    if not first or not second:
        return None
    at = (lo + hi) // 2 if integer else (lo + hi) / 2
    return {"load": at, "interval95": [lo, hi], "from": left.best, "to": right.best,
            "why": why(runner, _named(cands, first), _named(cands, second), hi)}


def _pair(left: Verdict, right: Verdict) -> tuple[str | None, str | None]:
    """The two candidates a flip is between: the winners on either side, or, beside a
    tie, the winner and the one it separates from."""
    if left.best and right.best:
        return left.best, right.best
    if left.best:
        return left.best, left.runner_up
    return right.runner_up, right.best


def _named(cands: Sequence[Candidate], label: str) -> Candidate:
    return next(c for c in cands if c.label == label)


WHY_FIGURES = ("throughput_rps", "p50_us", "p99_us", "cpus", "cpu_us_per_req", "ipc", "ghz",
               "llc_loads_per_req", "migrations_per_req", "switches_per_req", "uj_per_req")


def why(runner: Runner, a: Candidate, b: Candidate, load, top: int = 5) -> dict:
    """The figures (the time breakdown and the counters per request) that differ most
    between ``a`` and ``b`` at ``load``, means over the seeds, largest relative
    difference first."""
    fa, fb = _figures(runner.results(a, load)), _figures(runner.results(b, load))
    diffs = []
    for k in fa:
        x, y = fa[k], fb[k]
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue
        big = max(abs(x), abs(y))
        if big > 0:
            diffs.append((abs(x - y) / big, k, x, y))
    diffs.sort(reverse=True)
    return {"load": load, "a": a.label, "b": b.label,
            "figures": [{"figure": k, "a": x, "b": y} for _, k, x, y in diffs[:top]]}


def _figures(rs: Sequence[Result]) -> dict[str, float]:
    rows = []
    for r in rs:
        row = {k: r.per_request()[k] for k in WHY_FIGURES}
        row |= {f"breakdown.{k}": v for k, v in r.breakdown_us.model_dump().items()}
        rows.append(row)
    return {k: _mean_or_none([row[k] for row in rows]) for k in rows[0]}


def _mean_or_none(xs):
    xs = [x for x in xs if x is not None]
    return _mean(xs) if xs else None


# --------------------------------------------------------------------------- text

def format_advice(a: dict) -> str:
    """The answer as lines a person reads (``warmcore advise`` without --json)."""
    unit = "req/s" if a["load_field"].endswith("rate_per_s") else a["load_field"].split(".")[-1]
    lines = [verdict_text(a),
             f"objective: {a['objective_text']}; {a['replications']} replications per "
             f"point (seeds {a['seeds'][0]}..{a['seeds'][-1]}), {a['runs']} runs; best "
             f"means better at 95% and by {_pct(a.get('min_margin', MIN_MARGIN))} or more"]
    for r in a["ranges"]:
        span = f"{_load(r['from'])} .. {_load(r['to'])} {unit}"
        if r["best"]:
            lines.append(f"  {span:>32}  {r['best']:<14} better than {r['versus']} by "
                         f"{_pct(r['margin'])} (95%: {_interval(r['interval95'])})")
        elif r["leader"] and r["versus"]:
            lines.append(f"  {span:>32}  no significant difference ({r['leader']} against "
                         f"{r['versus']}: {_interval(r['interval95'])})")
        else:
            lines.append(f"  {span:>32}  no trustworthy run (see --json's doubts)")
    for c in a["crossovers"]:
        lines.append(f"crossover: {c['from'] or 'no difference'} -> {c['to'] or 'no difference'}"
                     f" at ~{_load(c['load'])} {unit} (between {_load(c['interval95'][0])} "
                     f"and {_load(c['interval95'][1])})")
        w = c["why"]
        lines.append(f"  why, at {_load(w['load'])}: " + "; ".join(
            f"{f['figure']} {_fig(f['a'])} ({w['a']}) vs {_fig(f['b'])} ({w['b']})"
            for f in w["figures"]))
    if not a["crossovers"]:
        lines.append("no crossover over these loads")
    return "\n".join(lines)


def verdict_text(a: dict) -> str:
    """The answer in one sentence: who is best over which loads, by how much, where it
    changes; or that no difference stands out of the noise."""
    unit = "req/s" if a["load_field"].endswith("rate_per_s") else \
        a["load_field"].split(".")[-1].replace("_", " ")
    rs = a["ranges"]
    head = f"For {a['objective_text'].split(' (')[0]}"
    held = a.get("slo_holds_up_to")
    slo = "" if not held else " The SLO holds up to: " + ", ".join(
        f"{n} {_load(x)} {unit}" if x is not None else f"{n} at no load"
        for n, x in held.items()) + "."
    if all(r["best"] is None for r in rs):
        return (f"{head}: no significant difference between {', '.join(a['strategies'])} "
                f"at any load from {_load(a['loads'][0])} to {_load(a['loads'][-1])} "
                f"{unit}.{slo}")
    parts = []
    for i, r in enumerate(rs):
        upto = _boundary(a, i)
        span = (f"from {_load(r['from'])} to {_load(r['to'])} {unit}" if len(rs) == 1 else
                f"up to ~{_load(upto)} {unit}" if i == 0 else
                f"beyond ~{_load(_boundary(a, i - 1))} {unit}" if upto is None else
                f"from ~{_load(_boundary(a, i - 1))} to ~{_load(upto)} {unit}")
        if r["best"]:
            parts.append(f"{r['best']} is best {span}, by {_pct(r['margin'])} or more over "
                         f"{r['versus']} (95%: {_interval(r['interval95'])})")
        elif r["leader"]:
            parts.append(f"no significant difference {span}")
        else:
            parts.append(f"no trustworthy run {span}")
    return f"{head}: " + "; ".join(parts) + "." + slo


def _boundary(a: dict, i: int):
    """The load where range i ends: its crossover's, or None for the last range."""
    rs = a["ranges"]
    if i >= len(rs) - 1:
        return None
    for c in a["crossovers"]:
        if c["from"] == rs[i]["best"] and c["to"] == rs[i + 1]["best"] and \
                rs[i]["to"] <= c["load"] <= rs[i + 1]["from"]:
            return c["load"]
    return (rs[i]["to"] + rs[i + 1]["from"]) / 2


def format_tuning(t: dict) -> str:
    where = f" at load {_load(t['load'])}" if t["load"] is not None else ""
    head = f"{t['path']}{where}, objective: {t['objective_text']}"
    vals = "  ".join(f"{k.split('=', 1)[1]}: {_fig(v)}" for k, v in t["values"].items())
    if t["best"]:
        tail = (f"best {t['best']}, better than {t['runner_up']} by {_pct(t['margin'])} "
                f"(95%: {_interval(t['interval95'])})")
    else:
        tail = "no significant difference between the best two"
    return f"{head}\n  {vals}\n  {tail}"


def _load(x) -> str:
    return f"{x:,.0f}" if isinstance(x, float) else f"{x}"


def _fig(x: float) -> str:
    """A figure as a person reads it: whole above 100, three digits below, 0 for the
    rounding of a zero."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return "0" if abs(x) < 1e-9 else f"{x:.3g}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _interval(iv) -> str:
    if not iv or iv[0] is None:
        return "one replication, no interval"
    return f"{_pct(iv[0])} .. {_pct(iv[1])}"
