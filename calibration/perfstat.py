"""Reading ``perf stat`` output in every format docs/MODEL.md lists.

    ps = load_perf_stat("run.perf.txt")     # or parse_perf_stat(text)
    ps.total("instructions")                 # summed over cores, intervals, hybrid PMUs
    ps.counters                              # every row read, with its line number
    ps.problems                              # (line, text, reason): nothing is dropped
    ps.series()                              # -I interval mode: a time x event DataFrame

Formats: the old human format (multiplexing in brackets ``[28.41%]``), the
current one (``(40.13%)``), repeat variance ``( +- 0.68% )``, ``<not counted>``
and ``<not supported>`` (kept, value None), ``msec task-clock`` / ``cpu-clock``,
``:u``/``:k`` modifiers, hybrid ``cpu_core/cycles/`` names, ``-x`` CSV with any
one-character separator (``-I``, ``--per-core``/``--per-socket`` columns, ``#
started on`` headers, decimal commas), ``-j`` JSON lines (string or numeric
metric values) and ``-I`` intervals. Aliases are normalised: ``cpu-clock`` is
``task-clock``, ``LLC-load-misses`` is ``LLC-misses``, ``L1-dcache-load-misses``
is ``L1-dcache-misses`` (the raw name is kept on each counter).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from warmcore.simcore.config import ConfigError, read_text

MAX_PERF_BYTES = 64 << 20

ALIASES = {"cpu-clock": "task-clock", "LLC-load-misses": "LLC-misses",
           "L1-dcache-load-misses": "L1-dcache-misses", "LLC-load": "LLC-loads",
           "cs": "context-switches", "migrations": "cpu-migrations",
           "cpu-cycles": "cycles", "faults": "page-faults"}
NOT_COUNTED, NOT_SUPPORTED = "<not counted>", "<not supported>"
_NUM = r"[0-9][0-9,.]*"
_AGG = re.compile(r"^(S\d+(-D\d+)?(-C\d+)?|CPU\d+|N\d+|C\d+)$")
_HUMAN = re.compile(
    r"^\s*(?:(?P<ts>\d+\.\d+)\s+)?"
    r"(?:(?P<agg>S\d+(?:-D\d+)?(?:-C\d+)?|CPU\d+|N\d+)\s+(?:(?P<nproc>\d+)\s+)?)?"
    rf"(?P<value>{_NUM}|<not counted>|<not supported>)\s+"
    r"(?:(?P<unit>msec|Joules|ns|us|ms|MiB|GiB|KiB|W|%)\s+)?"
    r"(?P<event>[A-Za-z_][\w.:/=,@-]*)"
    r"(?P<rest>.*)$")
_COVER = re.compile(r"[\[(]\s*(\d+(?:\.\d+)?)%\s*[\])]\s*$")
_VARIANCE = re.compile(r"\(\s*\+-\s*(\d+(?:\.\d+)?)%\s*\)")
_METRIC = re.compile(r"#\s*(?P<v>-?[0-9][0-9,.]*%?)\s+(?P<u>[^\[(#]*?)\s*(?:[\[(]|$)")
_FOOTER = re.compile(r"^\s*(?P<v>[0-9][0-9,.]*)\s+(?:\+-\s*[0-9.,]+\s+)?seconds\s+"
                     r"(?P<what>time elapsed|user|sys)")
_HEADER = re.compile(r"Performance counter stats for (?P<what>.*?):?\s*"
                     r"(\((?P<runs>\d+) runs\))?:?\s*$")


@dataclass
class Counter:
    """One row: an event's value on one line of the file."""

    event: str                   # canonical name, with its modifiers (cycles:u)
    raw: str                     # as written (cpu_core/LLC-load-misses/u)
    value: float | None          # None: <not counted> or <not supported>
    unit: str = ""
    status: str = "counted"      # or "not counted", "not supported"
    coverage: float = 1.0        # fraction of the run the event was counted (multiplexing)
    variance_pct: float | None = None
    pmu: str | None = None       # cpu_core, cpu_atom, ... (hybrid CPUs)
    modifiers: str = ""
    metric: tuple[float, str] | None = None     # perf's own derived figure (IPC, GHz...)
    interval_s: float | None = None
    aggregate: str | None = None                # S0-D0-C1, CPU3 (--per-core, -A)
    line: int = 0


