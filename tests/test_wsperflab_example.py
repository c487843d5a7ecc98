"""examples/wsperflab-2013: the extraction of WSPerfLab's load curves, and the
example's scenarios and calibration spec (docs/calibration.md, "WSPerfLab")."""

import csv
import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wsperflab-2013"


def _extract_module():
    spec = importlib.util.spec_from_file_location("wsperflab_extract", EXAMPLE / "extract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Two lines of test-results/Oct-22-2013/java_bio_blocking/java_servlet_blocking.txt
# and one of netty_results_to_750/netty.txt (eight percentiles: the earlier script).
FIXTURE = (
    "75\t382.52\t0.0\t[194, 195, 195, 195, 196, 197, 200, 206, 367]\n"
    "300\t141.6\t0.04\t[2058, 2087, 2098, 2116, 2157, 2174, 2179, 2382, 60001]\n"
    "750\t2326.84\t0.0\t[191, 193, 194, 196, 200, 207, 214, 314]\n"
)


def test_parse_report_reads_every_column():
    rows = _extract_module().parse_report(FIXTURE)
    assert len(rows) == 3
    assert rows[0] == {
        "clients": 75, "ok_per_s": 382.52, "ko_per_s": 0.0,
        "p0_ms": 194, "p10_ms": 195, "p25_ms": 195, "p50_ms": 195, "p75_ms": 196,
        "p90_ms": 197, "p95_ms": 200, "p99_ms": 206, "p99_99_ms": 367,
    }
    assert rows[1]["ko_per_s"] == 0.04 and rows[1]["p99_99_ms"] == 60001
    assert rows[2]["p99_ms"] == 314 and rows[2]["p99_99_ms"] is None


def test_parse_report_refuses_a_malformed_line():
    module = _extract_module()
    with pytest.raises(module.ReportError, match="4 tab-separated fields"):
        module.parse_report("75 382.52 0.0 [1, 2]\n")


def _csv_rows():
    with open(EXAMPLE / "curves.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_curves_csv_is_what_extract_writes(tmp_path):
    module = _extract_module()
    out = tmp_path / "curves.csv"
    with open(out, "w") as f:
        module.write_csv(module.extract(EXAMPLE / "source"), f)
    assert out.read_text() == (EXAMPLE / "curves.csv").read_text()


@pytest.mark.parametrize(
    "run, clients, ok, ko, p50, p99",
    [
        # numbers copied by hand from the WSPerfLab reports (commit 3c01285)
        ("java_bio_blocking", 75, "382.52", "0.0", "195", "206"),
        ("java_bio_blocking", 225, "248.16", "0.0", "923", "953"),
        ("java_bio_blocking", 375, "0.0", "6.32", "60000", "60001"),
        ("netty_results_to_1500", 750, "2220.6", "7.36", "195", "367"),
        ("netty_results_to_1500", 1425, "2536.36", "0.0", "199", "580"),
        ("play_normal_thread", 300, "1091.48", "0.0", "272", "404"),
    ],
)
def test_curves_csv_matches_the_source_numbers(run, clients, ok, ko, p50, p99):
    row = next(r for r in _csv_rows() if r["run"] == run and int(r["clients"]) == clients)
    assert (row["ok_per_s"], row["ko_per_s"], row["p50_ms"], row["p99_ms"]) == (ok, ko, p50, p99)


# -- the example's scenarios, specs and fitted parameters ---------------------------------

@pytest.mark.parametrize("name, strategy, threads", [
    ("tomcat-bio.toml", "thread-per-connection", 5000),   # maxThreads="5000"
    ("netty.toml", "event-loop", None),
])
def test_scenarios_load_and_validate(name, strategy, threads):
    import warmcore

    sc = warmcore.check(str(EXAMPLE / name))
    assert sc.strategy.name == strategy
    assert sc.workload.think_us == 0.0           # Gatling users with no pause
    assert sc.server.threads == threads


def test_tomcat_program_waits_the_critical_path():
    """B (150 ms) then E (40 ms): TestCaseAServlet.java's delays, deterministic."""
    import warmcore

    sc = warmcore.check(str(EXAMPLE / "tomcat-bio.toml"))
    calls = [s for s in sc.work.program if getattr(s, "call_us", None)]
    assert [c.call_us for c in calls] == [190000.0]


@pytest.mark.parametrize("spec", ["calibrate-tomcat.toml", "calibrate-netty.toml"])
def test_calibration_specs_load_and_validate(spec):
    from warmcore.calibration.fit import CalibrationSpec

    loaded = CalibrationSpec.load(EXAMPLE / spec)   # check(): paths, bounds, figures
    assert loaded.run.max_evaluations <= 30 and len(loaded.run.seeds) == 1


@pytest.mark.parametrize("spec, params", [
    ("calibrate-tomcat.toml", "tomcat.params.toml"),
    ("calibrate-netty.toml", "netty.params.toml"),
])
def test_fitted_params_belong_to_their_spec(spec, params):
    from warmcore.calibration.fit import CalibrationSpec
    from warmcore.calibration.params import load_params

    # the spec a fit recorded: its base_dir relative to the PARAMS.toml's folder
    recorded = load_params(EXAMPLE / params)["spec"]
    assert recorded["base_dir"] == "."
    recorded = {**recorded, "base_dir": str(EXAMPLE / recorded["base_dir"])}
    assert (CalibrationSpec.from_data(recorded).digest()
            == CalibrationSpec.load(EXAMPLE / spec).digest())


def test_measured_figures_in_specs_are_the_csv_numbers():
    """Every stated throughput and median of the specs is its curves.csv row."""
    import tomllib

    rows = {(r["run"], int(r["clients"])): r for r in _csv_rows()}
    runs = {"tomcat": "java_bio_blocking", "netty": "netty_results_to_1500"}
    for spec in ("calibrate-tomcat.toml", "calibrate-netty.toml"):
        data = tomllib.loads((EXAMPLE / spec).read_text())
        for m in data["measurement"]:
            server, clients = m["name"].split("-")
            row = rows[(runs[server], int(clients))]
            assert m["set"] == [f"workload.clients={clients}"]
            figures = m["figures"]
            assert figures["throughput_rps"]["value"] == float(row["ok_per_s"])
            if "p50_us" in figures:
                assert figures["p50_us"]["value"] == 1000.0 * float(row["p50_ms"])
