"""Fitting model parameters to measured figures, and predicting with intervals.

    spec = CalibrationSpec.load("examples/jetty-8/calibrate.toml")
    cal = Calibrator(spec).fit()            # scikit-learn style: returns a Calibration
    cal.values, cal.ci95, cal.correlation, cal.condition_number, cal.warnings
    cal.predict("pipeline", strategy="pec")  # figures with 95% intervals

Method (docs/calibration.md):
* residuals: for each measured figure, (simulated - measured) / measured divided by
  its relative uncertainty, times sqrt(coverage) of a multiplexed perf counter;
* common random numbers: every evaluation runs the same seeds, so differences
  between parameter values are not dice;
* a space-filling start (scrambled Sobol points, scipy.stats.qmc) in the unit box
  of the parameters (log scale where asked), the best of them refined by
  scipy.optimize.least_squares (trust region reflective, bounded), with a
  forward-difference Jacobian whose columns are simulated in parallel through
  warmcore's executor (a local pool or a Dask cluster);
* intervals: the Gauss-Newton linearisation at the optimum, cov = s^2 (J^T J)^-1
  with s^2 = max(1, RSS / (m - p)) (m figures, p parameters), 95% normal
  intervals mapped back from the unit box; correlations from cov; the condition
  number of J. A parameter whose interval spans its whole bounds, or whose
  direction J barely sees, is reported as not identified.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

import warmcore
from warmcore.simcore.config import ConfigError, config_error, parse_toml, read_text

# Figures a measurement may state, and how each is read from a result. Per-request
# figures have the names warmcore's results give them (Result.per_request(), compare
# --json, sweep reports: ``cpu_us_per_req``, ``llc_loads_per_req``, ``switches_per_req``,
# ``migrations_per_req``) and the same ``_per_req`` ending for the others; latencies
# are named as there too (``p50_us``, ``p99_us``; ``p90_us`` and ``mean_us`` alike).
FIGURES = {
    "throughput_rps": lambda r: r.throughput_rps,
    "mean_us": lambda r: r.latency_us.mean,
    "p50_us": lambda r: r.latency_us.p50,
    "p90_us": lambda r: r.latency_us.p90,
    "p99_us": lambda r: r.latency_us.p99,
    "cpus_utilized": lambda r: r.cpus_utilized,
    "ipc": lambda r: r.ipc,
    "ghz": lambda r: r.ghz,
    "cpu_us_per_req": lambda r: r.task_clock_ms * 1e3 / max(r.requests, 1),
    "instructions_per_req": lambda r: r.instructions / max(r.requests, 1),
    "cycles_per_req": lambda r: r.cycles / max(r.requests, 1),
    "llc_loads_per_req": lambda r: r.llc_loads / max(r.requests, 1),
    "llc_misses_per_req": lambda r: r.llc_misses / max(r.requests, 1),
    # perf's LLC-stores and LLC-store-misses: the demand RFOs (models.cache.Hierarchy)
    "llc_stores_per_req": lambda r: r.llc_stores / max(r.requests, 1),
    "llc_store_misses_per_req": lambda r: r.llc_store_misses / max(r.requests, 1),
    "l1d_loads_per_req": lambda r: r.l1d_loads / max(r.requests, 1),
    "l1d_misses_per_req": lambda r: r.l1d_misses / max(r.requests, 1),
    "switches_per_req": lambda r: r.context_switches / max(r.requests, 1),
    "migrations_per_req": lambda r: r.cpu_migrations / max(r.requests, 1),
}
# The names calibration used to give them: a spec stating one is refused with one line
# naming the new name (not an alias: one name per figure, in specs as in reports).
RENAMED = {
    "cpu_us_per_request": "cpu_us_per_req",
    "instructions_per_request": "instructions_per_req",
    "cycles_per_request": "cycles_per_req",
    "llc_loads_per_request": "llc_loads_per_req",
    "llc_misses_per_request": "llc_misses_per_req",
    "l1d_loads_per_request": "l1d_loads_per_req",
    "l1d_misses_per_request": "l1d_misses_per_req",
    "context_switches_per_request": "switches_per_req",
    "cpu_migrations_per_request": "migrations_per_req",
    "latency_mean_us": "mean_us",
    "latency_p50_us": "p50_us",
    "latency_p90_us": "p90_us",
    "latency_p99_us": "p99_us",
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# A seed as a scenario takes one (simcore.config.schema.Scenario.seed).
Seed = Annotated[int, Field(ge=0, lt=2**63)]
MAX_SEEDS = 64
MAX_DRAWS = 1000          # predict --draws: each draw is one simulation
# A sampling governor's clock is a choice every sampling period: a run that covers
# fewer of them than this may report a clock (and what it moves) still settling. On
# the Jetty 8 setup jetty9-milestone's clock ran 1.85 GHz over 14 samples (3,000
# requests) and 1.60 over 100 (20,000); pipeline's milestone, per-CPU against one
# package policy, spread 0.932-0.986 over seeds 1-4 at 40 samples and 0.933-0.954 at
# 100 (tests/test_dvfs_per_cpu.py, docs/calibration.md).
MIN_GOVERNOR_SAMPLES = 50
H_MAX = 0.2               # widest finite-difference step, in the unit box (see jac)
MAX_FIT = 64              # fitted parameters (a spec's and a PARAMS.toml's alike)
MAX_MEASUREMENTS = 64     # each one a simulation per seed and evaluation
MAX_WALL_S = 86_400       # run.max_wall, as a sweep's


class Figure(Strict):
    """One measured figure: its value, relative uncertainty (1 sigma) and weight from
    the perf counter's multiplexing coverage (1: counted all the time)."""

    value: float = Field(gt=0)
    uncertainty: float = Field(default=0.05, gt=0, le=10,
                               description="relative, 1 sigma (0.05: 5%)")
    coverage: float = Field(default=1.0, gt=0, le=1)