@dataclass
class PerfStat:
    counters: list[Counter] = field(default_factory=list)
    elapsed_s: float | None = None
    user_s: float | None = None
    sys_s: float | None = None
    command: str | None = None
    runs: int | None = None
    format: str = "human"
    problems: list[tuple[int, str, str]] = field(default_factory=list)
    source: str = ""

    def events(self) -> list[str]:
        return list(dict.fromkeys(c.event for c in self.counters))

    def total(self, event: str) -> float | None:
        """The event summed over cores, sockets, hybrid PMUs and intervals; None if it
        was never counted. ``event`` may be an alias."""
        event = canonical(event)[0]
        vals = [c.value for c in self.counters if c.event == event and c.value is not None]
        return math.fsum(vals) if vals else None

    def coverage(self, event: str) -> float:
        """The smallest multiplexing coverage among the event's rows (1: always counted)."""
        event = canonical(event)[0]
        covs = [c.coverage for c in self.counters if c.event == event and c.value is not None]
        return min(covs) if covs else 0.0

    def series(self):
        """Interval mode: a DataFrame indexed by interval end (s), one column per event."""
        import pandas as pd

        rows = [(c.interval_s, c.event, c.value) for c in self.counters
                if c.interval_s is not None]
        if not rows:
            return pd.DataFrame()
        df = pd.DataFrame(rows, columns=["interval_s", "event", "value"])
        return df.pivot_table(index="interval_s", columns="event", values="value",
                              aggfunc="sum")

    def to_dict(self) -> dict:
        return {"source": self.source, "format": self.format, "command": self.command,
                "runs": self.runs, "elapsed_s": self.elapsed_s, "user_s": self.user_s,
                "sys_s": self.sys_s,
                "totals": {e: self.total(e) for e in self.events()},
                "counters": [c.__dict__ for c in self.counters],
                "problems": [{"line": n, "text": t, "reason": r} for n, t, r in self.problems]}


def canonical(raw: str) -> tuple[str, str | None, str]:
    """(canonical event with modifiers, pmu, modifiers) of an event name as written."""
    pmu = None
    name, mods = raw, ""
    m = re.match(r"^([\w.-]+)/([^/]+)/(\w*)$", raw)
    if m:
        pmu, name, mods = m.group(1), m.group(2), m.group(3)
        if pmu not in ("cpu", "cpu_core", "cpu_atom", "armv8_pmuv3"):   # power/energy-pkg/
            return raw, None, ""
    elif ":" in raw:
        name, mods = raw.rsplit(":", 1)
        if not re.fullmatch(r"[ukhGHpPSD]+", mods):
            name, mods = raw, ""
    name = ALIASES.get(name, name)
    return (f"{name}:{mods}" if mods else name), pmu, mods


