"""warmcore sweep-report: a real small sweep's means and Student t intervals match a
hand computation on the same rows; its charts are valid PNG and HTML holding the
Vega-Lite spec; charts the axes do not allow are left out and said so; a sampled
design ranks the one axis that matters first; bad input is one line and exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import warmcore
from warmcore.cli import main
from warmcore.sweep_report import is_sampled, report, sensitivity, summary
from warmcore.sweeps import read_results

pytest.importorskip("altair")
pytest.importorskip("vl_convert")
pytest.importorskip("SALib")

SPEC = """
scenario = "mmc"
set = ["run.requests=300"]
replications = 3
metrics = ["throughput_rps", "latency_us.p99", "cpus_utilized", "ipc", "ghz", "requests"]
[axes]
"strategy.name" = ["pc", "pec"]
"machine.cores" = [1, 2]
"workload.rate_per_s" = [500.0, 900.0]
"""
AXES = ["axis.strategy.name", "axis.machine.cores", "axis.workload.rate_per_s"]
CHARTS = ["latency-vs-load", "throughput-vs-cores", "cpu-per-request-vs-cores",
          "ipc-ghz-per-strategy"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A real sweep (8 points x 3 replications of 300 requests) and its CLI report."""
    d = tmp_path_factory.mktemp("sweep")
    (d / "spec.toml").write_text(SPEC)
    out = d / "results"
    assert main(["sweep", str(d / "spec.toml"), "--out", str(out), "--workers", "1",
                 "--quiet"]) == 0
    return d, out


@pytest.fixture(scope="module")
def cli_report(swept):
    import contextlib

    d, out = swept
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["sweep-report", str(out), "--html", str(d / "report.html")])
    assert code == 0
    return buf.getvalue()