class Measurement(Strict):
    name: str
    scenario: str = Field(description="a built-in scenario name or a TOML file")
    strategy: str | None = None
    set: list[str] = Field(default=[], description="--set overrides of the measured setup")
    perf: str | None = Field(default=None, description="perf stat output of the run")
    requests: int | None = Field(default=None, gt=0, description=(
        "requests the load tool counted in elapsed_s (without elapsed_s: the requests "
        "the perf file covers); a perf window shorter than elapsed_s covers the load's "
        "rate over it (calibration.perf_figures.counted_requests)"))
    elapsed_s: float | None = Field(default=None, gt=0, description=(
        "the load tool's time for `requests` (its throughput)"))
    figures: dict[str, Annotated[float, Field(gt=0)] | Figure] = {}

    @field_validator("figures", mode="before")
    @classmethod
    def _figure_tables(cls, figures):
        """A figure stated as a table is checked as one, so that its error names the
        key at fault ({value = 500, coverage = 2.5}: coverage), not the union's first
        member ("should be a number")."""
        if isinstance(figures, dict):
            for name, v in figures.items():
                if isinstance(v, dict):
                    try:
                        Figure.model_validate(v)
                    except ValidationError as e:
                        raise config_error(e, str(name)) from None
        return figures

    @model_validator(mode="after")
    def _known_figures(self):
        for k in self.figures:
            if k in RENAMED:
                raise ConfigError(f"figures.{k}", f"renamed {RENAMED[k]}, as in warmcore's "
                                                  "results")
            if k not in FIGURES:
                raise ConfigError(f"figures.{k}", f"not a figure warmcore fits (known: "
                                                  f"{', '.join(FIGURES)})")
        return self

    def scenario_obj(self, base_dir: str) -> warmcore.Scenario:
        """The measured setup: the scenario (a file relative to the spec), its overrides
        and strategy."""
        src = self.scenario
        if src.endswith(".toml") and not Path(src).is_absolute():
            src = str(Path(base_dir) / src)
        sc = warmcore.Scenario.load(src, self.set)
        return sc.with_(strategy=self.strategy) if self.strategy else sc

    def perf_path(self, base_dir: str) -> Path | None:
        if not self.perf:
            return None
        path = Path(self.perf)
        return path if path.is_absolute() else Path(base_dir) / path

    def perf_note(self, base_dir: str) -> str | None:
        """Which requests the perf file's per-request figures divide by, when its window
        is not the load's (calibration.perf_figures.window_note)."""
        from warmcore.calibration.perf_figures import window_note

        path = self.perf_path(base_dir)
        return window_note(path, self.requests, self.elapsed_s) if path else None

    def all_figures(self, base_dir: str) -> dict[str, Figure]:
        """The stated figures, plus those read from the perf file (stated ones win)."""
        out: dict[str, Figure] = {}
        path = self.perf_path(base_dir)
        if path:
            from warmcore.calibration.perf_figures import figures_from_perf

            out.update(figures_from_perf(path, requests=self.requests,
                                         elapsed_s=self.elapsed_s))
        for k, v in self.figures.items():
            out[k] = v if isinstance(v, Figure) else Figure(value=float(v))
        return out


