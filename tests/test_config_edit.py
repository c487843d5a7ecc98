"""The configuration layer (simcore/config/, issue 27): the one edit path and its rules,
tested without Streamlit; the command line, the API and the explorer going through
it; ConfigError's re-rooting; the one translator of pydantic's errors."""

from __future__ import annotations

import types
from pathlib import Path
from runpy import run_path

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, \
    model_validator

import warmcore
from warmcore.simcore import config
from warmcore.simcore.config import ConfigError, Scenario, config_error
from warmcore.simcore.config import edit as edit_module     # the module

ROOT = Path(__file__).resolve().parents[1]


def pipeline() -> Scenario:
    return Scenario.load("pipeline")       # pc, saturating, i7-3770 under ondemand


# -- the rules ------------------------------------------------------------------------------

def test_another_preset_resets_its_overrides_and_the_governor_tunables():
    sc = pipeline().edit({"machine.overrides.l2_kib": 512.0,
                          "machine.governor_params.up_threshold": 80.0})
    new = sc.edit({"machine.preset": "epyc-zen3"})
    assert new.machine.preset == "epyc-zen3"
    assert new.machine.overrides == {} and new.machine.governor_params == {}


def test_what_the_same_edit_gives_for_a_reset_table_stays():
    sc = pipeline().edit({"machine.overrides.l2_kib": 512.0})
    new = sc.edit({"machine.preset": "epyc-zen3", "machine.overrides.llc_mib": 16.0})
    assert new.machine.overrides == {"llc_mib": 16.0}


def test_the_same_preset_again_resets_nothing():
    sc = pipeline().edit({"machine.overrides.l2_kib": 512.0})
    assert sc.edit({"machine.preset": "i7-3770"}).machine.overrides == {"l2_kib": 512.0}


def test_another_governor_resets_its_tunables():
    sc = pipeline().edit({"machine.governor": "conservative",
                          "machine.governor_params.down_threshold": 30.0})
    assert sc.edit({"machine.governor": "ondemand"}).machine.governor_params == {}
    again = sc.edit({"machine.governor": "ondemand",
                     "machine.governor_params.up_threshold": 90.0})
    assert again.machine.governor_params == {"up_threshold": 90.0}


def test_another_strategy_resets_its_tunables_but_those_given_or_kept():
    sc = pipeline().edit({"strategy.params.select_us": 5.0, "strategy.params.queue_us": 2.0},
                         strategy="pec")
    assert sc.edit(strategy="epc").strategy.params == {}
    assert sc.edit({"strategy.name": "epc"}).strategy.params == {}    # the same change
    assert sc.edit(strategy="epc", keep=["select_us"]).strategy.params == {"select_us": 5.0}
    given = sc.edit({"strategy.params.max_threads": 50}, strategy="epc")
    assert given.strategy.params == {"max_threads": 50}
    assert sc.edit(strategy="pec").strategy.params == sc.strategy.params   # not another


def test_another_workload_kind_keeps_the_service_shape_and_takes_its_own_defaults():
    sc = pipeline()                                  # saturating, lognormal 6.8 us, cv 0.3
    closed = sc.edit({"workload.kind": "closed"})
    assert (closed.workload.service, closed.workload.service_us,
            closed.workload.service_cv) == ("lognormal", 6.8, 0.3)
    assert closed.workload.clients == type(closed.workload).model_fields["clients"].default
    assert "connections" not in closed.to_data()["workload"]
    given = sc.edit({"workload.kind": "closed", "workload.clients": 3})
    assert given.workload.clients == 3


def test_an_open_loop_gets_the_old_rate_or_half_a_cpu_at_the_mean_service_time():
    hello = Scenario.load("hello")                   # connections at 100,000 req/s
    assert hello.edit({"workload.kind": "open"}).workload.rate_per_s == 100_000.0
    sc = pipeline()                                  # saturating: no rate
    assert sc.edit({"workload.kind": "open"}).workload.rate_per_s == round(0.5e6 / 6.8, 1)
    new = sc.edit({"workload.kind": "open", "workload.service_us": 12.0})
    assert new.workload.rate_per_s == round(0.5e6 / 12.0, 1)     # the new service time


