"""What the explorer (app.py) shows, as data: the comparison table with its best values
and its change against a pinned baseline, where a request's time went, the load curves
with their knees and their change, the machine's topology, and a timeline's spans read
back from its Chrome trace. Pandas only: app.py draws these, explorer_charts.py charts
them, and tests read them without Streamlit.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

import warmcore
from warmcore.advice import doubts
from warmcore.comparison import knee, load_field
from warmcore.result import has_outcomes

# Comparison table: per_request() key -> (header with unit, format, better: max/min/None)
COLUMNS = {
    "throughput_rps": ("req/s", "{:,.0f}", "max"),
    "p50_us": ("p50 (us)", "{:,.1f}", "min"),
    "p99_us": ("p99 (us)", "{:,.1f}", "min"),
    "max_us": ("max (us)", "{:,.1f}", "min"),
    "cpus": ("CPUs", "{:.2f}", "min"),
    "cpu_us_per_req": ("CPU us/req", "{:.2f}", "min"),
    "ipc": ("IPC", "{:.2f}", "max"),
    "ghz": ("GHz", "{:.2f}", None),
    "llc_loads_per_req": ("LLC loads/req", "{:.1f}", "min"),
    "migrations_per_req": ("migrations/req", "{:.3f}", "min"),
    "switches_per_req": ("switches/req", "{:.3f}", "min"),
    "uj_per_req": ("uJ/req", "{:.1f}", "min"),
}
# Shown when some client was refused or timed out (warmcore.result.has_outcomes).
OUTCOME_COLUMNS = {
    "arrived_rps": ("arrived (req/s)", "{:,.0f}", None),
    "goodput_rps": ("goodput (req/s)", "{:,.0f}", "max"),
    "rejected_pct": ("rejected (%)", "{:.2f}", "min"),
    "timed_out_pct": ("timed out (%)", "{:.2f}", "min"),
}
IN_DOUBT = " (in doubt)"
# A strategy may win a cost column only serving at least this share of the most
# throughput any trusted strategy served.
SERVES = 0.95
# breakdown_us field -> the cause as the chart names it, in stacking order
CAUSES = {"queue_wait": "queue wait", "dispatch": "dispatch and wake-up",
          "compute": "compute", "cache_reload": "cache reload", "coherence": "coherence",
          "contention": "contention", "blocked_io": "blocked I/O"}
# The preset's figures shown as the machine's topology, in this order
TOPOLOGY = ["sockets", "cores_per_socket", "threads_per_core", "llc_domains_per_socket",
            "l1d_kib", "l2_kib", "llc_mib", "pstates_ghz", "turbo_ghz", "default_governor"]
# Load curves' change against the baseline: per_request() key -> column
CURVE_COLUMNS = {"p50_us": "p50 (us)", "p99_us": "p99 (us)", "throughput_rps": "req/s",
                 "cpus": "CPUs", "cpu_us_per_req": "CPU us/req"}


# -- the comparison -------------------------------------------------------------------------

def comparison_frame(results) -> pd.DataFrame:
    """One row per strategy; a partial run's row is marked "(partial)", a run whose
    figures are in doubt (advice.doubts: a window too short for its load...) "(in
    doubt)"."""
    rows = [r.per_request() for r in results]
    for row, r in zip(rows, results, strict=True):
        if r.partial:
            row["strategy"] += " (partial)"
        elif doubts(r):
            row["strategy"] += IN_DOUBT
    columns = ({**COLUMNS, **OUTCOME_COLUMNS} if has_outcomes(rows)
               else COLUMNS)
    df = pd.DataFrame(rows).set_index("strategy")[list(columns)]
    return df.rename(columns={k: v[0] for k, v in columns.items()}).astype(float)


# Comparison column -> (the ci95 key of a replicated run, its scale to the column's unit)
INTERVALS = {"throughput_rps": ("throughput_rps", 1.0), "p50_us": ("latency_us.p50", 1.0),
             "p99_us": ("latency_us.p99", 1.0), "max_us": ("latency_us.max", 1.0),
             "cpus": ("cpus_utilized", 1.0), "ipc": ("ipc", 1.0), "ghz": ("ghz", 1.0),
             "uj_per_req": ("joules_per_request", 1e6)}


