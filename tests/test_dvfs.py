"""Governor decisions against hand-computed traces, PELT, and the DVFS controller."""

from __future__ import annotations

import math
import time

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from warmcore.models.dvfs import (
    GOVERNORS,
    IOWAIT_BOOST_MIN,
    PELT_PERIOD_S,
    PELT_Y,
    Conservative,
    DvfsController,
    Ondemand,
    Pelt,
    Schedutil,
    available_ghz,
    frequency_domains,
    make_governor,
)
from warmcore.models.presets import PRESETS, Preset, get_preset, with_overrides

# P-states 1.6..3.4 GHz in 0.1 steps, turbo 3.9 (off); the hand traces below are of the
# later kernels' ondemand rule (the preset's own is Linux 3.5's: test_dvfs_per_cpu.py)
IVB = with_overrides(get_preset("i7-3770"), extra={"ondemand_rule": "proportional"})

# A small machine for controller runs: 2 CPUs in one package domain.
TOY = Preset(
    name="toy", description="test machine", sources=("test",),
    cores_per_socket=2, threads_per_core=1, pstates_ghz=(1.0, 1.5, 2.0, 2.5, 3.0),
    freq_domain="package", transition_latency_us=20.0,
)


def test_available_ghz_adds_turbo_only_when_enabled():
    assert available_ghz(IVB)[0] == 1.6 and available_ghz(IVB)[-1] == 3.4
    assert available_ghz(with_overrides(IVB, turbo=True))[-1] == 3.9
    assert len(available_ghz(with_overrides(IVB, turbo=True))) == len(IVB.pstates_ghz) + 1


# ---------------------------------------------------------------- fixed governors

def test_fixed_governors():
    assert make_governor("performance", IVB).next_freq(0, 1.6, [0.0], [0.0]) == 3.4
    assert make_governor("performance", with_overrides(IVB, turbo=True)).next_freq(
        0, 1.6, [0.0], [0.0]) == 3.9
    assert make_governor("powersave", IVB).next_freq(0, 3.4, [1.0], [1024]) == 1.6
    # userspace resolves with RELATION_L: 2.45 -> 2.5
    assert make_governor("userspace", IVB, userspace_ghz=2.45).next_freq(0, 3.4, [1], [0]) == 2.5
    for name in ("performance", "powersave"):
        assert make_governor(name, IVB).period_s is None
    assert make_governor("userspace", IVB, userspace_ghz=2.0).period_s is None


# ---------------------------------------------------------------- ondemand

def test_ondemand_hand_trace_i7_3770():
    g = Ondemand(IVB)
    assert g.period_s == pytest.approx(0.010)          # sampling_rate 10 ms
    # load = max(0.5, 0.1) = 50 %: f = 1.6 + 50 * (3.4 - 1.6) / 100 = 2.5 GHz, a P-state
    assert g.next_freq(0.01, 3.4, [0.5, 0.1], [0, 0]) == 2.5
    # 97 % > up_threshold 95 -> max 3.4 GHz
    assert g.next_freq(0.02, 2.5, [0.97, 0.0], [0, 0]) == 3.4
    # 95.5 % is load 95 (integer percent), not > 95: f = 1.6 + 95*1.8/100 = 3.31 -> L -> 3.4
    assert g.next_freq(0.03, 3.4, [0.955], [0]) == 3.4
    # 33 %: f = 1.6 + 0.594 = 2.194 -> lowest P-state >= 2.194 is 2.2
    assert g.next_freq(0.04, 3.4, [0.33], [0]) == 2.2
    # idle -> min
    assert g.next_freq(0.05, 2.2, [0.0, 0.0], [0, 0]) == 1.6


def test_ondemand_turbo_uses_turbo_as_max():
    g = Ondemand(with_overrides(IVB, turbo=True))
    # f = 1.6 + 50 * (3.9 - 1.6) / 100 = 2.75 -> 2.8
    assert g.next_freq(0, 1.6, [0.5], [0]) == 2.8
    assert g.next_freq(0, 2.8, [0.97], [0]) == 3.9


