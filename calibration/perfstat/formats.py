"""perf stat's three output formats read a line at a time into the parse's sink:
human (old and current), -x CSV, -j JSON; numbers, coverage, variance, metrics."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from warmcore.calibration.perfstat.records import (  # noqa: F401
    COUNTED,
    Comment,
    Metric,
    NOT_COUNTED,
    NOT_SUPPORTED,
    Problem,
    _METRIC_KINDS,
)

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


