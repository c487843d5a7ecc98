"""Calibration (issue 14): the fit's recovery of known parameters from synthetic
measurements, prediction intervals, PARAMS.toml and the commands (the perf stat
parsers: tests/test_perfstat.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import warmcore
from warmcore.calibration.cli import main
from warmcore.calibration.fit import FIGURES, CalibrationSpec, Calibrator


EXAMPLE = "examples/jetty-8"


# -- fitting ------------------------------------------------------------------------------

TRUTH = {"workload.service_us": 30.0, "work.thread_kib": 48.0}
KEYS = ("throughput_rps", "ipc", "llc_loads_per_req", "cpu_us_per_req",
        "p50_us")


def _synthetic(seeds=(1, 2), requests=2000):
    sc = warmcore.Scenario.load("pipeline").with_(TRUTH, requests=requests)
    rs = [warmcore.simulate(sc, seed=s) for s in seeds]
    return {k: float(np.mean([FIGURES[k](r) for r in rs])) for k in KEYS}


def _spec(figures, **run):
    return CalibrationSpec.from_data({
        "measurement": [{"name": "synthetic", "scenario": "pipeline", "figures": figures}],
        "fit": [{"path": "workload.service_us", "lo": 5.0, "hi": 100.0, "log": True},
                {"path": "work.thread_kib", "lo": 4.0, "hi": 256.0, "log": True}],
        "run": {"requests": 2000, "seeds": [1, 2], "starts": 6, "max_evaluations": 40, **run}})


@pytest.fixture(scope="module")
def fitted():
    return Calibrator(_spec(_synthetic()), workers=1).fit()


def test_a_fit_recovers_known_parameters_inside_its_intervals(fitted):
    for path, truth in TRUTH.items():
        lo, hi = fitted.ci95[path]
        assert lo <= truth <= hi, (path, truth, lo, hi)
        assert fitted.values[path] == pytest.approx(truth, rel=0.05)
    assert fitted.evaluations <= 40
    assert all(abs(f["residual_sigmas"]) < 1 for f in fitted.figures)
    assert fitted.warnings == []
    assert 1 <= fitted.condition_number < 1e6
    assert fitted.correlation["workload.service_us"]["workload.service_us"] == pytest.approx(1)


def test_a_prediction_of_another_strategy_contains_the_simulators_answer(fitted):
    truth = warmcore.simulate(warmcore.Scenario.load("pipeline").with_(
        TRUTH, strategy="pec", requests=2000), seed=1)
    pred = fitted.predict("pipeline", strategy="pec", draws=8)
    lo, hi = pred["interval95"]["throughput_rps"]
    assert lo <= truth.throughput_rps <= hi, (lo, truth.throughput_rps, hi)
    assert pred["strategy"] == "pec" and pred["fitted"]["work.thread_kib"] > 0


def test_measurements_that_disagree_are_named():
    figs = _synthetic()
    figs["ipc"] *= 3                     # no parameter in the fit can make this
    cal = Calibrator(_spec(figs, max_evaluations=20), workers=1).fit()
    assert any(w.startswith("synthetic.ipc:") and "disagrees" in w for w in cal.warnings)


def test_a_parameter_the_figures_cannot_see_is_reported_unidentified():
    spec = CalibrationSpec.from_data({
        "measurement": [{"name": "m", "scenario": "pipeline",
                         "figures": {"throughput_rps": _synthetic()["throughput_rps"]}}],
        "fit": [{"path": "workload.service_us", "lo": 5.0, "hi": 100.0},
                {"path": "machine.overrides.tdp_w", "lo": 10.0, "hi": 200.0}],
        "run": {"requests": 1000, "seeds": [1], "starts": 4, "max_evaluations": 16}})
    cal = Calibrator(spec, workers=1).fit()
    assert any(w.startswith("machine.overrides.tdp_w: the data cannot identify")
               for w in cal.warnings)


@pytest.mark.parametrize("change,field", [
    ({"fit": [{"path": "workload.nope", "lo": 1.0, "hi": 2.0}]}, "calibration.fit.workload.nope"),
    ({"fit": [{"path": "workload.service_us", "lo": 2.0, "hi": 1.0}]}, "calibration.fit"),
    ({"fit": [{"path": "workload.service_us", "lo": -1.0, "hi": 1.0}]},
     "calibration.fit.workload.service_us"),
    ({"measurement": [{"name": "m", "scenario": "pipeline", "figures": {"bogus": 1.0}}]},
     "calibration.measurement"),
    ({"measurement": [{"name": "m", "scenario": "pipeline"}]}, "calibration.measurement[0]"),
    ({"run": {"seeds": []}}, "calibration.run.seeds"),
])
def test_bad_specs_name_their_field(change, field):
    data = {"measurement": [{"name": "m", "scenario": "pipeline",
                             "figures": {"throughput_rps": 1000.0}}],
            "fit": [{"path": "workload.service_us", "lo": 5.0, "hi": 100.0}]}
    data.update(change)
    with pytest.raises(warmcore.ConfigError) as e:
        CalibrationSpec.from_data(data)
    assert e.value.field.startswith(field), e.value


def test_a_figure_under_its_old_name_is_refused_with_its_new_one(tmp_path, capsys):
    spec = tmp_path / "old.toml"
    spec.write_text('[[measurement]]\nname = "m"\nscenario = "pipeline"\n'
                    '[measurement.figures]\ncpu_us_per_request = 20.0\n\n'
                    '[[fit]]\npath = "workload.service_us"\nlo = 5.0\nhi = 80.0\n')
    assert main(["calibrate", str(spec), "--out", str(tmp_path / "p.toml")]) == 2
    assert capsys.readouterr().err == (
        "warmcore: calibration.measurement.0.figures.cpu_us_per_request: renamed "
        "cpu_us_per_req, as in warmcore's results\n")


def test_per_request_figures_have_the_names_and_values_of_the_results():
    """One name per figure: what calibration fits per request is what Result.per_request()
    (compare --json, the explorer) shows under the same name."""
    from warmcore.calibration.fit import RENAMED
    from warmcore.calibration.perf_figures import PER_REQUEST

    r = warmcore.simulate(warmcore.Scenario.load("pipeline"), requests=300)
    shown = r.per_request()
    for name in ("cpu_us_per_req", "llc_loads_per_req", "switches_per_req",
                 "migrations_per_req", "throughput_rps", "ipc", "ghz", "p50_us", "p99_us"):
        assert FIGURES[name](r) == shown[name], name
    assert not [k for k in FIGURES if "_per_" in k and not k.endswith("_per_req")]
    assert set(PER_REQUEST) <= set(FIGURES) and set(RENAMED.values()) <= set(FIGURES)
    assert not set(RENAMED) & set(FIGURES)


def test_calibrate_writes_params_that_run_and_predict_apply(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    import tomli_w

    spec.write_text(tomli_w.dumps({
        "measurement": [{"name": "synthetic", "scenario": "pipeline", "figures": _synthetic()}],
        "fit": [{"path": "workload.service_us", "lo": 5.0, "hi": 100.0, "log": True}],
        "run": {"requests": 2000, "seeds": [1, 2], "starts": 4, "max_evaluations": 20}}))
    out = tmp_path / "params.toml"
    assert main(["calibrate", str(spec), "--out", str(out), "--workers", "1",
                 "--report", str(tmp_path / "r.html")]) == 0
    printed = capsys.readouterr().out
    assert "workload.service_us" in printed and "95% interval" in printed
    import tomllib

    doc = tomllib.loads(out.read_text())
    v = doc["values"]["workload.service_us"]
    assert v == pytest.approx(30, rel=0.05) and doc["warmcore_version"] == warmcore.__version__
    assert doc["measurements"] == ["synthetic"] and len(doc["spec_digest"]) == 16
    assert CalibrationSpec.from_data(doc["spec"]).digest() == doc["spec_digest"]
    assert doc["spec"]["base_dir"] == "."       # where the spec is, from the params' folder
    page = (tmp_path / "r.html").read_text()
    assert "vegaEmbed" in page and "Predictions from the fit" in page
    assert all(f"<td>{s}</td>" in page for s in ("pc", "pec", "epc"))
    # run --params == run --set with the fitted value
    assert main(["run", "pipeline", "--params", str(out), "--requests", "500", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(["run", "pipeline", "--set", f"workload.service_us={v!r}", "--requests", "500",
                 "--json"]) == 0
    assert a == json.loads(capsys.readouterr().out)
    # predict: the run's JSON plus intervals
    assert main(["predict", "pipeline", "--params", str(out), "--strategy", "pec",
                 "--requests", "500", "--draws", "4", "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    lo, hi = p["interval95"]["throughput_rps"]
    assert lo <= hi and p["strategy"] == "pec" and math.isfinite(p["throughput_rps"])


def test_the_jetty_8_example_reads_its_figures_over_perfs_window(pytestconfig):
    """perf printed 0.867 CPUs of 27,751.967 ms task-clock: it counted for 32.0092 s
    of the load generator's 37.696 s, so its per-request figures are over that
    window's share of the 1,000,000 requests at the load's rate: 849,140."""
    spec = CalibrationSpec.load(pytestconfig.rootpath / EXAMPLE / "calibrate.toml")
    m = spec.measurement[0]
    figs = m.all_figures(spec.base_dir)
    window = 27.751967126 / 0.867
    counted = 1e6 * window / 37.696
    assert counted == pytest.approx(849_140, abs=1)
    assert figs["throughput_rps"].value == pytest.approx(1e6 / 37.696, rel=1e-9)
    assert figs["cpu_us_per_req"].value == pytest.approx(27_751.967126e3 / counted, rel=1e-9)
    assert figs["instructions_per_req"].value == pytest.approx(49_404_471_415 / counted,
                                                               rel=1e-9)
    assert figs["llc_loads_per_req"].value == pytest.approx(204_217_265 / counted, rel=1e-9)
    assert figs["ipc"].value == pytest.approx(0.9155, rel=1e-3)
    assert figs["ipc"].coverage == pytest.approx(0.2867)
    assert figs["cpus_utilized"].value == 0.867
    assert "849,140 requests" in m.perf_note(spec.base_dir)


PERF_LONGER = """ Performance counter stats for process id '42':
      3000.000000 task-clock        #    0.300 CPUs utilized
    9,000,000,000 instructions
     10.000000000 seconds time elapsed