def test_ondemand_params():
    g = Ondemand(IVB, {"up_threshold": 80, "sampling_rate_us": 20000})
    assert g.period_s == pytest.approx(0.020)
    assert g.next_freq(0, 1.6, [0.85], [0]) == 3.4       # 85 > 80
    # 80 is not > 80: f = 1.6 + 80*1.8/100 = 3.04 -> 3.1
    assert Ondemand(IVB, {"up_threshold": 80}).next_freq(0, 3.4, [0.80], [0]) == 3.1


def test_ondemand_sampling_down_factor_stretches_period_at_max():
    g = Ondemand(IVB, {"sampling_down_factor": 4})
    assert g.period_s == pytest.approx(0.010)
    g.next_freq(0, 1.6, [1.0], [0])                      # jump to max from below
    assert g.period_s == pytest.approx(0.040)
    g.next_freq(0, 3.4, [0.2], [0])                      # load fell: back to 1x
    assert g.period_s == pytest.approx(0.010)


# ---------------------------------------------------------------- conservative

def test_conservative_hand_trace_i7_3770():
    g = Conservative(IVB)
    # freq_step = 5 % of 3.4 GHz = 0.17 GHz; up with RELATION_H, down with RELATION_L
    assert g.next_freq(0, 1.6, [0.9], [0]) == 1.7        # req 1.77 -> H -> 1.7
    assert g.next_freq(0, 1.7, [0.9], [0]) == 1.9        # req 1.94 -> 1.9
    assert g.next_freq(0, 1.9, [0.9], [0]) == 2.1        # req 2.11 -> 2.1
    assert g.requested_ghz == pytest.approx(2.11)
    assert g.next_freq(0, 2.1, [0.5], [0]) == 2.1        # 20 <= 50 <= 80: hold
    assert g.next_freq(0, 2.1, [0.1], [0]) == 2.0        # req 1.94 -> L -> 2.0
    assert g.next_freq(0, 2.0, [0.1], [0]) == 1.8        # req 1.77 -> 1.8
    assert g.next_freq(0, 1.8, [0.1], [0]) == 1.6        # req 1.60 -> 1.6
    assert g.next_freq(0, 1.6, [0.1], [0]) == 1.6        # at min: stays


def test_conservative_climbs_to_max_in_steps():
    g = Conservative(IVB)
    f, steps = 1.6, 0
    while f < 3.4:
        f = g.next_freq(0, f, [1.0], [0])
        steps += 1
    # requested: 1.6 + 0.17 k >= 3.4 needs k = 11 (1.6 + 1.87 = 3.47 clamped to 3.4)
    assert steps == 11 and f == 3.4


def test_conservative_freq_step_zero_never_moves():
    g = Conservative(IVB, {"freq_step": 0})
    assert g.next_freq(0, 2.0, [1.0], [0]) == 2.0
    assert g.next_freq(0, 2.0, [0.0], [0]) == 2.0


# ---------------------------------------------------------------- schedutil

def test_schedutil_formula():
    g = Schedutil(IVB)
    # evaluated at the 4 ms tick (and on utilisation updates), rate-limited to 1 ms
    assert g.period_s == pytest.approx(0.004)
    assert g.rate_limit_s == pytest.approx(0.001)        # rate_limit_us 1000
    # 1.25 * 3.4 * 512/1024 = 2.125 -> L -> 2.2
    assert g.next_freq(0, 3.4, [0.5], [512.0]) == 2.2
    # util = max over CPUs: 1.25 * 3.4 * 800/1024 = 3.3203 -> 3.4
    assert g.next_freq(0, 2.2, [0.5, 0.9], [100.0, 800.0]) == 3.4
    # 1.25 * 3.4 * 100/1024 = 0.415 -> clamped to min 1.6
    assert g.next_freq(0, 3.4, [0.1], [100.0]) == 1.6
    # 1.25 * 3.4 * 700/1024 = 2.905 -> 3.0
    assert g.next_freq(0, 1.6, [0.7], [700.0]) == 3.0
    assert Schedutil(IVB, {"rate_limit_us": 2000}).rate_limit_s == pytest.approx(0.002)