@pytest.mark.parametrize("service_us, field", [("x", "workload.service_us"),
                                               (0, "workload.service_us"),
                                               (float("inf"), "workload.service_us")])
def test_an_open_loops_rate_from_a_bad_service_time_leaves_validation_to_name_it(
        service_us, field):
    with pytest.raises(ConfigError) as e:
        pipeline().edit({"workload.kind": "open", "workload.service_us": service_us})
    assert e.value.field == field


def test_none_puts_a_setting_back_to_its_default():
    sc = pipeline().edit({"machine.cores": 2, "machine.governor": "performance",
                          "strategy.params.select_us": 5.0})
    back = sc.edit({"machine.cores": None, "machine.governor": None,
                    "strategy.params.select_us": None})
    assert back.machine.cores is None and back.machine.governor is None
    assert back.strategy.params == {}
    assert back == pipeline()


def test_raw_data_and_a_scenario_edit_alike():
    """The command line edits a file's raw data, the API a validated scenario: the
    same change gives the same scenario."""
    change = {"machine.preset": "epyc-zen3", "workload.kind": "open", "seed": 4}
    raw = config.edit_scenario(config.read_scenario_dict("pipeline"), change, requests=900)
    assert raw == pipeline().edit(change, requests=900)


def test_changes_as_pairs_apply_in_order():
    pairs = [("machine.overrides.l2_kib", 512.0), ("machine.overrides", {"llc_mib": 4.0}),
             ("machine.overrides.l2_kib", 128.0)]
    assert pipeline().edit(pairs).machine.overrides == {"llc_mib": 4.0, "l2_kib": 128.0}


def test_resets_names_the_controls_an_owner_change_makes_stale():
    assert config.resets(["machine.preset"], "machine.overrides.l2_kib")
    assert config.resets(["machine.preset"], "machine.governor_params.up_threshold")
    assert not config.resets(["machine.preset"], "machine.cores")
    assert config.resets(["strategy.name"], "strategy.params.threads")
    assert config.resets(["workload.kind"], "workload.connections")
    assert not config.resets(["workload.kind"], "workload.service_us")
    assert not config.resets([], "strategy.params.threads")
    assert config.changed_owners(pipeline(), {"machine.preset": "i7-3770",
                                              "strategy.name": "pec"}) == ["strategy.name"]


# -- one path for the command line, the API and the explorer ------------------------------

CHANGE = {"machine.preset": "epyc-zen3", "workload.kind": "closed", "workload.service_us": 12.0}
# The explorer's controls of their own (the others are drawn from warmcore.parameters).
OWNERS = ("machine.preset", "machine.governor", "strategy.name", "workload.kind")


def _explorer_apply(monkeypatch, sc: Scenario, changes: dict, *, main: str, seed: int,
                    requests: int) -> Scenario:
    """app.py's apply on ``sc`` as the form submits it (app.py loaded as the script it
    is, with a fake session instead of a Streamlit run)."""
    pytest.importorskip("streamlit")
    apply = run_path(str(ROOT / "app.py"), run_name="explorer")["apply"]
    state = types.SimpleNamespace(error=None, toml=sc.to_toml(), strategies=[], gen=0,
                                  uploads={})     # files uploaded with the scenario (none)
    monkeypatch.setitem(apply.__globals__, "st",
                        types.SimpleNamespace(session_state=state, rerun=lambda: None))
    params = {p.path: p for p in warmcore.parameters(sc)}
    values = {path: (params[path], v) for path, v in changes.items() if path not in OWNERS}
    apply(sc, values, preset=changes.get("machine.preset", sc.machine.preset),
          governor=sc.machine.governor, chosen=[main], main=main, seed=seed,
          requests=requests, kind=changes.get("workload.kind"))
    assert state.error is None, state.error
    return Scenario.from_toml(state.toml)


