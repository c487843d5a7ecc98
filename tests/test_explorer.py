"""The explorer (app.py) through Streamlit's AppTest: defaults, every kind of control,
uploads good and bad, and the downloaded TOML reproducing the run through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("altair")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


def started() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert not at.exception, at.exception
    return at


def comparison(at: AppTest):
    """The comparison table: the data frame indexed by strategy."""
    frames = [d.value for d in at.main.dataframe if "req/s" in d.value.columns]
    assert frames, "no comparison table"
    return frames[0]


def widget(at: AppTest, kind: str, key: str):
    return getattr(at, kind)(key=f"p{at.session_state.gen}:{key}" if ":" not in key and
                             "." in key else f"{key}{at.session_state.gen}")


def apply(at: AppTest) -> AppTest:
    at.button[[b.label for b in at.button].index("Apply")].click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def test_defaults_render_without_exception():
    at = started()
    df = comparison(at)
    assert list(df.index) == ["pc", "jetty9-milestone", "pec"]
    assert {"req/s", "p50 (us)", "p99 (us)", "max (us)", "CPUs", "CPU us/req", "IPC", "GHz",
            "LLC loads/req", "migrations/req", "switches/req", "uJ/req"} <= set(df.columns)
    assert (df["req/s"] > 0).all()
    assert len(at.get("vega_lite_chart")) == 1        # the breakdown chart
    assert not at.error
    assert at.get("download_button")


@pytest.mark.parametrize("kind, key, value, column", [
    ("number_input", "workload.service_us", 16.0, "CPU us/req"),
    ("number_input", "work.code_kib", 2048.0, "LLC loads/req"),
    ("number_input", "seed", 7, "max (us)"),
    ("number_input", "req", 1500, "max (us)"),
    ("selectbox", "preset", "epyc-zen3", "GHz"),
    ("selectbox", "gov", "performance", "GHz"),
    ("number_input", "strategy.params.queue_us", 5.0, "CPU us/req"),
    ("selectbox", "machine.overrides.freq_domain", "core", "GHz"),
])
def test_changing_a_control_and_applying_changes_the_figures(kind, key, value, column):
    at = started()
    before = comparison(at)
    if key.startswith("strategy.params."):
        # the Jetty pool's tunables, on the strategy that dispatches every request
        # (pec loops on its one pipelined connection and dispatched it once, in the
        # warm-up: its queue_us moved its figures only in their last floating digit)
        widget(at, "selectbox", "main").set_value("jetty9-milestone")
        apply(at)
        before = comparison(at)
    widget(at, kind, key).set_value(value)
    apply(at)
    after = comparison(at)
    assert list(after.index) == list(before.index)
    assert not after[column].equals(before[column]), (key, column)


def test_strategy_selection_changes_the_rows():
    at = started()
    widget(at, "multiselect", "strategies").set_value(["pc", "thread-pool"])
    apply(at)
    assert list(comparison(at).index) == ["pc", "thread-pool"]


def test_an_invalid_value_is_one_line_and_keeps_the_setup():
    at = started()
    toml = at.session_state.toml
    widget(at, "multiselect", "strategies").set_value([])
    at.button[[b.label for b in at.button].index("Apply")].click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["strategies: pick at least one strategy to compare"]
    assert at.session_state.toml == toml
    assert list(comparison(at).index) == ["pc", "jetty9-milestone", "pec"]


@pytest.mark.parametrize("content, expect", [
    (b"this is = = not toml", "not valid TOML"),
    (b"[workload]\nkind = 'open'\nrate_per_s = -5\n[run]\nrequests = 100\n",
     "workload.rate_per_s"),
    (b"[workload]\nkind = 'closed'\n[run]\nrequests = 100\n[machine]\ncolour = 1\n",
     "machine.colour: unknown key"),
    (b"\xff\xfe\x00 binary", "not UTF-8"),
    (b"# padding\n" * 10_000, "more than the"),
])
def test_a_bad_upload_shows_one_line_not_a_traceback(content, expect):
    at = started()
    toml = at.session_state.toml
    at.file_uploader(key="upload").set_value(("bad.toml", content, "application/toml")).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and expect in errors[0] and "\n" not in errors[0], errors
    assert errors[0].startswith("bad.toml: ")
    assert at.session_state.toml == toml                     # nothing of the setup lost
    assert list(comparison(at).index) == ["pc", "jetty9-milestone", "pec"]


def test_an_upload_without_a_run_table_names_what_else_is_wrong():
    """A scenario without [run] runs as long as a built-in does here; what else is
    wrong in it (an unknown preset) is what the line names, not the missing table."""
    at = started()
    text = (b"[machine]\npreset = 'nonesuch'\n[workload]\nkind = 'open'\n"
            b"rate_per_s = 1000\n[strategy]\nname = 'pc'\n")
    at.file_uploader(key="upload").set_value(("norun.toml", text, "application/toml")).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith(
        "norun.toml: machine.preset: unknown preset 'nonesuch'"), errors
    at.file_uploader(key="upload").set_value(
        ("norun.toml", text.replace(b"nonesuch", b"ideal"), "application/toml")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "requests = 3000" in at.session_state.toml


def test_an_upload_error_goes_when_its_file_is_removed_or_replaced():
    at = started()
    at.file_uploader(key="upload").set_value(("bad.toml", b"x = = 1", "text/plain")).run()
    assert [e.value for e in at.error][0].startswith("bad.toml: ")
    at.file_uploader(key="upload").set_value([]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.file_uploader(key="upload").set_value(("bad.toml", b"x = = 1", "text/plain")).run()
    assert len(at.error) == 1
    good = (b"[workload]\nkind = 'open'\nrate_per_s = 1000\n[strategy]\nname = 'pc'\n"
            b"[run]\nrequests = 300\n")
    at.file_uploader(key="upload").set_value(("good.toml", good, "text/plain")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]


def test_a_good_upload_replaces_the_setup():
    at = started()
    text = (b"name = 'mine'\nseed = 3\n[machine]\npreset = 'ideal'\ncores = 2\n"
            b"[workload]\nkind = 'open'\nrate_per_s = 5000\nservice_us = 100\n"
            b"[strategy]\nname = 'shared-queue'\n[run]\nrequests = 800\n")
    at.file_uploader(key="upload").set_value(("mine.toml", text, "application/toml")).run()
    assert not at.exception and not at.error
    assert "mine" in at.session_state.toml
    df = comparison(at)
    assert df.index[0] == "shared-queue"
    assert df.loc["shared-queue", "req/s"] == pytest.approx(5000, rel=0.2)


def test_downloaded_toml_reproduces_the_run_through_the_cli(tmp_path):
    at = started()
    widget(at, "number_input", "work.task_kib").set_value(12.0)
    apply(at)
    path = tmp_path / "setup.toml"
    path.write_text(at.session_state.toml)
    shown = {r["strategy"]: r for r in at.session_state.results}
    out = subprocess.run([sys.executable, "-m", "warmcore.cli", "run", str(path), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    cli = json.loads(out.stdout)
    assert cli == json.loads(json.dumps(shown[cli["strategy"]]))
    # and another strategy of the comparison through --strategy
    out = subprocess.run([sys.executable, "-m", "warmcore.cli", "run", str(path), "--json",
                          "--strategy", "pec"], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert json.loads(out.stdout) == json.loads(json.dumps(shown["pec"]))


def test_the_downloaded_toml_holds_the_compared_strategies_and_reruns_the_table(tmp_path):
    """The TOML the explorer downloads carries the strategies compared
    (strategy.compare): `warmcore compare FILE` runs the same table; uploaded back, the
    same strategies are compared."""
    from warmcore.explorer_setup import downloaded_toml

    at = started()
    widget(at, "multiselect", "strategies").set_value(["pc", "epc", "thread-pool"])
    apply(at)
    text = downloaded_toml(at.session_state.toml, at.session_state.strategies)
    assert tomllib.loads(text)["strategy"]["compare"] == ["pc", "epc", "thread-pool"]
    path = tmp_path / "setup.toml"
    path.write_text(text)
    out = subprocess.run([sys.executable, "-m", "warmcore.cli", "compare", str(path), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    shown = json.loads(json.dumps(at.session_state.results))
    assert json.loads(out.stdout) == shown
    fresh = started()
    fresh.file_uploader(key="upload").set_value(("setup.toml", text.encode(),
                                                 "application/toml")).run()
    assert not fresh.exception and not fresh.error, [e.value for e in fresh.error]
    assert list(comparison(fresh).index) == ["pc", "epc", "thread-pool"]
    assert "compare" not in fresh.session_state.toml     # the runs' cache key: not in it


def test_pinning_a_baseline_shows_deltas():
    at = started()
    at.button[[b.label for b in at.button].index("Pin as baseline")].click().run()
    widget(at, "number_input", "workload.service_us").set_value(16.0)
    apply(at)
    frames = [d.value for d in at.main.dataframe if "req/s" in d.value.columns]
    assert len(frames) == 2                                  # the table and its deltas
    delta = frames[1]                         # now minus baseline, and in % of it
    assert delta["CPU us/req"].str.fullmatch(r"\+[\d,.]+ \(\+[\d.]+%\)").all(), delta
    assert any("baseline" in m.value for m in at.markdown)


TRACE_SCENARIO = (b"name = 'traced'\n[workload]\nkind = 'open'\narrival = 'trace'\n"
                  b"trace_file = 'arrivals.txt'\nservice_us = 100\n[strategy]\nname = 'pc'\n"
                  b"[run]\nrequests = 300\n")


def test_a_failing_run_shows_its_one_line_error():
    """Valid as a scenario and as a machine, but its uploaded trace is not: the run
    fails, shown as one line naming the upload as the user named it."""
    at = started()
    at.file_uploader(key="upload").set_value([
        ("trace.toml", TRACE_SCENARIO, "application/toml"),
        ("arrivals.txt", b"0.001\nnot-a-time\n", "text/plain")]).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("run failed: ") and "\n" not in errors[0]
    assert "arrivals.txt:2: 'not-a-time' is not a time in seconds" in errors[0]
    assert "warmcore-uploads" not in errors[0]             # the server's own folder unseen


@pytest.mark.parametrize("path", ["/etc/passwd", "../../etc/hostname", "arrivals.txt"])
def test_a_scenario_naming_a_server_file_is_refused_at_upload_without_reading_it(path):
    """A scenario may name only files uploaded with it: any other path is refused before
    anything reads it, and the refusal shows nothing of the file (docs/explorer.md,
    Security). ``arrivals.txt`` not uploaded is a server path too."""
    at = started()
    before = at.session_state.toml
    text = TRACE_SCENARIO.replace(b"'arrivals.txt'", f"'{path}'".encode())
    at.file_uploader(key="upload").set_value(("evil.toml", text, "application/toml")).run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [
        "evil.toml: workload.trace_file: names a file on the machine that serves the "
        "explorer; upload the file together with the scenario and name it by its file name"]
    assert at.session_state.toml == before
    assert "root:" not in str([m.value for m in at.markdown])


def test_an_uploaded_trace_runs_and_its_setup_reruns_from_the_cli(tmp_path):
    """Upload a scenario and its trace, run, download the setup (a zip of both), unzip
    it and rerun from the CLI: the same numbers."""
    import io
    import zipfile

    at = started()
    times = "".join(f"{i * 0.0004:.6f}\n" for i in range(1, 1200)).encode()
    at.file_uploader(key="upload").set_value([
        ("traced.toml", TRACE_SCENARIO, "application/toml"),
        ("arrivals.txt", times, "text/plain")]).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    shown = {r["strategy"]: r for r in at.session_state.results}
    assert shown["pc"]["requests"] > 0
    assert shown["pc"]["throughput_rps"] == pytest.approx(2500, rel=0.05)  # one per 0.4 ms
    labels = [b.label for b in at.get("download_button")]
    assert "Download setup (.zip)" in labels
    from warmcore import uploads

    data = uploads.setup_zip(at.session_state.toml, at.session_state.uploads, "traced")
    zipfile.ZipFile(io.BytesIO(data)).extractall(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arrivals.txt", "traced.toml"]
    out = subprocess.run([sys.executable, "-m", "warmcore.cli", "run", "traced.toml", "--json"],
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert json.loads(out.stdout) == json.loads(json.dumps(shown["pc"]))


def test_an_impossible_machine_is_refused_at_upload_and_the_setup_kept():
    """A governor no model knows is valid as a scenario but not as a machine: refused
    with its field before anything is replaced (warmcore.check)."""
    at = started()
    before = at.session_state.toml
    text = (b"[machine]\npreset = 'ideal'\ngovernor = 'turbo-boost-9000'\n"
            b"[workload]\nkind = 'closed'\n[strategy]\nname = 'pc'\n[run]\nrequests = 200\n")
    at.file_uploader(key="upload").set_value(("gov.toml", text, "application/toml")).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("gov.toml: machine.governor: unknown")
    assert at.session_state.toml == before


def test_an_upload_with_unknown_strategy_tunables_is_refused():
    at = started()
    text = (b"[workload]\nkind = 'closed'\n[strategy]\nname = 'pec'\nparams = {bogus = 1}\n"
            b"[run]\nrequests = 100\n")
    at.file_uploader(key="upload").set_value(("t.toml", text, "application/toml")).run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [
        "t.toml: strategy.params.bogus: unknown key (strategy pec)"]


def test_load_curves_run_every_strategy_at_every_load_and_mark_the_knee():
    at = started()
    at.text_input(key=f"loads{at.session_state.gen}").set_value("1, 2, 4")
    at.button[[b.label for b in at.button].index("Compute load curves")].click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    rows = at.session_state.curves["rows"]
    assert [(r["strategy"], r["load"]) for r in rows] == [
        (n, x) for n in ("pc", "jetty9-milestone", "pec") for x in (1, 2, 4)]
    assert len(at.get("vega_lite_chart")) == 4         # breakdown + three curves
    knees = [c.value for c in at.main.caption if c.value.startswith("Knee")]
    assert len(knees) == 1 and all(f"{n}: " in knees[0] for n in ("pc", "jetty9-milestone", "pec"))
    # more connections than one: more throughput for pc
    pc = [r["throughput_rps"] for r in rows if r["strategy"] == "pc"]
    assert pc[1] > pc[0]


def test_bad_loads_are_one_line():
    at = started()
    at.text_input(key=f"loads{at.session_state.gen}").set_value("1, lots")
    at.button[[b.label for b in at.button].index("Compute load curves")].click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["loads: '1, lots' is not a list of positive numbers"]


def test_timeline_shows_the_trace_and_matches_the_cli_trace_file(tmp_path):
    from warmcore.trace import chrome_trace
    import warmcore

    at = started()
    gen = at.session_state.gen
    at.selectbox(key=f"tl_strategy{gen}").set_value("pec")
    at.number_input(key=f"tl_events{gen}").set_value(400)
    at.button[[b.label for b in at.button].index("Show timeline")].click().run()
    assert not at.exception, at.exception
    assert not at.error
    assert len(at.get("vega_lite_chart")) == 2             # breakdown + Gantt
    assert any(c.value.startswith("pec: the run's last 400 kernel events")
               for c in at.main.caption)
    assert any("Chrome trace" in b.proto.label for b in at.get("download_button"))
    shown = chrome_trace(warmcore.Result.from_dict(at.session_state.timeline["result"]))
    # each CPU's clock: a band under its row, span by span the trace's counter track
    (gantt,) = [c for c in at.get("vega_lite_chart") if "clock (GHz)" in c.proto.spec]
    spans = [r for r in chart_rows(gantt) if "ghz" in r]
    t0, t1 = shown["otherData"]["window_us"]
    counters = {}
    for e in shown["traceEvents"]:
        if e["ph"] == "C":
            counters.setdefault(e["name"].split()[1], []).append((e["ts"] - t0, e["args"]["GHz"]))
    assert counters and len(spans) >= len(counters)
    for cpu, track in counters.items():
        mine = sorted((r["from_us"], r["ghz"]) for r in spans
                      if r["cpu"].split()[1] == cpu)
        assert mine == [(a, g) for a, g in sorted(track) if a < t1 - t0], cpu
    assert any("the band under each CPU is its clock" in c.value for c in at.main.caption)
    path = tmp_path / "setup.toml"
    path.write_text(at.session_state.toml)
    out = tmp_path / "t.json"
    subprocess.run([sys.executable, "-m", "warmcore.cli", "run", str(path), "--strategy", "pec",
                    "--set", "run.trace_events=400", "--trace", str(out)], check=True,
                   capture_output=True, cwd=ROOT)
    assert json.loads(out.read_text()) == json.loads(json.dumps(shown))


def curve_charts(at: AppTest) -> list:
    """The load-curve charts (their x axis is the offered load)."""
    return [c for c in at.get("vega_lite_chart") if "offered load" in c.proto.spec]


def chart_rows(chart) -> list[dict]:
    """Every row of a chart's data sets (Streamlit ships them as Arrow)."""
    import pyarrow as pa

    return [r for d in chart.proto.datasets
            for r in pa.ipc.open_stream(d.data.data).read_all().to_pylist()]


