"""The figures a calibration fits, read from a perf stat file: totals over the run
turned into per-request and per-second figures, each weighted by the multiplexing
coverage of the counters it needs (calibration.fit.Figure)."""

from __future__ import annotations

from pathlib import Path

from warmcore.calibration.fit import Figure
from warmcore.calibration.perfstat import PerfStat, PerfStatError, load_perf_stat
from warmcore.simcore.config import ConfigError

# figure -> the counter it divides by the request count
PER_REQUEST = {"instructions_per_req": "instructions", "cycles_per_req": "cycles",
               "llc_loads_per_req": "LLC-loads", "llc_misses_per_req": "LLC-misses",
               "l1d_loads_per_req": "L1-dcache-loads",
               "l1d_misses_per_req": "L1-dcache-misses",
               "switches_per_req": "context-switches",
               "migrations_per_req": "cpu-migrations"}
# a measured count is an estimate: perf scales a multiplexed count by time enabled /
# time running; its relative error is taken as 2% at full coverage (run-to-run
# variation of counts on an idle-free machine) growing as 1/sqrt(coverage).
BASE_UNCERTAINTY = 0.02


def _rows(ps: PerfStat, event: str):
    """The event's counters over every PMU (hybrid CPUs) without modifiers, or the
    modified ones if that is all there is (user plus kernel is the whole)."""
    rows = [c for c in ps.find(event) if c.value is not None]
    plain = [c for c in rows if not c.modifiers]
    return plain or rows


def total(ps: PerfStat, event: str) -> float | None:
    rows = _rows(ps, event)
    return sum(c.value for c in rows) if rows else None


def coverage(ps: PerfStat, event: str) -> float:
    rows = _rows(ps, event)
    return min(c.coverage for c in rows) if rows else 0.0


def figures_from_perf(path: str | Path, requests: int | None = None,
                      elapsed_s: float | None = None) -> dict[str, Figure]:
    try:
        ps = load_perf_stat(path)
    except PerfStatError as e:
        raise ConfigError("perf", str(e)) from None
    if not ps.counters:
        first = f":{ps.problems[0].line}: {ps.problems[0].reason};" if ps.problems else ":"
        raise ConfigError("perf", f"{path}{first} no counters read ({len(ps.problems)} "
                          "lines not understood)")
    out: dict[str, Figure] = {}

    def fig(value, *events):
        cov = min(coverage(ps, e) for e in events)
        if value is not None and value > 0 and cov > 0:
            return Figure(value=float(value), uncertainty=BASE_UNCERTAINTY, coverage=cov)
        return None

    ins, cyc, clock_ms = total(ps, "instructions"), total(ps, "cycles"), total(ps, "task-clock")
    if ins and cyc:
        out["ipc"] = fig(ins / cyc, "instructions", "cycles")
    if cyc and clock_ms:
        out["ghz"] = fig(cyc / (clock_ms * 1e-3) / 1e9, "cycles", "task-clock")
    elapsed = elapsed_s or ps.elapsed_s
    said = ps.derived.get("cpus_utilized")
    if said is not None:            # perf's own figure, over the time it was attached
        out["cpus_utilized"] = fig(said, "task-clock")
    elif clock_ms and elapsed:
        out["cpus_utilized"] = fig(clock_ms * 1e-3 / elapsed, "task-clock")
    if requests:
        if clock_ms:
            out["cpu_us_per_req"] = fig(clock_ms * 1e3 / requests, "task-clock")
        for name, event in PER_REQUEST.items():
            n = total(ps, event)
            if n:
                out[name] = fig(n / requests, event)
        if elapsed:
            out["throughput_rps"] = Figure(value=requests / elapsed, uncertainty=0.01)
    return {k: v for k, v in out.items() if v is not None}
