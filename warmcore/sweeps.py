"""Batch parameter sweeps: a spec, its points, and a resumable, atomic run.

A spec (TOML, docs/sweeps.md)::

    scenario = "contended"                 # built-in name or TOML file
    set = ["run.requests=3000"]            # fixed --set style overrides
    design = "grid"                        # grid | random | lhs | sobol
    samples = 64                           # points of a sampled design
    replications = 2
    seed = 1
    metrics = ["throughput_rps", "latency_us.p99", "cpus_utilized"]
    [axes]
    "server.cpus" = [1, 2, 4, 8]           # a list of values
    "workload.rate_per_s" = {start = 1000.0, stop = 8000.0, num = 4, log = true}
    "work.task_kib" = {start = 0.0, stop = 8.0, step = 2.0}

Every axis path is a path of ``warmcore.parameters(scenario)`` and every value is
checked against its range before anything runs (one line naming the field).
A point's seeds derive from the spec's hash and the point's values only, so its
rows do not depend on the order or the worker that ran them. Results go to
``OUT/part-*.parquet``, one file per batch, written under a temporary name and
renamed into place: an interrupted sweep (Ctrl-C, SIGKILL, a lost worker) loses
at most the batches in flight, and running it again computes only what is missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from warmcore.simcore.config import (
    ConfigError,
    Scenario,
    builtin_names,
    check_output_dir,
    config_error,
    parse_toml,
    read_text,
    short_repr,
    write_atomic,
    write_atomic_with,
)

TASK_SECONDS = 0.5        # an automatic batch aims at this much work per task
MAX_BATCH = 1000
# A sweep's size: points (a grid's product of its axes' lengths, or a sampled design's
# samples) and runs (points x replications). The driver keeps the (point, replication)
# pairs already done in memory and reads their rows back when it resumes, so the runs
# are capped where that stays well under a GiB.
MAX_POINTS = 1_000_000
MAX_RUNS = 1_000_000
MAX_AXIS_VALUES = 1_000_000
DEFAULT_METRICS = ["throughput_rps", "latency_us.p50", "latency_us.p99", "latency_us.max",
                   "cpus_utilized", "ipc", "ghz", "llc_loads", "requests"]
SPEC_FILE = "spec.json"


class AxisRange(BaseModel):
    """``num`` values from ``start`` to ``stop`` (both included), evenly spaced, or
    geometrically with ``log``; a sampled design draws from [start, stop] instead."""

    model_config = ConfigDict(extra="forbid", strict=True)
    start: float = Field(allow_inf_nan=False)
    stop: float = Field(allow_inf_nan=False)
    num: int | None = Field(default=None, ge=1, le=MAX_AXIS_VALUES)
    step: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    log: bool = False

    @model_validator(mode="after")
    def _num_or_step(self):
        if self.step is not None and (self.num is not None or self.log):
            raise ConfigError("step", "give either num (linear or log) or step (linear)")
        if self.start > self.stop:       # (a step range would run only its start)
            raise ConfigError("start", f"{self.start:g} is above stop {self.stop:g}")
        if self.start == self.stop and (self.num or 2) > 1:
            raise ConfigError("stop", f"equals start ({self.start:g}): the range has one "
                              "value; write it as a list")
        if self.step is not None and (self.stop - self.start) / self.step > MAX_AXIS_VALUES:
            raise ConfigError("step", f"more than {MAX_AXIS_VALUES:,} values")
        return self

    def values(self) -> list[float]:
        if self.step is not None:
            n = int(math.floor((self.stop - self.start) / self.step + 1e-9)) + 1
            return [self.start + i * self.step for i in range(max(n, 0))] or [self.start]
        if self.num is None:
            return [self.start, self.stop]
        if self.log:
            return np.geomspace(self.start, self.stop, self.num).tolist()
        return np.linspace(self.start, self.stop, self.num).tolist()

    def at(self, u: float) -> float:
        if self.log:
            return float(math.exp(math.log(self.start) + u * (math.log(self.stop)
                                                               - math.log(self.start))))
        return float(self.start + u * (self.stop - self.start))


# An axis is a list of values or a range (a TOML table): told apart by its shape, so
# that an error speaks of the one the user wrote. The tags are written as pydantic's
# own type tags are ("list[int]"), which an error's path leaves out (config_error).
Axis = Annotated[Annotated[list[Any], Tag("axis[values]")]
                 | Annotated[AxisRange, Tag("axis[range]")],
                 Discriminator(lambda v: "axis[range]" if isinstance(v, dict | AxisRange)
                               else "axis[values]")]


def axis_values(axis) -> list:
    return axis.values() if isinstance(axis, AxisRange) else axis


def _value_key(v):
    """What makes two axis values the same setting: 2 and 2.0 are one number."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return ("number", float(v))
    return ("json", json.dumps(v, sort_keys=True, default=str))