def test_schedutil_without_frequency_invariance_scales_by_the_current_clock():
    """get_next_freq: without arch_scale_freq_invariant(), util is a running fraction
    at the current clock: f = 1.25 * cur_freq * util / 1024."""
    g = Schedutil(with_overrides(IVB, extra={"freq_invariance": False}))
    # 1.25 * 2.0 * 512/1024 = 1.25 -> clamped to min 1.6
    assert g.next_freq(0, 2.0, [0.5], [512.0]) == 1.6
    # 1.25 * 2.4 * 900/1024 = 2.637 -> L -> 2.7
    assert g.next_freq(0, 2.4, [0.9], [900.0]) == 2.7
    # the same util with invariance: 1.25 * 3.4 * 900/1024 = 3.735 -> 3.4
    assert Schedutil(IVB).next_freq(0, 2.4, [0.9], [900.0]) == 3.4


def test_schedutil_iowait_boost_doubles_then_halves():
    g = Schedutil(IVB)
    seq = []
    for flag in (True, True, True, True, False, False, False):
        seq.append((g.next_freq(0, 1.6, [0], [0.0], iowait_boost=flag), g.boost))
    # boost 128 (1.25*3.4/8 = 0.53 -> 1.6), 256 (1.06 -> 1.6), 512 (2.125 -> 2.2),
    # 1024 (4.25 -> 3.4), then halving 512 -> 2.2, 256 -> 1.6, 128 -> 1.6
    assert seq == [(1.6, IOWAIT_BOOST_MIN), (1.6, 256), (2.2, 512), (3.4, 1024),
                   (2.2, 512), (1.6, 256), (1.6, 128)]
    g.next_freq(0, 1.6, [0], [0.0])
    assert g.boost == 0                                  # 64 < IOWAIT_BOOST_MIN -> 0


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("name, params, field", [
    ("ondemand", {"up_threshold": 0}, "up_threshold"),
    ("ondemand", {"up_threshold": 101}, "up_threshold"),
    ("ondemand", {"sampling_rate_us": 0}, "sampling_rate_us"),
    ("ondemand", {"down_threshold": 10}, "down_threshold"),     # not an ondemand tunable
    ("ondemand", {"up_threshold": "95"}, "up_threshold"),
    ("ondemand", {"up_threshold": True}, "up_threshold"),
    ("conservative", {"down_threshold": 85}, "down_threshold"),  # >= up_threshold 80
    ("conservative", {"freq_step": 150}, "freq_step"),
    ("schedutil", {"rate_limit_us": 0}, "rate_limit_us"),
    ("schedutil", {"up_threshold": 90}, "up_threshold"),
    ("performance", {"sampling_rate_us": 1000}, "sampling_rate_us"),
])
def test_bad_params_name_the_field(name, params, field):
    with pytest.raises(ValueError, match=field):
        make_governor(name, IVB, params)


def test_bad_governor_and_userspace_errors():
    with pytest.raises(ValueError, match="governor.*'turbo'"):
        make_governor("turbo", IVB)
    with pytest.raises(ValueError, match="userspace_ghz"):
        make_governor("userspace", IVB)
    with pytest.raises(ValueError, match="userspace_ghz.*outside"):
        make_governor("userspace", IVB, userspace_ghz=5.0)
    with pytest.raises(ValueError, match="userspace_ghz"):
        make_governor("ondemand", IVB, userspace_ghz=2.0)
    with pytest.raises(ValueError, match="domains"):
        DvfsController(TOY, "ondemand", [[0], [0]])
    with pytest.raises(ValueError, match="freq_domain"):
        frequency_domains(with_overrides(TOY, freq_domain="die"))


def test_governor_registry():
    assert set(GOVERNORS) == {"performance", "powersave", "userspace", "ondemand",
                              "conservative", "schedutil"}


# ---------------------------------------------------------------- PELT

def test_pelt_constants():
    assert pytest.approx(0.5) == PELT_Y ** 32
    assert pytest.approx(1.024e-3) == PELT_PERIOD_S


@settings(max_examples=60, deadline=None)
@given(u0=st.floats(0, 1024), r=st.floats(0, 1), n=st.integers(0, 300))
def test_pelt_closed_form_matches_iteration(u0, r, n):
    u = u0
    for _ in range(n):
        u = Pelt.step(u, r)
    assert Pelt.closed_form(u0, r, n) == pytest.approx(u, rel=1e-9, abs=1e-9)
    p = Pelt(util=u0, now=0.0, running=r)
    assert p.update(n * PELT_PERIOD_S) == pytest.approx(u, rel=1e-9, abs=1e-9)