def interval_frame(results) -> pd.DataFrame | None:
    """The 95% interval (Student t over the replications, ``Result.ci95``) of each
    figure that has one, as "low - high" in the comparison's formats, one row per
    replicated strategy; None when no run was replicated."""
    rows = {}
    for r in results:
        if not r.ci95 or (r.replications or 1) < 2:
            continue
        row = {}
        for col, (key, scale) in INTERVALS.items():
            if key in r.ci95 and None not in r.ci95[key]:
                header, fmt, _ = COLUMNS[col]
                lo, hi = (v * scale for v in r.ci95[key])
                row[header] = f"{fmt.format(lo)} - {fmt.format(hi)}"
        rows[f"{r.strategy} ({r.replications} runs)"] = row
    return pd.DataFrame.from_dict(rows, orient="index") if rows else None


def styled(df: pd.DataFrame):
    """The comparison formatted, the best value per column highlighted among the rows
    that may win it: never a partial run or one in doubt, and a cost (CPUs, CPU or
    energy per request...) only among the strategies that serve at least SERVES of the
    most throughput (serving a fraction of the load with fewer CPUs is not a win)."""
    every = {**COLUMNS, **OUTCOME_COLUMNS}.values()
    fmt = {v[0]: v[1] for v in every if v[0] in df.columns}
    s = df.style.format(fmt, na_rep="-")
    best = {v[0]: v[2] for v in every if v[2] and v[0] in df.columns}
    trusted = pd.Series([not (n.endswith(IN_DOUBT) or n.endswith(" (partial)"))
                         for n in df.index], index=df.index)
    rps = df[COLUMNS["throughput_rps"][0]]
    serving = trusted & (rps >= SERVES * rps[trusted].max())

    def mark(col: pd.Series):
        """The best cell(s) of a column, compared as shown: values that differ only
        beyond the shown digits (the same loop on two threads, say) tie, and every
        one of them is marked; none where every row shows the same."""
        may = trusted if col.name in (COLUMNS["throughput_rps"][0],) else serving
        form = fmt.get(col.name, "{}")
        shown = col.map(lambda v: form.format(v) if v == v else "")
        if shown[may].nunique() < 2 and may.sum() == len(col):
            return [""] * len(col)
        if not may.any():
            return [""] * len(col)
        target = shown[col[may].idxmax() if best[col.name] == "max" else col[may].idxmin()]
        return ["background-color: #c8f0c8; font-weight: bold" if ok and v == target else ""
                for v, ok in zip(shown, may, strict=True)]

    return s.apply(mark, subset=list(best))


def comparison_deltas(df: pd.DataFrame, base_df: pd.DataFrame):
    """Every figure of the strategies in both tables, now minus baseline, formatted
    with its change in % of the baseline's."""
    common = df.index.intersection(base_df.index)
    delta = df.loc[common] - base_df.loc[common]
    pct = 100 * delta / base_df.loc[common].where(base_df.loc[common] != 0)
    shown = delta.copy().astype(object)
    for col in delta.columns:
        shown[col] = [_delta_text(d, p) for d, p in zip(delta[col], pct[col], strict=True)]
    return _Deltas(delta, shown)


class _Deltas:
    """The deltas table: ``data`` the numbers (now minus baseline), what Streamlit shows
    the same with each change in % of the baseline (``shown``)."""

    def __init__(self, data: pd.DataFrame, shown: pd.DataFrame):
        self.data, self.shown = data, shown


def _delta_text(d: float, p: float) -> str:
    if d != d:                     # nan: a figure a run did not have
        return "-"
    return f"{d:+,.2f}" + (f" ({p:+.1f}%)" if p == p and abs(p) != float("inf") else "")


def stopped_note(results, names, fraction: float, requests: int) -> str:
    """What a stopped comparison measured: how far its stopped run got (``fraction`` of
    its run, of ``requests`` measured ones) and which strategies it did not run."""
    ran = [r.strategy for r in results]
    left = [n for n in names if n not in ran]
    return "Stopped: partial result. " + "; ".join(
        f"{r.strategy}: stopped at {fraction:.0%} of its run, {r.requests:,} of "
        f"{requests:,} measured requests" + (" (still in its warm-up)" if not r.requests
                                             else "")
        for r in results if r.stop_reason == "stopped") + (
        f"; not run: {', '.join(left)}" if left else "")