"""


def test_a_perf_window_longer_than_the_load_counts_all_its_requests(tmp_path):
    """perf attached for 10 s around a 5 s load of 1,000 requests: all are counted, and
    the load's CPUs are its 3 s of task-clock over its own 5 s (0.6), not perf's 0.3."""
    from warmcore.calibration.perf_figures import figures_from_perf, window_note

    path = tmp_path / "run.perf.txt"
    path.write_text(PERF_LONGER)
    figs = figures_from_perf(path, requests=1000, elapsed_s=5.0)
    assert figs["instructions_per_req"].value == pytest.approx(9e6)
    assert figs["cpu_us_per_req"].value == pytest.approx(3000.0)
    assert figs["cpus_utilized"].value == pytest.approx(0.6)
    assert "longer than the load's" in window_note(path, 1000, 5.0)
    assert window_note(path, 1000, 10.0) is None          # the same window: no note
    assert figures_from_perf(path, requests=1000)["cpus_utilized"].value == 0.3


@pytest.fixture(scope="module")
def jetty_8_fit(pytestconfig):
    return Calibrator(CalibrationSpec.load(
        pytestconfig.rootpath / EXAMPLE / "calibrate.toml"), workers=1).fit()


def test_the_jetty_8_fit_explains_every_figure_and_identifies_every_parameter(jetty_8_fit):
    """Issue 28's first done-condition: no figure more than 3 sigma off, every fitted
    parameter identified (no warning), at most 6 parameters and 150 simulations."""
    cal = jetty_8_fit
    assert len(cal.spec.fit) <= 6 and cal.evaluations <= 150
    assert cal.warnings == []
    assert max(abs(f["residual_sigmas"]) for f in cal.figures) < 3
    assert len(cal.figures) == 11


def test_the_jetty_8_fit_notes_that_its_window_is_short_for_ondemand(jetty_8_fit, tmp_path):
    """calibrate.toml fits over 3,000 requests: by hand, at the measured 1,000,000
    requests in 37.696 s (26,528 req/s) that is 0.113 s, 11 of ondemand's 10 ms
    samples, under MIN_GOVERNOR_SAMPLES (50). The fit says so in a note (advisory: not a
    warning, every figure still agrees), on the command line, in PARAMS.toml and in the
    JSON."""
    from warmcore.calibration.cli import format_calibration
    from warmcore.calibration.params import load_params, write_params

    by_hand = round(3000 / (1_000_000 / 37.696) / 0.010)
    assert by_hand == 11
    assert jetty_8_fit.notes == [
        f"jetty-8: the run measured {by_hand} of its governor's 10 ms samples (fewer than "
        "50): its clock (ghz) and the figures the clock moves may not have settled; "
        "lengthen it ([run] requests)"]
    assert f" note: {jetty_8_fit.notes[0]}" in format_calibration(jetty_8_fit).splitlines()
    assert jetty_8_fit.to_dict()["notes"] == jetty_8_fit.notes
    write_params(jetty_8_fit, tmp_path / "p.toml")
    assert load_params(tmp_path / "p.toml")["notes"] == jetty_8_fit.notes


def test_a_governor_note_needs_a_sampling_governor_and_a_short_window():
    """The same synthetic spec on pipeline (ondemand): one note whose sample count is
    the run's measured window over 10 ms; under the performance governor, none."""
    from warmcore.calibration.fit import MIN_GOVERNOR_SAMPLES

    spec = _spec({"throughput_rps": 1.0})
    notes = Calibrator(spec, workers=1)._governor_notes(TRUTH)
    r = warmcore.simulate(warmcore.Scenario.load("pipeline").with_(TRUTH, requests=2000), seed=1)
    samples = r.sim_seconds / 0.010
    assert samples < MIN_GOVERNOR_SAMPLES
    assert notes == [f"synthetic: the run measured {samples:.0f} of its governor's 10 ms "
                     "samples (fewer than 50): its clock (ghz) and the figures the clock "
                     "moves may not have settled; lengthen it ([run] requests)"]
    fixed = CalibrationSpec.from_data({**spec.model_dump(), "measurement": [
        {**spec.measurement[0].model_dump(), "set": ["machine.governor=performance"]}]})
    assert Calibrator(fixed, workers=1)._governor_notes(TRUTH) == []


