"""The menu cpuidle governor (models/cpuidle.py) on cases computed by hand from
drivers/cpuidle/governors/menu.c and intel_idle's skx_cstates table."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from warmcore.models.cpuidle import (
    TABLES,
    UINT_MAX,
    CpuIdle,
    MenuDevice,
    correction_factor_update,
    gating_index,
    get_typical_interval,
    idle_states,
    measured_us,
    which_bucket,
)
from warmcore.models.presets import get_preset

SKX = TABLES["skx"]          # POLL, C1 (2/2), C1E (10/20), C6 (133/600)


def test_the_correction_factor_moves_as_menu_update_computes_it_in_integers():
    # T = 4000 us (bucket 3), idle times of 600 us, from unity (8192):
    # 8192 - 1024 + 1024*600//4000 (=153) = 7321; 7321 - 915 + 153 = 6559;
    # 6559 - 819 + 153 = 5893
    cf, seq = 8192, []
    for _ in range(3):
        cf = correction_factor_update(cf, 600, 4000)
        seq.append(cf)
    assert seq == [7321, 6559, 5893]
    # an idle time of MAX_INTERESTING (50 ms) or more counts as a perfect prediction
    assert correction_factor_update(8192, 50000, 100000) == 8192
    # T >= 51.2 s: 1024 x measured // T is 0 for every idle time menu counts, and the
    # factor decays to its fixed point 7 (7 - 7 // 8 = 7)
    cf = 8192
    for _ in range(200):
        cf = correction_factor_update(cf, 49999, 51_200_000)
    assert cf == 7


def test_measured_idle_time_deducts_the_exit_latency_or_halves_a_short_one():
    assert measured_us(700, 133, 4000) == 567          # 700 > 2 x 133
    assert measured_us(183, 133, 4000) == 91           # 183 <= 266: halved
    assert measured_us(9000, 10, 4000) == 4000         # never beyond T
    # a tick the governor meant to stop (T > TICK) counts as 9/10 of 50 ms, capped at T
    assert measured_us(4000, 10, 100000, tick_wakeup=True) == 45000
    assert measured_us(4000, 10, 4000, tick_wakeup=True) == 3990
    # a polling period that hit its time limit counts as T
    assert measured_us(2, 0, 4000, poll_limit=True) == 4000


def test_buckets_are_orders_of_magnitude():
    assert [which_bucket(d) for d in (9, 10, 99, 100, 999, 1000, 9999, 10000, 100000)] \
        == [0, 1, 1, 2, 2, 3, 3, 4, 5]


def test_typical_interval_of_a_regular_series_is_its_mean():
    # sum 800, mean 100; variance (0+4+4+0+1+1+0+0) >> 3 = 1 <= 400
    assert get_typical_interval([100, 102, 98, 100, 101, 99, 100, 100], 4000) == 100
    # one outlier is dropped: the other 7 are 100 (variance 0, 7 of 8 kept)
    assert get_typical_interval([100] * 7 + [5000], 4000) == 100


def test_typical_interval_of_an_irregular_series_gives_up():
    # 8 values: mean 469, variance 420452; without 2000: mean 250, variance 98160;
    # without 900: 6 left, mean 142, variance 32548 > mean^2 / 36: 6 of 8 is the floor
    assert get_typical_interval([10, 500, 30, 2000, 60, 900, 5, 250], 4000) == UINT_MAX
    # every interval at least the prediction: nothing to learn
    assert get_typical_interval([5000] * 8, 4000) == UINT_MAX


def _device(intervals, cf=8192):
    d = MenuDevice()
    d.intervals = list(intervals)
    d.cf = [cf] * len(d.cf)
    return d


def test_the_deepest_state_that_fits_the_prediction_is_chosen():
    # long regular idles: predicted = min(4000 x 8192 / 8192, UINT_MAX) = 4000, not
    # below the tick: C6 with the tick stopped
    assert _device([4000] * 8).select(SKX, 4000, 4000) == (3, True)
    # idles of 100 us: predicted 100: C1E (target 20), not C6 (600); the tick stays
    assert _device([100] * 8).select(SKX, 4000, 3000) == (2, False)
    # idles of 700 us: C6 would fit, but the kept tick comes in 500 us (< 600): C1E
    assert _device([700] * 8).select(SKX, 4000, 500) == (2, False)
    assert _device([700] * 8).select(SKX, 4000, 700) == (3, False)
    # boot state (intervals 0): predicted 0, so polling
    assert MenuDevice().select(SKX, 4000, 4000) == (0, False)
    # a PM QoS limit below C6's exit latency keeps the core out of it
    assert _device([4000] * 8).select(SKX, 4000, 4000, latency_req=100)[0] == 2


def _skx_cpu(intervals):
    idle = CpuIdle(SKX, 1, next_timer_us=4000, wake_busy_s=5e-6, wake_cap_s=50e-6)
    idle.devices[0] = _device(intervals)
    return idle


def test_a_short_sleep_after_long_ones_pays_c6s_exit():
    idle = _skx_cpu([2000] * 8)
    # predicted 2000: C6 at once (its target 600 fits the 3500 us to the next tick)
    assert idle.enter(0, 0.0005) == 0.0
    # woken 50 us later: min(5 + 133, 50) us, where the hindsight rule (idle < 600 us)
    # charges C1's 5 + 2 = 7 us
    assert idle.wake(0, 0.00055) == pytest.approx(50e-6, abs=1e-12)
    # menu_update: residency 50 + 133 = 183 <= 2 x 133, halved: 91;
    # cf = 8192 - 1024 + 1024 x 91 // 4000 (= 23)
    dev = idle.devices[0]
    assert dev.intervals[0] == 91
    assert dev.cf[3] == 7191


def test_a_long_sleep_after_short_ones_leaks_in_c1e_until_the_ticks_teach_menu():
    """Idles of 30 us, then one from 1 ms on. 1 ms: typical 30: C1E, tick kept.
    4 ms tick: measured 3000, cf 7936; the typical interval drops the outlier: 30,
    C1E. 8 ms (the timer T): measured 4000, cf 7968; two outliers dropped: 30, C1E.
    12 ms: with three outliers 6 of 8 are not regular: UINT_MAX; predicted
    round(4000 x 7996 / 8192) = 3904: C6. So C6 from 12 ms: 11 ms in C1E (the
    hindsight rule: C6 after 600 us)."""
    idle = _skx_cpu([30] * 8)
    assert idle.enter(0, 0.001) == pytest.approx(0.011, abs=1e-12)
    assert idle.wake(0, 0.013) == pytest.approx(50e-6, abs=1e-12)
    dev = idle.devices[0]
    # the last period, 12 to 13 ms in C6: residency 1000 + 133 us, measured 1000;
    # cf = 7996 - 999 + 1024 x 1000 // 4000 = 7253
    assert dev.cf[3] == 7253
    assert sorted(dev.intervals) == [30] * 4 + [1000, 3000, 4000, 4000]


def test_gating_states_are_c6_and_deeper():
    assert gating_index(SKX) == 3
    assert [s.name for s in TABLES["snb"]][gating_index(TABLES["snb"])] == "C6"
    # a preset intel_idle does not drive: C1 and C6 from its own knobs
    t1000 = get_preset("t1000")
    states = idle_states(t1000)
    assert [s.name for s in states] == ["POLL", "C1", "C6"]
    assert states[2].target_residency_us == round(t1000.extra.cstate_deep_after_us)


def test_the_same_idle_periods_give_the_same_choices_bit_for_bit():
    def run():
        idle = CpuIdle(TABLES["ivb"], 2, wake_busy_s=4e-6, wake_cap_s=40e-6)
        out, t = [], 0.0
        for k in range(400):
            gap = ((k * 7919) % 997) * 3e-6 + 1e-6
            out.append(idle.enter(k % 2, t))
            t += gap
            out.append(idle.wake(k % 2, t))
            t += 1e-5
        return out, [d.cf for d in idle.devices], idle.chosen
    assert run() == run()


def _run(*sets):
    cmd = [sys.executable, "-m", "warmcore.cli", "run", "pipeline", "--strategy",
           "jetty9-milestone", "--requests", "1500", "--json"]
    for s in sets:
        cmd += ["--set", s]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def test_a_run_under_menu_is_reproducible_and_differs_from_hindsight():
    a = _run("machine.idle_governor=menu")
    assert a == _run("machine.idle_governor=menu")
    h = json.loads(_run("machine.idle_governor=hindsight"))
    m = json.loads(a)
    assert m["joules"] != h["joules"] and math.isfinite(m["joules"])


def test_an_unknown_idle_governor_is_one_clear_line():
    cmd = [sys.executable, "-m", "warmcore.cli", "run", "pipeline", "--requests", "10",
           "--set", "machine.idle_governor=ladder"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "machine.idle_governor" in lines[0]


def test_the_meter_gates_a_core_once_every_thread_chose_c6():
    """i7-3770 (4 cores, threads c and c + 4 on core c), every thread in C6 from the
    start. CPU 0 runs 0..1 ms, then menu's replay puts it in C6 only 11 ms later (the
    leakage case above): core 0 and the package are gated from 12 ms. At 20 ms the
    gated energy is 3 cores x 20 ms + core 0 x 8 ms of static_w_per_core, and 8 ms of
    the package's saved share; with CPU 4 never reaching C6, core 0 and the package
    are never gated."""
    from warmcore.models.energy import EnergyMeter

    p = get_preset("i7-3770")
    core_w = p.static_w_per_core
    pkg_w = p.package_static_w * (1.0 - p.extra.package_c6_power_fraction)
    for cpu4, core0_s, pkg_s in ((0.0, 0.008, 0.008), (math.inf, 0.0, 0.0)):
        m = EnergyMeter(p)
        m.use_idle_model([0.0, 0.0, 0.0, 0.0, cpu4, 0.0, 0.0, 0.0])
        m.busy(0, 0.0, 1.6)
        m.idle(0, 0.001, 0.011)
        expected = (3 * 0.020 + core0_s) * core_w + pkg_s * pkg_w
        assert m.gated_joules(0.020) == pytest.approx(expected, rel=1e-12)
        assert m.active_cores(0.020) == (0 if cpu4 == 0.0 else 1)