def test_command_line_api_and_explorer_edit_through_one_function(monkeypatch):
    calls = []
    real = edit_module.edit_scenario

    def spy(base, changes=None, **kw):
        calls.append(dict(changes) if isinstance(changes, dict) else list(changes or ()))
        return real(base, changes, **kw)

    monkeypatch.setattr(edit_module, "edit_scenario", spy)
    sets = ['machine.preset="epyc-zen3"', 'workload.kind="closed"', "workload.service_us=12.0"]
    cli = config.load("pipeline", sets, strategy="pec", seed=3, requests=500)
    assert len(calls) == 1
    api = pipeline().edit(CHANGE, strategy="pec", seed=3, requests=500)
    assert len(calls) == 3                 # Scenario.load, then edit
    explorer = _explorer_apply(monkeypatch, pipeline(), {**CHANGE, "strategy.name": "pec"},
                               main="pec", seed=3, requests=500)
    assert len(calls) == 5 and calls[-1]["workload.service_us"] == 12.0
    assert cli == api == explorer
    assert explorer.workload.kind == "closed" and explorer.machine.preset == "epyc-zen3"


def test_the_explorer_drops_controls_drawn_for_the_preset_it_leaves(monkeypatch):
    sc = pipeline()
    new = _explorer_apply(monkeypatch, sc, {"machine.preset": "epyc-zen3",
                                            "machine.overrides.l2_kib": 1024.0},
                          main="pc", seed=1, requests=500)
    assert new.machine.preset == "epyc-zen3" and new.machine.overrides == {}
    kept = _explorer_apply(monkeypatch, sc, {"machine.overrides.l2_kib": 1024.0}, main="pc",
                           seed=1, requests=500)
    assert kept.machine.overrides == {"l2_kib": 1024.0}


# -- ConfigError and the one translator ---------------------------------------------------

def test_a_config_error_is_re_rooted_where_its_table_sits():
    e = ConfigError("v_min", "2.0 is above v_max 1.2")
    assert e.under("machine.overrides").field == "machine.overrides.v_min"
    assert e.under("machine.overrides").reason == e.reason
    aliases = {"cores_per_socket": "machine.cores", "params": "governor_params"}
    assert ConfigError("cores_per_socket", "r").under("machine.overrides", aliases).field == \
        "machine.cores"
    assert ConfigError("params.up_threshold", "r").under("", aliases).field == \
        "governor_params.up_threshold"
    assert ConfigError("userspace_ghz", "r").under("").field == "userspace_ghz"
    assert str(e.under("m")) == "m.v_min: 2.0 is above v_max 1.2"


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    size: int = Field(default=1, gt=0)
    items: list[int] = Field(default=[], max_length=3)

    @model_validator(mode="after")
    def _blame(self):
        if self.size == 7:
            raise ConfigError("size", "seven: the unlucky one")    # a colon in the reason
        if self.size == 8:
            raise ValueError("size: a plain ValueError is not parsed")
        return self


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    inner: _Inner = _Inner()
    rate: float = Field(default=1.0, le=100)

    @field_validator("rate")
    @classmethod
    def _odd(cls, v):
        if v == 3.0:
            raise ValueError("three is not a rate")
        return v


def _error(data: dict, **options) -> ConfigError:
    with pytest.raises(ValidationError) as e:
        _Outer.model_validate(data)
    return config_error(e.value, **options)


def test_the_translator_reads_a_validators_config_error_without_parsing_it():
    err = _error({"inner": {"size": 7}}, prefix="x")
    assert (err.field, err.reason) == ("x.inner.size", "seven: the unlucky one")
    err = _error({"inner": {"size": 8}}, prefix="x")
    assert (err.field, err.reason) == ("x.inner", "size: a plain ValueError is not parsed")