def test_the_jetty_8_fit_predicts_the_milestones_parallel_slowdown(jetty_8_fit, tmp_path,
                                                                  pytestconfig):
    """From the fit, jetty9-milestone against pc on the measured setup: slower, more
    than one CPU, a lower IPC and clock, more LLC loads and L1d misses per request
    (phenomenon 1), each predicted with its interval. Not yet as written: "several
    times" the LLC loads (1.55x here, with LLC-loads counted as demand reads only and
    the futile wake-up's re-check of the queue; 1.67x with a wake-up's kernel lines
    counted part by part, wake_lines_by_part; issue 28 stays open, docs/calibration.md
    "What a wake-up touches, counted")."""
    from warmcore.calibration.fit import predict
    from warmcore.calibration.params import load_params, write_params

    out = tmp_path / "jetty-8.params.toml"
    write_params(jetty_8_fit, out)
    params = load_params(out)
    scenario = str(pytestconfig.rootpath / EXAMPLE / "jetty-8.toml")
    # 20,000 requests: the milestone's clock is ondemand's choice every 10 ms, and
    # predict's 3,000 requests (0.14 s, 14 samples) end before it settles (1.84 GHz
    # after 3,000 requests, 1.60 after 20,000; pc 2.03 and 2.00)
    pc, j9 = (predict(params, scenario, strategy=s, draws=4, requests=20000)
              for s in ("pc", "jetty9-milestone"))
    assert all(p["interval95"]["throughput_rps"][0] <= p["interval95"]["throughput_rps"][1]
               for p in (pc, j9))
    assert pc["throughput_rps"] > 1.15 * j9["throughput_rps"]
    assert j9["cpus_utilized"] > 1.1 and pc["cpus_utilized"] < 1.0
    assert j9["ipc"] < 0.85 * pc["ipc"]
    assert j9["ghz"] < 0.9 * pc["ghz"]
    per_req = lambda r, k: r[k] / r["requests"]  # noqa: E731
    assert per_req(j9, "llc_loads") > 1.3 * per_req(pc, "llc_loads")
    assert per_req(j9, "l1d_misses") > per_req(pc, "l1d_misses")