def breakdown_frame(results, baseline_results=None) -> pd.DataFrame:
    """Where a request's time went: one row per strategy, run (now, baseline), cause."""
    rows = []
    for tag, rs in (("now", results), ("baseline", baseline_results or [])):
        for r in rs:
            for k, label in CAUSES.items():
                v = getattr(r.breakdown_us, k)
                rows.append({"strategy": r.strategy, "run": tag, "cause": label,
                             "us": 0.0 if v is None else float(v)})
    return pd.DataFrame(rows)


def topology_text(params) -> str:
    """The machine's topology as lines "name (unit): value" (Markdown), which wrap in a
    narrow sidebar where a table's value column is cut off."""
    table = topology_table(params)
    return "  \n".join(f"{name}: **{row['value']}**" for name, row in table.iterrows())


def topology_table(params) -> pd.DataFrame:
    """The machine's topology (sockets, cores, caches, clocks) from its parameters."""
    by = {p.path.removeprefix("machine.overrides."): p for p in params}
    rows = []
    for k in TOPOLOGY:
        p = by.get(k)
        if p is not None:
            v = p.value
            v = ", ".join(f"{x:g}" for x in v) if isinstance(v, (list, tuple)) else v
            rows.append({"": k + (f" ({p.unit})" if p.unit else ""), "value": str(v)})
    return pd.DataFrame(rows).set_index("")


# -- load curves ----------------------------------------------------------------------------

def default_loads(sc: warmcore.Scenario, results=()) -> str:
    """Offered loads that fit the scenario: a count (clients, connections) doubling up
    to twice the scenario's own; a rate from a tenth of the capacity the comparison's
    runs imply to 120% of it (each strategy's requests per CPU-second times the
    machine's CPUs: the most it could serve scaling perfectly), the scenario's own rate
    among them; without runs, the scenario's rate scaled."""
    field = load_field(sc)
    now = getattr(sc.workload, field, None)
    if field != "rate_per_s":
        now = int(now or 1)
        if now <= 8:
            return ", ".join(str(n) for n in (1, 2, 4, 8, 16))
        return ", ".join(str(n) for n in sorted({1, *(max(1, round(now * f))
                                                      for f in (0.125, 0.25, 0.5, 1, 2))}))
    now = now or 10_000.0
    cap = capacity_bound(results)
    if cap is None or cap <= now:
        return ", ".join(f"{now * f:g}" for f in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5))
    loads = sorted({round(now), *(round(cap * f, -1) for f in (0.1, 0.25, 0.5, 0.75, 1.0, 1.2))})
    return ", ".join(f"{x:g}" for x in loads)


def capacity_bound(results) -> float | None:
    """The most req/s any of the runs could serve with every CPU of the machine at its
    requests per CPU-second, or None without a run that used a CPU."""
    rates = [r.throughput_rps / r.cpus_utilized * len(r.cpu_utilization) for r in results
             if r.throughput_rps and r.cpus_utilized and r.cpu_utilization]
    return max(rates) if rates else None


def parse_loads(text: str, field: str) -> list:
    """The offered loads typed, sorted without repeats (counts as whole numbers), or
    ValueError with the page's one line."""
    try:
        loads = sorted({float(x) for x in text.split(",") if x.strip()})
        if not loads or any(x <= 0 for x in loads):
            raise ValueError
    except ValueError:
        raise ValueError(f"loads: {text!r} is not a list of positive numbers") from None
    if field != "rate_per_s":
        loads = sorted({int(x) for x in loads})
    return loads


def same_field(toml: str, field: str) -> bool:
    """Does the setup ``toml`` offer its load through ``field`` (the same kind of number)?"""
    try:
        return load_field(warmcore.Scenario.from_toml(toml)) == field
    except warmcore.ConfigError:
        return False


def overlaid_baseline(base: dict | None, toml: str, field: str) -> str | None:
    """The pinned baseline's setup whose curves go beside this setup's, at the same
    loads: None if there is none, if it is this setup, or if its load is another kind
    of number."""
    if base is None or base["toml"] == toml or not same_field(base["toml"], field):
        return None
    return base["toml"]