def test_load_curves_overlay_the_pinned_baseline_and_show_deltas(monkeypatch):
    import warmcore

    at = started()
    gen = at.session_state.gen
    at.text_input(key=f"loads{gen}").set_value("1, 3")
    at.button[[b.label for b in at.button].index("Compute load curves")].click().run()
    assert not at.exception, at.exception
    base_toml = at.session_state.toml
    at.button[[b.label for b in at.button].index("Pin as baseline")].click().run()
    widget(at, "number_input", "workload.service_us").set_value(17.5)
    apply(at)
    calls = []                          # every simulation the page asks for from here on
    real = warmcore.compare

    def counting(sc, strategies, *a, **k):
        calls.append((sc.to_toml(), tuple(strategies), tuple(k.get("loads") or ())))
        return real(sc, strategies, *a, **k)

    monkeypatch.setattr(warmcore, "compare", counting)
    at.text_input(key=f"loads{at.session_state.gen}").set_value("1, 3")
    at.button[[b.label for b in at.button].index("Compute load curves")].click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    curves = at.session_state.curves
    pairs = [(n, x) for n in ("pc", "jetty9-milestone", "pec") for x in (1, 3)]
    assert [(r["strategy"], r["load"]) for r in curves["rows"]] == pairs
    assert [(r["strategy"], r["load"]) for r in curves["base_rows"]] == pairs
    assert curves["base_toml"] == base_toml
    # the baseline's curves came from the cache: no simulation of the baseline ran
    assert calls and not [c for c in calls if c[0] == base_toml], calls
    # every curve chart overlays both runs, the baseline dashed
    specs = curve_charts(at)
    assert len(specs) == 3
    for spec in specs:
        runs = {r.get("run") for r in chart_rows(spec)}
        assert runs == {"now", "baseline"}, runs
        assert '"strokeDash"' in spec.proto.spec and "baseline" in spec.proto.spec
    # and the deltas: slower service costs more CPU per request at every load
    frames = [d.value for d in at.main.dataframe if "CPU us/req" in d.value.columns
              and "load" in d.value.index.names]
    assert len(frames) == 1
    delta = frames[0]
    assert len(delta) == len(pairs) and (delta["CPU us/req"] > 0).all()
    assert {"p50 (us)", "p99 (us)", "CPUs", "req/s", "knee"} <= set(delta.columns)
    assert any(m.value.startswith("**Load curves: change against the pinned baseline")
               for m in at.markdown)
    assert any("Baseline (dashed lines" in c.value for c in at.main.caption)


