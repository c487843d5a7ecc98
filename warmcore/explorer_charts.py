"""The explorer's charts (Altair), built from explorer_data's frames: where a request's
time went, the load curves with their knees, and the per-CPU timeline. Altair is
imported inside each function, as in sweep_report, so importing this module needs only
the core install; app.py hands the charts to Streamlit.
"""

from __future__ import annotations

from warmcore.explorer_data import CAUSES, Timeline, breakdown_frame

RUNS = ["now", "baseline"]      # a setup and its pinned baseline, in legend order


def breakdown_chart(results, baseline_results=None):
    """A stacked bar per strategy (and run, with a baseline) of where the time went."""
    import altair as alt

    order = list(CAUSES.values())
    x = alt.X("run:N", title=None, sort=["baseline", "now"],
              axis=alt.Axis(labelAngle=0) if baseline_results else None)
    return alt.Chart(breakdown_frame(results, baseline_results)).mark_bar().encode(
        x=x,
        y=alt.Y("sum(us):Q", title="mean us per request"),
        color=alt.Color("cause:N", sort=order, title="where the time went"),
        order=alt.Order("cause_order:Q"),
        column=alt.Column("strategy:N", title=None,
                          sort=list(dict.fromkeys(r.strategy for r in results))),
        tooltip=["strategy", "run", "cause", alt.Tooltip("us:Q", format=".2f")],
    ).transform_calculate(
        cause_order=f"indexof({order!r}, datum.cause)"
    ).properties(width=90, height=300).resolve_scale(y="independent")
    # each strategy on its own scale: one strategy's long queue wait would otherwise
    # flatten the others' bars (their totals are in the tooltips and the table)


def curve_charts(df, knees: list[dict], field: str) -> list:
    """p50/p99 latency (log scale), CPUs utilized and CPU us per request against the
    offered load (``field``), a line per strategy (the baseline's dashed), each knee a
    dotted rule (the baseline's faint). ``df``: explorer_data.curve_frame."""
    import altair as alt
    import pandas as pd

    kdf = pd.DataFrame([k for k in knees if k["knee"] is not None])
    x = alt.X("load:Q", title=f"offered load ({field})")
    color = alt.Color("strategy:N", sort=list(dict.fromkeys(df["strategy"])))
    dash = alt.StrokeDash("run:N", title="run", sort=RUNS,
                          scale=alt.Scale(domain=RUNS, range=[[1, 0], [6, 4]]))

    def with_knees(c):
        if kdf.empty:
            return c
        return c + alt.Chart(kdf).mark_rule(strokeDash=[2, 2]).encode(
            x="knee:Q", color=color,
            opacity=alt.Opacity("run:N", sort=RUNS, legend=None,
                                scale=alt.Scale(domain=RUNS, range=[1, 0.4])),
            tooltip=["strategy", "run", "knee"])

    def chart(y: str, title: str):
        return alt.Chart(df).mark_line(point=True).encode(
            x=x, y=alt.Y(f"{y}:Q", title=title), color=color, strokeDash=dash,
            tooltip=["strategy", "run", "load", alt.Tooltip(f"{y}:Q", format=",.2f")])

    lat = df.melt(id_vars=["strategy", "load", "run"], value_vars=["p50_us", "p99_us"],
                  var_name="percentile", value_name="us")
    lat["percentile"] = lat["percentile"].str.removesuffix("_us")
    latency = alt.Chart(lat).mark_line(point=True).encode(
        x=x, y=alt.Y("us:Q", title="latency (us)",
                     scale=alt.Scale(type="log")), color=color, strokeDash=dash,
        shape=alt.Shape("percentile:N", title="percentile",
                        scale=alt.Scale(domain=["p50", "p99"], range=["circle", "square"])),
        detail="percentile:N",
        tooltip=["strategy", "run", "load", "percentile", alt.Tooltip("us:Q", format=",.1f")])
    return [with_knees(c).properties(height=260)
            for c in (latency, chart("cpus", "CPUs utilized"),
                      chart("cpu_us_per_req", "CPU us per request"))]


