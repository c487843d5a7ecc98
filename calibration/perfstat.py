"""``perf stat`` output read into typed counters (issue 14, calibration inputs).

``parse_perf_stat(text)`` detects the format and reads every line of it:

* human output, old (perf 3.x, multiplexing as ``[28.67%]``) and current
  (``(40.13%)``), with ``( +- 0.68% )`` repeat variance, ``<not counted>`` /
  ``<not supported>``, ``msec task-clock`` / ``task-clock (msec)``, the
  ``Performance counter stats for '...'`` header and the ``seconds time
  elapsed`` / ``user`` / ``sys`` footer;
* ``-x SEP`` CSV (any one-character separator, a decimal comma when the
  separator is not a comma, ``# started on`` headers);
* ``-j`` JSON lines (metric values as strings or bare numbers);
* in each of them ``-I`` interval timestamps (a time series) and
  ``--per-core`` / ``--per-socket`` / ``-A`` / ``--per-thread`` columns.

Event names are canonicalised (``LLC-load-misses`` -> ``LLC-misses``,
``cpu-clock`` -> ``task-clock``, ...), ``:u``/``:k`` modifiers and a PMU
prefix (``cpu_core/cycles/``) are split off. A line that cannot be read is
kept in ``PerfStat.problems`` with its number; comment and hint lines are kept
in ``PerfStat.comments``; nothing is dropped without a record.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from warmcore.simcore.config import read_capped

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


# ----------------------------------------------------------------------------- numbers

def _human_num(text: str) -> float:
    return float(text.replace(",", ""))


def _local_num(text: str, comma: bool) -> float:
    """A CSV/JSON number; a comma is the decimal mark when the separator is not a comma."""
    text = text.strip()
    return float(text.replace(",", ".") if comma else text)


def _is_num(text: str, comma: bool = False) -> bool:
    try:
        return math.isfinite(_local_num(text, comma))
    except ValueError:
        return False


def _pct(x: float) -> float:
    """A percentage as a fraction, without binary noise (28.67 -> 0.2867)."""
    return round(x / 100, 10)


def _finite(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@lru_cache(maxsize=1024)
def _metric_kind(unit: str) -> str | None:
    return next((k for rx, k in _METRIC_KINDS if rx.match(unit)), None)


def _metric(value, unit: str, group: str = "") -> Metric:
    unit = " ".join(unit.split())
    return Metric(_finite(value), unit, _metric_kind(unit), group)


# ----------------------------------------------------------------------------- collecting

class _LineError(Exception):
    pass


@dataclass
class _Row:
    line: int
    event: str
    value: float | None
    status: str
    unit: str = ""
    coverage: float | None = None
    variance_pct: float | None = None
    time_s: float | None = None
    part: str = ""
    part_cpus: int | None = None
    runtime_ns: int | None = None
    metrics: list[Metric] = field(default_factory=list)


@dataclass
class _Sink:
    rows: list[_Row] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    comments: list[Comment] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    bracketed: bool = False
    decimal_comma: bool = False
    group: str = ""

    def attach(self, metric: Metric) -> None:
        """A metric on a line of its own belongs to the counter just read, if any."""
        if self.rows and not metric.group:
            self.rows[-1].metrics.append(metric)
        else:
            self.metrics.append(metric)


def _value_status(text: str, comma: bool = False, human: bool = False):
    t = text.strip()
    if t == "<not counted>":
        return None, NOT_COUNTED
    if t == "<not supported>":
        return None, NOT_SUPPORTED
    try:
        value = _human_num(t) if human else _local_num(t, comma)
    except ValueError:
        raise _LineError(f"counter value {short_text(t)} is not a number") from None
    return _count(value, t), COUNTED


def _count(value: float, text: str) -> float:
    """A counter's value: finite (a 400-digit count overflows a float) and not negative
    (perf counts and clocks never are), in every format alike."""
    if not math.isfinite(value):
        raise _LineError(f"counter value {short_text(text)} is not a finite number")
    if value < 0:
        raise _LineError(f"counter value {short_text(text)} is negative: a count never is")
    return value


def short_text(text: str, limit: int = 40) -> str:
    r = repr(text)
    return r if len(r) <= limit else r[:limit - 4] + "...'"


def _coverage_pct(pct: float) -> float:
    """perf's multiplexing percentage (time running / time enabled) as a fraction."""
    if not (math.isfinite(pct) and 0 <= pct <= 100):
        raise _LineError(f"multiplexing percentage {pct:g}% is not between 0 and 100")
    return _pct(pct)