def test_load_curves_without_a_baseline_have_one_run_only():
    at = started()
    at.text_input(key=f"loads{at.session_state.gen}").set_value("1, 2")
    at.button[[b.label for b in at.button].index("Compute load curves")].click().run()
    specs = curve_charts(at)
    assert len(specs) == 3
    assert all({r.get("run") for r in chart_rows(s)} == {"now"} for s in specs)
    assert not [d for d in at.main.dataframe if "load" in d.value.index.names]


def test_a_long_run_shows_progress_and_stop_leaves_its_partial_result():
    at = started()
    at.session_state["wait_s"] = 1.0              # the page stops waiting after 1 s
    widget(at, "number_input", "req").set_value(3_000_000)
    widget(at, "number_input", "run.warmup").set_value(0.0)     # measuring from the start
    apply(at)
    job = at.session_state.job
    assert job.running                            # still going: progress and Stop shown
    assert at.button(key="stop_run").label == "Stop"
    assert any(c.value.startswith("Still running: simulating pc (1/3)")
               for c in at.main.caption)
    assert not [d for d in at.main.dataframe if "req/s" in d.value.columns]
    at.button(key="stop_run").click().run()
    assert not at.exception, at.exception
    assert not job.running and job.stopped
    df = comparison(at)
    assert list(df.index) == ["pc (partial)"]
    (warning,) = [w.value for w in at.warning if w.value.startswith("Stopped")]
    assert "pc: " in warning and "of 3,000,000 measured requests" in warning
    assert "not run: jetty9-milestone, pec" in warning
    (pc,) = at.session_state.results
    assert pc["partial"] and pc["stop_reason"] == "stopped" and 0 < pc["requests"] < 3_000_000
    assert 0 < job.fraction < 0.5 and f"stopped at {job.fraction:.0%} of its run" in warning
    # the partial result was not cached: running again starts the runs over
    at.button[[b.label for b in at.button].index("Run again")].click().run()
    assert at.session_state.job is not job and at.session_state.job.running
    at.button(key="stop_run").click().run()
    assert not at.exception, at.exception
    assert list(comparison(at).index) == ["pc (partial)"]
    assert not [b for b in at.button if b.label == "Stop"]      # the progress box is gone


def test_a_run_stopped_in_its_warm_up_shows_no_figures():
    at = started()
    at.session_state["wait_s"] = 0.5
    widget(at, "number_input", "req").set_value(3_000_000)      # 300,000 warm-up requests
    apply(at)
    at.button(key="stop_run").click().run()
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning if w.value.startswith("Stopped")]
    assert "0 of 3,000,000 measured requests (still in its warm-up)" in warning
    assert not [d for d in at.main.dataframe if "req/s" in d.value.columns]
    # the load curves and the timeline are still on offer (they run on their own)
    assert {"Compute load curves", "Show timeline"} <= {b.label for b in at.button}


