"""Energy meter: hand-computed traces, SMT counted once, and the static-power floor."""

from __future__ import annotations

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from warmcore.models.dvfs import DvfsController
from warmcore.models.energy import EnergyMeter, dynamic_power_w, static_power_w, voltage
from warmcore.models.presets import Preset, get_preset, with_overrides

# 1 socket x 2 cores x 2 threads; static 2*1 + 5 = 7 W; dynamic 10 W per core at 2 GHz.
# Linux numbering: cpu 0,2 = core 0; cpu 1,3 = core 1 (sibling of cpu N is N + 2).
SMT2 = Preset(
    name="smt2", description="test machine", sources=("test",),
    cores_per_socket=2, threads_per_core=2, pstates_ghz=(1.0, 2.0), smt_throughput=(1.0, 1.25),
    static_w_per_core=1.0, package_static_w=5.0, dyn_w_per_core_max=10.0, v_min=0.8, v_max=1.2,
)


def test_power_formula_by_hand():
    assert static_power_w(SMT2) == 7.0
    assert voltage(SMT2, 1.0) == 0.8 and voltage(SMT2, 2.0) == 1.2
    assert voltage(SMT2, 1.5) == pytest.approx(1.0)
    assert dynamic_power_w(SMT2, 2.0) == pytest.approx(10.0)
    # 10 * (0.8/1.2)^2 * (1/2) = 2.2222
    assert dynamic_power_w(SMT2, 1.0) == pytest.approx(10 * (0.8 / 1.2) ** 2 * 0.5)
    # 10 * (1.0/1.2)^2 * 0.75 = 5.2083
    assert dynamic_power_w(SMT2, 1.5) == pytest.approx(5.208333, rel=1e-6)
    assert dynamic_power_w(SMT2, 0.0) == 0.0


def test_voltage_tops_out_at_turbo_whatever_the_turbo_switch():
    p = with_overrides(SMT2, turbo_ghz=2.5)
    # V(2.0) = 0.8 + 0.4 * (1.0 / 1.5) = 1.0667; P = 10 * (1.0667/1.2)^2 * 2.0/2.5 = 6.321
    expected = 10 * ((0.8 + 0.4 / 1.5) / 1.2) ** 2 * 0.8
    assert dynamic_power_w(p, 2.0) == pytest.approx(expected)
    assert dynamic_power_w(with_overrides(p, turbo=True), 2.0) == pytest.approx(expected)
    assert dynamic_power_w(p, 2.5) == pytest.approx(10.0)


def test_hand_trace_with_smt_counted_once():
    m = EnergyMeter(SMT2, 4)
    m.busy(0, 0.0, 2.0)          # core 0
    m.busy(2, 0.5, 2.0)          # sibling on core 0: core already busy
    m.idle(0, 1.0)
    m.idle(2, 1.5)               # core 0 busy 0..1.5 at 10 W = 15 J
    m.busy(1, 0.0, 1.0)          # core 1: 1 s at 2.2222 W, then 1 s at 10 W
    m.freq_change(1, 1.0, 2.0)
    p1 = 10 * (0.8 / 1.2) ** 2 * 0.5
    assert m.dynamic_joules(2.0) == pytest.approx(15.0 + p1 + 10.0)
    # core 0 idle from 1.5 s: in C6 (its 1 W gated) from 1.5006 s (600 us residency)
    assert m.joules(2.0) == pytest.approx(7.0 * 2 - 0.4994 + 15.0 + p1 + 10.0)
    assert m.watts() == pytest.approx(7.0 + 10.0)
    assert m.watts(2.0) == pytest.approx(7.0 - 1.0 + 10.0)
    m.idle(1, 2.0)
    # then core 1 from 2.0006 s, and with both cores in C6 the package (5 W x 0.6 gated)
    gated = 2.4994 * 1.0 + 1.9994 * 1.0 + 1.9994 * 3.0
    assert m.finish(4.0)["joules"] == pytest.approx(7.0 * 4 - gated + 15.0 + p1 + 10.0)


def test_idle_machine_gates_down_to_its_package_c6_floor():
    m = EnergyMeter(get_preset("server-2015"))
    # 2 sockets * 20 W + 24 cores * 1.5 W = 76 W with everything in C0
    assert m.static_w == pytest.approx(76.0)
    # idle: every core in C6 after its 600 us residency (0 W), then both packages in
    # package C6 (40% of 20 W each): 16 W
    assert m.idle_floor_w == pytest.approx(16.0)
    assert m.joules(10.0) == pytest.approx(76.0 * 0.0006 + 16.0 * 9.9994)
    assert m.watts(10.0) == pytest.approx(16.0)


def test_freq_change_of_idle_core_costs_nothing_until_busy():
    m = EnergyMeter(SMT2)
    m.freq_change(0, 0.5, 1.0)
    assert m.dynamic_joules(1.0) == 0.0
    m.busy(0, 1.0, 1.0)
    assert m.dynamic_joules(2.0) == pytest.approx(dynamic_power_w(SMT2, 1.0))


def test_times_running_backwards_are_clamped():
    m = EnergyMeter(SMT2)
    m.busy(0, 1.0, 2.0)
    m.idle(0, 0.5)               # earlier than the busy event: no negative energy
    assert m.dynamic_joules(3.0) == 0.0
    # idle throughout but for the instant at 1.0 s (the idle clamped to it): core 1
    # in C6 from 0.0006 s, core 0 from 0.0006 to 1.0 s and from 1.0006 s, the package
    # (3 W of its 5 gated) over the same stretches as core 0
    gated = (2.9994 + 0.9994 + 1.9994) * 1.0 + (0.9994 + 1.9994) * 3.0
    assert m.joules(3.0) == pytest.approx(21.0 - gated)


