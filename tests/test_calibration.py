"""Calibration (issue 14): perf stat parsers in every format, the fit's recovery of
known parameters from synthetic measurements, prediction intervals, PARAMS.toml and
the commands."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warmcore
from tests.fuzzing import contract_violation, run_cli
from warmcore.calibration.cli import main
from warmcore.calibration.fit import FIGURES, CalibrationSpec, Calibrator
from warmcore.calibration.perfstat import load_perf_stat, parse_perf_stat


EXAMPLE = "examples/jetty-8"


@pytest.fixture(scope="module")
def jetty(pytestconfig):
    return load_perf_stat(pytestconfig.rootpath / EXAMPLE / "jetty-8.perf.txt")


def test_the_old_human_format_of_the_jetty_8_file(jetty):
    assert jetty.format == "human" and jetty.problems == []
    assert jetty.command == "process id 'jetty-8'"
    assert jetty.total("cycles") == 53_963_171_579
    assert jetty.coverage("cycles") == pytest.approx(0.2867)
    assert jetty.total("instructions") == 49_404_471_415 and jetty.coverage("instructions") == 1
    assert jetty.total("task-clock") == pytest.approx(27751.967126)
    assert jetty.total("LLC-load-misses") == 15_167_562            # alias of LLC-misses
    assert jetty.coverage("LLC-misses") == pytest.approx(0.0721)
    ins = next(c for c in jetty.counters if c.event == "instructions")
    assert ins.metric == (0.92, "insns per cycle") and ins.line == 4


CURRENT = """# started on Mon Jan  1 00:00:00 2024

 Performance counter stats for 'system wide' (5 runs):

        226,054.13 msec cpu-clock                #  224.588 CPUs utilized    ( +-  0.68% )
    13,931,568,041      L1-dcache-loads                                               (40.13%)
   <not supported>      L1-icache-loads
     <not counted>      LLC-loads                                                     (0.00%)
               986      context-switches:u               #    4.365 /sec
         1,234,567      cpu_core/cycles/                                              (49.90%)
         1,000,000      cpu_atom/cycles/                                              (50.10%)
             5,000      cpu_core/LLC-load-misses/u
                                                  #    0.92  stalled cycles per insn
this line is not perf output
       1.006537 +- 0.000243 seconds time elapsed  ( +-  0.02% )

       0.500000000 seconds user
       0.250000000 seconds sys
"""


def test_the_current_human_format():
    ps = parse_perf_stat(CURRENT)
    assert ps.command == "'system wide'" and ps.runs == 5
    assert (ps.elapsed_s, ps.user_s, ps.sys_s) == (1.006537, 0.5, 0.25)
    clock = ps.counters[0]
    assert (clock.event, clock.raw, clock.unit, clock.value) == ("task-clock", "cpu-clock",
                                                                 "msec", 226054.13)
    assert clock.variance_pct == 0.68 and clock.metric == (224.588, "CPUs utilized")
    assert ps.coverage("L1-dcache-loads") == pytest.approx(0.4013)
    by = {c.raw: c for c in ps.counters}
    assert by["L1-icache-loads"].status == "not supported" and by["L1-icache-loads"].value is None
    assert by["LLC-loads"].status == "not counted" and ps.total("LLC-loads") is None
    assert by["context-switches:u"].event == "context-switches:u"
    assert by["context-switches:u"].modifiers == "u"
    assert ps.total("cycles") == 2_234_567                    # both hybrid PMUs
    assert {c.pmu for c in ps.counters if c.event == "cycles"} == {"cpu_core", "cpu_atom"}
    assert by["cpu_core/LLC-load-misses/u"].event == "LLC-misses:u"
    assert ps.problems == [(14, "this line is not perf output", "not a perf stat line")]


CSV = """# started on Mon Jan  1 00:00:00 2024