class FitParam(Strict):
    path: str
    lo: float
    hi: float
    log: bool = False

    @model_validator(mode="after")
    def _bounds(self):
        if not self.lo < self.hi:
            raise ConfigError("lo", f"{self.lo} is not below hi {self.hi}")
        if self.log and self.lo <= 0:
            raise ConfigError("lo", "a log-scale parameter needs lo > 0")
        return self


class RunSpec(Strict):
    requests: int = Field(default=3000, gt=0, le=10_000_000)
    seeds: list[Seed] = Field(default=[1, 2], min_length=1, max_length=MAX_SEEDS)
    starts: int = Field(default=8, ge=1, le=256, description="Sobol starting points")
    max_evaluations: int = Field(default=100, ge=2, le=100_000)
    max_wall: float | None = Field(default=None, gt=0, le=MAX_WALL_S,
                                   description="per simulation, s")


class CalibrationSpec(Strict):
    measurement: list[Measurement] = Field(min_length=1, max_length=MAX_MEASUREMENTS)
    fit: list[FitParam] = Field(min_length=1, max_length=MAX_FIT)
    run: RunSpec = RunSpec()
    base_dir: str = Field(default=".", description="where relative file names start "
                                                   "(the spec's folder)")

    @model_validator(mode="after")
    def _each_path_once(self):
        seen = set()
        for f in self.fit:
            if f.path in seen:
                raise ConfigError("fit", f"{f.path} is fitted twice")
            seen.add(f.path)
        return self

    @classmethod
    def load(cls, path: str | Path) -> CalibrationSpec:
        data = parse_toml(read_text(path, "calibration"), f"calibration: {path}")
        data["base_dir"] = str(Path(path).resolve().parent)
        return cls.from_data(data)

    @classmethod
    def from_data(cls, data: dict) -> CalibrationSpec:
        try:
            spec = cls.model_validate(data)
        except ValidationError as e:
            raise config_error(e, prefix="calibration") from None
        spec.check()
        return spec

    def check(self) -> None:
        """Every fitted path is a parameter of every measured scenario, bounds inside
        its range; every measurement has a figure."""
        for i, m in enumerate(self.measurement):
            sc = m.scenario_obj(self.base_dir)
            space = {p.path: p for p in warmcore.parameters(sc)}
            for f in self.fit:
                p = space.get(f.path)
                if p is None or p.type not in ("int", "float"):
                    raise ConfigError(f"calibration.fit.{f.path}", "not a numeric parameter "
                                      f"of scenario {sc.name!r} (see warmcore.parameters)")
                check_fit_bounds(f, p, f"calibration.fit.{f.path}")
            if not m.all_figures(self.base_dir):
                raise ConfigError(f"calibration.measurement[{i}]", "states no figure to fit "
                                  "(figures or a perf file)")

    def digest(self) -> str:
        """What the spec asks, not where it sits: the folder it was read from
        (``base_dir``) is left out, so a spec and its PARAMS.toml moved together to
        another machine keep their digest."""
        return hashlib.sha256(
            self.model_dump_json(exclude={"base_dir"}).encode()).hexdigest()[:16]

    def int_paths(self) -> set[str]:
        """The fitted paths that are whole numbers (a thread count): fitted over whole
        bounds, evaluated and reported rounded."""
        sc = self.measurement[0].scenario_obj(self.base_dir)
        space = {p.path: p for p in warmcore.parameters(sc)}
        return {f.path for f in self.fit if space[f.path].type == "int"}