def test_with_a_dvfs_controller_listener():
    toy = Preset(name="toy", description="test", sources=("test",), cores_per_socket=2,
                 pstates_ghz=(1.0, 1.5, 2.0, 2.5, 3.0), freq_domain="package")
    ctl = DvfsController(toy, "ondemand", [[0, 1]], initial_ghz=1.0)
    m = EnergyMeter(toy)
    ctl.add_listener(m.freq_change)
    env = simpy.Environment()
    ctl.bind(env)
    ctl.cpu_busy(0, 0.0)
    m.busy(0, 0.0, ctl.ghz(0, 0.0))
    env.run(until=0.015)
    ctl.ghz(0, 0.015)                                    # apply the 10.02 ms change
    # 100 % load -> 3.0 GHz at 10.02 ms; before: 1.0 GHz at 10*(0.8/1.2)^2/3 W
    p_lo = 10 * (0.8 / 1.2) ** 2 / 3
    expected = p_lo * 0.01002 + 10.0 * 0.00498
    assert m.dynamic_joules(0.015) == pytest.approx(expected)
    # core 1 idle throughout: in C6 from 0.6 ms, its 1 W gated for 14.4 ms
    assert m.joules(0.015) == pytest.approx(expected + 7.0 * 0.015 - 0.0144)


def test_bad_cpu_count():
    with pytest.raises(ValueError, match="n_cpus"):
        EnergyMeter(SMT2, 0)


events = st.lists(
    st.tuples(st.floats(0.0, 0.5), st.sampled_from(["busy", "idle", "freq"]),
              st.integers(0, 3), st.sampled_from([1.0, 1.25, 1.5, 2.0])),
    max_size=60)


@settings(max_examples=150, deadline=None)
@given(trace=events)
def test_energy_at_least_static_and_matches_reference(trace):
    m = EnergyMeter(SMT2)
    busy = [False] * 4
    core_ghz = [0.0, 0.0]
    t = ref = prev_j = 0.0
    for dt, kind, cpu, ghz in trace:
        # reference: integrate the state held since the last event
        for core in (0, 1):
            if busy[core] or busy[core + 2]:        # the core's two threads
                ref += dynamic_power_w(SMT2, core_ghz[core]) * dt
        t += dt
        core = cpu % 2
        if kind == "busy":
            m.busy(cpu, t, ghz)
            busy[cpu] = True
            core_ghz[core] = ghz
        elif kind == "idle":
            m.idle(cpu, t)
            busy[cpu] = False
        else:
            m.freq_change(cpu, t, ghz)
            core_ghz[core] = ghz
        j = m.joules(t)
        assert j >= m.idle_floor_w * t - 1e-9
        assert j >= prev_j - 1e-9
        assert j <= (m.static_w + 2 * SMT2.dyn_w_per_core_max) * t + 1e-9
        assert m.gated_joules(t) <= (m.static_w - m.idle_floor_w) * t + 1e-9
        prev_j = j
    assert m.dynamic_joules(t) == pytest.approx(ref, rel=1e-9, abs=1e-12)
    assert m.joules(t + 1.0) >= m.idle_floor_w * (t + 1.0)


# -- issue 35 item 4: every figure over the measured window ---------------------------

def test_machine_reports_joules_and_clock_over_the_window_from_its_mark():
    """i7-3770 at a fixed 1.6 GHz (userspace): CPU 0 busy 0..2 s, the window 1..3 s.
    Joules over the window = static W x 2 s + one core's dynamic W at 1.6 GHz x 1 s
    (busy 1..2 s), not the 2 s of dynamic power since t = 0."""
    from warmcore.models.hardware import HardwareMachine

    p = get_preset("i7-3770")
    m = HardwareMachine(p, governor="userspace", userspace_ghz=1.6,
                        idle_governor="hindsight")    # C6 600 us after idle entry
    m.cpu_busy(0, 0.0)
    m.measure_from(1.0)
    m.cpu_idle(0, 2.0)
    fin = m.finish(3.0)
    # the idle states (item 6): cores 1-3 in C6 the whole window (2 W each), core 0
    # from 2.0006 s, and the package (8 W x 0.6 gated) with it
    gated = 3 * 2.0 * 2.0 + 0.9994 * 2.0 + 0.9994 * 8.0 * 0.6
    expected = static_power_w(p) * 2.0 - gated + dynamic_power_w(p, 1.6) * 1.0
    assert fin["joules"] == pytest.approx(expected, rel=1e-12)
    assert fin["cpu_ghz"] == pytest.approx([1.6] * p.n_cpus)
    assert fin["freq_changes"] == 0


def test_energy_per_request_does_not_depend_on_the_warmup():
    """Only run.warmup changes: the same machine serving the same load must spend the
    same mJ per measured request. Before the fix joules ran from t = 0, warm-up
    included, and were divided by the window's requests (16.6 against 24.8 mJ/req for
    warm-ups of 0 and 0.5 at 20,000 requests on the i7-3770)."""
    from tests.helpers import run

    sets = {"machine.preset": "i7-3770"}
    a = run("mmc", sets, seed=1, requests=6000, warmup=0.0)
    b = run("mmc", sets, seed=1, requests=6000, warmup=0.5)
    for r in (a, b):
        assert r["requests"] == 6000
    # the same load and the same CPUs busy, so the same energy per request: within 3%
    # (the windows differ by their requests' noise, about 1/sqrt(6000) = 1.3%)
    assert b["joules_per_request"] == pytest.approx(a["joules_per_request"], rel=0.03)
    # and the mean watts are the window's: joules / window within the static..max range
    for r in (a, b):
        watts = r["joules"] / r["sim_seconds"]
        assert static_power_w(get_preset("i7-3770")) < watts < 150.0