def held_at(fraction: float, loads=None):
    """A ``warmcore.compare`` whose runs (at one of ``loads``, or all) go to ``fraction``
    of their length and then wait there for the page's Stop: a long run, without the
    test depending on how fast this machine simulates."""
    import warmcore

    real = warmcore.compare

    def compare(sc, strategies, *a, should_stop=None, **k):
        if should_stop is None or (loads is not None and list(k.get("loads") or []) != loads):
            return real(sc, strategies, *a, should_stop=should_stop, **k)

        def hold(f):
            if f < fraction:
                return should_stop(f)
            end = time.monotonic() + 60
            while not should_stop(f) and time.monotonic() < end:
                time.sleep(0.01)
            return True
        return real(sc, strategies, *a, should_stop=hold, **k)
    return compare


def test_stop_reaches_the_load_curves_and_keeps_the_runs_done(monkeypatch):
    import warmcore

    at = started()
    widget(at, "multiselect", "strategies").set_value(["pc"])
    widget(at, "number_input", "req").set_value(2000)
    apply(at)
    at.session_state["wait_s"] = 1.0
    monkeypatch.setattr(warmcore, "compare", held_at(0.3, loads=[2]))
    at.text_input(key=f"loads{at.session_state.gen}").set_value("1, 2, 4")
    at.button[[b.label for b in at.button].index("Compute load curves")].click().run()
    assert not at.exception, at.exception
    job = at.session_state.curves_job
    assert job.running and at.button(key="stop_curves").label == "Stop"
    assert any(c.value.startswith("Still running: simulating pc at 2 (2/3)")
               for c in at.main.caption)
    at.button(key="stop_curves").click().run()
    assert not at.exception, at.exception
    assert not job.running and job.stopped and at.session_state.curves_job is None
    curves = at.session_state.curves
    assert [(r["strategy"], r["load"]) for r in curves["rows"]] == [("pc", 1)]
    (warning,) = [w.value for w in at.warning if w.value.startswith("Stopped")]
    assert warning.startswith("Stopped: load curves from 1 of 3 runs")
    assert len(curve_charts(at)) == 3 and not [b for b in at.button if b.label == "Stop"]
    # the run done was cached, the stopped one was not: computing again runs load 2 anew
    monkeypatch.undo()                                         # runs no longer held
    at.session_state["wait_s"] = 120.0
    at.button[[b.label for b in at.button].index("Compute load curves")].click().run()
    assert not at.exception, at.exception
    assert [r["load"] for r in at.session_state.curves["rows"]] == [1, 2, 4]
    assert not [w for w in at.warning if w.value.startswith("Stopped")]


def test_stop_reaches_the_timeline_and_shows_the_run_so_far(monkeypatch):
    import warmcore

    at = started()
    at.session_state["wait_s"] = 1.0
    monkeypatch.setattr(warmcore, "compare", held_at(0.3))
    gen = at.session_state.gen
    at.selectbox(key=f"tl_strategy{gen}").set_value("pec")
    at.button[[b.label for b in at.button].index("Show timeline")].click().run()
    assert not at.exception, at.exception
    job = at.session_state.timeline_job
    assert job.running and at.button(key="stop_timeline").label == "Stop"
    at.button(key="stop_timeline").click().run()
    assert not at.exception, at.exception
    assert not job.running and job.stopped
    shown = at.session_state.timeline
    assert shown["stopped"] and shown["result"]["stop_reason"] == "stopped"
    (warning,) = [w.value for w in at.warning if w.value.startswith("Stopped")]
    assert f"after {shown['result']['requests']:,} measured requests" in warning
    assert any(c.value.startswith("pec: the run's last") for c in at.main.caption)


# -- every generated control ---------------------------------------------------------------

# Paths with a control of their own above the generated ones, or none (app.OWN_CONTROL).
OWN_CONTROL = {"seed", "machine.preset", "machine.governor", "strategy.name", "workload.kind",
               "run.requests", "run.duration_s", "run.trace_events"}


def base_scenario(base: str):
    """A built-in scenario, or "kind:K": the default one switched to workload kind K
    the way the page's kind control does it (no built-in scenario has K)."""
    import warmcore

    if not base.startswith("kind:"):
        return warmcore.Scenario.load(base)
    return warmcore.Scenario.load("pipeline").edit({"workload.kind": base.removeprefix("kind:")})


def generated_paths(base: str = "pipeline") -> list[str]:
    """The parameters the sidebar draws a control for, on a built-in scenario."""
    import warmcore

    return [p.path for p in warmcore.parameters(base_scenario(base))
            if p.path not in OWN_CONTROL and p.type in CONTROL_TYPES]


def control_cases() -> list[tuple[str, str]]:
    """(scenario, path): every control of the default scenario (pipeline) on it, and
    each control that only another built-in scenario draws (its workload kind's
    fields, its strategy's tunables, its resources) on the first scenario that has it,
    and the closed loop's (no built-in scenario is closed) on the default one switched
    to it."""
    from warmcore.simcore.config import builtin_names

    cases, seen = [], set()
    for base in ["pipeline", *sorted(set(builtin_names()) - {"pipeline"}), "kind:closed"]:
        for path in generated_paths(base):
            if path not in seen and BASE_FOR.get(path, base) == base:
                seen.add(path)
                cases.append((base, path))
    return cases


# Controls exercised on another scenario than the first that draws them: a bounded
# queue is refused for pipeline's saturating connections (they would re-send a
# refused request at once, forever), so it is tried on mmc's open loop; web's clients
# think 0 us (wrk writes the next request at once), so the think time's distribution
# is tried on the closed loop's default think time.
BASE_FOR = {"strategy.params.queue_capacity": "mmc", "workload.think": "kind:closed"}

CONTROL_TYPES = ("int", "float", "bool", "choice", "list", "int+list")


# Values picked by hand where the rule below would pick an invalid value or one equal
# to the effective default (an unset switch of a non-ideal machine is on).
VALUES = {
    "jvm.young_mib": 0.5,                         # loom's 25.6 MiB never fills (4 MB)
    "jvm.tenuring_threshold": 1,                  # 14: no object gets that old
    "workload.mmpp_off_fraction": 0.5,            # 0 is the default, at most below 1
    "machine.threads_per_core": 1,                # 2 is the preset's
    "machine.turbo": True,                        # unset: the preset's (off)
    "machine.frequency_ghz": 2.0,                 # with the userspace governor (below)
    "machine.governor_params.sampling_down_factor": 2.0,    # a whole multiple
    "machine.overrides.threads_per_core": 1,      # with one SMT throughput (below)
    "machine.overrides.v_min": 0.5,               # below v_max
    "machine.governor_params.sampling_rate_us": 200.0,      # a sample within the run
    # lists: the text typed into their TOML input
    "machine.overrides.pstates_ghz": "[1.6, 2.0, 2.4]",
    "machine.overrides.smt_throughput": "[1.0, 1.1]",
    "server.cpus": "[0, 1]",
    "producer.cpus": "[2]",
    "consumer.cpus": "[3]",
    "work.program": "[{service_share = 0.5}, {compute_us = 20.0}, {service_share = 0.5}]",
    # a call plan of two calls, the second after the first (web's loop makes them)
    "work.backend_calls": "[{delay_us = 5000.0}, {delay_us = 2000.0, after = [0]}]",
    "strategy.params.max_kernel_threads": 50,     # with kernel threads (below), < 2000 tasks
    "strategy.params.workers": 4,                 # fewer than the requests in flight
    "workload.batches": "[4, 2, 1]",              # EWYKBenchmark-style batch sizes
    "strategy.params.ring_size": 4096,            # a power of two
    "work.data_read_kib": 16.0,                   # within data_kib (PREPARE: 64)
    "machine.overrides.extra.turbo_bins_ghz": "[3.9, 3.7]",  # within 3.4 and turbo 3.9
}
LISTS = ("list", "int+list")
# Controls set up before the one under test, so that its other value is valid.
PREPARE = {"machine.frequency_ghz": {"gov": "userspace", "machine.frequency_ghz": 3.4}}
# loom's virtual-threads tunables of its platform-thread mode: in that mode
KERNEL_THREADS = {"strategy.params.kernel_threads": True}
PREPARE |= {k: KERNEL_THREADS for k in ("strategy.params.kernel_start_us",
                                        "strategy.params.max_kernel_threads",
                                        "strategy.params.pool")}