def test_pelt_half_life_and_saturation():
    p = Pelt(util=1024.0, now=0.0, running=0.0)
    assert p.value(32 * PELT_PERIOD_S) == pytest.approx(512.0)
    p = Pelt(now=0.0, running=1.0)
    assert p.value(32 * PELT_PERIOD_S) == pytest.approx(512.0)
    t0 = time.perf_counter()
    assert p.update(1e6) == pytest.approx(1024.0)          # ~1e9 periods in O(1)
    assert time.perf_counter() - t0 < 0.01
    p.update(1e6, 0.0)
    assert p.value(1e6 + 64 * PELT_PERIOD_S) == pytest.approx(256.0)


def test_pelt_piecewise_equals_stepping():
    # busy 10 periods, idle 5, busy 3: state changes at period boundaries
    p = Pelt()
    p.update(0.0, 1.0)
    p.update(10 * PELT_PERIOD_S, 0.0)
    p.update(15 * PELT_PERIOD_S, 1.0)
    u = 0.0
    for r in [1] * 10 + [0] * 5 + [1] * 3:
        u = Pelt.step(u, r)
    assert p.value(18 * PELT_PERIOD_S) == pytest.approx(u)


# ---------------------------------------------------------------- domains

def test_frequency_domains():
    assert frequency_domains(IVB) == [list(range(8))]                  # package
    srv = get_preset("server-2015")                                    # 2 x 12C x 2T, per core
    doms = frequency_domains(srv)
    # Linux numbering: cpu N's sibling is N + 24 (one thread of every core first)
    assert len(doms) == 24 and doms[0] == [0, 24] and doms[23] == [23, 47]
    assert frequency_domains(with_overrides(srv, freq_domain="package")) == [
        list(range(12)) + list(range(24, 36)), list(range(12, 24)) + list(range(36, 48))]
    t1 = get_preset("t1000")                                           # 8C x 4T
    assert frequency_domains(with_overrides(t1, freq_domain="core"))[1] == [1, 9, 17, 25]


# ---------------------------------------------------------------- controller

def test_controller_ondemand_applies_after_transition_latency():
    ctl = DvfsController(TOY, "ondemand", [[0, 1]], initial_ghz=1.0)
    env = simpy.Environment()
    ctl.bind(env)
    seen = {}

    def driver(env):
        ctl.cpu_busy(0, env.now)                        # busy 0..5 ms: load 50 %
        yield env.timeout(0.005)
        ctl.cpu_idle(0, env.now)
        yield env.timeout(0.00501)                      # 10.01 ms: sample done, not applied
        seen["10.01"] = ctl.ghz(0, env.now)
        ctl.cpu_busy(1, env.now)                        # busy 10.01..19.71 ms: 97 %
        yield env.timeout(0.00001)                      # 10.02 ms: applied
        seen["10.02"] = (ctl.ghz(0, env.now), ctl.ghz(1, env.now))
        yield env.timeout(0.0097 - 0.00001)
        ctl.cpu_idle(1, env.now)

    env.process(driver(env))
    env.run(until=0.030)
    seen["mean"] = ctl.mean_ghz(0, 0.030)               # applies the change due at 20.02 ms
    # period 1: load 50 -> f = 1.0 + 50*(3.0-1.0)/100 = 2.0 GHz, at 10 ms + 20 us
    assert seen["10.01"] == 1.0
    assert seen["10.02"] == (2.0, 2.0)
    # period 2: CPU1 busy 9.7 of 10 ms = 97 % > 95 -> 3.0 GHz at 20.02 ms
    assert [(round(t, 6), d, f) for t, d, f in ctl.changes] == [
        (0.0, 0, 1.0), (0.01002, 0, 2.0), (0.02002, 0, 3.0)]
    # mean: (10.02*1.0 + 10*2.0 + 9.98*3.0) / 30 = 59.96 / 30
    assert seen["mean"] == pytest.approx(59.96 / 30)


