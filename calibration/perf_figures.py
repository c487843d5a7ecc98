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
               "llc_stores_per_req": "LLC-stores",
               "llc_store_misses_per_req": "LLC-store-misses",
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


def perf_window_s(ps: PerfStat) -> float | None:
    """The time perf counted for: its own elapsed line, else task-clock over the CPUs
    utilized it printed (``perf stat -p`` prints that ratio over the time it was
    attached: tools/perf/util/stat-display.c, ``print_running``/``cpus utilized``)."""
    if ps.elapsed_s:
        return ps.elapsed_s
    said, clock_ms = ps.derived.get("cpus_utilized"), total(ps, "task-clock")
    return clock_ms * 1e-3 / said if said and clock_ms else None


def counted_requests(ps: PerfStat, requests: int, elapsed_s: float | None) -> float:
    """The requests perf's counters cover. ``requests`` in ``elapsed_s`` is what the load
    tool measured; perf attached for a shorter window saw the load's mean rate over
    that window (the Jetty 8 run: 0.867 CPUs of 27.75 s task-clock is a 32.0 s window
    of a 37.7 s load, 849,000 of its 1,000,000 requests). A window as long as the load
    or longer covers them all."""
    window = perf_window_s(ps)
    if not elapsed_s or not window or window >= elapsed_s:
        return float(requests)
    return requests * window / elapsed_s


def window_note(path: str | Path, requests: int | None, elapsed_s: float | None) -> str | None:
    """One line saying which requests a perf file's per-request figures divide by, when
    its window and the load's differ (None when they agree or nothing is known)."""
    try:
        ps = load_perf_stat(path)
    except PerfStatError:
        return None
    window = perf_window_s(ps)
    if not (requests and elapsed_s and window) or abs(window - elapsed_s) <= 1e-3 * elapsed_s:
        return None
    n = counted_requests(ps, requests, elapsed_s)
    if window < elapsed_s:
        return (f"{Path(path).name}: perf counted for {window:.2f} s of the load's "
                f"{elapsed_s:g} s: its per-request figures are over {n:,.0f} requests, the "
                "load's rate over that window")
    return (f"{Path(path).name}: perf counted for {window:.2f} s, longer than the load's "
            f"{elapsed_s:g} s: its CPUs utilized are taken over the load's time")


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
    window = perf_window_s(ps)
    if clock_ms and elapsed and window and window > elapsed:
        # perf also counted before and after the load: the load's CPUs are its clock
        # over the load's own time (the server idle outside it)
        out["cpus_utilized"] = fig(clock_ms * 1e-3 / elapsed, "task-clock")
    elif ps.derived.get("cpus_utilized") is not None:  # perf's own, over its window
        out["cpus_utilized"] = fig(ps.derived["cpus_utilized"], "task-clock")
    elif clock_ms and elapsed:
        out["cpus_utilized"] = fig(clock_ms * 1e-3 / elapsed, "task-clock")
    if requests:
        counted = counted_requests(ps, requests, elapsed)
        if clock_ms:
            out["cpu_us_per_req"] = fig(clock_ms * 1e3 / counted, "task-clock")
        for name, event in PER_REQUEST.items():
            n = total(ps, event)
            if n:
                out[name] = fig(n / counted, event)
        if elapsed:
            out["throughput_rps"] = Figure(value=requests / elapsed, uncertainty=0.01)
    return {k: v for k, v in out.items() if v is not None}
