"""SMT: per-thread speed from the core's total-throughput curve."""

from __future__ import annotations

import pytest

from warmcore.models.hardware import HardwareMachine
from warmcore.models.presets import Preset
from warmcore.models.smt import smt_speed, smt_total, speed_table
from warmcore.simcore.work import Segment

BIG = (1.0, 1.25)
THROUGHPUT = (1.0, 1.9, 2.7, 3.4)


def test_speed_is_curve_over_k():
    assert smt_speed(1, BIG) == 1.0
    assert smt_speed(2, BIG) == pytest.approx(0.625)
    for k in range(1, 5):
        assert smt_speed(k, THROUGHPUT) == pytest.approx(THROUGHPUT[k - 1] / k)


def test_totals_are_the_curve():
    for curve in (BIG, THROUGHPUT, (1.0,)):
        for k in range(1, len(curve) + 1):
            assert smt_total(k, curve) == pytest.approx(curve[k - 1])
    assert smt_total(0, BIG) == 0.0


def test_beyond_the_curve_total_stays_flat_and_k0_is_a_lone_thread():
    assert smt_total(3, BIG) == pytest.approx(1.25)
    assert smt_speed(0, BIG) == 1.0
    assert smt_speed(4, ()) == 1.0


def test_speed_table():
    assert speed_table(THROUGHPUT, 4) == pytest.approx([1.0, 1.0, 0.95, 0.9, 0.85])


SMT2 = Preset(name="test-smt", description="2 cores x 2 threads", cores_per_socket=2,
              threads_per_core=2, smt_throughput=BIG, pstates_ghz=(2.0,), base_ipc=2.0)
ONLY_SMT = {e: e == "smt" for e in ("caches", "coherence", "contention", "membus", "smt",
                                    "dvfs", "switch_costs", "energy")}


def _compute(m, cpu):
    return m.execute(cpu, Segment(1e6), "t", 0.0)[7]


def test_two_busy_siblings_each_get_s2():
    m = HardwareMachine(SMT2, effects=ONLY_SMT)
    lone = 1e6 / 2.0 / 2e9
    m.cpu_busy(0, 0.0)
    assert _compute(m, 0) == pytest.approx(lone)
    m.cpu_busy(2, 0.0)                       # sibling of CPU 0 (cpu + n_cores)
    assert _compute(m, 0) == pytest.approx(lone / smt_speed(2, BIG))
    assert _compute(m, 2) == pytest.approx(lone / smt_speed(2, BIG))
    m.cpu_busy(1, 0.0)                       # another core: no effect on core 0
    assert _compute(m, 0) == pytest.approx(lone / smt_speed(2, BIG))
    m.cpu_idle(2, 1.0)
    assert _compute(m, 0) == pytest.approx(lone)
    # a CPU not marked busy counts itself: its busy sibling still shares the core
    m.cpu_idle(0, 1.0)
    m.cpu_busy(2, 1.0)
    assert _compute(m, 0) == pytest.approx(lone / smt_speed(2, BIG))


def test_smt_effect_off_ignores_siblings():
    eff = dict(ONLY_SMT, smt=False)
    m = HardwareMachine(SMT2, effects=eff)
    m.cpu_busy(0, 0.0)
    m.cpu_busy(2, 0.0)                       # sibling of CPU 0
    assert _compute(m, 0) == pytest.approx(1e6 / 2.0 / 2e9)