def test_controller_listener_and_busy_weighted_ghz():
    ctl = DvfsController(TOY, "ondemand", [[0], [1]], initial_ghz=1.0)
    calls = []
    ctl.add_listener(lambda cpu, t, f: calls.append((cpu, round(t, 6), f)))
    env = simpy.Environment()
    ctl.bind(env)
    ctl.cpu_busy(0, 0.0)                                # always busy: 100 % -> max
    env.run(until=0.015)
    assert ctl.ghz(0, env.now) == 3.0 and ctl.ghz(1, env.now) == 1.0
    assert calls == [(0, 0.01002, 3.0)]                 # only CPU 0's domain changed
    assert ctl.freq_changes == 1
    # busy-weighted: 10.02 ms at 1.0 + 4.98 ms at 3.0 over 15 ms
    assert ctl.busy_mean_ghz(0, 0.015) == pytest.approx((10.02 * 1 + 4.98 * 3) / 15)
    assert ctl.busy_mean_ghz(1, 0.015) == 1.0          # never busy: current clock
    ctl.cpu_idle(0, 0.015)
    # the window restarts at the 10 ms sample: CPU 0 busy all of 10..15 ms
    assert ctl.loads(0, 0.015) == [pytest.approx(1.0)]


def test_controller_loads_since_last_sample():
    ctl = DvfsController(TOY, "ondemand", [[0, 1]], initial_ghz=1.0)
    ctl.cpu_busy(0, 0.0)
    ctl.cpu_idle(0, 0.004)
    ctl.cpu_busy(1, 0.002)
    assert ctl.loads(0, 0.010) == [pytest.approx(0.4), pytest.approx(0.8)]
    # load 80 %: f = 1.0 + 80 * (3.0 - 1.0) / 100 = 2.6 -> lowest P-state >= 2.6 is 3.0
    assert ctl.sample(0, 0.010) == 3.0
    # after the sample, the window restarts: CPU1 still busy 10..15 ms -> 1.0, CPU0 0
    assert ctl.loads(0, 0.015) == [0.0, pytest.approx(1.0)]


def test_controller_schedutil_uses_frequency_invariant_pelt():
    """TOY (1.0-3.0 GHz, 20 us transitions), CPU 0 busy from 0 at 1.0 GHz, schedutil
    evaluated at each 4 ms tick while it runs. Frequency-invariant PELT: a running
    period adds f / 3.0 of its share, so the clock climbs in steps, each tick asking
    1.25 x 3.0 x util / 1024 (RELATION_L). By hand, per tick: util, then request:
    4 ms: 341.3 x (1 - y^3.906) = 27.7 -> 0.10 GHz -> 1.0 (no change);
    ... the loop below is the kernel's recurrence, written out independently."""
    ctl = DvfsController(TOY, "schedutil", [[0, 1]], initial_ghz=1.0)
    env = simpy.Environment()
    ctl.bind(env)
    ctl.cpu_busy(0, 0.0)
    env.run(until=0.2)
    ctl.ghz(0, env.now)
    # the recurrence: u(t) = u0 y^n + 1024 (f/3) (1 - y^n), n = dt / 1.024 ms
    table = (1.0, 1.5, 2.0, 2.5, 3.0)
    u, f, t, expected = 0.0, 1.0, 0.0, []
    for k in range(1, 50):
        tick = 0.004 * k
        n = (tick - t) / PELT_PERIOD_S
        u = u * PELT_Y ** n + 1024 * (f / 3.0) * (1 - PELT_Y ** n)
        t = tick
        want = 1.25 * 3.0 * u / 1024
        g = next(x for x in table if x >= want - 1e-9) if want <= 3.0 else 3.0
        if g != f:
            # applied 20 us later: PELT runs at the old clock until then
            n = 20e-6 / PELT_PERIOD_S
            u = u * PELT_Y ** n + 1024 * (f / 3.0) * (1 - PELT_Y ** n)
            t = tick + 20e-6
            f = g
            expected.append((pytest.approx(t, abs=1e-12), g))
    changes = [(ct, ghz) for ct, _d, ghz in ctl.changes][1:]
    assert changes == expected
    assert [g for _t, g in expected] == [1.5, 2.0, 2.5, 3.0]   # 1.25x per step: to the top


