"""Turbo limits (issue 35 item 7): bins by active cores, RAPL PL1/PL2 with their
time window, against hand-computed figures (models/turbo.py)."""

from __future__ import annotations

import json
import math
import subprocess

import pytest
import simpy

import warmcore
from warmcore.models.dvfs import DvfsController, frequency_domains
from warmcore.models.energy import dynamic_power_w
from warmcore.models.presets import get_preset, with_overrides
from warmcore.models.turbo import ewma, turbo_levels

XEON = with_overrides(get_preset("xeon-sp"), turbo=True)     # 20 cores, TDP 150 W
I5 = with_overrides(get_preset("i5-2400"), turbo=True)       # bins 3.4/3.3/3.3/3.2


def xeon_package_w(ghz: float, busy: int = 20) -> float:
    """All 20 cores in C0, ``busy`` of them running: 30 W uncore + 20 x 1.2 W leakage
    + the busy cores' dynamic power."""
    return 30.0 + 20 * 1.2 + busy * dynamic_power_w(XEON, ghz)


def run(preset, governor, busy_cpus, until, probes=(), userspace_ghz=None):
    """A controller alone: ``busy_cpus`` run from t = 0; at each probe time, the
    clock of the first busy CPU and the first socket's RAPL average."""
    ctl = DvfsController(preset, governor, frequency_domains(preset),
                         userspace_ghz=userspace_ghz)
    env = simpy.Environment()
    ctl.bind(env)
    for c in busy_cpus:
        ctl.cpu_busy(c, 0.0)
    seen = {}

    def probe(env):
        for t in probes:
            yield env.timeout(t - env.now)
            pcu = ctl.pcu
            seen[t] = (ctl.cpu_ghz[busy_cpus[0]], pcu.avg_w[0] if pcu else None,
                       pcu.meters[0].joules(t) if pcu else None, ctl.ghz_seconds(busy_cpus[0], t))

    env.process(probe(env))
    env.run(until=until + 1e-6)       # the probes at ``until`` included
    return ctl, seen


def test_power_of_the_xeon_at_its_clocks_by_hand():
    # V linear 0.7 V at 1.0 GHz .. 1.15 V at 3.7 GHz; 10.5 W per core at 3.7 GHz
    # 2.8 GHz: V = 1.0, (1/1.15)^2 * 2.8/3.7 * 10.5 = 6.008 W; x 20 + 54 = 174.17
    assert xeon_package_w(3.7) == pytest.approx(264.0)
    assert xeon_package_w(2.9) == pytest.approx(182.64, abs=0.01)
    assert xeon_package_w(2.8) == pytest.approx(174.17, abs=0.01)
    assert xeon_package_w(2.5) == pytest.approx(150.83, abs=0.01)
    assert xeon_package_w(2.4) == pytest.approx(143.73, abs=0.01)


def test_ewma_one_step_and_closed_form():
    # 12 W (an idle package) then 0.5 s at 178.4 W, tau 1 s:
    # 12 e^-0.5 + 178.4 (1 - e^-0.5) = 7.278 + 70.195 = 77.47
    assert ewma(12.0, 178.4, 0.5, 1.0) == pytest.approx(77.47, abs=0.01)
    avg = 12.0
    for _ in range(2000):                       # 2000 PCU intervals of 500 us = 1 s
        avg = ewma(avg, 178.4, 0.0005, 1.0)
    assert avg == pytest.approx(178.4 - (178.4 - 12.0) * math.exp(-1.0))


def test_levels_step_by_100_mhz_from_base_to_the_top_bin():
    assert turbo_levels(XEON) == tuple(round(2.4 + 0.1 * k, 3) for k in range(14))
    assert turbo_levels(with_overrides(get_preset("i7-920"), turbo=True)) == (2.667, 2.8, 2.933)