def load_perf_stat(path: str | Path) -> PerfStat:
    """Parse a file (UTF-8, at most 64 MiB); ConfigError naming the file otherwise."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError("perf", f"{path}: a directory, not a perf stat file")
    text = read_text(p, "perf", MAX_PERF_BYTES)
    return parse_perf_stat(text, source=str(path))


def parse_perf_stat(text: str, source: str = "") -> PerfStat:
    ps = PerfStat(source=source)
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), "")
    if first.lstrip().startswith("{"):
        ps.format = "json"
        reader = _json_line
    else:
        sep = _csv_separator(first)
        if sep is not None:
            ps.format = "csv"
            reader = lambda n, ln, ps: _csv_line(n, ln, ps, sep)  # noqa: E731
        else:
            reader = _human_line
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        reader(n, line, ps)
    if ps.counters and all(c.interval_s is None for c in ps.counters) is False:
        ps.format += "+intervals"
    return ps


def _number(text: str, decimal_comma: bool = False) -> float:
    t = text.strip()
    if decimal_comma:
        t = t.replace(".", "").replace(",", ".")
    else:
        t = t.replace(",", "")
    v = float(t)
    if not math.isfinite(v):
        raise ValueError(text)
    return v


def _add(ps: PerfStat, n: int, raw: str, value: str, unit: str = "", coverage=None,
         variance=None, metric=None, ts=None, agg=None, decimal_comma=False) -> None:
    event, pmu, mods = canonical(raw)
    status = "counted"
    v = None
    if value.strip() == NOT_COUNTED:
        status = "not counted"
    elif value.strip() == NOT_SUPPORTED:
        status = "not supported"
    else:
        v = _number(value, decimal_comma)
    ps.counters.append(Counter(event=event, raw=raw, value=v, unit=unit, status=status,
                               coverage=1.0 if coverage is None else coverage,
                               variance_pct=variance, pmu=pmu, modifiers=mods,
                               metric=metric, interval_s=ts, aggregate=agg, line=n))


# -- human --------------------------------------------------------------------------------

def _human_line(n: int, line: str, ps: PerfStat) -> None:
    if (h := _HEADER.search(line)) is not None:
        ps.command = h.group("what").strip()
        ps.runs = int(h.group("runs")) if h.group("runs") else None
        return
    if (f := _FOOTER.match(line)) is not None:
        setattr(ps, {"time elapsed": "elapsed_s", "user": "user_s", "sys": "sys_s"}[
            f.group("what")], _number(f.group("v")))
        return
    if line.lstrip().startswith("#"):
        return
    m = _HUMAN.match(line)
    if m is None:
        if _METRIC.search(line) and ps.counters and not re.match(r"^\s*\d", line):
            return          # a metric-only continuation line (perf's second metric)
        ps.problems.append((n, line.strip()[:200], "not a perf stat line"))
        return
    rest = m.group("rest")
    cover = _COVER.search(rest)
    var = _VARIANCE.search(rest)
    metric = None
    mm = _METRIC.search(rest)
    if mm is not None:
        try:
            metric = (_number(mm.group("v").rstrip("%")), mm.group("u").strip())
        except ValueError:
            metric = None
    try:
        _add(ps, n, m.group("event"), m.group("value"), m.group("unit") or "",
             coverage=float(cover.group(1)) / 100 if cover else None,
             variance=float(var.group(1)) if var else None, metric=metric,
             ts=float(m.group("ts")) if m.group("ts") else None, agg=m.group("agg"))
    except ValueError:
        ps.problems.append((n, line.strip()[:200], f"{m.group('value')!r} is not a count"))


# -- CSV (-x SEP) ---------------------------------------------------------------------------

def _csv_separator(line: str) -> str | None:
    """The -x separator of a CSV line, or None for the human format."""
    if _HUMAN.match(line) or _HEADER.search(line) or _FOOTER.match(line):
        return None
    # the separator is the character that splits the row into the most fields (a
    # decimal comma splits a value in two at most)
    counts = {sep: line.count(sep) for sep in (",", ";", "\t", "|", "!", ":")}
    sep = max(counts, key=counts.get)
    return sep if counts[sep] >= 3 else None


def _csv_line(n: int, line: str, ps: PerfStat, sep: str) -> None:
    f = [x.strip() for x in line.rstrip("\n").split(sep)]
    decimal_comma = sep != "," and any(re.fullmatch(r"-?\d+,\d+", x) for x in f)
    i, ts, agg = 0, None, None

    def is_value(x: str) -> bool:
        return x in (NOT_COUNTED, NOT_SUPPORTED) or bool(re.fullmatch(r"-?\d[\d.,]*", x))

    if len(f) > 2 and re.fullmatch(r"\d+[.,]\d+", f[0]) and (is_value(f[1]) or _AGG.match(f[1])):
        ts, i = _number(f[0], decimal_comma or ("," in f[0] and sep != ",")), 1
    if i < len(f) and _AGG.match(f[i]):
        agg, i = f[i], i + 1
        if i + 1 < len(f) and re.fullmatch(r"\d+", f[i]) and is_value(f[i + 1]):
            i += 1                                  # the number of CPUs aggregated
    rest = f[i:] + [""] * 7
    value, unit, event, _runtime, pcnt, mval, munit = rest[:7]
    if not event or not is_value(value):
        ps.problems.append((n, line.strip()[:200], "not a perf stat CSV row"))
        return
    try:
        cover = _number(pcnt, decimal_comma) / 100 if pcnt else None
        metric = (_number(mval, decimal_comma), munit) if mval else None
        _add(ps, n, event, value, unit, coverage=cover, metric=metric, ts=ts, agg=agg,
             decimal_comma=decimal_comma)
    except ValueError as e:
        ps.problems.append((n, line.strip()[:200], f"{e.args[0]!r} is not a number"))


# -- JSON (-j) ---------------------------------------------------------------------------------

def _json_line(n: int, line: str, ps: PerfStat) -> None:
    try:
        d = json.loads(line)
        if not isinstance(d, dict) or "event" not in d or "counter-value" not in d:
            raise ValueError("no event or counter-value")
    except ValueError as e:
        ps.problems.append((n, line.strip()[:200], f"not a perf stat JSON object ({e})"))
        return
    agg = next((str(d[k]) for k in ("cpu", "core", "socket", "die", "node") if k in d), None)
    try:
        mv = d.get("metric-value")
        metric = (float(mv), d.get("metric-unit", "")) if mv not in (None, "") else None
        pc = d.get("pcnt-running")
        ts = d.get("interval")
        _add(ps, n, str(d["event"]), str(d["counter-value"]), str(d.get("unit", "")),
             coverage=float(pc) / 100 if pc not in (None, "") else None, metric=metric,
             ts=float(ts) if ts is not None else None, agg=agg)
    except (TypeError, ValueError) as e:
        ps.problems.append((n, line.strip()[:200], f"not a number ({e})"))