def check_fit_bounds(f: FitParam, p, field: str) -> None:
    """A fitted parameter's bounds: inside the parameter's range, whole numbers for an
    integer parameter (fitted over [1, 1.5], it would be reported as 1.425)."""
    for v in (f.lo, f.hi):
        try:
            p.check(round(v) if p.type == "int" and v == round(v) else v)
        except ValueError as e:
            raise ConfigError(field, f"{v:g}: {e}") from None
    if p.type == "int" and not (f.lo == round(f.lo) and f.hi == round(f.hi)):
        raise ConfigError(field, f"an integer parameter is fitted over whole bounds "
                          f"(got [{f.lo:g}, {f.hi:g}])")


# -- evaluation (picklable, runs in worker processes) -------------------------------------

def to_values(fit: list[FitParam], u: Iterable[float]) -> dict[str, float]:
    """Parameter values at a point ``u`` of the unit box (log scale where asked)."""
    out = {}
    for f, x in zip(fit, u, strict=True):
        x = min(max(float(x), 0.0), 1.0)
        v = f.lo * (f.hi / f.lo) ** x if f.log else f.lo + x * (f.hi - f.lo)
        out[f.path] = v
    return out


def _typed(sc: warmcore.Scenario, values: dict[str, float]) -> dict:
    space = {p.path: p for p in warmcore.parameters(sc)}
    return {k: (round(v) if space[k].type == "int" else v) for k, v in values.items()}


def simulate_figures(spec_json: str, keys: list[list[str]], u: list[float]) -> list[float]:
    """Simulated figures at ``u``: for each measurement the figures named in ``keys``,
    each the mean over the spec's seeds (common random numbers)."""
    spec = CalibrationSpec.model_validate_json(spec_json)
    return _figures_at(spec, keys, to_values(spec.fit, u))


def _figures_at(spec: CalibrationSpec, keys_per: list[list[str]], values: dict[str, float],
                seeds: list[int] | None = None) -> list[float]:
    out = []
    for m, keys in zip(spec.measurement, keys_per, strict=True):
        sc = m.scenario_obj(spec.base_dir)
        sc = sc.with_(_typed(sc, values), requests=spec.run.requests)
        per_seed = []
        for s in seeds or spec.run.seeds:
            r = warmcore.simulate(sc, seed=s, max_wall=spec.run.max_wall)
            per_seed.append([_finite(FIGURES[k](r)) for k in keys])
        out += list(np.mean(per_seed, axis=0))
    return out


def _finite(x) -> float:
    return float(x) if x is not None and math.isfinite(x) else 0.0


# -- the fit -------------------------------------------------------------------------------

@dataclass
class Calibration:
    """What a fit found. ``values``/``ci95`` per fitted path; ``figures``: per
    measured figure, measured and fitted value and the residual in sigmas."""

    spec: CalibrationSpec
    values: dict[str, float]
    ci95: dict[str, tuple[float, float]]
    correlation: dict[str, dict[str, float]]
    condition_number: float
    figures: list[dict]
    evaluations: int
    cost: float
    warnings: list[str] = field(default_factory=list)
    # advisory, not a disagreement: a measurement's simulated window too short for its
    # sampling governor to settle (governor_samples_note)
    notes: list[str] = field(default_factory=list)
    unit_optimum: list[float] = field(default_factory=list)
    unit_cov: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"values": self.values, "ci95": {k: list(v) for k, v in self.ci95.items()},
                "correlation": self.correlation, "condition_number": self.condition_number,
                "figures": self.figures, "evaluations": self.evaluations, "cost": self.cost,
                "warnings": self.warnings, "notes": self.notes, "method": METHOD,
                "spec_digest": self.spec.digest(), "warmcore_version": warmcore.__version__}

    def predict(self, scenario, strategy: str | None = None, sets: Iterable[str] = (),
                draws: int = 8, seeds: Iterable[int] | None = None, requests: int | None = None,
                max_wall: float | None = None) -> dict:
        """The scenario at the fitted values, and 95% intervals of each figure over
        parameter draws from the fit's covariance and the spec's seeds."""
        return predict(self.to_params(), scenario, strategy=strategy, sets=sets, draws=draws,
                       seeds=seeds, requests=requests or self.spec.run.requests,
                       max_wall=max_wall)

    def to_params(self) -> dict:
        """The PARAMS.toml document (calibration.params)."""
        from warmcore.calibration.params import params_document

        return params_document(self)