def test_xeon_20_busy_cores_are_held_to_pl2_then_pl1():
    """The issue's example: 20 busy cores no longer sit at 3.7 GHz and 264 W. Over PL2
    (180 W) the ceiling steps a bin per 500 us to 2.8 GHz (174.17 W), then dithers
    with 2.9 (182.64 W): 178.40 W on average. The RAPL average rises from the idle
    package's 12 W towards it and crosses PL1 (150 W) at ln((178.40 - 12) /
    (178.40 - 150)) = 1.768 s; from then on the ceiling dithers around 2.4/2.5 GHz
    (143.73/150.83 W), the package at 150 W on average."""
    times = (0.001, 0.006, 1.0, 1.70, 1.85, 3.0, 4.0)
    _, seen = run(XEON, "performance", list(range(20)), 4.0, times)
    assert seen[0.001][0] == 3.6                # one bin down after the first interval
    assert seen[0.006][0] in (2.8, 2.9)         # 9 bins down in 9 intervals
    assert seen[1.0][0] in (2.8, 2.9) and seen[1.0][1] < 150.0
    assert seen[1.70][1] < 150.0 < seen[1.85][1]
    assert seen[4.0][2] - seen[3.0][2] == pytest.approx(150.0, abs=1.5)   # joules in 1 s
    assert 2.4 <= seen[4.0][3] - seen[3.0][3] <= 2.5                       # mean GHz


def test_one_busy_core_gets_the_top_bin():
    _, seen = run(XEON, "performance", [0], 2.0, (0.001, 1.0, 2.0))
    assert {seen[t][0] for t in seen} == {3.7}
    # 30 W uncore + 1.2 W + 10.5 W, the 19 idle cores in C6: far below PL1
    assert seen[2.0][2] - seen[1.0][2] == pytest.approx(41.7, abs=0.01)


@pytest.mark.parametrize(("busy", "ghz"), [(1, 3.4), (2, 3.3), (3, 3.3), (4, 3.2)])
def test_bins_follow_the_active_cores(busy, ghz):
    # idle cores leave C1 for C6 after 600 us and stop counting; 4 busy cores at 3.2 GHz
    # draw 10 + 4 x (3 + 14.10) = 78.4 W, under the 95 W TDP: only the bins limit
    _, seen = run(I5, "performance", list(range(busy)), 0.01, (0.0004, 0.0011, 0.01))
    assert seen[0.0004][0] == 3.4               # no interval yet: the table's top
    assert seen[0.0011][0] == ghz and seen[0.01][0] == ghz


IVB = with_overrides(get_preset("i7-3770"), turbo=True)     # bins 3.9/3.9/3.8/3.7


def ivb_package_w(ghz: float, busy: int) -> float:
    """The i7-3770 with ``busy`` cores running, the others in C6 (their leakage
    gated): 8 W uncore + busy x (2 W leakage + P_dyn); V linear 0.85 V at 1.6 GHz ..
    1.2 V at 3.9 GHz, 18 W per core at 3.9 GHz."""
    return 8.0 + busy * (2.0 + dynamic_power_w(IVB, ghz))


def test_ivb_power_at_its_bins_by_hand():
    # 3.7 GHz: V = 0.85 + 0.35 x 2.1/2.3 = 1.16957; 18 x (1.16957/1.2)^2 x 3.7/3.9
    # = 16.222 W; four cores 8 + 4 x 18.222 = 80.89 W, under PL2 = 96.25 W
    assert ivb_package_w(3.7, 4) == pytest.approx(80.89, abs=0.01)
    # 3.8 GHz: V = 1.18478; 18 x 0.97483 x 0.97436 = 17.097 W; three cores 65.29 W
    assert ivb_package_w(3.8, 3) == pytest.approx(65.29, abs=0.01)
    assert ivb_package_w(3.9, 2) == pytest.approx(48.0)


@pytest.mark.parametrize(("busy", "ghz"), [(1, 3.9), (2, 3.9), (3, 3.8), (4, 3.7)])
def test_i7_3770_bins_follow_the_active_cores(busy, ghz):
    # CPUs 0-3 are the first threads of cores 0-3; the power stays under PL2 and the
    # RAPL average far under PL1 in 10 ms: only the bins limit
    _, seen = run(IVB, "performance", list(range(busy)), 0.01, (0.0004, 0.0011, 0.01))
    assert seen[0.0004][0] == 3.9               # no interval yet: the table's top
    assert seen[0.0011][0] == ghz and seen[0.01][0] == ghz


@pytest.mark.parametrize(("cpus", "ghz"), [((0, 4), 3.9), ((0, 1, 2, 4, 5, 6), 3.8),
                                           (tuple(range(8)), 3.7)])