def _no_repeats(path: str, values: list) -> None:
    """An axis names each value once: a repeated one would be one point (one point id,
    the same seeds) reported as several."""
    seen = set()
    for v in values:
        key = _value_key(v)
        if key in seen:
            raise ConfigError(path, f"{short_repr(v)} appears more than once")
        seen.add(key)


# The figures of a result a sweep can keep: every scalar of warmcore.result.Result
# (nested ones as latency_us.p99), and per process processes.NAME.FIGURE.
_NOT_FIGURES = {"processes", "cpu_utilization", "cpu_ghz", "warnings", "trace", "seeds",
                "ci95"}


def metric_paths() -> set[str]:
    from warmcore.result import Result

    out = set()
    for name, f in Result.model_fields.items():
        sub = f.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out |= {f"{name}.{k}" for k in sub.model_fields}
        elif name not in _NOT_FIGURES:
            out.add(name)
    return out


def is_metric(path: str) -> bool:
    from warmcore.result import ProcessCounters

    head, _, rest = path.partition(".")
    if head == "processes":
        proc, _, figure = rest.partition(".")
        return bool(proc) and figure in ProcessCounters.model_fields
    return path in metric_paths()


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    scenario: str
    set: list[str] = []
    axes: dict[str, Axis]
    design: Literal["grid", "random", "lhs", "sobol"] = "grid"
    samples: int | None = Field(default=None, ge=1, le=MAX_POINTS)
    replications: int = Field(default=1, ge=1, le=1000)
    seed: int = Field(default=1, ge=0)
    metrics: list[str] = DEFAULT_METRICS
    batch: int | None = Field(default=None, ge=1, le=10_000)   # None: about TASK_SECONDS
    max_wall: float | None = Field(
        default=None, gt=0, le=86_400, description="wall-clock budget of each run, "
        "seconds: a run past it stops and its row is marked partial (docs/formats.md)")

    @field_validator("axes")
    @classmethod
    def _non_empty(cls, axes):
        if not axes:
            raise ValueError("a sweep needs at least one axis")
        for path, ax in axes.items():
            if isinstance(ax, list) and not ax:
                raise ConfigError(path, "an empty axis")
            if isinstance(ax, list) and len(ax) > MAX_AXIS_VALUES:
                raise ConfigError(path, f"more than {MAX_AXIS_VALUES:,} values")
            if isinstance(ax, AxisRange) and ax.log and min(ax.start, ax.stop) <= 0:
                raise ConfigError(path, "a log range needs positive bounds")
            _no_repeats(path, axis_values(ax))
        return axes

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, metrics):
        if not metrics:             # rows of nothing but their errors: a slip, not a wish
            raise ConfigError("", "no figure named (leave metrics out for "
                              f"{', '.join(DEFAULT_METRICS)})")
        seen = set()
        for m in metrics:
            if not is_metric(m):
                raise ConfigError("", f"{short_repr(m)} is not a figure of a run's result "
                                  "(for example throughput_rps, latency_us.p99, "
                                  "cpus_utilized, processes.server.cycles; docs/formats.md)")
            if m in seen:
                raise ConfigError("", f"{short_repr(m)} is named twice")
            seen.add(m)
        return metrics

    @model_validator(mode="after")
    def _size(self):
        n = _n_points(self)
        if n > MAX_POINTS:
            raise ConfigError("axes" if self.design == "grid" else "samples",
                              f"{n:,} points; at most {MAX_POINTS:,} (docs/sweeps.md)")
        if n * self.replications > MAX_RUNS:
            raise ConfigError("replications", f"{n:,} points x {self.replications} "
                              f"replications = {n * self.replications:,} runs; at most "
                              f"{MAX_RUNS:,}")
        return self

    def digest(self) -> str:
        """The spec's hash: what decides its rows (not ``batch``, which decides only
        how they are sent to the workers)."""
        data = self.model_dump(mode="json", exclude={"batch"})
        if data.get("max_wall") is None:        # specs without one hash as they always did
            data.pop("max_wall", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# -- the spec ----------------------------------------------------------------------------

def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec; ConfigError (one line) if it is bad. A scenario
    file named relative to the spec (neither a built-in scenario nor a file from where
    the sweep runs) is read from the spec's folder, as calibration specs do."""
    # as a scenario file: UTF-8 (else the bad byte's offset), at most 1 MiB, TOML
    data = parse_toml(read_text(path, "sweep"), f"sweep: {path}")
    scenario = data.get("scenario") if isinstance(data, dict) else None
    if isinstance(scenario, str) and scenario not in builtin_names() \
            and not Path(scenario).exists():
        beside = Path(path).parent / scenario
        if beside.is_file():
            data["scenario"] = str(beside)
    return validate_spec(data)


def validate_spec(data: dict) -> SweepSpec:
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        raise config_error(e, prefix="sweep") from None
    check_axes(spec)
    return spec


def base_scenario(spec: SweepSpec) -> Scenario:
    return Scenario.load(spec.scenario, spec.set)


def check_axes(spec: SweepSpec) -> None:
    """Every axis is a parameter of the scenario and every value is in its range
    and gives a valid scenario."""
    from warmcore.api import check
    from warmcore.params import parameters

    base = base_scenario(spec)
    space = {p.path: p for p in parameters(base)}
    for path, axis in spec.axes.items():
        if path != "strategy.name" and path not in space:
            raise ConfigError(path, f"not a parameter of scenario {base.name!r} "
                              "(see warmcore.parameters)")
        if isinstance(axis, AxisRange) and space[path].type == "int":
            raise ConfigError(path, "an integer parameter takes a list of values, "
                              "not a range")
        # A range's values lie between its ends, and every check (the parameter's range,
        # the scenario's caps) is monotonic in one value: its ends stand for it.
        values = [axis.start, axis.stop] if isinstance(axis, AxisRange) else axis
        for v in values:
            if path != "strategy.name":
                try:
                    space[path].check(v)
                except ValueError as e:
                    raise ConfigError(path, f"{v!r}: {e}") from None
            check(point_scenario(base, {path: v}))   # in the scenario, machine, strategy


def point_scenario(base: Scenario, point: dict) -> Scenario:
    changes = {k: v for k, v in point.items() if k != "strategy.name"}
    return base.with_(changes, strategy=point.get("strategy.name"))


# -- the points --------------------------------------------------------------------------

def points(spec: SweepSpec) -> Iterator[dict]:
    """The design's points, lazily (a grid of 100,000 points is never held whole)."""
    paths = list(spec.axes)
    axes = [spec.axes[p] for p in paths]
    if spec.design == "grid":
        lists = [a.values() if isinstance(a, AxisRange) else a for a in axes]
        for combo in itertools.product(*lists):
            yield dict(zip(paths, combo, strict=True))
        return
    n = spec.samples or 16
    u = _unit_samples(spec.design, n, len(paths), spec.seed)
    for row in u:
        yield {p: (a.at(x) if isinstance(a, AxisRange) else a[min(int(x * len(a)), len(a) - 1)])
               for p, a, x in zip(paths, axes, row, strict=True)}


def _unit_samples(design: str, n: int, d: int, seed: int) -> np.ndarray:
    from scipy.stats import qmc

    if design == "lhs":
        return qmc.LatinHypercube(d=d, seed=seed).random(n)
    if design == "sobol":
        return qmc.Sobol(d=d, scramble=True, seed=seed).random(n)
    return np.random.default_rng(seed).random((n, d))


def point_id(point: dict) -> str:
    return hashlib.sha256(json.dumps(point, sort_keys=True).encode()).hexdigest()[:16]


def point_seed(spec_digest: str, pid: str, replication: int) -> int:
    """The seed of one replication of one point: from the spec and the point only."""
    ss = np.random.SeedSequence([int(spec_digest, 16), int(pid, 16), replication])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


# -- running -----------------------------------------------------------------------------

def run_batch(spec_json: str, batch: list[tuple[dict, int]]) -> tuple[list[dict], float]:
    """Rows of (point, replication) pairs and the seconds they took; runs in a worker
    process. A point that fails is a row with its error, never an exception."""
    import time

    import warmcore
    from warmcore.simcore.config import ConfigError as CfgError

    spec = SweepSpec.model_validate_json(spec_json)
    digest = spec.digest()
    base = base_scenario(spec)
    rows = []
    t0 = time.perf_counter()
    for point, rep in batch:
        pid = point_id(point)
        seed = point_seed(digest, pid, rep)
        row = {"point_id": pid, "replication": rep, "seed": seed,
               **{f"axis.{k}": v for k, v in point.items()}, "partial": False}
        try:
            r = warmcore.simulate(point_scenario(base, point), seed=seed,
                                  max_wall=spec.max_wall).to_dict()
            for m in spec.metrics:
                row[m] = _lookup(r, m)
            row["partial"] = bool(r.get("partial"))     # stopped by max_wall or a cap
            row["error"] = None
        except CfgError as e:
            row["error"] = f"{e.field}: {e.reason}"
        except Exception as e:  # noqa: BLE001  (a crashing point is recorded, not fatal)
            row["error"] = f"{type(e).__name__}: {e}"
        row["warmcore_version"] = warmcore.__version__
        row["spec_hash"] = digest
        rows.append(row)
        _count_run()
    return rows, time.perf_counter() - t0


def _count_run() -> None:
    """Tests count the simulations a sweep ran (WARMCORE_SWEEP_COUNT: a file)."""
    path = os.environ.get("WARMCORE_SWEEP_COUNT")
    if path:
        with open(path, "a") as f:
            f.write("1\n")


def _lookup(d: dict, dotted: str):
    node = d
    for k in dotted.split("."):
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return node


def sweep(spec: SweepSpec | str | Path, out: str | Path, workers: int | None = None,
          scheduler: str | None = None, overwrite: bool = False, retry_failed: bool = False,
          progress=None) -> dict:
    """Run the sweep into ``out`` (a directory of Parquet part files), skipping what
    is already there. Returns counts: points, rows written now, skipped, failed."""
    from warmcore.executor import capacity, check_scheduler, check_workers, make_executor

    spec = spec if isinstance(spec, SweepSpec) else load_spec(spec)
    check_axes(spec)
    check_workers(workers)
    if scheduler:
        check_scheduler(scheduler)
    out = check_output_dir(out, "--out")         # before Path(''), which is '.'
    done, failed = _prepare_output(spec, out, overwrite)
    if retry_failed and failed:
        _drop_rows(out, failed)
        done -= failed
    todo = ((p, rep) for p in points(spec) for rep in range(spec.replications)
            if (point_id(p), rep) not in done)
    total = _n_points(spec) * spec.replications - len(done)
    spec_json = spec.model_dump_json()
    counts = {"rows_written": 0, "rows_failed": 0}
    import warmcore.api  # noqa: F401  (loaded once here, forked workers start warm)

    with make_executor(workers, scheduler) as ex:
        batcher = Batcher(spec.batch, capacity(ex), total)

        def collect(finished) -> None:
            for f in finished:
                rows, seconds = f.result()
                batcher.observe(len(rows), seconds)
                _write_part(out, rows)
                counts["rows_written"] += len(rows)
                counts["rows_failed"] += sum(r["error"] is not None for r in rows)
                if progress:
                    progress(len(rows))

        in_flight = set()                 # at most two batches a worker: bounded memory
        with _ctrl_c_stops_submitting() as interrupted:
            while not interrupted() and (batch := batcher.take(todo)):
                in_flight.add(ex.submit(run_batch, spec_json, batch))
                if len(in_flight) >= 2 * batcher.slots:
                    batcher.slots = capacity(ex)          # a cluster's workers come and go
                    finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                    collect(finished)
            while in_flight:                  # the batches in flight finish and are written
                finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                collect(finished)
        if interrupted():
            raise KeyboardInterrupt
    return {**counts, "rows_skipped": len(done)}


@contextlib.contextmanager
def _ctrl_c_stops_submitting():
    """While the sweep submits and collects, a first Ctrl-C (SIGINT) only sets a flag:
    nothing more is submitted, the batches in flight finish and are written, then
    the sweep raises KeyboardInterrupt. A KeyboardInterrupt raised at an arbitrary
    point instead could leave the pool's internal lock held, and its shutdown
    waiting forever. A second Ctrl-C interrupts at once. Yields ``interrupted()``.
    Outside the main thread (signals go to it) nothing changes."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag.is_set
        return

    def first(_sig, _frame):
        flag.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    old = signal.signal(signal.SIGINT, first)
    try:
        yield flag.is_set
    finally:
        signal.signal(signal.SIGINT, old)


def _n_points(spec: SweepSpec) -> int:
    if spec.design != "grid":
        return spec.samples or 16
    return math.prod(len(a.values()) if isinstance(a, AxisRange) else len(a)
                     for a in spec.axes.values())


class Batcher:
    """How many runs go into the next task: the spec's ``batch`` if it sets one, or
    else about TASK_SECONDS of work from the measured seconds per run (a smoothed
    mean; single runs until the first batch reports), fewer near the end so the last
    tasks still spread over the ``slots`` workers."""

    def __init__(self, fixed: int | None, slots: int, total: int):
        self.fixed, self.slots, self.left = fixed, max(1, slots), total
        self.per_run: float | None = None

    def size(self) -> int:
        if self.fixed:
            return self.fixed
        if self.per_run is None:
            return 1
        n = int(TASK_SECONDS / max(self.per_run, 1e-6))
        return max(1, min(n, self.left // (2 * self.slots), MAX_BATCH))

    def take(self, todo: Iterator) -> list:
        chunk = list(itertools.islice(todo, self.size()))
        self.left -= len(chunk)
        return chunk

    def observe(self, runs: int, seconds: float) -> None:
        x = seconds / max(runs, 1)
        self.per_run = x if self.per_run is None else 0.7 * self.per_run + 0.3 * x


class SpecMarker(BaseModel):
    """``OUT/spec.json``: which spec the folder's rows belong to."""

    model_config = ConfigDict(extra="forbid", strict=True)
    spec_hash: str = Field(pattern=r"^[0-9a-f]{16}$")
    spec: dict


MAX_MARKER_BYTES = 16 << 20       # a spec of a 1 MiB file, as JSON
REUSE_HINT = "choose another --out, or --overwrite to replace what it holds"


def read_marker(out: Path, field: str = "--out") -> SpecMarker | None:
    """The folder's spec.json, None if it has none; ConfigError if it is damaged."""
    marker = out / SPEC_FILE
    if not marker.exists():
        return None
    text = read_text(marker, field, max_bytes=MAX_MARKER_BYTES)
    try:
        return SpecMarker.model_validate_json(text)
    except ValidationError as e:
        err = config_error(e, prefix=SPEC_FILE)       # the one translator (errors.py)
        where = err.field.removeprefix(SPEC_FILE).lstrip(".")
        reason = f"{where}: {err.reason}" if where else err.reason
        raise ConfigError(field, f"{marker}: damaged, not a spec.json warmcore wrote "
                          f"({reason})") from None


def _prepare_output(spec: SweepSpec, out: Path, overwrite: bool):
    """The output folder for this spec: (rows done, rows failed) as
    {(point_id, replication)}. A folder of another spec, a damaged spec.json, part
    files without a spec.json (another sweep's rows would be relabelled) and a
    damaged or foreign part file are refused with the reason, unless ``overwrite``
    (which removes the parts of a folder it cannot reuse)."""
    out = check_output_dir(out, "--out")
    digest = spec.digest()
    try:
        marker = read_marker(out)
        problem = _reuse_problem(out, marker, digest)
    except ConfigError as e:
        if not overwrite:
            raise ConfigError(e.field, f"{e.reason}; {REUSE_HINT}") from None
        problem = e.reason
    if problem:
        if not overwrite:
            raise ConfigError("--out", f"{problem}; {REUSE_HINT}")
        for part in out.glob("part-*.parquet"):
            part.unlink()
    write_atomic(out / SPEC_FILE, json.dumps({"spec_hash": digest,
                                              "spec": spec.model_dump(mode="json")}), "--out")
    done, failed = set(), set()
    df = read_results(out, columns=["point_id", "replication", "error"])
    for pid, rep, err in zip(df["point_id"], df["replication"], df["error"], strict=True):
        done.add((pid, int(rep)))
        if err is not None and err == err:
            failed.add((pid, int(rep)))
    return done, failed


def _reuse_problem(out: Path, marker: SpecMarker | None, digest: str) -> str | None:
    """Why ``out`` cannot take this spec's rows as it is (None: it can)."""
    parts = sorted(out.glob("part-*.parquet"))
    if marker is None:
        return f"{out} holds part files but no spec.json" if parts else None
    if marker.spec_hash != digest:
        return f"{out} holds a sweep of another spec ({marker.spec_hash})"
    read_results(out, columns=["point_id"])           # every part readable, none foreign
    return None


def _write_part(out: Path, rows: list[dict]) -> None:
    import pandas as pd

    name = hashlib.sha256(json.dumps([(r["point_id"], r["replication"]) for r in rows])
                          .encode()).hexdigest()[:16]
    df = pd.DataFrame(rows)
    write_atomic_with(out / f"part-{name}.parquet",
                      lambda tmp: df.to_parquet(tmp, index=False), "--out")


def _drop_rows(out: Path, keys: set) -> None:
    """Remove rows (point_id, replication) from the part files (for --retry-failed)."""
    for part in sorted(out.glob("part-*.parquet")):
        df = _read_part(part, None, "--out")
        keep = [(p, int(r)) not in keys for p, r in zip(df["point_id"], df["replication"],
                                                        strict=True)]
        if all(keep):
            continue
        write_atomic_with(part, lambda tmp, d=df[keep]: d.to_parquet(tmp, index=False),
                          "--out")


# What every part file of a sweep holds.
PART_COLUMNS = ("point_id", "replication", "error", "spec_hash")


def _read_part(part: Path, columns, field: str):
    """One part file's rows, checked: Parquet, with the bookkeeping columns."""
    import pandas as pd
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(part).names
        missing = [c for c in PART_COLUMNS if c not in names]
        if missing:
            raise ConfigError(field, f"{part}: not a part file of a warmcore sweep (no "
                              f"{', '.join(missing)} column)")
        want = None if columns is None else list(dict.fromkeys([*columns, "spec_hash"]))
        return pd.read_parquet(part, columns=want)
    except ConfigError:
        raise
    except (OSError, ValueError) as e:       # pyarrow's ArrowInvalid is a ValueError
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(field, f"{part}: a damaged part file ({first}); remove it and "
                          "run the sweep again to recompute its rows") from None


def read_results(out: str | Path, columns=None, field: str = "--out"):
    """Every row of a sweep's output directory as one DataFrame. Every part file must be
    a readable part of one sweep: the spec.json's if the folder has one (a part of
    another spec is refused, not merged in), else all parts of the same spec."""
    import pandas as pd

    out = Path(out)
    marker = read_marker(out, field)
    parts = sorted(out.glob("part-*.parquet"))
    if not parts:
        return pd.DataFrame(columns=columns or ["point_id", "replication", "error"])
    frames = []
    expect = marker.spec_hash if marker else None
    for part in parts:
        df = _read_part(part, columns, field)
        hashes = set(df["spec_hash"].dropna().unique().tolist())
        expect = expect or next(iter(hashes), None)
        if hashes - {expect}:
            raise ConfigError(field, f"{part}: rows of another sweep (spec "
                              f"{', '.join(sorted(hashes - {expect}))}, not {expect}); "
                              "remove it, or run each sweep in a folder of its own")
        frames.append(df if columns is None or "spec_hash" in columns
                      else df.drop(columns="spec_hash"))
    return pd.concat(frames, ignore_index=True)