def test_schedutil_fixed_point_with_invariance_is_one_and_a_quarter_of_the_busy_cycles():
    """A CPU that must do c Gcycles/s of work is busy c / f of the time at f; its
    invariant util is then 1024 c / f_max whatever f, and schedutil settles at the
    lowest clock >= 1.25 c. The raw (non-invariant) util times f_max (the old model)
    settled at the root of f^2 = 1.25 c f_max instead."""
    g = Schedutil(IVB)                                   # 1.6..3.4 GHz
    c = 1.5                                              # Gcycles/s
    f = 3.4
    for _ in range(5):
        util = 1024 * (c / f) * f / 3.4                  # busy fraction x f / f_max
        f = g.next_freq(0, f, [c / f], [util])
    assert f == 1.9                                      # 1.25 x 1.5 = 1.875 -> 1.9


def test_controller_iowait_boost_reaches_governor():
    ctl = DvfsController(TOY, "schedutil", [[0, 1]], initial_ghz=1.0)
    ctl.iowait_wakeup(1, 0.0)
    ctl.sample(0, 0.001)
    assert ctl.governors[0].boost == IOWAIT_BOOST_MIN
    ctl.sample(0, 0.002)
    assert ctl.governors[0].boost == 0                   # halved below the minimum


def test_fixed_governor_controller_starts_no_process():
    ctl = DvfsController(IVB, "performance", frequency_domains(IVB))
    env = simpy.Environment()
    ctl.bind(env)
    assert env.peek() == math.inf                        # nothing scheduled
    assert ctl.ghz(3, 1.0) == 3.4 and ctl.cpu_ghz == [3.4] * 8
    ctl.cpu_busy(3, 0.0)
    ctl.cpu_idle(3, 0.5)
    assert ctl.mean_ghz(3, 2.0) == 3.4
    us = DvfsController(IVB, "userspace", [[c] for c in range(8)], userspace_ghz=2.0)
    assert [us.ghz(c, 5.0) for c in range(8)] == [2.0] * 8


def test_dynamic_controller_starts_one_process_per_domain():
    ctl = DvfsController(TOY, "ondemand", [[0], [1]])
    env = simpy.Environment()
    ctl.bind(env)
    env.run(until=1e-9)                                  # start the processes
    # one pending sampling timeout per domain, at the 10 ms ondemand period
    assert sorted(ev[0] for ev in env._queue if ev[0] > 1e-6) == [pytest.approx(0.01)] * 2
    assert ctl.ghz(0, 0.0) == 3.0                        # starts at max by default


def test_changes_log_is_bounded():
    ctl = DvfsController(TOY, "ondemand", [[0, 1]], max_changes=5)
    for k in range(20):                                  # alternate busy/idle periods
        t = k * 0.01
        if k % 2:
            ctl.cpu_idle(0, t)
        else:
            ctl.cpu_busy(0, t)
        ctl.sample(0, t + 0.01)
        ctl.ghz(0, t + 0.0101)
    assert len(ctl.changes) == 5
    res = ctl.finish(0.21)
    assert len(res["cpu_ghz"]) == 2 and len(res["freq_timeline"]) == 5
    assert res["freq_changes"] == ctl.freq_changes > 5      # the count is not bounded


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_runs_its_default_governor(name):
    p = PRESETS[name]
    table = available_ghz(p)
    ctl = DvfsController(p, p.default_governor, frequency_domains(p), initial_ghz=table[0])
    ctl.cpu_busy(0, 0.0)
    for d in range(len(ctl.domains)):
        assert ctl.sample(d, 0.01) in table
    f = ctl.ghz(0, 0.02)
    assert f in table
    # CPU 0 busy all the time: every dynamic governor climbs from the minimum to the maximum
    # within 40 samples, and the fixed ones sit at their frequency
    for k in range(2, 40):
        ctl.sample(0, 0.01 * k)
    assert ctl.ghz(0, 0.5) == (table[0] if p.default_governor == "powersave" else table[-1])


def test_conservative_thresholds_are_strict():
    g = Conservative(IVB)
    assert g.next_freq(0, 2.0, [0.80], [0]) == 2.0       # 80 is not > 80: hold
    assert g.next_freq(0, 2.0, [0.81], [0]) == 2.1       # req 2.17 -> H -> 2.1
    assert g.next_freq(0, 2.1, [0.20], [0]) == 2.1       # 20 is not < 20: hold
    assert g.next_freq(0, 2.1, [0.19], [0]) == 2.0       # req 2.00 -> L -> 2.0