def why_not_overlaid(base_toml: str, toml: str, field: str) -> str:
    """Why the pinned baseline's curves are not beside the curves shown."""
    if base_toml == toml:
        return "it is this setup"
    if not same_field(base_toml, field):
        return "its offered load is another kind of number"
    return "it was pinned after these curves were computed; compute them again"


class CurveRun(NamedTuple):
    label: str           # the job's progress names it
    toml: str
    strategy: str
    load: float
    baseline: bool


def curve_runs(toml: str, base_toml: str | None, names, loads) -> list[CurveRun]:
    """Each strategy at each load, then the same for the baseline's setup if given."""
    runs = [CurveRun(f"{n} at {x:g}", toml, n, x, False) for n in names for x in loads]
    if base_toml:
        runs += [CurveRun(f"baseline: {n} at {x:g}", base_toml, n, x, True)
                 for n in names for x in loads]
    return runs


def curves_of(job, meta: dict) -> dict:
    """The load curves a finished (or stopped) job measured: each completed run's row,
    split into this setup's and the baseline's; a run cut short by Stop is left out.
    ``meta``: the setup's toml, load field and baseline toml, and per run whether it
    was the baseline's."""
    rows, base_rows = [], []
    for d, is_base in zip(job.results, meta["baseline"], strict=False):
        if d.get("stop_reason") == "stopped":
            continue
        (base_rows if is_base else rows).append(warmcore.Result.from_dict(d).per_request())
    done = len(rows) + len(base_rows)
    return {**{k: meta[k] for k in ("toml", "field", "base_toml")}, "rows": rows,
            "base_rows": base_rows,
            "stopped": f"{done} of {len(job.names)} runs" if job.stopped else None}


def shows_baseline(curves: dict, base: dict | None) -> bool:
    """Do the curves carry the baseline now pinned (computed with it)?"""
    return bool(curves.get("base_rows")) and base is not None and \
        curves.get("base_toml") == base["toml"]


def curve_frame(curves: dict, with_base: bool) -> pd.DataFrame:
    """Every curve's row, tagged with its run (now, baseline), the load a float."""
    tagged = [{**r, "run": "now"} for r in curves["rows"]]
    if with_base:
        tagged += [{**r, "run": "baseline"} for r in curves["base_rows"]]
    df = pd.DataFrame(tagged)
    df["load"] = df["load"].astype(float)
    return df


def knees_of(curves: dict, with_base: bool) -> list[dict]:
    """Each strategy's knee (None: not reached), of this setup's run and the baseline's."""
    knees = []
    for run, rs in (("now", curves["rows"]),
                    ("baseline", curves["base_rows"] if with_base else [])):
        for n in dict.fromkeys(r["strategy"] for r in rs):
            k = knee([r for r in rs if r["strategy"] == n])
            knees.append({"strategy": n, "knee": k, "run": run})
    return knees


def knee_text(knees: list[dict], run: str) -> str:
    return "; ".join(f"{k['strategy']}: " + ("not reached" if k["knee"] is None
                                              else f"{k['knee']:g}")
                     for k in knees if k["run"] == run)


def curve_deltas(rows, base_rows, knees):
    """Each strategy at each load: every curve's figure now minus the baseline's, and
    the knee's move."""
    base = {(r["strategy"], r["load"]): r for r in base_rows}
    knee_of = {(k["strategy"], k["run"]): k["knee"] for k in knees}
    out = []
    for r in rows:
        b = base.get((r["strategy"], r["load"]))
        if b is None:
            continue
        d = {"strategy": r["strategy"], "load": r["load"]}
        for k, label in CURVE_COLUMNS.items():
            d[label] = (r[k] - b[k]) if r[k] is not None and b[k] is not None else math.nan
        kn, kb = knee_of.get((r["strategy"], "now")), knee_of.get((r["strategy"], "baseline"))
        d["knee"] = (f"{kb:g} -> {kn:g}" if kn is not None and kb is not None else
                     f"{'-' if kb is None else f'{kb:g}'} -> {'-' if kn is None else f'{kn:g}'}")
        out.append(d)
    df = pd.DataFrame(out).set_index(["strategy", "load"])
    return df.style.format({v: "{:+,.2f}" for v in CURVE_COLUMNS.values()}, na_rep="-")