# strategy.params.lock_us is drawn first on `hello` (thread-pool's executor queue
# lock), where it acts without preparation
# the turnaround matters with one request in flight per (serial) connection
PREPARE["workload.client_turnaround_us"] = {"workload.serial": True,
                                            "workload.pipelined": False}
# a remote client is one with a turnaround (client_us)
PREPARE["workload.client_host"] = {"workload.client_us": 37.7}
# the part of the read-mostly data a request reads needs read-mostly data
PREPARE["work.data_read_kib"] = {"work.data_kib": 64.0}
# a client closes its connection on a timeout only if it has one (hello's clients hold
# one request in flight): 20 us against hello's 7 us handler, so some do time out
PREPARE["workload.timeout_closes"] = {"workload.timeout_us": 20.0}
# the event loop's task tunables act on responses coming back from its offload pool:
# web's backend calls go there instead of through the non-blocking client
OFFLOAD = {"strategy.params.async_backend": False, "strategy.params.offload": 8}
PREPARE["strategy.params.io_ratio"] = OFFLOAD
# the Disruptor's thread counts: lmax-latency's pipeline topology fixes them (another
# number is refused), the sharded one lets them be chosen
SHARDED = {"strategy.params.topology": "sharded"}
PREPARE |= {k: SHARDED for k in ("strategy.params.producers", "strategy.params.consumers")}
# the JVM heap's controls act on the objects virtual-threads allocates (the only strategy
# that does: loom's), with a young generation its 2,000 tasks' 4 MB fill: 0.5 MiB
JVM_PATHS = ("jvm.young_mib", "jvm.survivor_ratio", "jvm.tenuring_threshold",
             "jvm.gc_threads", "jvm.object_ins", "jvm.chunk_frame_ins")
BASE_FOR |= {k: "loom" for k in JVM_PATHS}
# the backend mock on the machine answers backend calls: web's (pipeline has none);
# its threads' counts act once it runs
MOCK_PATHS = ("work.backend_mock_us", "work.backend_mock_loops", "work.backend_mock_timers")
BASE_FOR |= {k: "web" for k in MOCK_PATHS}
PREPARE |= {k: {"work.backend_mock_us": 7.0} for k in MOCK_PATHS[1:]}
# a call plan replaces web's one backend call
BASE_FOR["work.backend_calls"] = "web"
PREPARE["work.backend_calls"] = {"work.backend_us": 0.0}
# thread-pool's executor for a call plan's calls (hello's server has no backend call):
# one thread makes every call in turn
PREPARE["strategy.params.backend_threads"] = {
    "work.backend_calls": "[{delay_us = 500.0}, {delay_us = 200.0}]"}
VALUES["strategy.params.backend_threads"] = 1
PREPARE |= {k: {"jvm.young_mib": 0.5} for k in JVM_PATHS if k != "jvm.young_mib"}
# choices drawn as a selectbox whose key is a dotted path (set_controls)
DOTTED_CHOICES = {"strategy.params.topology"}
# bool fields that may be left unset, drawn as a selectbox
OPTIONAL_BOOLS = {"workload.serial", "strategy.params.async_backend"}
# Controls set in the same Apply as the one under test, which cannot change alone.
TOGETHER = {"machine.overrides.threads_per_core": {"machine.overrides.smt_throughput": "[1.0]"},
            "workload.pipelined": {"workload.serial": True}}
# Controls whose other value legitimately leaves this setup's numbers alone (pc, 400
# requests of the pipeline scenario: one saturating connection on an i7-3770, about
# 8 ms simulated); the scenario still changes (asserted), the figures need not.
SHORT_RUN = "the 400-request run (about 8 ms simulated) ends before the governor's 10 ms sample"
TOP_CLOCK = ("one core is always busy: ondemand's package-wide load is 100%, so it "
             "holds the top clock whatever its tunables")
ONE_THREAD = "pc serves the one connection on one thread on one core"
MMC_POISSON = "the scenario's arrivals are Poisson (hello's connections, drawn there " \
              "first, or mmc's open loop): the MMPP's and batches' tunables are read " \
              "only with arrival = 'mmpp' or 'batch'"
