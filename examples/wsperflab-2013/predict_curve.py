"""Predict the WSPerfLab curves from the fits and chart them against the measured.

    warmcore calibrate calibrate-tomcat.toml --out tomcat.params.toml
    warmcore calibrate calibrate-netty.toml --out netty.params.toml
    python predict_curve.py            # -> predicted.csv, ../../docs/wsperflab-curves.png

Each point is `warmcore predict SCENARIO --params P --set workload.clients=N
--draws 4 --json`: the figure at the fitted values and its 95% interval over four
parameter vectors drawn from the fit's covariance (5 simulations a point).
`python predict_curve.py --chart-only` redraws the chart from predicted.csv.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHART = HERE.parent.parent / "docs" / "wsperflab-curves.png"
DRAWS = 4
# server -> (scenario, params, run in curves.csv, users fitted, users predicted)
SERVERS = {
    "tomcat-bio": ("tomcat-bio.toml", "tomcat.params.toml", "java_bio_blocking",
                   (75, 150), (75, 150, 225, 300, 375, 750, 1425)),
    "netty": ("netty.toml", "netty.params.toml", "netty_results_to_1500",
              (75, 375, 750), (75, 225, 375, 750, 1050, 1425)),
}
COLUMNS = ("server", "clients", "fitted_on", "throughput_rps", "throughput_lo",
           "throughput_hi", "p50_ms", "p50_lo", "p50_hi")


def predict_point(scenario: str, params: str, clients: int) -> dict:
    out = subprocess.run(
        ["warmcore", "predict", str(HERE / scenario), "--params", str(HERE / params),
         "--set", f"workload.clients={clients}", "--draws", str(DRAWS), "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def predicted_rows() -> list[dict]:
    rows = []
    for server, (scenario, params, _run, fitted, users) in SERVERS.items():
        for clients in users:
            r = predict_point(scenario, params, clients)
            thr, p50 = r["interval95"]["throughput_rps"], r["interval95"]["p50_us"]
            rows.append({
                "server": server, "clients": clients, "fitted_on": clients in fitted,
                "throughput_rps": round(r["throughput_rps"], 1),
                "throughput_lo": round(thr[0], 1), "throughput_hi": round(thr[1], 1),
                "p50_ms": round(r["latency_us"]["p50"] / 1000, 1),
                "p50_lo": round(p50[0] / 1000, 1), "p50_hi": round(p50[1] / 1000, 1),
            })
            print(server, clients, rows[-1]["throughput_rps"], thr, file=sys.stderr)
    return rows


def measured_rows() -> list[dict]:
    runs = {run: server for server, (_s, _p, run, _f, _u) in SERVERS.items()}
    with open(HERE / "curves.csv", newline="") as f:
        return [{"server": runs[r["run"]], "clients": int(r["clients"]),
                 "throughput_rps": float(r["ok_per_s"]), "p50_ms": float(r["p50_ms"])}
                for r in csv.DictReader(f) if r["run"] in runs]


def chart(predicted: list[dict], measured: list[dict]):
    import altair as alt
    import pandas as pd

    pred = pd.DataFrame(predicted)
    pred["source"] = "predicted (95% interval)"
    meas = pd.DataFrame(measured)
    meas["source"] = "measured (WSPerfLab)"
    x = alt.X("clients:Q", title="Gatling users (no think time)")
    y = alt.Y("throughput_rps:Q", title="OK responses per s")
    color = alt.Color("source:N", title=None)
    panels = []
    for server in SERVERS:
        p = pred[pred["server"] == server]
        m = meas[meas["server"] == server]
        band = alt.Chart(p).mark_area(opacity=0.25).encode(
            x=x, y="throughput_lo:Q", y2="throughput_hi:Q", color=color)
        line = alt.Chart(p).mark_line(point=True).encode(x=x, y=y, color=color)
        real = alt.Chart(m).mark_line(point=True, strokeDash=[4, 2]).encode(
            x=x, y=y, color=color)
        fitted = alt.Chart(p[p["fitted_on"]]).mark_point(
            shape="diamond", size=160, filled=False, color="black").encode(x=x, y=y)
        panels.append(alt.layer(band, line, real, fitted).properties(
            width=330, height=240, title=server))
    return alt.hconcat(*panels).properties(
        title="WSPerfLab 22 Oct 2013: measured vs predicted (diamonds: the users fitted on)")


def main(argv: list[str]) -> int:
    out = HERE / "predicted.csv"
    if "--chart-only" not in argv:
        rows = predicted_rows()
        with open(out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    with open(out, newline="") as f:
        rows = [{**r, "fitted_on": r["fitted_on"] == "True"} for r in csv.DictReader(f)]
    for r in rows:
        for k in COLUMNS[3:]:
            r[k] = float(r[k])
        r["clients"] = int(r["clients"])
    chart(rows, measured_rows()).save(str(CHART), format="png", scale_factor=1.5)
    print(f"-> {out}, {CHART}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