def test_a_prediction_too_short_for_the_governor_says_so(jetty_8_fit, tmp_path,
                                                         pytestconfig):
    """ondemand chooses the clock every 10 ms: the milestone's 3,000 requests (0.14 s)
    cover 14 samples, under MIN_GOVERNOR_SAMPLES (50), and the prediction warns;
    20,000 requests (1.0 s, 100 samples) do not."""
    from warmcore.calibration.fit import predict
    from warmcore.calibration.params import load_params, write_params

    out = tmp_path / "jetty-8.params.toml"
    write_params(jetty_8_fit, out)
    scenario = str(pytestconfig.rootpath / EXAMPLE / "jetty-8.toml")
    short, long = (predict(load_params(out), scenario, strategy="jetty9-milestone",
                           draws=0, requests=n) for n in (3000, 20000))
    note = [w for w in short["warnings"] if "governor's 10 ms samples" in w]
    assert len(note) == 1 and "measured 14 of" in note[0], short["warnings"]
    assert not any("samples" in w for w in long["warnings"]), long["warnings"]


@pytest.mark.parametrize("scenario, seconds, samples", [
    ("pipeline", 0.49, 49), ("pipeline", 0.5, None), ("hello", 0.01, None)])
def test_the_governor_note_counts_sampling_periods_by_hand(scenario, seconds, samples):
    """pipeline: the i7-3770's ondemand, sampling_rate 10 ms: 0.49 s is 49 samples
    (a note), 0.5 s is 50 (none); hello runs the performance governor (no samples)."""
    from warmcore.calibration.fit import governor_samples_note

    note = governor_samples_note(warmcore.Scenario.load(scenario), seconds)
    if samples is None:
        assert note is None
    else:
        assert note.startswith(f"the run measured {samples} of its governor's 10 ms")