NO_RETRY = "web's clients have no timeout and its server refuses nothing: nothing is retried"
# lmax-latency: the Disruptor's busy-spin three-stage pipeline, one producer, one
# event every microsecond (the first built-in scenario with the disruptor)
NO_WRAP = "at one event per microsecond the ring never fills, so the producer never waits"
# the turbo limits (models/turbo.py) act only with turbo on, off in every preset
NO_TURBO = "the i7-3770's turbo is off (every preset's default): its limits are not read"
SAME_NUMBERS = {
    "machine.idle_next_timer_us": "menu's next timer event is read only with "
                                  "machine.idle_governor = 'menu'; the default is the "
                                  "hindsight rule (models/cpuidle.py)",
    "workload.mmpp_on_us": MMC_POISSON,
    "workload.mmpp_off_us": MMC_POISSON,
    "workload.mmpp_off_fraction": MMC_POISSON,
    "workload.batch_size": MMC_POISSON,
    "workload.batch_sizes": MMC_POISSON,
    "workload.retries": NO_RETRY,
    "workload.retry_backoff_us": NO_RETRY,
    "strategy.params.ring_size": NO_WRAP,
    "strategy.params.producer_wait": NO_WRAP,
    "strategy.params.timer_slack_us": NO_WRAP + " (parkNanos) and busy-spin never sleeps",
    "strategy.params.producer_type": "'single' is what one producer gets by default",
    "strategy.params.claim_us": "a single producer claims without a CAS",
    "strategy.params.signal_us": "busy-spin consumers are never signalled",
    "strategy.params.spin_turn_cycles": "busy-spin has no counting turns (yielding and "
                                        "sleeping do)",
    "strategy.params.sleep_ns": "busy-spin never sleeps",
    "run.max_in_flight": "the cap is far above the one request in flight",
    "strategy.params.io_ratio": "ioRatio's task budget is checked every 64 tasks "
                                "(Netty's runAllTasks); 400 requests through 8 offload "
                                "threads never leave 64 responses waiting in one pass",
    "work.backend_async": "the pipeline scenario's handler makes no backend call "
                          "(work.backend_us 0), and pc would block on one anyway",
    "work.invocation": "pc runs every task in the thread that produced it, whatever its "
                       "invocation type (it matters to pec and epc)",
    "server.threads": ONE_THREAD + ": more threads find nothing to do",
    "producer.threads": "the pipeline scenario has no producer process",
    "consumer.threads": "the pipeline scenario has no consumer process",
    "strategy.params.max_threads": "the pool never grows to 200 threads",
    "machine.overrides.extra.fill_buffers": "a cap on the demand MLP, 1.75 on the "
                                            "i7-3770, far below 10 or 11 fill buffers",
    "machine.overrides.extra.cstate_flushes_core_caches": "pc's one thread never lets its "
                                                          "core sleep into C6 (600 us)",
    "strategy.params.selectors": "pc on the one connection runs on its selector's thread; "
                                 "another selector waits in epoll_wait for connections "
                                 "it does not have",
    "strategy.params.idle_timeout_s": "no thread idles 60 s in an 8 ms run",
    "strategy.shared_params": "the run keeps the scenario's own strategy, whose params "
                              "are its own either way",
    "strategy.params.thread_pool_executor": "pc never dispatches: EPC's low-on-threads "
                                            "check is all it changes",
    "kernel.wakeup_preemption": ONE_THREAD + ": no woken thread ever finds its CPU busy",
    "machine.governor_params.up_threshold": TOP_CLOCK,
    "machine.governor_params.sampling_rate_us": TOP_CLOCK,
    "machine.governor_params.sampling_down_factor": TOP_CLOCK,
    "machine.effects.dvfs": TOP_CLOCK + "; without DVFS the clock is fixed at the top",
    "workload.serial": "pc takes the one connection's requests one after another either way",
    "machine.overrides.freq_domain": SHORT_RUN + " (no clock changes to share)",
    "machine.overrides.extra.cpufreq_policy": SHORT_RUN + " (no request to resolve)",
    "machine.overrides.extra.ondemand_rule": SHORT_RUN + " (no rule applied yet)",
    "machine.governor_params.powersave_bias": SHORT_RUN + " (no target to bias)",
    "machine.overrides.default_governor": SHORT_RUN + " (every governor starts at the "
                                                       "same clock)",
    "machine.overrides.transition_latency_us": SHORT_RUN + " (no transition)",
    "machine.overrides.c2c_smt_ns": ONE_THREAD + ": no line moves between SMT siblings",
    "machine.overrides.c2c_cross_llc_ns": "one LLC: no line moves between LLCs",
    "machine.overrides.c2c_socket_ns": "one socket: no line moves between sockets",
    "machine.overrides.futex_wake_us": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.contended_waiter_cost": ONE_THREAD + ": no two CPUs are ever "
                                                     "inside their ops on one line at once, "
                                                     "so no handover has a waiter",
    "machine.overrides.extra.futex_wake_lines": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.wake_lines_by_part": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.wake_wait_lines": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.wake_rq_lines": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.wake_remote_lines": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.wake_resume_lines": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.wake_resume_rq_lines": ONE_THREAD + ": no thread wakes "
                                                    "another",
    "machine.overrides.extra.wake_migrate_lines": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.extra.wake_scan_lines": ONE_THREAD + ": no thread wakes another",
    "machine.overrides.wake_latency_idle_us": ONE_THREAD + ": the busy core never idles",
    "machine.overrides.extra.freq_invariance": TOP_CLOCK + "; only schedutil reads PELT",
    "machine.overrides.extra.package_c6_power_fraction": ONE_THREAD + ": its core never "
                                                         "idles, so the package never "
                                                         "reaches package C6",
    "machine.overrides.extra.epoll_ctl_us": "Jetty's selectors change no interest (no "
                                            "epoll_ctl; Tomcat's poller does)",
    "machine.overrides.extra.poll_fd_us": "no Jetty thread calls poll (Tomcat BIO does)",
    "machine.overrides.extra.futex_wait_us": ONE_THREAD + ": the pool's idle threads park "
                                             "once and are never woken to pay it",
    "machine.overrides.extra.sched_yield_us": "no Jetty thread calls sched_yield",
    "machine.overrides.tdp_w": "one busy core draws far less than the power limit",
    "machine.overrides.extra.turbo_bins_ghz": NO_TURBO,
    "machine.overrides.extra.power_limit_tau_s": NO_TURBO,
    "machine.overrides.extra.power_limit_2_ratio": NO_TURBO,
    "machine.overrides.extra.pcu_interval_us": NO_TURBO,
    "producer.cpus": "the pipeline scenario has no producer process",
    "consumer.cpus": "the pipeline scenario has no consumer process",
    "machine.overrides.smt_throughput": ONE_THREAD + ": its SMT sibling is never busy",
    "strategy.params.permits": "loom's tasks run a request program, whose permits are its "
                               "[resources] db; `permits` bounds the blocking call of a "
                               "task without a program",
}


def other_value(p):
    """A valid value other than the parameter's own."""
    if p.path in VALUES:
        return VALUES[p.path]
    if p.type == "choice":
        return next(c for c in p.choices if c != p.value)
    if p.type == "bool":
        return False if p.value is None else not p.value
    v = p.value if p.value is not None else p.default
    if p.type == "int":
        v = 1 if v is None else v
        tries = [v + 1, v - 1, 2, 1]
    else:
        v = 1.0 if v is None else float(v)
        tries = [v * 1.5 if v else 1.0, v * 0.5, v + 1.0]
    for x in tries:
        try:
            p.check(x)
        except ValueError:
            continue
        if x != p.value:
            return x
    raise AssertionError(f"no other valid value for {p.path}")


def control_widget(at: AppTest, p):
    key = f"p{at.session_state.gen}:{p.path}"
    if p.type in LISTS:
        return at.text_input(key=key)
    if p.type == "choice" or (p.type == "bool" and p.optional):
        return at.selectbox(key=key)
    if p.type == "bool":
        return at.checkbox(key=key)
    return at.number_input(key=key)


def small_setup(path: str = "", base: str = "pipeline") -> AppTest:
    """A built-in scenario (the default one unless ``base``), its own strategy only
    (pc for the default) at 400 requests: each control's run is quick."""

    at = open_base(base)
    own = base_scenario(base).strategy.name
    widget(at, "multiselect", "strategies").set_value([own])
    widget(at, "number_input", "req").set_value(400)
    set_controls(at, PREPARE.get(path, {}))
    return apply(at)


def open_base(base: str) -> AppTest:
    """The page on ``base`` (base_scenario's names)."""
    at = started()
    if base.startswith("kind:"):
        at.selectbox(key=f"kind{at.session_state.gen}").set_value(base.removeprefix("kind:"))
        apply(at)
    elif base != "pipeline":
        at.selectbox(key=f"base{at.session_state.gen}").set_value(base).run()
        assert not at.exception, at.exception
    return at


def set_controls(at: AppTest, values: dict) -> None:
    for key, value in values.items():
        kind = "selectbox" if "." not in key or key in DOTTED_CHOICES else \
            "checkbox" if isinstance(value, bool) else \
            "text_input" if isinstance(value, str) else "number_input"
        if kind == "checkbox" and key in OPTIONAL_BOOLS:
            kind = "selectbox"              # an optional bool: (default), True, False
        widget(at, kind, key).set_value(value)


def at_path(data: dict, path: str):
    """The value at a dotted path of a scenario's TOML data (None: not set)."""
    for k in path.split("."):
        data = data.get(k) if isinstance(data, dict) else None
    return data