@pytest.mark.parametrize("data, options, field, reason", [
    ({"inner": {"size": 0}}, {}, "inner.size", "must be greater than 0 (got 0)"),
    ({"inner": {"size": 0}}, {"plain": False}, "inner.size",
     "Input should be greater than 0 (got 0)"),
    ({"inner": {"size": 0}}, {"plain": False, "note": "a note"}, "inner.size",
     "Input should be greater than 0 (got 0, a note)"),
    ({"inner": {"size": "4"}}, {}, "inner.size", "should be a whole number (got '4')"),
    ({"inner": {"nope": 1}}, {}, "inner.nope", "unknown key"),
    ({"inner": {"nope": 1}}, {"unknown": "not a knob"}, "inner.nope", "not a knob"),
    ({"inner": {"items": [1, "x"]}}, {}, "inner.items.1", "should be a whole number (got 'x')"),
    ({"inner": {"items": [1, "x"]}}, {"indices": False}, "inner.items",
     "should be a whole number (got 'x')"),
    ({"inner": 5}, {}, "inner", "should be a table (got 5)"),
    ({"rate": 3.0}, {}, "rate", "three is not a rate (got 3.0)"),
    ({"rate": 300.0}, {"prefix": "run"}, "run.rate", "must be at most 100 (got 300.0)"),
    ({"inner": {"size": 0}}, {"prefix": "m", "aliases": {"inner": "elsewhere.x"}},
     "elsewhere.x.size", "must be greater than 0 (got 0)"),
])
def test_the_translators_options(data, options, field, reason):
    err = _error(data, **options)
    assert (err.field, err.reason) == (field, reason)


def test_a_tagged_unions_tag_is_left_out_of_the_path_and_named_when_wrong():
    with pytest.raises(ConfigError) as e:
        Scenario.load("mmc", ["workload.rate_per_s=-1"])
    assert e.value.field == "workload.rate_per_s"          # not workload.open.rate_per_s
    with pytest.raises(ConfigError) as e:
        Scenario.load("mmc", ['workload={kind="teleport"}'])
    assert (e.value.field, e.value.reason) == (
        "workload", "unknown workload kind; known: " + ", ".join(config.workload_kinds()))


def test_one_translator_reads_pydantics_errors():
    """Only simcore/config/errors.py looks inside a pydantic ValidationError."""
    readers = [str(p.relative_to(ROOT))
               for folder in ("simcore", "models", "strategies", "warmcore", "calibration")
               for p in sorted((ROOT / folder).rglob("*.py")) if ".errors()" in p.read_text()]
    readers += ["app.py"] if ".errors()" in (ROOT / "app.py").read_text() else []
    assert readers == ["simcore/config/errors.py"]


def test_no_validator_writes_its_field_into_a_value_errors_text():
    """A validator that blames a field raises ConfigError(field, reason): a ValueError
    "field: reason" would reach the user as one reason at the table's path."""
    import ast
    import re

    blamed = re.compile(r"""raise ValueError\(\s*f?["'][\w.{}\[\]]+: """)
    found = []
    for folder in ("simcore", "models", "strategies", "warmcore", "calibration"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef) and any(
                        "validator" in ast.unparse(d) for d in node.decorator_list):
                    found += [f"{path.relative_to(ROOT)}:{node.name}"
                              for m in blamed.finditer(ast.get_source_segment(text, node))]
    assert found == []


def test_models_name_fields_of_their_own_table():
    """A preset, a governor and a machine name their own fields; build_machine puts
    them where a scenario holds them."""
    from warmcore.models.dvfs import make_governor
    from warmcore.models.hardware import HardwareMachine
    from warmcore.models.presets import PRESETS, with_overrides

    ivb = PRESETS["i7-3770"]
    with pytest.raises(ConfigError) as e:
        with_overrides(ivb, v_min=2.0)
    assert e.value.field == "v_min"
    with pytest.raises(ConfigError) as e:
        with_overrides(ivb, cores_per_socket=0)
    assert e.value.field == "cores_per_socket"
    with pytest.raises(ConfigError) as e:
        make_governor("ondemand", ivb, {"up_threshold": 200})
    assert e.value.field == "params.up_threshold"
    with pytest.raises(ConfigError) as e:
        HardwareMachine(ivb, governor_params={"up_threshold": 200})
    assert e.value.field == "governor_params.up_threshold"
    for setting, field in [("machine.overrides.v_min=2.0", "machine.overrides.v_min"),
                           ("machine.overrides.cores_per_socket=0", "machine.cores"),
                           ("machine.overrides.extra.l1i_ways=5000",
                            "machine.overrides.extra.l1i_ways"),
                           ("machine.governor_params.up_threshold=200",
                            "machine.governor_params.up_threshold")]:
        with pytest.raises(ConfigError) as e:
            warmcore.check(Scenario.load("pipeline", [setting]))
        assert e.value.field == field, setting
