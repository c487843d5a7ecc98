"""``warmcore calibrate --report report.html``: measured against fitted figures,
residuals, the fitted values with their intervals, and a chart of each."""

from __future__ import annotations

import html
from pathlib import Path

import warmcore
from warmcore.simcore.config import write_atomic


PREDICTED = ("throughput_rps", "cpus_utilized", "ipc", "llc_loads_per_req",
             "p99_us")


def predictions(cal, strategies=None, draws: int = 4) -> list[dict]:
    """The first measurement's setup run by other strategies at the fitted values, each
    figure with its 95% interval (Calibration.predict)."""
    from warmcore.calibration.fit import FIGURES

    m = cal.spec.measurement[0]
    sc = m.scenario_obj(cal.spec.base_dir)
    names = list(dict.fromkeys([sc.strategy.name, *(strategies or ("pc", "pec", "epc"))]))
    rows = []
    for name in names:
        p = cal.predict(sc, strategy=name, draws=draws)
        iv = p.get("interval95", {})
        row = {"strategy": name}
        for k in PREDICTED:
            v = FIGURES[k](warmcore.Result.from_dict(
                {k2: v2 for k2, v2 in p.items() if k2 not in ("fitted", "interval95")}))
            lo, hi = iv.get(k, (v, v))
            row[k] = f"{v:.4g} [{lo:.4g}, {hi:.4g}]"
        rows.append(row)
    return rows


def write_report(cal, path: str | Path, strategies=None) -> None:
    import altair as alt
    import pandas as pd

    figs = pd.DataFrame(cal.figures)
    long = figs.melt(id_vars=["figure"], value_vars=["measured", "fitted"], var_name="which")
    bars = alt.Chart(long).mark_bar().encode(
        x=alt.X("which:N", title=None), y=alt.Y("value:Q"), color="which:N",
        column=alt.Column("figure:N", title=None)).resolve_scale(y="independent")
    resid = alt.Chart(figs).mark_bar().encode(
        x=alt.X("residual_sigmas:Q", title="residual (sigmas)"), y=alt.Y("figure:N", title=None))
    params = "".join(f"<tr><td>{html.escape(k)}</td><td>{v:.6g}</td><td>[{cal.ci95[k][0]:.6g}, "
                     f"{cal.ci95[k][1]:.6g}]</td></tr>" for k, v in cal.values.items())
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in cal.warnings) or "<li>none</li>"
    warn += "".join(f"<li>note: {html.escape(n)}</li>" for n in cal.notes)
    pred = pd.DataFrame(predictions(cal, strategies)).to_html(index=False)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>warmcore calibration</title>
<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>
<script src="https://cdn.jsdelivr.net/npm/vega-lite@5"></script>
<script src="https://cdn.jsdelivr.net/npm/vega-embed@6"></script></head><body>
<h1>warmcore calibration</h1>
<p>{cal.evaluations} simulations, condition number {cal.condition_number:.3g}</p>
<h2>Fitted parameters</h2><table border="1"><tr><th>parameter</th><th>fitted</th>
<th>95% interval</th></tr>{params}</table>
<h2>Figures</h2>{figs.to_html(index=False)}
<h2>Warnings</h2><ul>{warn}</ul>
<h2>Predictions from the fit</h2>
<p>The first measurement's setup run by each strategy at the fitted values; each figure
with its 95% interval over parameter draws from the fit's covariance and the seeds.</p>
{pred}
<div id="bars"></div><div id="resid"></div>
<script>vegaEmbed("#bars", {bars.to_json()}); vegaEmbed("#resid", {resid.to_json()});</script>
</body></html>"""
    write_atomic(path, page, "--report")