@pytest.mark.parametrize("base", sorted({b for b, _ in control_cases()}))
def test_every_generated_control_is_exercised_below(base):
    at = open_base(base)
    prefix = f"p{at.session_state.gen}:"
    keys = {w.key.removeprefix(prefix)
            for kind in ("number_input", "selectbox", "checkbox", "text_input")
            for w in getattr(at, kind) if w.key and w.key.startswith(prefix)}
    assert keys == set(generated_paths(base))
    assert keys <= {path for _, path in control_cases()}


@pytest.mark.parametrize("base, path", control_cases())
def test_each_generated_control_changes_the_scenario_and_reruns(base, path):
    import warmcore

    at = small_setup(path, base)
    own = base_scenario(base).strategy.name
    toml, job, before = at.session_state.toml, at.session_state.job, at.session_state.results
    p = {q.path: q for q in warmcore.parameters(warmcore.Scenario.from_toml(toml))}[path]
    value = other_value(p)
    control_widget(at, p).set_value(value)
    set_controls(at, TOGETHER.get(path, {}))
    apply(at)
    if p.type in LISTS:                              # the text, read as TOML
        value = tomllib.loads(f"v = {value}")["v"]
    got = at_path(tomllib.loads(at.session_state.toml), path)
    if path in ("work.program", "work.backend_calls"):   # the TOML writes the defaults too
        got = [{k: step[k] for k in want} for step, want in zip(got, value, strict=True)]
    assert got == value, (path, p.value, value, got)
    assert at.session_state.job is not job                       # the comparison reran
    assert at.session_state.job.key == (at.session_state.toml, (own,))
    after = at.session_state.results
    if path in SAME_NUMBERS:
        assert at.session_state.toml != toml
    else:
        assert after != before, (path, value)


@pytest.mark.parametrize("kind", ["open", "closed", "batch", "connections", "stream"])
def test_another_workload_kind_keeps_the_service_and_draws_its_own_controls(kind):
    import warmcore

    at = started()
    gen = at.session_state.gen
    before = warmcore.Scenario.from_toml(at.session_state.toml)
    at.selectbox(key=f"kind{gen}").set_value(kind)
    widget(at, "number_input", "workload.service_us").set_value(12.0)
    apply(at)
    sc = warmcore.Scenario.from_toml(at.session_state.toml)
    assert sc.workload.kind == kind and sc.workload.service_us == 12.0
    assert (sc.workload.service, sc.workload.service_cv) == (before.workload.service,
                                                             before.workload.service_cv)
    if kind == "open":              # half of one CPU at the mean service time
        assert sc.workload.rate_per_s == round(0.5e6 / 12.0, 1)
    assert at.session_state.gen == gen + 1       # the form starts over: the kind's controls
    drawn = {w.key.split(":", 1)[1] for kind_ in ("number_input", "selectbox", "checkbox")
             for w in getattr(at, kind_) if w.key and w.key.startswith(f"p{gen + 1}:")}
    own = {p.path for p in warmcore.parameters(sc) if p.path.startswith("workload.")
           and p.type in CONTROL_TYPES and p.path not in OWN_CONTROL}
    assert own <= drawn and not {k for k in drawn if k.startswith("workload.")} - own
    assert comparison(at)["req/s"].gt(0).all()


# -- list-valued settings: a TOML text input each ------------------------------------------

def test_a_list_setting_is_typed_as_toml_and_applied():
    at = started()
    before = comparison(at)
    box = widget(at, "text_input", "machine.overrides.pstates_ghz")
    assert box.value.startswith("[1.6, 1.7, ") and box.value.endswith(", 3.4]")
    box.set_value("[1.2, 1.8]")
    apply(at)
    assert tomllib.loads(at.session_state.toml)["machine"]["overrides"]["pstates_ghz"] == \
        [1.2, 1.8]
    after = comparison(at)
    assert (after["GHz"] <= 1.8 + 1e-9).all() and (before["GHz"] > 1.8).any()
    # the input now shows the applied list, and applying again changes nothing
    assert widget(at, "text_input", "machine.overrides.pstates_ghz").value == "[1.2, 1.8]"
    toml = at.session_state.toml
    apply(at)
    assert at.session_state.toml == toml


def test_a_request_program_and_a_cpu_set_are_typed_as_toml():
    at = started()
    widget(at, "text_input", "work.program").set_value(
        '[{service_share = 1.0}, {call_us = 50.0, distribution = "exponential"}]')
    widget(at, "text_input", "server.cpus").set_value("[0, 2]")
    apply(at)
    data = tomllib.loads(at.session_state.toml)
    assert data["server"]["cpus"] == [0, 2]
    assert [s.get("call_us") for s in data["work"]["program"]] == [None, 50.0]
    df = comparison(at)
    assert (df["CPUs"] > 0).all()
    assert widget(at, "text_input", "work.program").value == \
        '[{service_share = 1.0}, {call_us = 50.0, distribution = "exponential"}]'
    # emptied, an optional list is unset again
    widget(at, "text_input", "server.cpus").set_value("")
    apply(at)
    assert "cpus" not in tomllib.loads(at.session_state.toml).get("server", {})


@pytest.mark.parametrize("path, text, expect", [
    ("machine.overrides.pstates_ghz", "[1.6, oops",
     "machine.overrides.pstates_ghz: '[1.6, oops' is not a TOML value ("),
    ("server.cpus", "[0, 1", "server.cpus: '[0, 1' is not a TOML value ("),
    ("server.cpus", '"all"', "server.cpus: "),
    ("work.program", "[{acquire = 'db'}]", "work.program"),
    ("machine.overrides.pstates_ghz", "", "machine.overrides.pstates_ghz: needs a value"),
])
def test_a_bad_list_is_one_line_and_keeps_the_setup(path, text, expect):
    at = started()
    toml = at.session_state.toml
    widget(at, "text_input", path).set_value(text)
    at.button[[b.label for b in at.button].index("Apply")].click().run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith(expect) and "\n" not in errors[0], errors
    assert at.session_state.toml == toml
    assert list(comparison(at).index) == ["pc", "jetty9-milestone", "pec"]


def test_an_uploaded_params_file_applies_its_fitted_values(tmp_path):
    """A calibration's PARAMS.toml (warmcore calibrate --out) applies its fitted values
    to the current setup, as `warmcore run --params` does; a broken one is one line."""
    import tomli_w

    import warmcore

    at = started()
    doc = {"values": {"workload.service_us": 17.5, "work.code_kib": 80.0},
           "fit": [{"path": "workload.service_us", "lo": 5.0, "hi": 80.0, "log": True},
                   {"path": "work.code_kib", "lo": 8.0, "hi": 512.0, "log": True}],
           "unit_optimum": [0.4, 0.5], "unit_cov": [[0.01, 0.0], [0.0, 0.01]]}
    at.file_uploader(key="upload").set_value(
        ("p.toml", tomli_w.dumps(doc).encode(), "application/toml")).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    sc = warmcore.Scenario.from_toml(at.session_state.toml)
    assert sc.workload.service_us == 17.5 and sc.work.code_kib == 80.0
    assert any("fitted values from p.toml" in i.value for i in at.sidebar.info)
    doc["values"]["workload.nope"] = 1.0          # (a value of a path the fit names too)
    doc["fit"].append({"path": "workload.nope", "lo": 1.0, "hi": 2.0, "log": False})
    doc["unit_optimum"].append(0.5)
    doc["unit_cov"] = [[0.01, 0.0, 0.0], [0.0, 0.01, 0.0], [0.0, 0.0, 0.01]]
    at.file_uploader(key="upload").set_value(
        ("q.toml", tomli_w.dumps(doc).encode(), "application/toml")).run()
    assert [e.value for e in at.error] == [
        "q.toml: --params: workload.nope is not a numeric parameter of scenario 'pipeline'"]
    assert warmcore.Scenario.from_toml(at.session_state.toml).workload.service_us == 17.5


