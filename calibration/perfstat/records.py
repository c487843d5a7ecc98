"""perf stat's figures as warmcore reads them: the typed records a parse gives
(PerfStat, Counter, Sample, Metric, Problem...) and event names canonicalised."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from functools import lru_cache


MAX_BYTES = 50 * 1024 * 1024
COUNTED, NOT_COUNTED, NOT_SUPPORTED = "counted", "not counted", "not supported"

# Generic perf event names, spelled as perf prints them; keys are lower case.
_KNOWN = {n.lower(): n for n in (
    "cycles", "instructions", "cache-references", "cache-misses", "branches",
    "branch-misses", "bus-cycles", "ref-cycles", "stalled-cycles-frontend",
    "stalled-cycles-backend", "task-clock", "page-faults", "minor-faults", "major-faults",
    "context-switches", "cpu-migrations", "alignment-faults", "emulation-faults",
    "L1-dcache-loads", "L1-dcache-misses", "L1-dcache-stores", "L1-icache-loads",
    "L1-icache-misses", "LLC-loads", "LLC-misses", "LLC-stores", "LLC-store-misses",
    "dTLB-loads", "dTLB-load-misses", "iTLB-loads", "iTLB-load-misses", "branch-loads",
    "branch-load-misses", "slots", "duration_time", "user_time", "system_time")}
# Other spellings of the same counter -> the canonical name.
ALIASES = {
    "llc-load-misses": "LLC-misses", "l1-dcache-load-misses": "L1-dcache-misses",
    "l1-icache-load-misses": "L1-icache-misses", "cpu-clock": "task-clock",
    "cpu-cycles": "cycles", "branch-instructions": "branches", "cs": "context-switches",
    "migrations": "cpu-migrations", "faults": "page-faults",
    "idle-cycles-frontend": "stalled-cycles-frontend",
    "idle-cycles-backend": "stalled-cycles-backend",
}
# Derived-metric units perf prints after '#', by the name they are known by here.
_METRIC_KINDS = ((re.compile(r"^insns? per cycle$"), "ipc"), (re.compile(r"^GHz$"), "ghz"),
                 (re.compile(r"^CPUs utilized$"), "cpus_utilized"))


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class Metric:
    """A value perf derived (after ``#``), not a raw count: kept, but apart."""
    value: float | None
    unit: str                      # "insn per cycle", "GHz", "% of all L1-dcache hits", ...
    kind: str | None = None        # "ipc", "ghz", "cpus_utilized" or None
    group: str = ""                # a metric group heading (TopdownL1 ...), if any


@dataclass(frozen=True)
class Part:
    """One aggregation unit's share of a counter (--per-core, --per-socket, -A, ...)."""
    id: str                        # "S0-D0-C1", "S0", "CPU3", "java-1234"
    cpus: int | None               # CPUs aggregated into it, when perf says
    value: float | None
    status: str
    coverage: float
    variance_pct: float | None = None


@dataclass(frozen=True)
class Counter:
    name: str                      # canonical event name ("LLC-misses")
    raw_name: str                  # as written ("cpu_core/LLC-load-misses/u")
    value: float | None            # None when not counted / not supported
    unit: str                      # "msec", "" for plain counts
    status: str                    # counted | not counted | not supported
    coverage: float                # share of the time the counter ran (multiplexing); 1.0 = all
    line: int                      # first line it was read from
    variance_pct: float | None = None   # repeat-mode relative stddev (-r), percent
    modifiers: str = ""            # "u", "k", "uk", ...
    pmu: str = ""                  # "cpu_core", "cpu_atom", "power", ...
    runtime_ns: int | None = None
    metrics: tuple[Metric, ...] = ()
    parts: tuple[Part, ...] = ()


@dataclass(frozen=True)
class Sample:
    """One reading of interval mode (-I): counts over the interval ending at time_s."""
    time_s: float
    counter: str                   # key into PerfStat.counters
    value: float | None
    unit: str
    status: str
    coverage: float
    part: str = ""
    metrics: tuple[Metric, ...] = ()


@dataclass(frozen=True)
class Problem:
    line: int
    text: str
    reason: str


@dataclass(frozen=True)
class Comment:
    line: int
    text: str


@dataclass(frozen=True)
class PerfStat:
    counters: dict[str, Counter]
    format: str                    # human-old | human | csv | json
    source: str = ""
    separator: str | None = None   # CSV only
    decimal_comma: bool = False
    command: str | None = None
    target: str | None = None      # what the header names: "process id 'jetty-8'", ...
    pid: str | None = None
    system_wide: bool = False
    cpus: str | None = None
    runs: int | None = None
    elapsed_s: float | None = None
    elapsed_variance_pct: float | None = None
    user_s: float | None = None
    sys_s: float | None = None
    intervals: tuple[Sample, ...] = ()
    metrics: tuple[Metric, ...] = ()     # metrics not attached to a counter
    problems: tuple[Problem, ...] = ()
    comments: tuple[Comment, ...] = ()

    @property
    def derived(self) -> dict[str, float]:
        """The first IPC, GHz and CPUs-utilized metric perf printed, by kind."""
        out: dict[str, float] = {}
        for c in self.counters.values():
            for m in c.metrics:
                if m.kind and m.value is not None:
                    out.setdefault(m.kind, m.value)
        return out

    def find(self, name: str) -> list[Counter]:
        """Every counter of this event whatever its PMU or modifiers (aliases accepted)."""
        want = canonical_event(name)
        return [c for c in self.counters.values() if c.name == want]

    def intervals_frame(self):
        """Interval mode as a pandas DataFrame, one row per reading."""
        import pandas as pd
        cols = ["time_s", "counter", "value", "unit", "status", "coverage", "part"]
        return pd.DataFrame([[getattr(s, c) for c in cols] for s in self.intervals],
                            columns=cols)

    def to_dict(self) -> dict:
        """Everything as plain data, non-finite numbers as None (valid JSON)."""
        d = asdict(self)
        d["derived"] = self.derived
        return _json_safe(d)


def _json_safe(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


class PerfStatError(Exception):
    """A file that cannot be read as perf stat output; str() is ``PATH[:LINE]: reason``."""

    def __init__(self, path: str, line: int | None, reason: str):
        self.path, self.line, self.reason = path, line, reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


# ----------------------------------------------------------------------------- names

_PMU_EVENT = re.compile(r"^(?P<pmu>[A-Za-z_][\w.-]*)/(?P<ev>[^/]+)/(?P<mods>[A-Za-z]*)$")
_MODIFIED = re.compile(r"^(?P<ev>.+?):(?P<mods>[ukhGHIpPSDWeb]+)$")


def canonical_event(name: str) -> str:
    """The canonical spelling of a bare event name (no PMU, no modifiers)."""
    low = name.lower()
    return ALIASES.get(low) or _KNOWN.get(low) or name


@lru_cache(maxsize=4096)
def split_event(raw: str) -> tuple[str, str, str]:
    """``cpu_core/LLC-load-misses/u`` -> ("cpu_core", "LLC-misses", "u")."""
    pmu, mods, ev = "", "", raw.strip()
    m = _PMU_EVENT.match(ev)
    if m:
        pmu, ev, mods = m["pmu"], m["ev"], m["mods"]
    m = _MODIFIED.match(ev)
    if m:
        ev, mods = m["ev"], m["mods"] + mods
    return pmu, canonical_event(ev), mods


def counter_key(pmu: str, name: str, mods: str) -> str:
    """The key of a counter in PerfStat.counters: ``[pmu/]name[:modifiers]``."""
    key = f"{pmu}/{name}" if pmu else name
    return f"{key}:{mods}" if mods else key