def test_a_sweep_of_a_calibrated_model_applies_the_fitted_values(tmp_path, fitted):
    from warmcore.calibration.params import write_params
    from warmcore.sweeps import read_results

    params = tmp_path / "p.toml"
    write_params(fitted, params)
    spec = tmp_path / "s.toml"
    spec.write_text('scenario = "pipeline"\nset = ["run.requests=300"]\n'
                    'metrics = ["throughput_rps", "latency_us.p50"]\n'
                    '[axes]\n"strategy.name" = ["pc"]\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "a"), "--workers", "1",
                 "--params", str(params), "--quiet"]) == 0
    got = read_results(tmp_path / "a")
    # the same as a spec that writes the fitted values in its own `set`, first
    fitted_sets = ", ".join(f'"{k}={v!r}"' for k, v in fitted.values.items())
    spec.write_text(spec.read_text().replace('set = ["run.requests=300"]',
                                             f'set = [{fitted_sets}, "run.requests=300"]'))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "b"), "--workers", "1",
                 "--quiet"]) == 0
    same = read_results(tmp_path / "b")
    assert got["throughput_rps"].iloc[0] == same["throughput_rps"].iloc[0]
    assert got["seed"].iloc[0] == same["seed"].iloc[0]


def test_a_fit_is_the_same_on_one_worker_two_workers_and_a_dask_cluster(fitted):
    """Evaluations go through the sweeps' executor: the local pool or a Dask cluster
    by address; common random numbers make the fit the same wherever it runs."""
    import distributed

    spec = fitted.spec
    two = Calibrator(spec, workers=2).fit()
    assert two.values == fitted.values and two.evaluations == fitted.evaluations
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster:
        on_dask = Calibrator(spec, scheduler=cluster.scheduler_address).fit()
    assert on_dask.values == fitted.values