METHOD = ("weighted relative residuals; Sobol start + scipy.optimize.least_squares (trf); "
          "95% intervals from the Gauss-Newton covariance s^2 (J^T J)^-1, s^2 = max(1, "
          "RSS/(m-p))")


class Calibrator:
    """``Calibrator(spec).fit()``: see the module's docstring for the method."""

    def __init__(self, spec: CalibrationSpec | str | Path, workers: int | None = None,
                 scheduler: str | None = None, progress=None):
        self.spec = spec if isinstance(spec, CalibrationSpec) else CalibrationSpec.load(spec)
        self.workers = workers
        self.scheduler = scheduler
        self.progress = progress
        self.evaluations = 0
        self._cache: dict[tuple, np.ndarray] = {}
        # Each measurement's figures, read once (a perf file is parsed here, not on
        # every evaluation), in the order the simulated figures come back.
        self._figures = [m.all_figures(self.spec.base_dir) for m in self.spec.measurement]
        self._keys = [list(f) for f in self._figures]

    # residual machinery
    def _targets(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        labels, meas, weight = [], [], []
        for m, figures in zip(self.spec.measurement, self._figures, strict=True):
            for k, f in figures.items():
                labels.append(f"{m.name}.{k}")
                meas.append(f.value)
                weight.append(math.sqrt(f.coverage) / f.uncertainty)
        return labels, np.array(meas), np.array(weight)

    def _simulate_many(self, points: list[np.ndarray]) -> list[np.ndarray]:
        todo = [p for p in points if tuple(np.round(p, 12)) not in self._cache]
        if todo:
            spec_json = self.spec.model_dump_json()
            keys = self._keys
            if len(todo) == 1 or self.workers == 1:
                got = [simulate_figures(spec_json, keys, list(p)) for p in todo]
            else:
                from warmcore.executor import make_executor

                with make_executor(workers=self.workers, scheduler=self.scheduler) as ex:
                    got = list(ex.map(simulate_figures, [spec_json] * len(todo),
                                      [keys] * len(todo), [list(p) for p in todo]))
            for p, g in zip(todo, got, strict=True):
                self._cache[tuple(np.round(p, 12))] = np.array(g)
                self.evaluations += 1
                if self.progress:
                    self.progress(self.evaluations)
        return [self._cache[tuple(np.round(p, 12))] for p in points]

    def fit(self) -> Calibration:
        from scipy.optimize import least_squares
        from scipy.stats import qmc

        spec = self.spec
        labels, meas, weight = self._targets()
        p = len(spec.fit)
        resid = lambda sim: (sim - meas) / meas * weight   # noqa: E731
        n0 = min(spec.run.starts, max(1, spec.run.max_evaluations // 3))
        starts = qmc.Sobol(d=p, scramble=True, seed=0).random_base2(max(0, (n0 - 1).bit_length()))
        start_res = [resid(s) for s in self._simulate_many(list(starts))]
        best = int(np.argmin([float(r @ r) for r in start_res]))
        h = 0.05                                  # forward-difference step in the unit box

        def fun(u):
            return resid(self._simulate_many([np.asarray(u)])[0])

        def step(uj, size):
            """Forward in the unit box if it has room, else backward."""
            return min(size, 1 - uj) if uj + size <= 1 else -size

        def jac(u):
            u = np.asarray(u)
            steps = [step(u[j], h) for j in range(p)]
            base, *cols = self._simulate_many([u, *(u + np.eye(p)[j] * steps[j]
                                                    for j in range(p))])
            r0 = resid(base)
            J = np.column_stack([(resid(c) - r0) / s for c, s in zip(cols, steps, strict=True)])
            # A parameter whose figures move in whole steps (a governor's threshold
            # picks whole P-states) can be flat over one step: widen its step (to
            # H_MAX at most) until the figures move, a secant over the steps it spans.
            size = h
            while size < H_MAX and not np.all(np.any(J, axis=0)):
                size *= 2
                flat = [j for j in range(p) if not np.any(J[:, j])]
                wide = {j: step(u[j], size) for j in flat}
                got = self._simulate_many([u + np.eye(p)[j] * wide[j] for j in flat])
                for j, c in zip(flat, got, strict=True):
                    J[:, j] = (resid(c) - r0) / wide[j]
            return J

        budget = spec.run.max_evaluations - self.evaluations
        sol = least_squares(fun, starts[best], jac=jac, bounds=(0.0, 1.0), method="trf",
                            max_nfev=max(1, budget // (p + 1)), x_scale="jac")
        u = sol.x
        r = fun(u)
        J = jac(u)
        cal = self._report(u, r, J, labels, meas, weight)
        cal.notes = self._governor_notes(cal.values)
        return cal

    def _governor_notes(self, values: dict[str, float]) -> list[str]:
        """One note per measurement whose simulated window, at the fitted values, covers
        fewer than MIN_GOVERNOR_SAMPLES periods of its sampling governor: the fit then
        compared the measured clock with a simulated one still settling. One run at the
        spec's first seed, outside the fit's budget of evaluations."""
        spec, notes = self.spec, []
        for m in spec.measurement:
            sc = m.scenario_obj(spec.base_dir)
            sc = sc.with_(_typed(sc, values), requests=spec.run.requests)
            if not _samples_governor(sc):
                continue
            r = warmcore.simulate(sc, seed=spec.run.seeds[0], max_wall=spec.run.max_wall)
            note = governor_samples_note(sc, r.sim_seconds, lengthen="[run] requests")
            if note:
                notes.append(f"{m.name}: {note}")
        return notes

    def _report(self, u, r, J, labels, meas, weight) -> Calibration:
        spec = self.spec
        p, m = len(spec.fit), len(r)
        rss = float(r @ r)
        s2 = max(1.0, rss / (m - p)) if m > p else 1.0
        sv = np.linalg.svd(J, compute_uv=False)
        cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf
        cov = s2 * np.linalg.pinv(J.T @ J)
        sd = np.sqrt(np.clip(np.diag(cov), 0, None))
        ints = spec.int_paths()        # evaluated rounded, so reported rounded
        values = {k: round(v) if k in ints else v for k, v in to_values(spec.fit, u).items()}
        ci, warnings = {}, []
        for j, f in enumerate(spec.fit):
            lo_u, hi_u = u[j] - 1.96 * sd[j], u[j] + 1.96 * sd[j]
            lo = to_values([f], [max(lo_u, 0)])[f.path]
            hi = to_values([f], [min(hi_u, 1)])[f.path]
            ci[f.path] = (math.floor(lo), math.ceil(hi)) if f.path in ints else (lo, hi)
            if not np.isfinite(sd[j]) or sd[j] > 0.5 or not np.any(J[:, j]):
                warnings.append(f"{f.path}: the data cannot identify it (its interval spans "
                                "its bounds)")
        corr = {}
        for a, fa in enumerate(spec.fit):
            corr[fa.path] = {fb.path: (float(cov[a, b] / (sd[a] * sd[b]))
                                       if sd[a] > 0 and sd[b] > 0 else 0.0)
                             for b, fb in enumerate(spec.fit)}
        if not math.isfinite(cond) or cond > 1e6:
            warnings.append(f"ill-conditioned fit (condition number {cond:.3g}): some "
                            "parameters move together")
        fitted = meas + r * meas / weight
        figs = []
        for lab, mv, fv, rv in zip(labels, meas, fitted, r, strict=True):
            figs.append({"figure": lab, "measured": float(mv), "fitted": float(fv),
                         "residual_sigmas": float(rv)})
            if abs(rv) > 3:
                warnings.append(f"{lab}: measured {mv:.6g}, fitted {fv:.6g} ({rv:+.1f} "
                                "sigma): this figure disagrees with the others")
        return Calibration(spec=spec, values=values, ci95=ci, correlation=corr,
                           condition_number=cond, figures=figs, evaluations=self.evaluations,
                           cost=rss / 2, warnings=warnings, unit_optimum=[float(x) for x in u],
                           unit_cov=cov.tolist())


# -- prediction ------------------------------------------------------------------------------

def predict(params: dict, scenario, strategy: str | None = None, sets: Iterable[str] = (),
            draws: int = 8, seeds: Iterable[int] | None = None, requests: int = 3000,
            max_wall: float | None = None) -> dict:
    """``warmcore run``'s JSON of ``scenario`` with the fitted values of ``params`` (a
    PARAMS.toml document), plus ``interval95``: per figure, the 2.5-97.5 percentiles
    over ``draws`` parameter vectors drawn from the fit's covariance x the seeds."""
    from warmcore.calibration.params import check_against

    if isinstance(draws, bool) or not isinstance(draws, int) or not 0 <= draws <= MAX_DRAWS:
        raise ConfigError("--draws", f"from 0 to {MAX_DRAWS:,} (got {draws!r})")
    fit = [FitParam(**f) for f in params["fit"]]
    u0 = np.array(params["unit_optimum"])
    cov = np.array(params["unit_cov"])
    from warmcore.calibration.params import apply_params

    # the fitted values first, so that an override may rely on one (and still wins)
    sc = warmcore.Scenario.load(apply_params(warmcore.Scenario.load(scenario), params),
                                list(sets))
    if strategy:
        sc = sc.with_(strategy=strategy)
    sc = sc.with_(requests=requests)
    check_against(sc, params)           # every fitted path, bound and value in its range
    seeds = list(seeds or params.get("seeds") or [1, 2])
    if not all(isinstance(x, int) and 0 <= x < 2**63 for x in seeds):
        raise ConfigError("seeds", f"whole numbers from 0 (got {seeds!r})")
    centre = warmcore.simulate(sc.with_(_typed(sc, to_values(fit, u0))), seed=seeds[0],
                               max_wall=max_wall)
    rng = np.random.default_rng(0)
    us = rng.multivariate_normal(u0, cov, size=draws, check_valid="ignore") if draws else []
    rows = []
    for i, u in enumerate(us):
        s = seeds[i % len(seeds)]
        r = warmcore.simulate(sc.with_(_typed(sc, to_values(fit, np.clip(u, 0, 1)))), seed=s,
                              max_wall=max_wall)
        rows.append({k: _finite(f(r)) for k, f in FIGURES.items()})
    out = centre.to_dict()
    short = governor_samples_note(sc, out["sim_seconds"])
    if short:
        out["warnings"] = [*out["warnings"], short]
    out["fitted"] = to_values(fit, u0)
    if rows:
        out["interval95"] = {k: [float(np.percentile([x[k] for x in rows], 2.5)),
                                 float(np.percentile([x[k] for x in rows], 97.5))]
                             for k in FIGURES}
    return out


def _samples_governor(sc) -> float | None:
    """The sampling period (us) of ``sc``'s governor if it samples (ondemand,
    conservative: the ones with ``sampling_rate_us``), else None."""
    return {p.path: p.value for p in warmcore.parameters(sc)}.get(
        "machine.governor_params.sampling_rate_us")


def governor_samples_note(sc, sim_seconds: float, lengthen: str = "--requests") -> str | None:
    """A warning when a run of ``sc`` that measured ``sim_seconds`` covered fewer than
    MIN_GOVERNOR_SAMPLES periods of its sampling governor (ondemand, conservative: the
    ones with ``sampling_rate_us``), else None; ``lengthen`` names what sets the run's
    length where the warning is read."""
    rate = _samples_governor(sc)
    if not rate or not sim_seconds > 0.0:
        return None
    samples = sim_seconds / (rate * 1e-6)
    if samples >= MIN_GOVERNOR_SAMPLES:
        return None
    return (f"the run measured {samples:.0f} of its governor's {rate / 1000:g} ms samples "
            f"(fewer than {MIN_GOVERNOR_SAMPLES}): its clock (ghz) and the figures the "
            f"clock moves may not have settled; lengthen it ({lengthen})")


def spec_hashes(spec: CalibrationSpec) -> dict[str, str]:
    """sha256 of every data file the spec reads (perf files), for PARAMS.toml."""
    out = {}
    for m in spec.measurement:
        if m.perf:
            path = Path(m.perf) if Path(m.perf).is_absolute() else Path(spec.base_dir) / m.perf
            out[m.perf] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def dumps(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)