def test_i7_3770_bins_count_cores_not_threads(cpus, ghz):
    # CPU c + 4 is the second hardware thread of CPU c's core: two threads of one
    # core are one active core (MSR_TURBO_RATIO_LIMIT counts cores in C0/C1)
    _, seen = run(IVB, "performance", list(cpus), 0.01, (0.0011, 0.01))
    assert seen[0.0011][0] == ghz and seen[0.01][0] == ghz


def test_i7_3770_four_busy_cores_reach_pl1_later_at_their_bin():
    """Four busy cores at the 3.7 GHz bin draw 80.89 W (not 88.00 W at 3.9): the RAPL
    average rises from the idle package's 3.2 W (8 W uncore x 0.4 in package C6) and
    crosses PL1 (77 W) at ln((80.89 - 3.2) / (80.89 - 77)) = 2.99 s; then the
    ceiling dithers among 3.5, 3.6 and 3.7 GHz (74.23, 77.50, 80.89 W): 77 W."""
    assert ivb_package_w(3.6, 4) == pytest.approx(77.50, abs=0.01)
    assert ivb_package_w(3.5, 4) == pytest.approx(74.23, abs=0.01)
    assert math.log((80.89 - 3.2) / (80.89 - 77.0)) == pytest.approx(2.99, abs=0.01)
    times = (1.0, 2.95, 3.0, 4.0, 5.0)
    _, seen = run(IVB, "performance", [0, 1, 2, 3], 5.0, times)
    assert seen[1.0][0] == 3.7                  # the bin binds, not yet the power
    assert seen[2.95][0] == 3.7 and seen[2.95][1] < 77.0
    assert seen[3.0][0] < 3.7 and seen[3.0][1] == pytest.approx(77.0, abs=0.01)
    assert seen[5.0][2] - seen[4.0][2] == pytest.approx(77.0, abs=0.8)   # joules in 1 s
    assert 3.5 <= seen[5.0][3] - seen[4.0][3] <= 3.7                     # mean GHz


def test_i7_3770_bins_pass_the_preset_validation():
    assert IVB.extra.turbo_bins_ghz == (3.9, 3.9, 3.8, 3.7)
    assert with_overrides(IVB, extra={"power_limit_tau_s": 28.0}).extra.turbo_bins_ghz == (
        3.9, 3.9, 3.8, 3.7)
    with pytest.raises(warmcore.ConfigError, match="extra.turbo_bins_ghz"):
        with_overrides(IVB, turbo_ghz=3.8)      # the 1-core bin above the turbo clock


def test_a_request_below_base_is_not_touched():
    ctl, seen = run(XEON, "userspace", list(range(20)), 0.1, (0.05, 0.1), userspace_ghz=2.0)
    assert {seen[t][0] for t in seen} == {2.0}


@pytest.mark.parametrize("preset", [get_preset("xeon-sp"), get_preset("i7-3770"),
                                    with_overrides(get_preset("epyc-zen3"), turbo=True)])
def test_no_package_control_without_turbo_or_without_limits(preset):
    # turbo off (every preset's default), or AMD's boost (no RAPL PL1/PL2 modeled)
    assert DvfsController(preset, "performance", frequency_domains(preset)).pcu is None


def test_bins_must_not_rise():
    with pytest.raises(warmcore.ConfigError, match="extra.turbo_bins_ghz"):
        with_overrides(I5, extra={"turbo_bins_ghz": (3.2, 3.4)})


def test_cli_batch_on_the_xeon_with_turbo():
    """20 CPU-bound jobs of 2 s (on the reference Core 2) on the xeon-sp with turbo:
    before, all at 3.7 GHz and 264 W; now under PL2 at 2.8-2.9 GHz."""
    out = subprocess.run(
        ["warmcore", "run", "throughput-machine", "--json", "--set", "machine.preset=xeon-sp",
         "--set", "machine.turbo=true", "--set", "workload.jobs=20",
         "--set", "workload.service_us=2000000.0", "--set", "work.task_kib=0.0"],
        check=True, capture_output=True, text=True)
    d = json.loads(out.stdout)
    watts = d["joules"] / d["makespan_s"]
    assert 174.0 < watts < 180.5 and 2.8 <= d["ghz"] < 2.9


def test_bins_set_from_a_scenario_as_a_toml_list():
    # machine.overrides.extra.turbo_bins_ghz = [3.4, 3.2] arrives as a list
    assert with_overrides(I5, extra={"turbo_bins_ghz": [3.4, 3.2]}).extra.turbo_bins_ghz == (
        3.4, 3.2)
