"""``warmcore calibrate --report report.html``: measured against fitted figures,
residuals, the fitted values with their intervals, and a chart of each."""

from __future__ import annotations

import html
from pathlib import Path


def write_report(cal, path: str | Path) -> None:
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
<div id="bars"></div><div id="resid"></div>
<script>vegaEmbed("#bars", {bars.to_json()}); vegaEmbed("#resid", {resid.to_json()});</script>
</body></html>"""
    Path(path).write_text(page)
