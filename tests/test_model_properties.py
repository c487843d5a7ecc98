"""Engine-level properties of the hardware model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import warmcore.build as run_mod
from warmcore.models.hardware import HardwareMachine
from warmcore.models.presets import get_preset, with_overrides
from tests.helpers import run, scenario

I5_PSTATES = get_preset("i5-2400").pstates_ghz


@settings(max_examples=12, deadline=None)
@given(f=st.lists(st.sampled_from(I5_PSTATES), min_size=2, max_size=2, unique=True),
       jobs=st.integers(1, 8))
def test_higher_fixed_frequency_never_lowers_compute_bound_throughput(f, jobs):
    lo, hi = sorted(f)

    def thr(ghz):
        return run("mmc", {"machine.preset": "i5-2400", "machine.governor": "userspace",
                           "machine.frequency_ghz": ghz},
                   workload={"kind": "closed", "clients": jobs, "think_us": 0.0,
                             "service": "deterministic", "service_us": 200.0},
                   requests=300)["throughput_rps"]

    assert thr(hi) >= thr(lo)


def test_with_every_effect_off_the_hardware_model_is_the_ideal_machine(monkeypatch):
    cfg = scenario("mmc", requests=20_000)
    ideal = run_mod.simulate(cfg)
    off = {e: False for e in run_mod.EFFECTS}
    preset = with_overrides(get_preset("ideal"), cores_per_socket=4)
    monkeypatch.setattr(run_mod, "build_machine", lambda c: HardwareMachine(preset, effects=off))
    hw = run_mod.simulate(cfg)
    for key in ("throughput_rps", "latency_us", "wait_us", "cpus_utilized", "instructions",
                "context_switches"):
        assert hw[key] == ideal[key], key
    assert hw["cycles"] == pytest.approx(ideal["cycles"], rel=1e-12)


def test_energy_lies_between_the_idle_floor_and_everything_on():
    from warmcore.models.energy import EnergyMeter, dynamic_power_w

    pre = get_preset("i7-3770")
    m = EnergyMeter(pre)
    r = run("pipeline", requests=3000)
    # at least the idle floor (every core in C6, the package in package C6), and, with
    # pc keeping one core busy, that core's static power on top
    floor = (m.idle_floor_w + pre.static_w_per_core) * r["sim_seconds"]
    assert r["joules"] >= floor * (1 - 1e-9)
    top = (m.static_w + pre.cores_per_socket * dynamic_power_w(pre, pre.max_ghz))
    assert r["joules"] <= top * r["sim_seconds"] * (1 + 1e-9)


def test_governor_and_affinity_settings_apply_to_every_scenario():
    for name in ("pipeline", "contended", "throughput-machine"):
        sets = {"machine.governor": "powersave", "server.cpus": 2}
        if name == "contended":
            sets.update({"producer.cpus": [2], "consumer.cpus": [3]})
        r = run(name, sets, requests=500)
        assert r["ghz"] == pytest.approx(get_preset(
            scenario(name).machine.preset).pstates_ghz[0], rel=1e-6), name
        assert r["cpu_utilization"][0] + r["cpu_utilization"][1] > 0, name
        assert all(u == 0 for u in r["cpu_utilization"][4:]), name
        if name != "contended":
            assert all(u == 0 for u in r["cpu_utilization"][2:]), name