DETERMINISTIC_TOML = (b"name = 'det'\n[machine]\npreset = 'ideal'\ncores = 4\n[workload]\n"
                      b"kind = 'open'\narrival = 'constant'\nservice = 'deterministic'\n"
                      b"service_us = 1000\nrate_per_s = 3200\n[strategy]\nname = 'pc'\n"
                      b"[run]\nrequests = 400\n")


def test_the_answer_leads_with_a_verdict_its_curves_and_their_table():
    """Constant arrivals and 1,000 us of work on four ideal CPUs: pc serves up to
    1e6/1,001 us = 999 req/s, the shared queue up to 4,000. 'Find the answer' shows the
    verdict (shared-queue best beyond ~1,000 req/s), throughput and the objective
    against offered load with the crossover marked, and the curves' table."""
    at = started()
    at.file_uploader(key="upload").set_value(("det.toml", DETERMINISTIC_TOML,
                                              "application/toml")).run()
    widget(at, "multiselect", "strategies").set_value(["pc", "shared-queue"])
    apply(at)
    at.button(key="FormSubmitter:answer_form-Find the answer").click().run(timeout=300)
    assert not at.exception, at.exception
    [verdict] = [s.value for s in at.success]
    assert verdict.startswith("For throughput req/s: no significant difference up to ~")
    assert "shared-queue is best beyond ~" in verdict
    flip = float(verdict.split("up to ~")[1].split(" ")[0].replace(",", ""))
    assert 960 <= flip <= 1020
    table = [d.value for d in at.main.dataframe if "best" in d.value.columns][0]
    assert {"load", "best", "margin %", "pc: throughput", "shared-queue: req/s",
            "in doubt"} <= set(table.columns)
    assert table["best"].iloc[0] == "no significant difference"
    assert table["best"].iloc[-1] == "shared-queue"
    specs = [c.proto.spec for c in at.get("vega_lite_chart")]
    assert sum('"throughput (req/s)"' in s for s in specs) == 1
    assert any('"strokeDash"' in s and '"rule"' in s for s in specs)     # the crossover
    assert any(m.value.startswith("**Why it flips at ~") for m in at.markdown)


def test_a_run_too_short_for_its_load_is_flagged_and_never_best():
    """hello at 150,000 req/s with 3,000 requests, Tomcat's thread pool against the
    event loop: the pool, growing its threads through the warm-up, serves the
    backlog that built up meanwhile in the window (more requests than arrived in it)
    and reads as the most throughput; it is marked in doubt, said why, and the
    highlight goes elsewhere."""
    at = open_base("hello")
    widget(at, "multiselect", "strategies").set_value(["thread-pool", "event-loop"])
    widget(at, "number_input", "workload.rate_per_s").set_value(150000.0)
    apply(at)
    df = comparison(at)
    assert "thread-pool (in doubt)" in df.index, df.index
    assert df.loc["thread-pool (in doubt)", "req/s"] > 150000       # what misled
    assert "event-loop" in df.index
    assert any(w.value.startswith("thread-pool (in doubt): served ")
               and "window is too short" in w.value for w in at.warning)
    from warmcore.explorer_data import styled

    html = styled(df).to_html()
    row = html.split("thread-pool (in doubt)")[1].split("</tr>")[0]
    assert "c8f0c8" not in row                                  # never highlighted


def test_the_setup_travels_in_the_link_and_comes_back_from_it():
    """After Apply the page's query parameters name the built-in scenario, every value
    changed and the strategies compared; a fresh session opened on them shows the same
    setup and the same figures."""
    at = started()
    widget(at, "number_input", "seed").set_value(7)
    widget(at, "multiselect", "strategies").set_value(["pc", "epc"])
    apply(at)
    q = {k: at.query_params[k] for k in at.query_params}
    assert q["scenario"] in ("pipeline", ["pipeline"]), q
    assert q["strategies"] in ("pc,epc", ["pc,epc"]) and q["set"] in ("seed=7", ["seed=7"])
    again = AppTest.from_file(APP, default_timeout=120)
    for k, v in q.items():
        again.query_params[k] = v
    again.run()
    assert not again.exception and not again.error, [e.value for e in again.error]
    assert again.session_state.toml == at.session_state.toml
    assert comparison(again).equals(comparison(at))


def test_a_bad_link_says_so_in_one_line_and_opens_the_default():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["scenario"] = "nope"
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == ["link: ValueError: scenario: 'nope' is not a "
                                           "built-in scenario"]
    assert list(comparison(at).index) == ["pc", "jetty9-milestone", "pec"]


def test_replications_show_each_figure_with_its_95_percent_interval():
    """With run.replications > 1 the table shows means and, under it, each figure's
    Student-t interval over the replications, which holds the mean shown."""
    at = started()
    widget(at, "number_input", "run.replications").set_value(3)
    widget(at, "number_input", "req").set_value(600)
    apply(at)
    means = comparison(at)
    frames = [d.value for d in at.main.dataframe if "(3 runs)" in "".join(d.value.index)]
    assert len(frames) == 1, [list(d.value.index) for d in at.main.dataframe]
    intervals = frames[0]
    assert list(intervals.index) == ["pc (3 runs)", "jetty9-milestone (3 runs)", "pec (3 runs)"]
    for name in ("pc", "jetty9-milestone", "pec"):
        # (within the rounding of the shown interval: pc's one busy CPU is 1.00 - 1.00)
        for col, shown in (("req/s", 0.5), ("p99 (us)", 0.05), ("CPUs", 0.005)):
            lo, hi = (float(x.replace(",", "")) for x in
                      intervals.loc[f"{name} (3 runs)", col].split(" - "))
            assert lo - shown <= means.loc[name, col] <= hi + shown, (name, col, lo, hi)
        lo, hi = (float(x.replace(",", "")) for x in
                  intervals.loc[f"{name} (3 runs)", "req/s"].split(" - "))
        assert hi > lo                              # three seeds: not one number


def test_the_presets_topology_is_shown_whole():
    """The machine's topology in the sidebar: every row of it with its whole value
    (the P-states' list too), as lines that wrap, not a table column that cuts them."""
    import warmcore
    from warmcore.explorer_data import topology_table

    at = started()
    sc = warmcore.Scenario.from_toml(at.session_state.toml)
    whole = topology_table(warmcore.parameters(sc))
    shown = [m.value for m in at.sidebar.markdown if "sockets" in m.value]
    assert len(shown) == 1 and len(whole) >= 8
    for name, row in whole.iterrows():
        assert f"{name}: **{row['value']}**" in shown[0]
    assert "1.6, 1.7" in shown[0] and "3.4**" in shown[0]      # the i7-3770's P-states


def test_a_shortened_builtin_says_so_and_its_own_length_does_not():
    """The first view of a built-in scenario runs at most DEFAULT_REQUESTS; the header
    says when that is shorter than the scenario's own run (ewyk-2015's 60,000: a short
    run there measures its 2000 clients' start), and stops saying so at its length."""
    at = open_base("ewyk-2015")
    note = "shorter than the scenario's own 60,000 requests"
    assert any(note in c.value for c in at.main.caption)
    widget(at, "number_input", "req").set_value(60_000)
    widget(at, "multiselect", "strategies").set_value(["pc"])
    apply(at)
    assert not any(note in c.value for c in at.main.caption)