def answer_charts(df, crossovers: list[dict], field: str, objective: str, open_loop: bool):
    """Throughput against offered load (the served = offered line dashed, for an open
    loop) and the objective's figure against load, a line per strategy, each
    crossover a rule with its interval shaded. ``df``: explorer_data.answer_curve_frame."""
    import altair as alt
    import pandas as pd

    x = alt.X("load:Q", title=f"offered load ({field})")
    color = alt.Color("strategy:N", sort=list(dict.fromkeys(df["strategy"])))
    shape = alt.Shape("in doubt:N", scale=alt.Scale(domain=[False, True],
                                                    range=["circle", "cross"]))
    cross = pd.DataFrame([{"load": c["load"], "lo": c["interval95"][0],
                           "hi": c["interval95"][1],
                           "flip": f"{c['from'] or 'no difference'} -> "
                                   f"{c['to'] or 'no difference'}"}
                          for c in crossovers])

    def marked(chart):
        if cross.empty:
            return chart
        band = alt.Chart(cross).mark_rect(opacity=0.15, color="#555").encode(
            x="lo:Q", x2="hi:Q")
        rule = alt.Chart(cross).mark_rule(color="black", strokeDash=[4, 3]).encode(
            x="load:Q", tooltip=["flip", alt.Tooltip("load:Q", format=",.0f"),
                                 alt.Tooltip("lo:Q", format=",.0f"),
                                 alt.Tooltip("hi:Q", format=",.0f")])
        return band + chart + rule

    served = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("served:Q", title="throughput (req/s)"), color=color, shape=shape,
        tooltip=["strategy", "load", alt.Tooltip("served:Q", format=",.0f"), "in doubt"])
    if open_loop:
        top = float(df["load"].max())
        ideal = alt.Chart(pd.DataFrame({"load": [0.0, top], "served": [0.0, top]})).mark_line(
            color="gray", strokeDash=[2, 2]).encode(x="load:Q", y="served:Q")
        served = ideal + served
    fig = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("figure:Q", title=objective,
                     scale=alt.Scale(type="log") if "latency" in objective else
                     alt.Undefined), color=color, shape=shape,
        tooltip=["strategy", "load", alt.Tooltip("figure:Q", format=",.2f"), "in doubt"])
    return [marked(c).properties(height=280) for c in (served, fig)]


# Threads' colours: Tableau 10 without its grey, since the clock band under them is a
# grey scale (light: a low clock, dark: a high one) that no thread's colour may match.
THREAD_HUES = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
               "#ff9da7", "#9c755f"]


def timeline_chart(t: Timeline):
    """Which thread ran on which CPU (a bar per slice, a colour per thread), under each
    CPU's row a grey band shaded by its clock, migrations as black triangles."""
    import altair as alt

    y = alt.Y("cpu:N", sort=t.cpus, title=None, axis=alt.Axis(labelLimit=400))
    gantt = alt.Chart(t.bars).mark_bar(height=16, yOffset=-5).encode(
        x=alt.X("start_us:Q", title="simulated us from the window's start"), x2="end_us:Q",
        y=y, color=alt.Color("thread:N", title="thread", scale=alt.Scale(range=THREAD_HUES)),
        tooltip=["cpu", "thread", "step", "request", alt.Tooltip("start_us:Q", format=".2f"),
                 alt.Tooltip("end_us:Q", format=".2f")])
    if not t.clocks.empty:                # a band under each CPU's work: its clock
        lo, hi = float(t.clocks["ghz"].min()), float(t.clocks["ghz"].max())
        band = alt.Chart(t.clocks).mark_bar(height=6, yOffset=10).encode(
            x="from_us:Q", x2="to_us:Q", y=y,
            color=alt.Color("ghz:Q", title="clock (GHz)",
                            scale=alt.Scale(scheme="greys",
                                            domain=[lo - 0.5, hi] if lo == hi else [lo, hi])),
            tooltip=["cpu", alt.Tooltip("ghz:Q", title="GHz", format=".2f"),
                     alt.Tooltip("from_us:Q", format=".1f"),
                     alt.Tooltip("to_us:Q", format=".1f")])
        gantt = alt.layer(gantt, band).resolve_scale(color="independent")
    if not t.migrations.empty:
        gantt = gantt + alt.Chart(t.migrations).mark_point(
            shape="triangle-down", color="black", size=60, filled=True, yOffset=-5).encode(
            x="t_us:Q", y=y, tooltip=["what", "t_us"])
    return gantt.properties(height=max(160, 34 * len(t.cpus)))
