"""Presets, their extra knobs and governor tunables are pydantic models: an impossible
value is rejected at the path the user wrote, and every one is in the parameter space."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import warmcore
from warmcore.models.presets import PRESETS, Preset, PresetExtra, with_overrides


def test_extra_knobs_can_be_set_from_the_command_line():
    """issue 8: --set machine.overrides.extra.loads_per_instruction=0.3 used to fail."""
    base = warmcore.simulate(warmcore.Scenario.load("pipeline"), requests=500)
    r = warmcore.simulate(warmcore.Scenario.load(
        "pipeline", sets=["machine.overrides.extra.loads_per_instruction=0.3"]), requests=500)
    per_ins = r.l1d_loads / r.instructions
    assert per_ins == pytest.approx(0.3, rel=0.02)
    assert base.l1d_loads / base.instructions == pytest.approx(0.33, rel=0.02)


@pytest.mark.parametrize("setting, field, words", [
    ("machine.overrides.pstates_ghz=[2.0,1.0]", "machine.overrides.pstates_ghz", "ascending"),
    ('machine.overrides.pstates_ghz="fast"', "machine.overrides.pstates_ghz", "list"),
    ("machine.overrides.smt_throughput=1.0", "machine.overrides.smt_throughput", "list"),
    ('machine.overrides.extra="x"', "machine.overrides.extra", "table"),
    ("machine.overrides.extra.nope=1", "machine.overrides.extra.nope", "not a preset"),
    ("machine.overrides.v_min=2.0", "machine.overrides.v_min", "above v_max"),
    ("machine.overrides.llc_domains_per_socket=9", "machine.overrides.llc_domains_per_socket",
     "LLC domains"),
    ("machine.overrides.line_bytes=1.5", "machine.overrides.line_bytes", "whole number"),
    ("machine.overrides.dram_ns=-1.0", "machine.overrides.dram_ns", "at least 0"),
    ("machine.cores=5000", "machine.cores", "at most 1024"),
    ("machine.governor_params.up_threshold=200", "machine.governor_params.up_threshold",
     "less than or equal to 100"),
    ("machine.governor_params.nope=2", "machine.governor_params.nope", "not a tunable"),
])
def test_impossible_machines_name_their_field(setting, field, words):
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.simulate(warmcore.Scenario.load("pipeline", sets=[setting]), requests=10)
    assert e.value.field == field and words in e.value.reason
    assert "Value error" not in e.value.reason


def test_every_built_in_preset_is_a_valid_model():
    for p in PRESETS.values():
        assert Preset.model_validate(p.model_dump()) == p


def test_presets_are_frozen_and_strict():
    p = PRESETS["i7-3770"]
    with pytest.raises(ValidationError):
        p.cores_per_socket = 2
    with pytest.raises(warmcore.ConfigError, match="cores_per_socket: should be a whole"):
        with_overrides(p, cores_per_socket="4")      # no silent str -> int
    with pytest.raises(warmcore.ConfigError, match="turbo: should be true or false"):
        with_overrides(p, turbo="yes")
    # one extra field overridden, the preset's others kept (the i7-3770's streamer,
    # turbo bins, RAPL window, per-CPU cpufreq policies, Linux 3.5's ondemand rule and
    # the caches its deep idle states flush)
    assert with_overrides(p, extra={"l1i_ways": 4}).extra == PresetExtra(
        l1i_ways=4, stream_ahead_lines=20.0,
        turbo_bins_ghz=(3.9, 3.9, 3.8, 3.7),
        power_limit_tau_s=1.0, power_limit_2_ratio=1.25, cpufreq_policy="cpu",
        ondemand_rule="load-freq", cstate_flushes_core_caches=True)


def test_preset_and_governor_parameters_carry_their_ranges():
    ps = {p.path: p for p in warmcore.parameters("pipeline")}
    assert ps["machine.overrides.l2_kib"].ge == 0
    assert ps["machine.overrides.cores_per_socket"].gt == 0
    lpi = ps["machine.overrides.extra.loads_per_instruction"]
    assert lpi.default == 0.33 and "jetty-8" in lpi.source
    up = ps["machine.governor_params.up_threshold"]
    assert (up.ge, up.le, up.default) == (1, 100, 95.0)