def hand_interval(values) -> tuple[float, float, int]:
    """Mean and half-width of the 95% Student t interval, computed directly."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    return x.mean(), stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / np.sqrt(n), n


def test_means_and_intervals_match_a_hand_computation_on_the_same_rows(swept, cli_report):
    _, out = swept
    rows = read_results(out)
    s = warmcore.report_sweep(out, charts_dir=None, file=io.StringIO())["summary"]
    assert len(s) == 8 and (s["n"] == 3).all() and (s["failed"] == 0).all()
    for _, point in s.iterrows():
        mine = rows[(rows[AXES] == point[AXES]).all(axis=1)]
        for m in ("throughput_rps", "latency_us.p99", "cpus_utilized"):
            mean, half, n = hand_interval(mine[m])
            assert n == point["n"] == 3
            assert point[m] == pytest.approx(mean)
            assert point[f"{m}.lo"] == pytest.approx(mean - half)
            assert point[f"{m}.hi"] == pytest.approx(mean + half)
        # The printed table has the point's row with the same numbers (cpus < 10: 3 decimals).
        mean, half, _ = hand_interval(mine["cpus_utilized"])
        assert f"{mean:.3f} ±{half:.3f}" in cli_report


def test_the_printed_report_says_its_method_and_what_it_left_out(cli_report):
    lines = cli_report.splitlines()
    assert "8 points, 24 runs (0 failed)" in lines[0]
    assert "Student t: t(0.975, n-1) * s / sqrt(n)" in cli_report
    table = [ln for ln in lines if ln.strip().startswith(("pc ", "pec "))]
    blocks = [ln for ln in lines if ln.strip().startswith("strategy.name")]
    assert blocks and len(table) == 8 * len(blocks)     # one row per point in each block
    # the ideal machine's clock is exactly its own; pec's kernel work lowers its IPC,
    # so IPC varies and only pc-like figures stay constant
    assert "the same in every run: ghz 1.000, requests 300" in cli_report
    assert "cpu_us_per_req = cpus_utilized * 1e6 / throughput_rps" in cli_report
    assert "sensitivity ranking: not computed (a grid design" in cli_report
    assert "not drawn" not in cli_report          # every chart has its axes here


def test_every_chart_is_a_valid_png_and_an_html_holding_its_vega_lite_spec(swept, cli_report):
    from PIL import Image

    d, out = swept
    charts = d / "results-charts"
    for name in CHARTS:
        png = charts / f"{name}.png"
        with Image.open(png) as im:
            im.verify()
            assert im.format == "PNG"
        with Image.open(png) as im:
            assert im.width >= 300 and im.height >= 200
            assert len(np.unique(np.asarray(im.convert("L")))) > 10    # not a blank image
        assert png.stat().st_size > 10_000
        html = (charts / f"{name}.html").read_text()
        assert "vega-lite" in html and "vegaEmbed" in html
    spec = _embedded_spec((charts / "latency-vs-load.html").read_text())
    data = next(iter(spec["datasets"].values()))
    assert {r["strategy_name"] for r in data} == {"pc", "pec"}
    page = (d / "report.html").read_text()
    assert page.count("vegaEmbed('#chart") == len(CHARTS)
    assert '"$schema": "https://vega.github.io/schema/vega-lite/' in page \
        or '"$schema":"https://vega.github.io/schema/vega-lite/' in page
    assert "Means per point" in page and "<table" in page


def _embedded_spec(html: str) -> dict:
    start = html.index("var spec = ") + len("var spec = ") if "var spec = " in html \
        else html.index("const spec = ") + len("const spec = ")
    return json.JSONDecoder().raw_decode(html[start:])[0]


def synthetic(tmp_path: Path, n: int = 64) -> Path:
    """A random design over three axes where throughput depends on ``work.a`` only."""
    rng = np.random.default_rng(7)
    a, b, c = rng.random(n), rng.random(n), rng.random(n)
    df = pd.DataFrame({
        "point_id": [f"{i:016x}" for i in range(n)], "replication": 0, "seed": range(n),
        "axis.work.a": a, "axis.work.b": b * 10, "axis.work.c": c + 5,
        "throughput_rps": 1000 + 800 * a ** 2 + rng.normal(0, 5, n),
        "error": [None] * n})
    path = tmp_path / "synthetic.parquet"
    df.to_parquet(path, index=False)
    return path


def test_a_sampled_design_ranks_the_one_axis_that_matters_first(tmp_path, capsys):
    path = synthetic(tmp_path)
    df = pd.read_parquet(path)
    assert is_sampled(df)
    r = sensitivity(df, "throughput_rps")
    assert list(r["parameter"])[0] == "work.a"
    assert r["S1"][0] > 0.8 and r["S1"][0] - r["S1"][1] > 0.6
    assert main(["sweep-report", str(path), "--charts", str(tmp_path / "charts")]) == 0
    text = capsys.readouterr().out
    assert "which parameter matters for throughput_rps" in text
    assert "  1. work.a" in text
    # None of the standard charts has its axes here: each is left out, with the reason.
    assert "not drawn: latency-vs-load: no load axis" in text
    assert "not drawn: throughput-vs-cores: no axis counts cores" in text
    assert "not drawn: ipc-ghz-per-strategy: no strategy.name axis" in text
    assert (tmp_path / "charts" / "sensitivity.png").stat().st_size > 5_000


def test_a_grid_is_not_sampled_and_one_run_has_no_interval():
    df = pd.DataFrame({"point_id": ["p", "q", "q", "r"], "replication": [0, 0, 1, 0],
                       "axis.x": [1, 2, 2, 3], "m": [5.0, 1.0, 3.0, np.nan],
                       "error": [None, None, None, "boom"]})
    assert not is_sampled(df)
    s = summary(df, ["m"]).set_index("axis.x")
    assert list(s["n"]) == [1, 2, 0] and list(s["failed"]) == [0, 0, 1]
    assert np.isnan(s.loc[1, "m.lo"])             # one run: no interval
    half = stats.t.ppf(0.975, 1) * np.std([1.0, 3.0], ddof=1) / np.sqrt(2)
    assert s.loc[2, "m.hi"] == pytest.approx(2.0 + half)


def _bad_parquet(tmp_path: Path) -> Path:
    p = tmp_path / "other.parquet"
    pd.DataFrame({"x": [1, 2]}).to_parquet(p)
    return p


@pytest.mark.parametrize("make, words", [
    (lambda t: t / "missing", "no such file or directory"),
    (lambda t: (t / "notes.parquet").write_text("not parquet") and t / "notes.parquet",
     "not a Parquet file"),
    (_bad_parquet, "not the rows of a warmcore sweep"),
    (lambda t: (t / "empty").mkdir() or t / "empty", "no part-*.parquet files"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, make, words):
    path = make(tmp_path)
    assert main(["sweep-report", str(path), "--no-charts"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warmcore: error: "), err
    assert words in lines[0] and out == ""


def test_the_api_returns_what_the_cli_printed(swept, tmp_path):
    _, out = swept
    buf = io.StringIO()
    got = report(out, charts_dir=tmp_path / "c", file=buf)
    assert set(got["charts"]) == set(CHARTS) and got["skipped"] == []
    assert got["sensitivity"] == {} and got["html"] is None
    assert all(png.is_file() for _, png in got["charts"].values())