def test_a_specs_digest_does_not_depend_on_the_folder_it_is_read_from(tmp_path):
    """The digest PARAMS.toml records is of what the spec asks: the same spec in two
    folders (two machines) has one digest."""
    from warmcore.calibration.fit import CalibrationSpec

    example = Path(__file__).resolve().parent.parent / "examples" / "wsperflab-2013"
    text = (example / "calibrate-netty.toml").read_text()
    copy = tmp_path / "elsewhere"
    copy.mkdir()
    for name in ("calibrate-netty.toml", "netty.toml", "curves.csv"):
        (copy / name).write_text((example / name).read_text())
    assert (copy / "calibrate-netty.toml").read_text() == text
    a = CalibrationSpec.load(example / "calibrate-netty.toml")
    b = CalibrationSpec.load(copy / "calibrate-netty.toml")
    assert a.base_dir != b.base_dir and a.digest() == b.digest()


# -- the Jetty 8 mechanisms, recovered from synthetic measurements ----------------------

J8_TRUTH = {"workload.client_us": 40.0, "work.data_read_kib": 24.0,
            "machine.governor_params.up_threshold": 80}
J8_KEYS = ("throughput_rps", "cpus_utilized", "ghz", "llc_loads_per_req", "ipc")


def test_a_fit_recovers_the_client_the_cache_and_the_governor_it_was_made_with(pytestconfig):
    """Issue 28: measurements simulated on the Jetty 8 setup with a known client
    turnaround (40 us), read part (24 KiB of the 4 MiB set) and ondemand up_threshold
    (80, not the default 95) are fitted back inside their intervals: throughput and
    CPUs see the client, LLC loads the part, the clock the threshold (Linux 3.5's rule
    settles at the server's load-frequency over up_threshold - 3, in whole P-states:
    the fit widens its step until the clock moves)."""
    scenario = str(pytestconfig.rootpath / EXAMPLE / "jetty-8.toml")
    sc = warmcore.Scenario.load(scenario).with_(J8_TRUTH, requests=2000)
    rs = [warmcore.simulate(sc, seed=s) for s in (1, 2)]
    figures = {k: float(np.mean([FIGURES[k](r) for r in rs])) for k in J8_KEYS}
    spec = CalibrationSpec.from_data({
        "measurement": [{"name": "synthetic", "scenario": scenario, "figures": figures}],
        "fit": [{"path": "workload.client_us", "lo": 20.0, "hi": 80.0, "log": True},
                {"path": "work.data_read_kib", "lo": 4.0, "hi": 64.0, "log": True},
                {"path": "machine.governor_params.up_threshold", "lo": 60, "hi": 99}],
        "run": {"requests": 2000, "seeds": [1, 2], "starts": 6, "max_evaluations": 60}})
    cal = Calibrator(spec, workers=1).fit()
    for path, truth in J8_TRUTH.items():
        lo, hi = cal.ci95[path]
        assert lo <= truth <= hi, (path, truth, lo, hi, cal.values[path])
    assert cal.values["workload.client_us"] == pytest.approx(40.0, rel=0.05)
    assert cal.warnings == []