1.000206,225851.20,msec,cpu-clock,225850700108,100.00,224.431,CPUs utilized
1.000206,<not counted>,,slots,0,0.00,,
1.000206,S0-D0-C0,2,1000,,instructions,1000,50.00,,
1.000206,S0-D0-C1,2,3000,,instructions,1000,50.00,,
2.000412,S0-D0-C0,2,2000,,instructions,1000,50.00,,
2.000412,S0-D0-C1,2,4000,,instructions,1000,50.00,,
"""


def test_csv_with_intervals_and_per_core_columns():
    ps = parse_perf_stat(CSV)
    assert ps.format == "csv+intervals" and ps.problems == []
    assert ps.total("instructions") == 10_000
    s = ps.series()
    assert list(s.index) == [1.000206, 2.000412]
    assert s.loc[1.000206, "instructions"] == 4000 and s.loc[2.000412, "instructions"] == 6000
    assert {c.aggregate for c in ps.counters if c.event == "instructions"} == {"S0-D0-C0",
                                                                              "S0-D0-C1"}
    slots = next(c for c in ps.counters if c.event == "slots")
    assert slots.status == "not counted" and slots.coverage == 0


def test_csv_with_another_separator_and_decimal_commas():
    ps = parse_perf_stat("225851,20;msec;cpu-clock;225850700108;100,00;224,431;CPUs utilized\n"
                         "1234;;instructions;225850700108;40,50;;\n")
    assert ps.total("task-clock") == pytest.approx(225851.20)
    assert ps.counters[0].metric == (224.431, "CPUs utilized")
    assert ps.total("instructions") == 1234 and ps.coverage("instructions") == 0.405


def test_json_lines_with_string_and_numeric_metrics():
    text = ('{"counter-value" : "986.000000", "unit" : "", "event" : "context-switches", '
            '"event-runtime" : 225904108985, "pcnt-running" : 100.00, "metric-value" : '
            '"4.364670", "metric-unit" : "/sec"}\n'
            '{"counter-value" : "42", "event" : "cpu-migrations", "metric-value" : 0.18}\n'
            '{"interval" : 1.5, "counter-value" : "<not supported>", "event" : "slots"}\n'
            "{broken\n")
    ps = parse_perf_stat(text)
    assert ps.format == "json+intervals"
    assert ps.total("cs") == 986 and ps.counters[0].metric == (4.36467, "/sec")
    assert ps.counters[1].metric == (0.18, "")
    assert ps.counters[2].status == "not supported" and ps.counters[2].interval_s == 1.5
    assert [p[0] for p in ps.problems] == [4]


# -- round trip: a small formatter writes counter sets in each format -----------------

def _fmt(events, style):
    out = []
    for name, (value, cov) in events.items():
        pct = cov * 100
        if style == "old":
            out.append(f"{value:>18,} {name:<20} #  1.0 M/sec  [{pct:5.2f}%]")
        elif style == "new":
            out.append(f"{value:>18,}      {name:<40} ({pct:.2f}%)")
        elif style == "csv":
            out.append(f"{value},,{name},1000,{pct:.2f},,")
        elif style == "csv-semicolon":
            out.append(f"{value};;{name};1000;{pct:.2f}".replace(".", ",") + ";;")
        else:
            out.append(json.dumps({"counter-value": f"{value}.000000", "unit": "",
                                   "event": name, "pcnt-running": round(pct, 2)}))
    return "\n".join(out) + "\n"


EVENT_NAMES = st.sampled_from(["cycles", "instructions", "LLC-loads", "LLC-misses",
                               "L1-dcache-loads", "context-switches", "cpu-migrations",
                               "branch-misses", "cycles:u", "instructions:k"])


@settings(max_examples=60, deadline=None)
@given(events=st.dictionaries(EVENT_NAMES,
                              st.tuples(st.integers(0, 10**14),
                                        st.integers(1, 10000).map(lambda x: x / 10000)),
                              min_size=1, max_size=6),
       style=st.sampled_from(["old", "new", "csv", "csv-semicolon", "json"]))
def test_any_counter_set_in_any_format_reads_back(events, style):
    ps = parse_perf_stat(_fmt(events, style))
    assert ps.problems == [], ps.problems
    for name, (value, cov) in events.items():
        assert ps.total(name) == value
        assert ps.coverage(name) == pytest.approx(round(cov * 100, 2) / 100, abs=1e-9)


# -- the command --------------------------------------------------------------------------

def test_perf_parse_prints_what_it_read(capsys, pytestconfig):
    path = str(pytestconfig.rootpath / EXAMPLE / "jetty-8.perf.txt")
    assert main(["perf-parse", path]) == 0
    out = capsys.readouterr().out
    assert "53,963,171,579.00" in out and "28.67%" in out and "human format, 11 rows" in out
    assert main(["perf-parse", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["totals"]["instructions"] == 49_404_471_415 and d["problems"] == []


@pytest.mark.parametrize("content,words", [
    (b"\xff\xfe\x00garbage", "not UTF-8 text (byte 0"),
    (b"", "no perf stat counters read (empty)"),
    (b"hello\nworld\n", ":1: no perf stat counters read (not a perf stat line)"),
    (bytes(range(256)), "not UTF-8"),
    (None, "a directory"),
    ("missing", "cannot read"),
])
def test_bad_perf_files_get_one_line(tmp_path, content, words):
    path = tmp_path / "p.txt"
    if content is None:
        path = tmp_path
    elif content == "missing":
        path = tmp_path / "nope.txt"
    else:
        path.write_bytes(content)
    o = run_cli(["perf-parse", str(path)], timeout=60)
    assert contract_violation(o) is None and o.code == 2, (o.code, o.stderr)
    assert words in o.stderr, o.stderr


def test_a_huge_perf_file_is_refused(tmp_path):
    from warmcore.calibration.perfstat import MAX_PERF_BYTES

    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        f.seek(MAX_PERF_BYTES)
        f.write(b"\n")
    o = run_cli(["perf-parse", str(path)], timeout=60)
    assert o.code == 2 and "larger than" in o.stderr


# -- fitting ------------------------------------------------------------------------------

TRUTH = {"workload.service_us": 30.0, "work.thread_kib": 48.0}
KEYS = ("throughput_rps", "ipc", "llc_loads_per_request", "cpu_us_per_request",
        "latency_p50_us")


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
    assert "vegaEmbed" in (tmp_path / "r.html").read_text()
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


def test_the_jetty_8_example_calibrates_and_reports_what_disagrees(pytestconfig):
    spec = CalibrationSpec.load(pytestconfig.rootpath / EXAMPLE / "calibrate.toml")
    figs = spec.measurement[0].all_figures(spec.base_dir)
    assert figs["throughput_rps"].value == pytest.approx(26528, rel=1e-3)
    assert figs["ipc"].value == pytest.approx(0.9155, rel=1e-3)
    assert figs["ipc"].coverage == pytest.approx(0.2867)
    assert figs["cpus_utilized"].value == 0.867


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