# -- the timeline ---------------------------------------------------------------------------

class Timeline(NamedTuple):
    bars: pd.DataFrame        # cpu, start_us, end_us, thread, step, request
    migrations: pd.DataFrame  # cpu (arrived on), t_us, what
    clocks: pd.DataFrame      # cpu, from_us, to_us, ghz: each CPU's clock span by span
    cpus: list[str]           # the CPUs' labels in CPU order


def timeline_of(doc: dict) -> Timeline:
    """A Chrome trace (``warmcore.trace.chrome_trace``) read back per CPU: its work
    slices, the migrations (on the CPU the thread arrived on) and its clock track;
    times in simulated us from the window's start."""
    ev = doc["traceEvents"]
    cpu_names = {e["tid"]: e["args"]["name"] for e in ev
                 if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 1}
    t0 = doc["otherData"]["window_us"][0] if doc["otherData"]["window_us"] else 0.0
    bars = pd.DataFrame([{"cpu": cpu_names[e["tid"]], "start_us": e["ts"] - t0,
                          "end_us": e["ts"] - t0 + e["dur"], "thread": e["args"]["thread"],
                          "step": e["name"], "request": e["args"].get("request", -1)}
                         for e in ev if e["ph"] == "X" and e["pid"] == 1])
    if bars.empty:
        return Timeline(bars, pd.DataFrame(), pd.DataFrame(), [])
    where = {}
    for e in ev:                          # the CPU a migrating thread arrived on
        if e["ph"] == "X" and e["pid"] == 2 and e["cat"] == "thread":
            where[(e["tid"], e["ts"])] = e["args"]["cpu"]
    migr = pd.DataFrame([{"cpu": cpu_names[where[(e["tid"], e["ts"])]], "t_us": e["ts"] - t0,
                          "what": f"thread {e['tid']}: {e['name']}"}
                         for e in ev if e["ph"] == "i" and (e["tid"], e["ts"]) in where])
    t1 = doc["otherData"]["window_us"][1] - t0
    clocks = []                           # each CPU's clock (its counter track) as spans
    for cpu in sorted(cpu_names):
        track = sorted((e["ts"] - t0, e["args"]["GHz"]) for e in ev
                       if e["ph"] == "C" and e["name"] == f"CPU {cpu} clock")
        for (a, ghz), (b, _) in zip(track, [*track[1:], (t1, None)], strict=True):
            if b > a:
                clocks.append({"cpu": cpu_names[cpu], "from_us": a, "to_us": b, "ghz": ghz})
    return Timeline(bars, migr, pd.DataFrame(clocks), [cpu_names[k] for k in sorted(cpu_names)])


# -- the answer across loads ----------------------------------------------------------------

def answer_frame(a: dict) -> pd.DataFrame:
    """The advice's points as a table: per load, the answer, its margin and interval
    (%), and each strategy's objective figure and throughput; doubts named."""
    rows = []
    for p in a["points"]:
        row = {"load": p["load"], "best": p["best"] or "no significant difference",
               "margin %": _pct(p["margin"]) if p["best"] else None,
               "95% interval %": _interval(p["interval95"]) if p["runner_up"] else None}
        for name in a["strategies"]:
            row[f"{name}: {a['objective']}"] = p["values"].get(name)
            row[f"{name}: req/s"] = p["served"].get(name)
        row["in doubt"] = "; ".join(f"{k}: {', '.join(v)}" for k, v in p["doubts"].items())
        rows.append(row)
    return pd.DataFrame(rows)


def answer_curve_frame(a: dict) -> pd.DataFrame:
    """Long form for the answer's charts: load, strategy, throughput, the objective's
    figure, and whether the run is in doubt."""
    return pd.DataFrame([{"load": float(p["load"]), "strategy": n, "served": p["served"][n],
                          "figure": p["values"][n], "in doubt": n in p["doubts"]}
                         for p in a["points"] for n in a["strategies"]])


def _pct(x):
    return None if x is None or not math.isfinite(x) else round(100 * x, 1)


def _interval(iv):
    if not iv or iv[0] is None:
        return None
    return f"{100 * iv[0]:.1f} .. {100 * iv[1]:.1f}"
