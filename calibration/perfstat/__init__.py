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

from pathlib import Path

from warmcore.simcore.config import read_capped

# The package (issue 27): records.py the typed results and event names, formats.py the
# three formats' line readers; here format detection, assembly and the entry points.
from warmcore.calibration.perfstat.records import (  # noqa: F401
    COUNTED,
    Counter,
    MAX_BYTES,
    Part,
    PerfStat,
    PerfStatError,
    Problem,
    Sample,
    counter_key,
    split_event,
)
from warmcore.calibration.perfstat.formats import (  # noqa: F401
    _Row,
    _Sink,
    _csv_parser,
    _human_line,
    _json_line,
    _scan,
    short_text,
)
from warmcore.calibration.perfstat.records import (  # noqa: F401  (the public names)
    ALIASES,
    Comment,
    Metric,
    NOT_COUNTED,
    NOT_SUPPORTED,
    canonical_event,
)

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
