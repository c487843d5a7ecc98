"""``warmcore sweep-report RESULTS [--html REPORT.html] [--charts DIR]``: what a sweep found.

* One row per point: for each kept figure the mean over the point's replications
  and its 95% confidence interval, a Student t interval
  ``mean ± t(0.975, n-1) * s / sqrt(n)`` (s the sample standard deviation of the
  n runs that did not fail; no interval when n = 1), and n.
* Charts (Altair, each saved as HTML and PNG): latency against load per strategy,
  throughput and CPU time per request against cores, IPC and GHz per strategy,
  each drawn when the sweep has the axis and the figures it needs (the printed
  report says which were skipped and why). Axes a chart does not show are
  averaged over; then its title says so and it draws no interval.
* For sampled designs (random, lhs, sobol) a ranking of the parameters by their
  first-order sensitivity index, RBD-FAST (SALib), for throughput and p99 latency.
  RBD-FAST reads any sample; ``design = "sobol"`` draws a Sobol sequence, not
  Saltelli's cross-sampled scheme, so Sobol indices proper cannot be computed
  from it.

RESULTS is a sweep's output directory (its ``spec.json`` tells the design) or one
Parquet file of rows; then the design counts as sampled when its points are not
the full grid of their axes' values. From Python: ``warmcore.report_sweep(RESULTS)``,
or ``load``, ``summary``, ``sensitivity`` and ``charts`` on the rows.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from warmcore.simcore.config import (
    ConfigError,
    check_output_dir,
    check_output_file,
    write_atomic,
    write_atomic_with,
)

CONFIDENCE = 0.95
REQUIRED = ("point_id", "replication", "error")
BOOKKEEPING = {"point_id", "replication", "seed", "error", "partial", "warmcore_version",
               "spec_hash"}
STRATEGY = "axis.strategy.name"
# The axes that count CPUs (what an offered load sets: load_axes()).
CORE_AXES = [f"axis.{p}" for p in ("machine.cores", "server.cpus", "consumer.cpus",
                                   "producer.cpus", "machine.overrides.cores_per_socket")]
LATENCY = ["latency_us.p99", "latency_us.p50", "latency_us.mean", "latency_us.max"]
# figures the sensitivity ranking covers, those the sweep kept (goodput: issue 31)
RANKED = ["throughput_rps", "latency_us.p99", "goodput_rps"]
CPU_PER_REQ = "cpu_us_per_req"


# -- reading -----------------------------------------------------------------------------

def load_axes() -> list[str]:
    """The axes an offered load sets (warmcore.comparison.load_fields: every workload
    kind's load field)."""
    from warmcore.comparison import load_fields

    return [f"axis.workload.{f}" for f in load_fields()]


def load(results: str | Path):
    """The rows of a sweep (its output directory, or one Parquet file) and its spec
    (None for a bare file); ConfigError (one line) for anything else: a damaged
    spec.json or part file, a part of another sweep."""
    path = Path(results)
    if not str(results).strip():
        raise ConfigError("sweep-report", "an empty path (name a sweep's output folder)")
    if not path.exists():
        raise ConfigError(str(path), "no such file or directory")
    spec = _stored_spec(path) if path.is_dir() else None
    df = _read_dir(path) if path.is_dir() else _read_file(path)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing or not axes_of(df):
        what = ", ".join(missing) if missing else "axis.* columns"
        raise ConfigError(str(path), f"not the rows of a warmcore sweep (no {what})")
    if df.empty:
        raise ConfigError(str(path), "no rows yet")
    return hashable_axes(df), spec


def hashable_axes(df):
    """Axis values as pandas can group them: a list value (``server.cpus = [[0], [0,
    1]]``, stored by Parquet as an array) becomes its TOML-like text, ``[0, 1]``."""
    for col in axes_of(df):
        if df[col].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any():
            df = df.assign(**{col: df[col].map(_axis_text)})
    return df


def _axis_text(v) -> str:
    v = v.tolist() if hasattr(v, "tolist") else v
    return json.dumps(v, separators=(", ", " = ")) if isinstance(v, list | dict) else str(v)


def _read_dir(path: Path):
    from warmcore.sweeps import read_results

    if not any(path.glob("part-*.parquet")):
        raise ConfigError(str(path), "no part-*.parquet files: not a sweep's output "
                          "directory, or nothing has finished yet")
    return read_results(path, field=str(path))


def _read_file(path: Path):
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as e:       # pyarrow's ArrowInvalid is a ValueError
        raise ConfigError(str(path), f"not a Parquet file ({_first_line(e)})") from None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _stored_spec(path: Path):
    """The spec of the folder's spec.json (None without one); a damaged one is refused."""
    from warmcore.sweeps import SweepSpec, read_marker

    marker = read_marker(path, str(path))
    if marker is None:
        return None
    try:
        spec = SweepSpec.model_validate(marker.spec)
    except (ValueError, ConfigError) as e:          # ValidationError is a ValueError
        raise ConfigError(str(path), f"spec.json: damaged, not the spec of a sweep "
                          f"({_first_line(e)})") from None
    if spec.digest() != marker.spec_hash:
        raise ConfigError(str(path), f"spec.json: damaged (its spec hashes to "
                          f"{spec.digest()}, not {marker.spec_hash})")
    return spec


def axes_of(df) -> list[str]:
    return [c for c in df.columns if c.startswith("axis.")]


def metrics_of(df) -> list[str]:
    """The numeric figures of the rows, in their order (the spec's)."""
    return [c for c in df.columns if c not in BOOKKEEPING and not c.startswith("axis.")
            and df[c].dtype.kind in "fiu"]


def with_cpu_per_request(df):
    """The rows with ``cpu_us_per_req`` (CPU microseconds per request) when a sweep
    kept what it derives from: task_clock_ms and requests, or else cpus_utilized and
    throughput_rps (CPU-seconds per second over requests per second); and how."""
    if CPU_PER_REQ in df.columns:
        return df, None
    if {"task_clock_ms", "requests"} <= set(df.columns):
        return df.assign(**{CPU_PER_REQ: df["task_clock_ms"] * 1e3 / df["requests"]}), \
            f"{CPU_PER_REQ} = task_clock_ms * 1000 / requests"
    if {"cpus_utilized", "throughput_rps"} <= set(df.columns):
        return df.assign(**{CPU_PER_REQ: df["cpus_utilized"] * 1e6 / df["throughput_rps"]}), \
            f"{CPU_PER_REQ} = cpus_utilized * 1e6 / throughput_rps"
    return df, None


# -- means and intervals -----------------------------------------------------------------

def summary(df, metrics: list[str] | None = None, keys: list[str] | None = None):
    """One row per point (or per ``keys``): the keys, ``n`` (runs that did not fail),
    ``failed``, and per figure its mean, ``<m>.lo`` and ``<m>.hi``: the Student t
    interval at CONFIDENCE over that figure's n values (NaN when n < 2)."""
    import numpy as np
    import pandas as pd
    from scipy import stats

    metrics = metrics if metrics is not None else metrics_of(df)
    keys = keys or axes_of(df)
    ok = df[df["error"].isna()]
    out = pd.DataFrame({"n": ok.groupby(keys, dropna=False).size(),
                        "failed": df[df["error"].notna()].groupby(keys, dropna=False).size()})
    out = out.fillna(0).astype(int)
    g = ok.groupby(keys, dropna=False)[metrics]
    mean, sd, n = g.mean(), g.std(ddof=1), g.count()
    t = stats.t.ppf(0.5 + CONFIDENCE / 2, np.maximum(n - 1, 1))
    half = (t * sd / np.sqrt(n)).where(n > 1)
    for m in metrics:
        out[m] = mean[m]
        out[f"{m}.lo"] = mean[m] - half[m]
        out[f"{m}.hi"] = mean[m] + half[m]
    return out.reset_index()


def format_summary(s, metrics: list[str], per_block: int = 4) -> str:
    """The summary as text, ``mean ±half-width``, in blocks of ``per_block`` figures."""
    import pandas as pd

    axes = [c for c in s.columns if c.startswith("axis.")]
    blocks = []
    for i in range(0, len(metrics), per_block):
        cols = {a.removeprefix("axis."): s[a].map(_fmt_axis) for a in axes}
        cols["n"] = s["n"]
        if s["failed"].any():
            cols["failed"] = s["failed"]
        for m in metrics[i:i + per_block]:
            cols[m] = [_pm(v, lo, hi) for v, lo, hi in
                       zip(s[m], s[f"{m}.lo"], s[f"{m}.hi"], strict=True)]
        blocks.append(pd.DataFrame(cols).to_string(index=False))
    return "\n\n".join(blocks)


def _fmt_axis(v) -> str:
    return f"{v:,.6g}" if isinstance(v, float) else str(v)


def _pm(v, lo, hi) -> str:
    """``mean ±half-width``, both to the mean's precision."""
    if v is None or v != v:
        return "-"
    fmt = _format_of(v)
    if not (lo == lo and hi == hi):                   # no interval (n < 2)
        return fmt.format(v)
    return f"{fmt.format(v)} ±{fmt.format((hi - lo) / 2)}"


def _num(x: float) -> str:
    return _format_of(x).format(x)


def _format_of(x: float) -> str:
    a = abs(x)
    if a >= 1000 or (a >= 10 and float(x).is_integer()):
        return "{:,.0f}"
    if a >= 10:
        return "{:.1f}"
    if a >= 0.01 or a == 0:
        return "{:.3f}"
    return "{:.3g}"


# -- sensitivity -------------------------------------------------------------------------

def is_sampled(df, spec=None) -> bool:
    """A random, LHS or Sobol design: the spec says; without one, the points are not
    the full grid of their axes' distinct values."""
    if spec is not None:
        return spec.design != "grid"
    axes = axes_of(df)
    n_points = len(df[axes].astype(str).drop_duplicates())
    return n_points < math.prod(df[a].astype(str).nunique() for a in axes)


def sensitivity(df, metric: str, spec=None):
    """First-order indices S1 of ``metric`` to each axis (RBD-FAST, SALib, with its
    bootstrap 95% interval S1_conf), from the points' means, largest first. A
    list-valued axis (strategies, governors) counts by the index of its value."""
    import numpy as np
    import pandas as pd
    from SALib.analyze import rbd_fast

    axes = axes_of(df)
    ok = df[df["error"].isna() & df[metric].notna()]
    pts = ok.groupby("point_id").agg({**{a: "first" for a in axes}, metric: "mean"})
    if len(pts) < 8:
        raise ValueError(f"{len(pts)} points: too few for a sensitivity estimate (8 or more)")
    cols, bounds = zip(*(_numeric_axis(pts[a], _axis_values(spec, a)) for a in axes),
                       strict=True)
    names = [a.removeprefix("axis.") for a in axes]
    problem = {"num_vars": len(axes), "names": names, "bounds": list(bounds)}
    m = int(np.clip(len(pts) // 32, 2, 6))       # harmonics: few for a small sample
    si = rbd_fast.analyze(problem, np.column_stack(cols), pts[metric].to_numpy(float),
                          M=m, seed=1)
    out = pd.DataFrame({"parameter": names, "S1": np.asarray(si["S1"]),
                        "S1_conf": np.asarray(si["S1_conf"])})
    return out.sort_values("S1", ascending=False, kind="stable").reset_index(drop=True)


def _axis_values(spec, column: str):
    """The spec's list of values of an axis (None for a range or without a spec)."""
    if spec is None:
        return None
    axis = spec.axes.get(column.removeprefix("axis."))
    return axis if isinstance(axis, list) else None


def _numeric_axis(col, values):
    """An axis as numbers and their bounds: a number as it is, anything else (or the
    values of a listed axis) by its index in its list of values."""
    import pandas as pd

    if values is None and pd.api.types.is_numeric_dtype(col) and col.dtype.kind != "b":
        x = col.astype(float).to_numpy()
        lo, hi = float(x.min()), float(x.max())
        return x, [lo, hi if hi > lo else lo + 1]
    order = [json.dumps(v) for v in values] if values is not None else \
        sorted({json.dumps(_plain(v)) for v in col})
    x = col.map(lambda v: order.index(json.dumps(_plain(v)))).astype(float).to_numpy()
    return x, [0.0, max(len(order) - 1, 1)]


def _plain(v):
    return v.tolist() if hasattr(v, "tolist") else v


def format_sensitivity(metric: str, r) -> str:
    lines = [f"which parameter matters for {metric} (first-order index S1, RBD-FAST; "
             "± its bootstrap 95% interval):"]
    lines += [f"  {i}. {p:32s} S1 {v:6.3f} ±{c:.3f}" for i, (p, v, c) in
              enumerate(zip(r["parameter"], r["S1"], r["S1_conf"], strict=True), 1)]
    return "\n".join(lines)


# -- charts ------------------------------------------------------------------------------

def charts(df, spec=None, sens: dict | None = None) -> tuple[dict, list[str]]:
    """The Altair charts the sweep's axes and figures allow, by name, and one line
    for each chart left out saying why. ``sens``: sensitivity tables by figure."""
    df, _ = with_cpu_per_request(df)
    out, skipped = {}, []
    for name, make in PLANS.items():
        made = make(df)
        if isinstance(made, str):
            skipped.append(f"{name}: {made}")
        else:
            out[name] = made
    if sens:
        out["sensitivity"] = _sensitivity_chart(sens)
    return out, skipped


def _first(df, candidates) -> str | None:
    return next((c for c in candidates if c in df.columns), None)


def _f(column: str) -> str:
    """A chart's field name: Vega-Lite reads "a.b" as a nested field, so no dots."""
    return column.removeprefix("axis.").replace(".", "_")


def _latency_vs_load(df):
    x, y = _first(df, load_axes()), _first(df, LATENCY)
    if x is None:
        fields = [a.removeprefix("axis.workload.") for a in load_axes()]
        return f"no load axis (workload.{', .'.join(fields[:-1])} or .{fields[-1]})"
    if y is None:
        return "no latency figure kept (latency_us.p99, .p50, .mean or .max)"
    return _line(df, x, y, f"{y} against offered load")


def _against_cores(y: str, title: str):
    def make(df):
        x = _first(df, CORE_AXES)
        if x is None:
            return "no axis counts cores (machine.cores, server.cpus, consumer.cpus...)"
        if y not in df.columns:
            return f"{y} not kept"
        if df[x].dtype.kind not in "fiu":
            return f"{x.removeprefix('axis.')} holds lists of CPUs, not counts"
        return _line(df, x, y, title)
    return make


def _line(df, x: str, y: str, title: str):
    """``y`` against ``x``, one line per strategy (or per value of another axis
    with at most 10), other axes averaged over; the 95% band when none is."""
    import altair as alt

    others = [a for a in axes_of(df) if a != x]
    color = STRATEGY if STRATEGY in others else \
        next((a for a in others if df[a].nunique() <= 10), None)
    rest = [a for a in others if a != color]
    keys = [x] + ([color] if color else [])
    d = summary(df, [y], keys).rename(columns=_f)
    values = sorted(df[x].dropna().unique().tolist())
    enc = {"x": alt.X(f"{_f(x)}:Q", title=x.removeprefix("axis."),
                      scale=alt.Scale(type=_scale(df[x]), zero=False),
                      axis=alt.Axis(values=values) if len(values) <= 12 else alt.Undefined)}
    if color:
        enc["color"] = alt.Color(f"{_f(color)}:N", title=color.removeprefix("axis."),
                                 scale=alt.Scale(scheme="category10"))
    tip = [*(_f(k) for k in keys), alt.Tooltip(f"{_f(y)}:Q", format=",.4g"), "n"]
    chart = alt.Chart(d).mark_line(point=True).encode(
        y=alt.Y(f"{_f(y)}:Q", title=y, scale=alt.Scale(zero=False)), tooltip=tip, **enc)
    if not rest:
        chart = alt.Chart(d).mark_errorband(opacity=0.2).encode(
            y=alt.Y(f"{_f(y)}_lo:Q", title=y), y2=f"{_f(y)}_hi:Q", **enc) + chart
    head = alt.TitleParams(title + _averaged(rest), subtitle=[] if rest else
                           "band: 95% Student t interval over the replications")
    return chart.properties(width=420, height=260, title=head)


def _per_strategy(df):
    """IPC and GHz per strategy: bars of the means, side by side for the values of
    another axis with at most 10 (a governor...), 95% intervals when no other axis
    is averaged over."""
    import altair as alt

    figs = [m for m in ("ipc", "ghz") if m in metrics_of(df)]
    if STRATEGY not in df.columns:
        return "no strategy.name axis"
    if not figs:
        return "neither ipc nor ghz kept"
    others = [a for a in axes_of(df) if a != STRATEGY]
    group = next((a for a in others if df[a].nunique() <= 10), None)
    rest = [a for a in others if a != group]
    d = summary(df, figs, [STRATEGY] + ([group] if group else [])).rename(columns=_f)
    color = group or STRATEGY
    enc = {"x": alt.X(f"{_f(STRATEGY)}:N", title="strategy", axis=alt.Axis(labelAngle=0)),
           **({"xOffset": alt.XOffset(f"{_f(group)}:N")} if group else {})}
    panels = []
    for m in figs:
        base = alt.Chart(d).encode(**enc)
        panel = base.mark_bar().encode(
            y=alt.Y(f"{m}:Q", title=m),
            color=alt.Color(f"{_f(color)}:N", title=color.removeprefix("axis."),
                            scale=alt.Scale(scheme="category10")),
            tooltip=[_f(STRATEGY), *([_f(group)] if group else []), m, "n"])
        if not rest:
            panel += base.mark_errorbar().encode(y=alt.Y(f"{m}_lo:Q", title=m),
                                                 y2=f"{m}_hi:Q")
        panels.append(panel.properties(width=240, height=220))
    return alt.hconcat(*panels).properties(title="IPC and GHz per strategy" + _averaged(rest))


def _averaged(rest: list[str]) -> str:
    if not rest:
        return ""
    return f" (mean over {', '.join(a.removeprefix('axis.') for a in rest)}; no interval)"


def _scale(col) -> str:
    v = col.dropna()
    numeric = v.dtype.kind in "fiu"
    return "log" if numeric and len(v) and (v > 0).all() and v.max() / v.min() >= 20 \
        else "linear"


def _sensitivity_chart(sens: dict):
    import altair as alt
    import pandas as pd

    d = pd.concat([r.assign(figure=m) for m, r in sens.items()], ignore_index=True)
    d["lo"], d["hi"] = d["S1"] - d["S1_conf"], d["S1"] + d["S1_conf"]
    base = alt.Chart(d).encode(y=alt.Y("parameter:N", sort="-x", title=None))
    layer = base.mark_bar().encode(x=alt.X("S1:Q", title="first-order index S1 (RBD-FAST)"),
                                   tooltip=["parameter", "S1", "S1_conf"]) + \
        base.mark_errorbar().encode(x=alt.X("lo:Q", title="first-order index S1 (RBD-FAST)"),
                                    x2="hi:Q")
    return layer.properties(width=320, height=24 * d["parameter"].nunique()).facet(
        row=alt.Row("figure:N", title=None)).properties(title="Which parameter matters")


PLANS = {
    "latency-vs-load": _latency_vs_load,
    "throughput-vs-cores": _against_cores("throughput_rps", "throughput against cores"),
    "cpu-per-request-vs-cores": _against_cores(CPU_PER_REQ,
                                               "CPU time per request (us) against cores"),
    "ipc-ghz-per-strategy": _per_strategy,
}


# -- the report --------------------------------------------------------------------------

METHOD = ("mean ±half-width of its 95% confidence interval over the point's n runs "
          "(Student t: t(0.975, n-1) * s / sqrt(n); none when n = 1)")


def report(results: str | Path, html: str | Path | None = None,
           charts_dir: str | Path | None = "default", file=None) -> dict:
    """Print what a sweep found (means with intervals per point, the sensitivity
    ranking of a sampled design), write its charts as HTML and PNG to ``charts_dir``
    ("default": RESULTS-charts beside the results; None: none) and, with ``html``,
    one self-contained page of it all. Returns the summary, the sensitivity tables,
    the chart files, the charts left out and the page."""
    file = file or sys.stdout
    df, spec = load(results)
    results = Path(results)
    where = _charts_dir(results, charts_dir)
    if html is not None:                 # the outputs checked before anything is computed
        check_output_file(html, "--html")
    if where is not None:
        check_output_dir(where, "--charts")
    df, derived = with_cpu_per_request(df)
    s = summary(df)
    sens, text = _rankings(df, spec)
    print("\n".join([*_table_text(df, s, spec, derived), *text, *_failures(df)]), file=file)
    out = {"summary": s, "sensitivity": sens, "charts": {}, "skipped": [], "html": None}
    if charts_dir is None and html is None:
        return out
    cs, out["skipped"] = _charts_or_error(df, spec, sens)
    if where is not None:
        out["charts"] = save_charts(cs, where)
        print(f"\ncharts ({', '.join(cs) or 'none'}) -> {where}/ as HTML and PNG", file=file)
    for line in out["skipped"]:
        print(f"  not drawn: {line}", file=file)
    if html is not None:
        write_atomic(html, page(df, s, spec, sens, cs), "--html")
        out["html"] = Path(html)
        print(f"report page -> {html}", file=file)
    return out


def _charts_dir(results: Path, charts_dir) -> Path | None:
    """Where the charts go: ``charts_dir``, or by default RESULTS-charts beside the
    results (named from the resolved path: ``sweep-report .`` inside the folder)."""
    if charts_dir is None:
        return None
    if charts_dir != "default":
        return Path(charts_dir)
    full = results if results.name not in ("", "..") else results.resolve()
    if not full.name:                                  # the root folder
        return full / "charts"
    return full.with_name(full.name.removesuffix(".parquet") + "-charts")


def _constant(col) -> bool:
    """The same in every run, up to rounding (an unchanging clock reads 1.0 +- 1e-15)."""
    v = col.dropna().to_numpy(float)
    return not v.size or float(v.max() - v.min()) <= 1e-9 * float(abs(v).max())


def _headline(df, s, spec) -> str:
    failed = int(df["error"].notna().sum())
    what = f"sweep {spec.digest()} of {spec.scenario!r}, design {spec.design}" if spec \
        else "sweep rows (no spec.json: design read from the points)"
    partial = int(df["partial"].fillna(False).astype(bool).sum()) if "partial" in df else 0
    cut = f", {partial} partial (max_wall or a cap)" if partial else ""
    return f"{what}: {len(s)} points, {len(df)} runs ({failed} failed{cut})"


def _table_text(df, s, spec, derived) -> list[str]:
    mets = metrics_of(df)
    ok = df[df["error"].isna()]
    const = [m for m in mets if len(ok) and _constant(ok[m])]
    lines = [_headline(df, s, spec), f"each figure: {METHOD}", "",
             format_summary(s, [m for m in mets if m not in const])]
    if const:
        lines += ["", "the same in every run: " + ", ".join(
            f"{m} {_pm(ok[m].iloc[0], math.nan, math.nan)}" for m in const)]
    if derived:
        lines.append(f"derived: {derived}")
    if (s["n"] < 2).any():
        lines.append("no interval where n < 2: set replications = 2 or more in the spec")
    return lines


def _rankings(df, spec) -> tuple[dict, list[str]]:
    """Sensitivity tables of a sampled design by figure, and their text."""
    if not is_sampled(df, spec):
        return {}, ["", "sensitivity ranking: not computed (a grid design; it needs a "
                    "random, lhs or sobol design)"]
    sens, text = {}, []
    for m in [m for m in RANKED if m in metrics_of(df)]:
        try:
            sens[m] = sensitivity(df, m, spec)
            text += ["", format_sensitivity(m, sens[m])]
        except (ValueError, ImportError) as e:
            text += ["", f"sensitivity of {m}: not computed ({_first_line(e)})"]
    return sens, text


def _failures(df) -> list[str]:
    errs = df.loc[df["error"].notna(), "error"].value_counts()
    if not len(errs):
        return []
    return ["", "failed runs (warmcore sweep --retry-failed reruns them):",
            *(f"  {n} x {e}" for e, n in errs.head(10).items())]


def _charts_or_error(df, spec, sens):
    try:
        import altair  # noqa: F401
        import vl_convert  # noqa: F401
    except ImportError:
        raise ConfigError("sweep-report", "charts need altair and vl-convert-python: "
                          "pip install 'warmcore[app]' (or --no-charts)") from None
    return charts(df, spec, sens)


def save_charts(cs: dict, where: Path) -> dict:
    """Each chart as NAME.html (Vega-Lite via vega-embed) and NAME.png; the paths."""
    where = check_output_dir(where, "--charts")
    written = {}
    for name, chart in cs.items():
        for ext, opts in (("html", {}), ("png", {"scale_factor": 2})):
            write_atomic_with(where / f"{name}.{ext}",
                              lambda tmp, c=chart, e=ext, o=opts: c.save(tmp, format=e, **o),
                              "--charts")
        written[name] = (where / f"{name}.html", where / f"{name}.png")
    return written


def page(df, s, spec, sens: dict, cs: dict) -> str:
    """One HTML page, no network needed: the summary, the sensitivity tables, and
    every chart's Vega-Lite spec drawn by the vega-embed bundled in."""
    import html

    import vl_convert

    table = s[[c for c in s.columns if c.startswith("axis.")] + ["n", "failed"]].copy()
    for m in metrics_of(df):
        table[m] = [_pm(v, lo, hi) for v, lo, hi in
                    zip(s[m], s[f"{m}.lo"], s[f"{m}.hi"], strict=True)]
    parts = ["<!doctype html><meta charset=utf-8><title>warmcore sweep report</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
             "font-size:90%}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "</style>", f"<script>{vl_convert.javascript_bundle()}</script>",
             f"<h1>warmcore sweep report</h1><p>{html.escape(_headline(df, s, spec))}</p>"]
    for i, (name, chart) in enumerate(cs.items()):
        parts.append(f"<h2>{html.escape(name)}</h2><div id='chart{i}'></div><script>"
                     f"vegaEmbed('#chart{i}', {_script_json(chart)});</script>")
    for m, r in sens.items():
        parts += [f"<h2>Sensitivity of {html.escape(m)} (first-order index, RBD-FAST)</h2>",
                  r.to_html(index=False, float_format=lambda x: f"{x:.3f}")]
    parts += [f"<h2>Means per point</h2><p>{html.escape(METHOD)}</p>",
              table.rename(columns=lambda c: c.removeprefix("axis.")).to_html(index=False)]
    return "\n".join(parts)


def _script_json(chart) -> str:
    """A chart's spec, safe inside a <script> element."""
    return chart.to_json(indent=None).replace("</", "<\\/")


report_sweep = report      # warmcore.report_sweep (warmcore.sweep_report is this module)