def _finite_field(value: float, what: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise _LineError(f"{what} {value:g} is not a finite, non-negative number")
    return value


# ----------------------------------------------------------------------------- shared lines

_HEADER = re.compile(r"^Performance counter stats for (?P<what>[^']*)'(?P<target>.*)'"
                     r"(?:\s*\((?P<runs>\d+) runs\))?\s*:?$")
_NUM = r"\d[\d,]*(?:\.\d+)?"
_FOOTER = re.compile(rf"^(?P<v>{_NUM})(?:\s*\+-\s*(?P<sd>{_NUM}))?\s+seconds\s+"
                     r"(?P<what>time elapsed|user|sys)"
                     r"(?:\s*\(\s*\+-\s*(?P<pct>\d+(?:\.\d+)?)\s*%\s*\))?$")
_HINTS = re.compile(r"^(Some events weren't counted|echo [01] > /proc/sys/kernel/nmi_watchdog|"
                    r"perf stat |The events in group usually|Try reorganizing the group|"
                    r"Events disabled|Error:\s*$)")


def _header(s: str, meta: dict) -> bool:
    m = _HEADER.match(s)
    if not m:
        return False
    what, target = m["what"].strip(), m["target"]
    meta["target"] = f"{what} '{target}'".strip()
    if what == "process id":
        meta["pid"] = target
    elif target == "system wide":
        meta["system_wide"] = True
    elif target.startswith("CPU(s) "):
        meta["system_wide"], meta["cpus"] = True, target[len("CPU(s) "):]
    elif not what:
        meta["command"] = target
    if m["runs"]:
        meta["runs"] = int(m["runs"])
    return True


def _footer(s: str, meta: dict) -> bool:
    m = _FOOTER.match(s)
    if not m:
        return False
    key = {"time elapsed": "elapsed_s", "user": "user_s", "sys": "sys_s"}[m["what"]]
    value = _human_num(m["v"])
    if not math.isfinite(value):          # (a 400-digit time: left to be a problem)
        return False
    meta[key] = value
    if key == "elapsed_s" and m["pct"]:
        meta["elapsed_variance_pct"] = float(m["pct"])
    return True


def _scan(lines: Iterable[tuple[int, str]], sink: _Sink,
          parse_line: Callable[[int, str, _Sink], None]) -> _Sink:
    """Every line goes somewhere: a row, the header/footer, a comment, or a problem."""
    for no, line in lines:
        s = line.strip()
        if not s or _header(s, sink.meta) or _footer(s, sink.meta):
            continue
        if (s.startswith("#") and not line[0].isspace()) or _HINTS.match(s):
            sink.comments.append(Comment(no, line))
            continue
        try:
            parse_line(no, line, sink)
        except _LineError as e:
            sink.problems.append(Problem(no, line, str(e)))
    return sink


# ----------------------------------------------------------------------------- human

_AGGR = r"S\d+(?:-D\d+)?(?:-C\d+|-L\d+-ID\d+)?|N\d+"
_PREFIX = (rf"^\s*(?:(?P<ts>\d+\.\d+)\s+)?"
           rf"(?:(?:(?P<aggr>{_AGGR})\s+(?P<nr>\d+)|(?P<cpu>CPU\d+)|(?P<thr>[^\s\d<#][^\s]*-\d+))\s+)?")
_HUMAN = re.compile(_PREFIX + r"(?P<value>\d[\d,]*(?:\.\d+)?|<not counted>|<not supported>)\s+"
                    r"(?:(?P<unit>[A-Za-z%]{1,8})\s+(?=[^\s#(\[]))?"
                    r"(?P<event>[^\s#(\[]+)(?P<rest>.*)$")
_NOT_A_COUNT = re.compile(_PREFIX + r"(?P<value>[-+]?(?:nan|inf(?:inity)?)|-\d[\d,]*(?:\.\d+)?)"
                          r"\s+(?:[A-Za-z%]{1,8}\s+)?[A-Za-z_][^\s#(\[]*", re.I)
_HUMAN_METRIC = re.compile(_PREFIX + r"(?P<group>[A-Za-z][^#]*?)?\s*(?P<rest>#.*)$")
_COVERAGE_END = re.compile(r"\s*(?P<open>[\[(])\s*(?P<pct>\d+(?:\.\d+)?)\s*%\s*[\])]\s*$")
_VARIANCE_END = re.compile(r"\s*\(\s*\+-\s*(?P<pct>\d+(?:\.\d+)?)\s*%\s*\)\s*$")
_OLD_UNIT = re.compile(r"^\s*\((?P<unit>[A-Za-z]+)\)")
_METRIC_TEXT = re.compile(r"^#\s*(?P<v>-?\d[\d,]*(?:\.\d+)?|nan|-?inf)?\s*(?P<u>.*)$")


def _split_rest(rest: str, row: _Row, sink: _Sink) -> Metric | None:
    """What follows the event name: (msec), # metric, ( +- var% ), (cov%) or [cov%]."""
    m = _COVERAGE_END.search(rest)
    if m:
        row.coverage, rest = _coverage_pct(float(m["pct"])), rest[:m.start()]
        sink.bracketed |= m["open"] == "["
    m = _VARIANCE_END.search(rest)
    if m:
        row.variance_pct = _finite_field(float(m["pct"]), "variance")
        rest = rest[:m.start()]
    m = _OLD_UNIT.match(rest)
    if m:
        row.unit, rest = row.unit or m["unit"], rest[m.end():]
    rest = rest.strip()
    if not rest:
        return None
    m = _METRIC_TEXT.match(rest)
    if not m:
        raise _LineError(f"unexpected text after the event: {short_text(rest)}")
    if m["v"] is None:
        if m["u"].strip():
            raise _LineError(f"derived metric without a value: {short_text(rest)}")
        return None
    if "[" in m["u"] or m["u"].count("(") != m["u"].count(")"):
        raise _LineError(f"unbalanced bracket after the metric (truncated?): {short_text(rest)}")
    return _metric(m["v"].replace(",", ""), m["u"])


def _prefix(m: re.Match, row: _Row) -> None:
    row.time_s = _finite_field(float(m["ts"]), "interval time") if m["ts"] else None
    row.part = m["aggr"] or m["cpu"] or m["thr"] or ""
    row.part_cpus = int(m["nr"]) if m["nr"] else None


def _human_line(no: int, line: str, sink: _Sink) -> None:
    m = _HUMAN.match(line)
    if m:
        value, status = _value_status(m["value"], human=True)
        row = _Row(no, m["event"], value, status, unit=m["unit"] or "")
        _prefix(m, row)
        metric = _split_rest(m["rest"], row, sink)
        row.metrics += [metric] if metric else []
        sink.rows.append(row)
        return
    m = _NOT_A_COUNT.match(line)
    if m:           # "nan  cycles  # 0.5 GHz" is a counter with a bad value, not a metric
        raise _LineError(f"counter value {short_text(m['value'])} is not a finite, "
                         "non-negative number")
    m = _HUMAN_METRIC.match(line)
    if not m:
        raise _LineError("not a perf stat counter line")
    probe = _Row(no, "", None, COUNTED)
    metric = _split_rest(m["rest"], probe, sink)
    if metric is None:
        raise _LineError("not a perf stat counter line")
    sink.attach(Metric(metric.value, metric.unit, metric.kind, (m["group"] or "").strip()))


# ----------------------------------------------------------------------------- CSV

_AGGR_FIELD = re.compile(rf"^(?:{_AGGR}|CPU\d+|.+-\d+)$")
_EVENT_FIELD = re.compile(r"^[A-Za-z_][^\s]*$")


def _csv_prefix(pre: list[str], comma: bool):
    """(time_s, part, cpus) if the fields before the value are a timestamp and/or an id."""
    ts, part, cpus, i = None, "", None, 0
    pre = [f.strip() for f in pre]
    if i < len(pre) and ("." in pre[i] or "," in pre[i]) and _is_num(pre[i], comma):
        ts, i = _local_num(pre[i], comma), i + 1
    if i < len(pre) and _AGGR_FIELD.match(pre[i]):
        part, i = pre[i], i + 1
        if i < len(pre) and pre[i].isdigit() and not part.startswith("CPU"):
            cpus, i = int(pre[i]), i + 1
    return (ts, part, cpus) if i == len(pre) else None


def _value_like(text: str, comma: bool) -> bool:
    t = text.strip()
    return t in ("<not counted>", "<not supported>") or _is_num(t, comma)


def _csv_locate(fields: list[str], comma: bool):
    """Index of the value column and the prefix before it, or (None, None)."""
    for v in range(min(4, len(fields) - 2)):
        if not (_value_like(fields[v], comma) and _EVENT_FIELD.match(fields[v + 2].strip())):
            continue
        if _value_like(fields[v + 1], comma):
            continue                       # a unit is never a number
        prefix = _csv_prefix(fields[:v], comma)
        if prefix is not None:
            return v, prefix
    return None, None


def _csv_tail(rest: list[str], row: _Row, comma: bool) -> Metric | None:
    """[cgroup] [variance%] runtime pcnt [metric-value metric-unit], all optional."""
    rest = [f.strip() for f in rest]
    if rest and rest[0] and not rest[0].endswith("%") and not _is_num(rest[0], comma):
        rest = rest[1:]                    # a cgroup name (-G)
    if rest and rest[0].endswith("%") and _is_num(rest[0][:-1], comma):
        row.variance_pct = _finite_field(_local_num(rest[0][:-1], comma), "variance")
        rest = rest[1:]
    try:
        if rest and rest[0]:
            row.runtime_ns = int(_finite_field(_local_num(rest[0], comma), "run time"))
        if len(rest) > 1 and rest[1]:
            row.coverage = _coverage_pct(_local_num(rest[1], comma))
        metric = None
        if len(rest) > 2 and rest[2]:
            metric = _metric(_local_num(rest[2], comma), rest[3] if len(rest) > 3 else "")
    except ValueError:
        raise _LineError(f"runtime / percentage / metric columns are not numbers: {rest}") \
            from None
    if any(rest[4:]):
        raise _LineError(f"unexpected extra columns: {rest[4:]}")
    return metric


def _csv_metric_only(fields: list[str], comma: bool, sink: _Sink) -> bool:
    """A further metric of the counter above: prefix, the counter's columns left empty
    (perf writes at least four), metric value, metric unit."""
    if len(fields) < 3 or not _is_num(fields[-2], comma) or not fields[-1].strip() \
            or _value_like(fields[-1], comma):
        return False
    head = [f for f in fields[:-2] if f.strip()]
    if len(fields) - 2 - len(head) < 4 or fields[-3].strip() \
            or _csv_prefix(head, comma) is None:
        return False
    sink.attach(_metric(_local_num(fields[-2], comma), fields[-1]))
    return True


def _csv_parser(sep: str) -> Callable[[int, str, _Sink], None]:
    comma = sep != ","

    def parse(no: int, line: str, sink: _Sink) -> None:
        fields = line.split(sep)
        v, prefix = _csv_locate(fields, comma)
        if v is None:
            if _csv_metric_only(fields, comma, sink):
                return
            raise _LineError(f"no value{sep}unit{sep}event columns (separator {sep!r})")
        value, status = _value_status(fields[v], comma)
        if comma and "," in line:
            sink.decimal_comma = True
        row = _Row(no, fields[v + 2].strip(), value, status, unit=fields[v + 1].strip())
        row.time_s, row.part, row.part_cpus = prefix
        metric = _csv_tail(fields[v + 3:], row, comma)
        row.metrics += [metric] if metric else []
        sink.rows.append(row)
    return parse


# ----------------------------------------------------------------------------- JSON

_PART_KEYS = ("core", "socket", "die", "node", "cpu", "thread", "cache")
_JSON_META = {"interval", "aggregate-number", "cpu-count", "cgroup", *_PART_KEYS}


def _json_counter(no: int, obj: dict) -> _Row:
    event = obj["event"]
    if not isinstance(event, str) or not event.strip():      # perf writes a name, always
        raise _LineError(f"event {short_text(json.dumps(event))} is not an event name")
    raw = obj.get("counter-value")
    value, status = _value_status(str(raw)) if raw is not None else (None, NOT_COUNTED)
    row = _Row(no, event, value, status, unit=str(obj.get("unit") or ""))
    pcnt, var, runtime = (_finite(obj.get(k)) for k in ("pcnt-running", "variance",
                                                         "event-runtime"))
    row.coverage = _coverage_pct(pcnt) if pcnt is not None else None
    row.variance_pct = _finite_field(var, "variance") if var is not None else None
    row.runtime_ns = int(_finite_field(runtime, "run time")) if runtime is not None else None
    return row


def _json_metric(obj: dict, group: str) -> Metric | None:
    unit = str(obj.get("metric-unit") or "")
    if "metric-value" not in obj or unit in ("", "(null)"):
        return None
    return _metric(obj["metric-value"], unit, group)


def _json_object(no: int, obj: dict, sink: _Sink) -> None:
    if "event" in obj:
        row = _json_counter(no, obj)
        row.time_s = _finite(obj.get("interval"))
        row.part = str(next((obj[k] for k in _PART_KEYS if k in obj), ""))
        nr = obj.get("aggregate-number", obj.get("cpu-count"))
        row.part_cpus = int(nr) if isinstance(nr, int | float) and not isinstance(nr, bool) \
            and math.isfinite(nr) else None
        metric = _json_metric(obj, "")
        row.metrics += [metric] if metric else []
        sink.rows.append(row)
    elif "metricgroup" in obj:
        sink.group = str(obj["metricgroup"])
    elif "metric-value" in obj:
        metric = _json_metric(obj, sink.group)
        if metric:
            sink.attach(metric)
    else:
        extra = {k: v for k, v in obj.items() if k not in _JSON_META}
        if not extra or any(_finite(v) is None for v in extra.values()):
            raise _LineError("JSON object with neither an event nor metric values")
        sink.metrics += [_metric(v, k, "metric-only") for k, v in extra.items()]


def _json_line(no: int, line: str, sink: _Sink) -> None:
    decoder, s, pos = json.JSONDecoder(), line.strip(), 0
    while pos < len(s):
        try:
            obj, pos = decoder.raw_decode(s, pos)
        except json.JSONDecodeError as e:
            raise _LineError(f"invalid JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(obj, dict):
            raise _LineError("a JSON value that is not an object")
        _json_object(no, obj, sink)
        while pos < len(s) and s[pos].isspace():
            pos += 1


# ----------------------------------------------------------------------------- detection

_SEPARATORS = ",;\t|:!^~"
_SAMPLE_LINES = 400


def _numbered(text: str) -> list[tuple[int, str]]:
    text = text.lstrip("\ufeff").replace("\u00a0", " ").replace("\u202f", " ")
    return [(i, line.rstrip("\r\n")) for i, line in enumerate(text.splitlines(), 1)]


def _candidates(lines: list[tuple[int, str]]):
    """(format, separator, line parser) for every format the text might be in."""
    first = next((s for _, s in lines if s.strip() and not s.lstrip().startswith("#")), "")
    if first.lstrip().startswith("{"):
        return [("json", None, _json_line)]
    out = [("human", None, _human_line)]
    return out + [("csv", sep, _csv_parser(sep)) for sep in _SEPARATORS if sep in first]


def _detect(lines: list[tuple[int, str]]):
    """The candidate that reads the most counters from the first lines (fewest problems)."""
    sample = [x for x in lines if x[1].strip()][:_SAMPLE_LINES]
    best, best_score = None, None
    for cand in _candidates(lines):
        sink = _scan(sample, _Sink(), cand[2])
        score = (len(sink.rows), -len(sink.problems))
        if best_score is None or score > best_score:
            best, best_score = cand, score
    return best


# ----------------------------------------------------------------------------- assembly

def _default_unit(name: str) -> str:
    return "msec" if name == "task-clock" else ""


def _coverage(rows: list[_Row]) -> float:
    counted = [r for r in rows if r.status == COUNTED]
    if not counted:
        return 0.0
    return sum(1.0 if r.coverage is None else r.coverage for r in counted) / len(counted)


def _total(rows: list[_Row]) -> tuple[float | None, str]:
    counted = [r.value for r in rows if r.status == COUNTED]
    return (sum(counted), COUNTED) if counted else (None, rows[0].status)


def _parts(rows: list[_Row]) -> tuple[Part, ...]:
    by_part: dict[str, list[_Row]] = {}
    for r in rows:
        by_part.setdefault(r.part, []).append(r)
    out = []
    for pid, rs in by_part.items():
        value, status = _total(rs)
        out.append(Part(pid, rs[0].part_cpus, value, status, _coverage(rs),
                        rs[0].variance_pct if len(rs) == 1 else None))
    return tuple(out)


def _counter(rows: list[_Row]) -> Counter:
    first = rows[0]
    pmu, name, mods = split_event(first.event)
    value, status = _total(rows)
    single = len(rows) == 1
    return Counter(
        name=name, raw_name=first.event, value=value,
        unit=first.unit or _default_unit(name), status=status, coverage=_coverage(rows),
        line=first.line, variance_pct=first.variance_pct if single else None,
        modifiers=mods, pmu=pmu, runtime_ns=first.runtime_ns if single else None,
        metrics=tuple(first.metrics) if single else (),
        parts=_parts(rows) if any(r.part for r in rows) else ())


def _group(rows: list[_Row], problems: list[Problem]) -> dict[str, list[_Row]]:
    """Rows by counter key; a second reading of the same slot is a problem, not a sum."""
    groups: dict[str, list[_Row]] = {}
    seen: dict[tuple, _Row] = {}
    for r in rows:
        key = counter_key(*split_event(r.event))
        slot = (key, r.time_s, r.part)
        if slot in seen:
            problems.append(Problem(r.line, r.event, f"{short_text(r.event)} repeats the "
                                    f"counter read at line {seen[slot].line} ({key}); kept "
                                    "the first"))
            continue
        seen[slot] = r
        groups.setdefault(key, []).append(r)
    return groups


def _sample(key: str, r: _Row) -> Sample:
    unit = r.unit or _default_unit(split_event(r.event)[1])
    coverage = 0.0 if r.status != COUNTED else 1.0 if r.coverage is None else r.coverage
    return Sample(r.time_s, key, r.value, unit, r.status, coverage, r.part, tuple(r.metrics))


def _assemble(sink: _Sink, fmt: str, sep: str | None, source: str) -> PerfStat:
    groups = _group(sink.rows, sink.problems)
    samples = tuple(_sample(k, r) for k, rs in groups.items() for r in rs
                    if r.time_s is not None)
    if fmt == "human" and sink.bracketed:
        fmt = "human-old"
    return PerfStat(
        counters={k: _counter(rs) for k, rs in groups.items()}, format=fmt, source=source,
        separator=sep, decimal_comma=sink.decimal_comma,
        intervals=tuple(sorted(samples, key=lambda s: s.time_s)),
        metrics=tuple(sink.metrics),
        problems=tuple(sorted(sink.problems, key=lambda p: p.line)),
        comments=tuple(sink.comments), **sink.meta)


# ----------------------------------------------------------------------------- public

def parse_perf_stat(text: str, *, source: str = "") -> PerfStat:
    """Read perf stat output in any of its formats (see the module docstring)."""
    lines = _numbered(text)
    fmt, sep, parse_line = _detect(lines)
    return _assemble(_scan(lines, _Sink(), parse_line), fmt, sep, source)


def _decode(data: bytes, path: str) -> str:
    nul = data.find(b"\x00")
    if nul >= 0:
        raise PerfStatError(path, data.count(b"\n", 0, nul) + 1,
                            f"binary file, not perf stat text (NUL byte at byte offset {nul})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PerfStatError(path, data.count(b"\n", 0, e.start) + 1,
                            f"not UTF-8 text (byte 0x{data[e.start]:02x} at byte offset "
                            f"{e.start})") from None


def load_perf_stat(path: str | Path, *, max_bytes: int = MAX_BYTES) -> PerfStat:
    """Read a perf stat output file; PerfStatError (one line) when it cannot be read."""
    p, name = Path(path), str(path)
    try:
        if p.is_dir():
            raise PerfStatError(name, None, "is a directory, not a perf stat file")
        with p.open("rb") as f:
            data = read_capped(f, max_bytes)
    except FileNotFoundError:
        raise PerfStatError(name, None, "no such file") from None
    except OSError as e:
        raise PerfStatError(name, None, f"cannot read: {e.strerror or e}") from None
    if data is None:
        raise PerfStatError(name, None, f"larger than the {max_bytes // (1024 * 1024)} MB "
                            "limit for perf stat files")
    return parse_perf_stat(_decode(data, name), source=name)
