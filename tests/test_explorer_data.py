"""What the explorer shows, shaped without Streamlit (warmcore.explorer_data and
warmcore.explorer_charts): the comparison table, the load curves with their baseline
and knees, a stopped comparison's note, and the timeline read back from its trace.
tests/test_explorer.py checks the same through the page."""

from __future__ import annotations

import math

import pytest

import warmcore
from warmcore import explorer_data as data
from warmcore import jobs

SMALL = warmcore.Scenario.load("mmc").with_(requests=300)
CLOSED = warmcore.Scenario.load({"workload": {"kind": "closed"}, "run": {"requests": 100}})


def results(sc=SMALL, names=("shared-queue", "pc")) -> list[warmcore.Result]:
    return warmcore.compare(sc, list(names))


def test_the_comparison_marks_partial_rows_and_its_best_values():
    rs = results()
    partial = warmcore.Result.from_dict({**rs[1].to_dict(), "partial": True})
    df = data.comparison_frame([rs[0], partial])
    assert list(df.index) == ["shared-queue", "pc (partial)"]
    assert list(df.columns) == [v[0] for v in data.COLUMNS.values()]
    assert df.loc["pc (partial)", "req/s"] == pytest.approx(rs[1].throughput_rps)
    html = data.styled(df).to_html()
    assert html.count("#c8f0c8") >= 1                   # some best value highlighted
    twin = warmcore.Result.from_dict({**rs[0].to_dict(), "strategy": "twin"})
    same = data.comparison_frame([rs[0], twin])
    assert "#c8f0c8" not in data.styled(same).to_html()  # equal rows: nothing is best
    delta = data.comparison_deltas(df, data.comparison_frame(rs)).data
    assert list(delta.index) == ["shared-queue"]        # only rows in both tables
    assert (delta.loc["shared-queue"].fillna(0) == 0).all()


def test_values_that_differ_beyond_the_shown_digits_are_both_best():
    """pc and pec on one pipelined connection are the same loop on two threads: their
    figures agree to the shown digits but not always to the last bit, and the table
    marks both, not whichever float came out a hair larger."""
    rs = results()
    row = rs[0].to_dict()
    hair = warmcore.Result.from_dict({**row, "strategy": "hair",
                                      "throughput_rps": row["throughput_rps"] * (1 + 1e-12)})
    slower = warmcore.Result.from_dict({**row, "strategy": "slower",
                                        "throughput_rps": row["throughput_rps"] * 0.5})
    df = data.comparison_frame([rs[0], hair, slower])
    css = data.styled(df).to_html().split("</style>")[0]
    marked = {sel.strip().rsplit("_", 2)[-2] + "_" + sel.strip().rsplit("_", 1)[-1]
              for rule in css.split("}") if "#c8f0c8" in rule
              for sel in rule.split("{")[0].split(",")}
    assert {"row0_col0", "row1_col0"} <= marked and "row2_col0" not in marked, marked


def test_the_breakdown_has_a_row_per_strategy_run_and_cause():
    rs = results()
    df = data.breakdown_frame(rs, rs[:1])
    assert len(df) == 3 * len(data.CAUSES)
    assert set(df["run"]) == {"now", "baseline"} and set(df["cause"]) == set(
        data.CAUSES.values())
    mine = df[(df["strategy"] == "pc") & (df["run"] == "now")]
    assert mine["us"].sum() == pytest.approx(sum(
        v or 0.0 for v in (getattr(rs[1].breakdown_us, k) for k in data.CAUSES)))


@pytest.mark.parametrize("text, field, loads", [
    ("4000, 1000, 2000, 1000", "rate_per_s", [1000.0, 2000.0, 4000.0]),
    ("1, 2.7, 2, ", "clients", [1, 2]),
])
def test_loads_typed(text, field, loads):
    assert data.parse_loads(text, field) == loads


@pytest.mark.parametrize("text", ["", "1, lots", "0, 1", "-2"])
def test_bad_loads_are_one_line(text):
    with pytest.raises(ValueError) as e:
        data.parse_loads(text, "rate_per_s")
    assert str(e.value) == f"loads: {text!r} is not a list of positive numbers"


def test_default_loads_scale_a_rate_and_double_counts():
    assert data.default_loads(SMALL).split(", ")[3] == f"{SMALL.workload.rate_per_s:g}"
    assert data.default_loads(CLOSED) == "1, 2, 5, 10, 20"      # its own 10 clients, twice


def test_the_baseline_is_overlaid_only_with_the_same_kind_of_load():
    now = SMALL.to_toml()
    other = SMALL.with_(seed=9).to_toml()
    closed = CLOSED.to_toml()
    assert data.overlaid_baseline(None, now, "rate_per_s") is None
    assert data.overlaid_baseline({"toml": now}, now, "rate_per_s") is None
    assert data.overlaid_baseline({"toml": closed}, now, "rate_per_s") is None
    assert data.overlaid_baseline({"toml": other}, now, "rate_per_s") == other
    assert data.why_not_overlaid(now, now, "rate_per_s") == "it is this setup"
    assert "another kind of number" in data.why_not_overlaid(closed, now, "rate_per_s")
    assert "pinned after" in data.why_not_overlaid(other, now, "rate_per_s")


