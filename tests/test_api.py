"""The public API: Scenario, simulate, compare, frame, parameters, and one result
schema (docs/result.schema.json) that every run's JSON validates against."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import warmcore
from warmcore import build
from warmcore.result import Result, json_schema
from warmcore.simcore.config import builtin_names

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "docs" / "result.schema.json").read_text())


def test_the_published_schema_is_generated_from_the_result_type():
    assert json.loads(json.dumps(json_schema())) == SCHEMA


@pytest.mark.parametrize("name", builtin_names())
@pytest.mark.parametrize("strategy", ["pc", "pec", "thread-pool", "work-stealing"])
def test_every_run_json_validates_against_the_schema(name, strategy):
    r = warmcore.simulate(warmcore.Scenario.load(name).with_(strategy=strategy), requests=300)
    jsonschema.validate(json.loads(r.to_json()), SCHEMA)


def test_replications_and_trace_validate_too():
    sc = warmcore.Scenario.load("mmc").with_({"run.replications": 3, "run.trace_events": 50},
                                             requests=200)
    d = json.loads(warmcore.simulate(sc).to_json())
    jsonschema.validate(d, SCHEMA)
    assert d["replications"] == 3 and len(d["seeds"]) == 3 and "ci95" in d and d["trace"]


def test_to_dict_is_the_run_dict_with_nan_as_null():
    sc = warmcore.Scenario.load("pipeline").with_(requests=500)
    raw = build.simulate(sc)
    d = Result.from_dict(raw).to_dict()
    assert list(d) == list(raw)
    for k, v in raw.items():
        if isinstance(v, float) and not math.isfinite(v):
            assert d[k] is None
        elif not isinstance(v, dict):
            assert d[k] == v and type(d[k]) is type(v), k


def test_simulate_is_typed_and_deterministic():
    sc = warmcore.Scenario.load("mmc")
    a = warmcore.simulate(sc, requests=1000, seed=3)
    b = warmcore.simulate(sc, requests=1000, seed=3)
    c = warmcore.simulate(sc, requests=1000, seed=4)
    assert isinstance(a, Result) and a.requests == 1000 and a.seed == 3
    assert a.to_json() == b.to_json() != c.to_json()
    assert 0 < a.latency_us.p50 <= a.latency_us.p99 <= a.latency_us.max


def test_simulate_with_a_duration():
    r = warmcore.simulate("mmc", duration=0.5)
    assert r.sim_seconds == pytest.approx(0.5, rel=1e-6)


def test_to_series_is_a_flat_row():
    s = warmcore.simulate("mmc", requests=300).to_series()
    assert s["latency_us.p99"] > 0 and s["throughput_rps"] > 0 and "breakdown_us.compute" in s


def test_compare_and_frame():
    rs = warmcore.compare("mmc", ["shared-queue", "work-stealing"], loads=[1000, 2000],
                          requests=300)
    assert [(r.strategy, r.load) for r in rs] == [
        ("shared-queue", 1000), ("shared-queue", 2000), ("work-stealing", 1000),
        ("work-stealing", 2000)]
    df = warmcore.frame(rs)
    assert len(df) == 4 and list(df["load"]) == [1000, 2000, 1000, 2000]
    table = warmcore.frame(rs, per_request=True)
    assert {"cpu_us_per_req", "p99_us", "rps_per_cpu"} <= set(table.columns)


class TestScenario:
    def test_load_from_name_file_and_dict_agree(self, tmp_path):
        sc = warmcore.Scenario.load("hello")
        f = tmp_path / "hello.toml"
        f.write_text(sc.to_toml())
        assert warmcore.Scenario.load(str(f)) == sc
        assert warmcore.Scenario.load(sc.to_data()) == sc
        assert warmcore.Scenario.from_toml(sc.to_toml()) == sc

    @pytest.mark.parametrize("name", builtin_names())
    def test_to_toml_round_trips_and_reproduces_the_run(self, name, tmp_path):
        sc = warmcore.Scenario.load(name).with_(requests=200)
        f = tmp_path / "s.toml"
        f.write_text(sc.to_toml())
        out = subprocess.run([sys.executable, "-m", "warmcore.cli", "run", str(f), "--json"],
                             capture_output=True, text=True, check=True).stdout
        assert json.loads(out) == json.loads(warmcore.simulate(sc).to_json())

    def test_set_and_with_return_new_validated_scenarios(self):
        sc = warmcore.Scenario.load("pipeline")
        sc2 = sc.set("machine.governor", "performance")
        assert sc.machine.governor != "performance" and sc2.machine.governor == "performance"
        sc3 = sc.with_({"machine.cores": 2, "strategy.params.max_threads": 50},
                       strategy="pec", seed=9, requests=777)
        assert (sc3.machine.cores, sc3.strategy.name, sc3.seed, sc3.run.requests) == \
            (2, "pec", 9, 777)
        assert sc3.strategy.params == {"max_threads": 50}
        assert sc3.run.duration_s is None

    def test_another_strategy_drops_the_old_ones_tunables(self):
        sc = warmcore.Scenario.load("mmc").set("strategy.params.workers", 3)
        assert sc.with_(strategy="pc").strategy.params == {}

    @pytest.mark.parametrize("path, value, field", [
        ("machine.cores", 0, "machine.cores"),
        ("workload.service_us", -1.0, "workload.service_us"),
        ("nope.x", 1, "nope"),
        ("run.warmup", 1.5, "run.warmup"),
    ])
    def test_bad_values_name_their_field(self, path, value, field):
        with pytest.raises(warmcore.ConfigError) as e:
            warmcore.Scenario.load("mmc").set(path, value)
        assert e.value.field == field


class TestParameters:
    def test_covers_config_strategy_governor_and_preset(self):
        paths = {p.path for p in warmcore.parameters("pipeline")}
        for expected in ("machine.cores", "workload.connections", "work.task_kib",
                         "run.requests", "strategy.params.max_threads",
                         "machine.governor_params.up_threshold",
                         "machine.overrides.l2_kib", "machine.effects.caches"):
            assert expected in paths
        assert "workload.rate_per_s" not in paths     # pipeline's workload is saturating

    def test_types_ranges_units_and_sources(self):
        ps = {p.path: p for p in warmcore.parameters("pipeline")}
        cores = ps["machine.cores"]
        assert cores.type == "int" and cores.gt == 0 and cores.optional
        svc = ps["workload.service_us"]
        assert svc.type == "float" and svc.unit == "us" and (svc.ge, svc.le) == (0.001, 1e7)
        assert ps["workload.service"].choices == ("deterministic", "exponential",
                                                  "lognormal", "hyperexponential",
                                                  "coxian", "empirical")
        assert "QueuedThreadPool" in ps["strategy.params.max_threads"].source
        assert ps["strategy.params.max_threads"].default == 200
        assert "Intel" in ps["machine.overrides.l2_kib"].source

    def test_value_is_the_scenarios(self):
        sc = warmcore.Scenario.load("pipeline").set("work.task_kib", 3.0)
        assert {p.path: p for p in warmcore.parameters(sc)}["work.task_kib"].value == 3.0

    def test_check_enforces_the_range(self):
        p = {p.path: p for p in warmcore.parameters("mmc")}["run.warmup"]
        p.check(0.5)
        with pytest.raises(ValueError, match="< 1"):
            p.check(1.0)

    def test_every_parameter_value_validates_back(self):
        """Setting each parameter to its own value leaves a valid scenario."""
        sc = warmcore.Scenario.load("hello")
        for p in warmcore.parameters(sc):
            if p.value is not None and p.type not in ("table",):
                sc.set(p.path, p.value)


def test_import_of_a_model_module_does_not_load_the_engine():
    code = ("import sys, warmcore.models.smt; "
            "print(sorted(m for m in ('simpy', 'scipy', 'pydantic', 'warmcore.build') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


class TestShouldStop:
    """``should_stop(fraction_done)``: progress for a caller, and a stop it asks for."""

    def test_asked_with_growing_progress_and_changes_nothing_when_false(self):
        sc = warmcore.Scenario.load("pipeline")
        seen = []
        a = warmcore.simulate(sc, requests=3000).to_json()
        b = warmcore.simulate(sc, requests=3000,
                              should_stop=lambda f: seen.append(f) or False).to_json()
        assert a == b
        assert seen and seen == sorted(seen) and seen[0] >= 0.0 and seen[-1] <= 1.0

    def test_true_stops_the_run_with_a_partial_result(self):
        import time

        sc = warmcore.Scenario.load("hello")
        t0 = time.monotonic()
        seen = []

        def stop_at_a_tenth(f):
            seen.append(f)
            return f >= 0.1

        r = warmcore.simulate(sc, requests=200_000, should_stop=stop_at_a_tenth)
        assert time.monotonic() - t0 < 60
        assert r.partial is True and r.stop_reason == "stopped"
        assert 0.1 <= seen[-1] < 0.5 and 0 < r.requests < 100_000
        assert any(w.startswith("partial: stopped after") for w in r.warnings)

    def test_compare_reports_the_fraction_of_all_runs_and_ends_at_the_stopped_one(self):
        sc = warmcore.Scenario.load("pipeline")
        seen = []

        def stop_in_the_second_run(f):
            seen.append(f)
            return f > 0.5

        rs = warmcore.compare(sc, ["pc", "pec", "epc"], requests=40_000,
                              should_stop=stop_in_the_second_run)
        assert [r.strategy for r in rs] == ["pc", "pec"]
        assert not rs[0].partial and rs[1].partial and rs[1].stop_reason == "stopped"
        assert max(seen) < 2 / 3 + 1e-9

    def test_replications_not_begun_are_left_out(self):
        sc = warmcore.Scenario.load("hello", ["run.replications=50"])
        r = warmcore.simulate(sc, requests=20_000, should_stop=lambda f: f > 0.05)
        assert r.partial and r.replications < 50
        assert any("replications ran before it was stopped" in w for w in r.warnings)

    def test_not_callable_is_a_config_error(self):
        with pytest.raises(warmcore.ConfigError, match="should_stop"):
            warmcore.simulate("mmc", requests=100, should_stop=3)


def test_check_validates_what_a_run_would_without_running():
    import warmcore

    sc = warmcore.Scenario.load("pipeline")
    assert warmcore.check(sc) is sc
    for setting, field in (('machine.governor="turbo-boost-9000"', "machine.governor"),
                           ("strategy.params.max_threads=-1", "strategy.params.max_threads"),
                           ("machine.overrides.v_min=9.0", "machine.overrides.v_min")):
        bad = warmcore.Scenario.load("pipeline", [setting])      # a valid scenario...
        with pytest.raises(warmcore.ConfigError) as e:          # ...that no run accepts
            warmcore.check(bad)
        assert e.value.field == field, e.value


def test_a_sweep_axis_value_no_run_accepts_is_refused_before_anything_runs(tmp_path):
    import warmcore
    from warmcore.sweeps import validate_spec

    with pytest.raises(warmcore.ConfigError) as e:
        validate_spec({"scenario": "pipeline", "axes": {"machine.governor": ["ondemand",
                                                                            "nope"]}})
    assert e.value.field == "machine.governor" and "unknown governor" in e.value.reason


def test_parameters_include_each_declared_resource():
    """[resources] entries are settable paths (explorer controls, --set, sweep axes)."""
    import warmcore

    ps = {p.path: p for p in warmcore.parameters("loom")}
    p = ps["resources.db.permits"]
    assert (p.type, p.value, p.gt, p.le) == ("int", 100, 0, 100_000)
    assert ps["resources.db.op_us"].value == 0.05
    assert "resources" not in ps                       # the table itself is not a control
    sc = warmcore.Scenario.load("loom").with_({"resources.db.permits": 7})
    assert sc.resources["db"].permits == 7
    assert not [q for q in warmcore.parameters("pipeline") if q.path.startswith("resources.")]