def test_load_curves_with_a_baseline_their_knees_and_deltas():
    from warmcore.explorer_charts import curve_charts

    now, base = SMALL.to_toml(), SMALL.with_({"workload.service_us": 900.0}).to_toml()
    runs = data.curve_runs(now, base, ["pc"], [1000.0, 3900.0])
    assert [r.label for r in runs] == ["pc at 1000", "pc at 3900", "baseline: pc at 1000",
                                       "baseline: pc at 3900"]
    job = jobs.Job(("k",), [(r.label, lambda stop, r=r: jobs.run_at_load(
        r.toml, r.strategy, r.load, stop)) for r in runs])
    assert job.wait(60) and job.error is None
    meta = {"toml": now, "field": "rate_per_s", "base_toml": base,
            "baseline": [r.baseline for r in runs]}
    curves = data.curves_of(job, meta)
    assert [r["load"] for r in curves["rows"]] == [1000.0, 3900.0]
    assert len(curves["base_rows"]) == 2 and curves["stopped"] is None
    assert data.shows_baseline(curves, {"toml": base})
    assert not data.shows_baseline(curves, {"toml": now}) and not data.shows_baseline(
        curves, None)
    df = data.curve_frame(curves, True)
    assert list(df["run"]) == ["now", "now", "baseline", "baseline"]
    knees = data.knees_of(curves, True)
    assert [(k["strategy"], k["run"]) for k in knees] == [("pc", "now"), ("pc", "baseline")]
    assert data.knee_text(knees, "now").startswith("pc: ")
    delta = data.curve_deltas(curves["rows"], curves["base_rows"], knees).data
    assert list(delta.index) == [("pc", 1000.0), ("pc", 3900.0)]
    assert (delta["CPU us/req"] > 0).all()              # 1000 us of service against 900
    assert all(" -> " in k for k in delta["knee"])
    charts = curve_charts(df, knees, "rate_per_s")
    assert len(charts) == 3 and all(c.to_dict()["height"] == 260 for c in charts)


def test_stopped_load_curves_leave_out_the_stopped_run():
    done = results(names=["pc"])[0].to_dict()

    def stopped(should_stop):
        raise jobs.Stopped({**done, "stop_reason": "stopped"})

    job = jobs.Job(("k",), [("a", lambda should_stop: done), ("b", stopped)])
    job.stop.set()       # a stop flag that the runs did not check: no run is skipped
    assert job.wait(10)
    curves = data.curves_of(job, {"toml": "t", "field": "rate_per_s", "base_toml": None,
                                  "baseline": [False, False]})
    assert len(curves["rows"]) == 1 and curves["stopped"] == "1 of 2 runs"


def test_a_stopped_comparison_says_how_far_it_got_and_what_did_not_run():
    r = warmcore.Result.from_dict({**results(names=["pc"])[0].to_dict(),
                                   "stop_reason": "stopped", "partial": True})
    note = data.stopped_note([r], ["pc", "pec", "epc"], 0.12, 300)
    assert note == (f"Stopped: partial result. pc: stopped at 12% of its run, "
                    f"{r.requests:,} of 300 measured requests; not run: pec, epc")
    cold = warmcore.Result.from_dict({**r.to_dict(), "requests": 0})
    assert data.stopped_note([cold], ["pc"], 0.01, 300).endswith(
        "0 of 300 measured requests (still in its warm-up)")


def test_the_timeline_reads_the_trace_back_per_cpu():
    from warmcore.explorer_charts import timeline_chart
    from warmcore.trace import chrome_trace

    sc = warmcore.Scenario.load("pipeline").with_({"run.trace_events": 300}, requests=400)
    doc = chrome_trace(warmcore.compare(sc, ["pec"])[0])
    t = data.timeline_of(doc)
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 1]
    assert len(t.bars) == len(slices) > 0
    assert (t.bars["end_us"] >= t.bars["start_us"]).all() and t.bars["start_us"].min() >= 0
    assert set(t.bars["cpu"]) <= set(t.cpus) and len(t.cpus) == len(set(t.cpus))
    assert set(t.clocks["cpu"]) == set(t.cpus)          # every CPU's clock band
    assert (t.clocks["to_us"] > t.clocks["from_us"]).all()
    assert not math.isnan(t.clocks["ghz"].max())
    spec = timeline_chart(t).to_dict()
    assert spec["height"] == max(160, 34 * len(t.cpus))
    # threads in hues, the clock band in greys: no thread's colour is a grey
    threads, clock = (layer["encoding"]["color"]["scale"] for layer in spec["layer"][:2])
    assert clock == {**clock, "scheme": "greys"}
    for hue in threads["range"]:
        r, g, b = (int(hue[i:i + 2], 16) for i in (1, 3, 5))
        assert max(r, g, b) - min(r, g, b) > 40, hue


def test_default_loads_reach_past_the_capacity_the_runs_imply():
    """contended-like: set to 10,000 req/s while a strategy serves 40,000 req/s on 2 of
    8 CPUs: the capacity bound is 40,000 / 2 x 8 = 160,000 req/s; the loads run from a
    tenth of it to 120%, the scenario's own rate among them. A count doubles to twice
    the scenario's own (web: 400 clients)."""
    from types import SimpleNamespace

    run = SimpleNamespace(throughput_rps=40_000.0, cpus_utilized=2.0, cpu_utilization=[0.2] * 8)
    assert data.capacity_bound([run]) == 160_000.0
    sc = SMALL.edit({"workload.rate_per_s": 10_000.0})
    loads = [float(x) for x in data.default_loads(sc, [run]).split(", ")]
    assert loads == [10_000, 16_000, 40_000, 80_000, 120_000, 160_000, 192_000]
    web = CLOSED.edit({"workload.clients": 400})
    assert data.default_loads(web) == "1, 50, 100, 200, 400, 800"


def test_deltas_show_the_change_in_percent():
    df = data.comparison_frame(results()[:1])
    base = df * 2
    out = data.comparison_deltas(df, base)
    req = df["req/s"].iloc[0]
    assert out.data["req/s"].iloc[0] == pytest.approx(-req)
    assert out.shown["req/s"].iloc[0] == f"{-req:+,.2f} (-50.0%)"
