"""Idle states that empty a core's caches (models.hardware "Idle states empty a core's
caches"): Intel's datasheets, "Core C3 State": a core in C3 "flushes the contents of
its L1 instruction cache, L1 data cache, and L2 cache to the shared L3 cache"; C6 too.
Every figure below is computed by hand on the 4-core test machine of test_hardware."""

from __future__ import annotations

import math

import pytest

from tests.test_cpuidle import _device
from tests.test_hardware import TEST, machine
from warmcore.models.cache import CacheState
from warmcore.models.cpuidle import TABLES, CpuIdle, flushing_index, gating_index, idle_states
from warmcore.models.presets import PRESETS, get_preset
from warmcore.simcore.work import C_L1M, C_LLCL, C_LLCM, THREAD, Footprint, Segment

FLUSHING = TEST.model_copy(update={"extra": TEST.extra.model_copy(
    update={"cstate_flushes_core_caches": True})})
# 300 lines written by one thread: they fit the 32 KiB L1D's 512 lines, so alone on
# its core the thread finds them warm (fewer than 10 misses: test_hardware)
STACK = Segment(1e4, (Footprint(THREAD, None, 300, True),))


def test_a_flushed_cache_holds_nothing_and_misses_every_line_again():
    c = CacheState(32 * 1024, 8)
    assert c.access(1, 100.0) == pytest.approx(100.0)
    assert c.resident(1) == pytest.approx(100.0, rel=1e-3)
    c.flush()
    assert c.resident(1) == 0.0 and len(c) == 0
    assert c.access(1, 100.0) == pytest.approx(100.0)


def _run_after_idle(m, idle_at, busy_at, cpu=0):
    """``cpu`` runs STACK, sleeps from ``idle_at`` and runs it again at ``busy_at``."""
    m.cpu_busy(cpu, 0.0)
    m.execute(cpu, STACK, "A", 0.0)
    m.cpu_idle(cpu, idle_at)
    m.cpu_busy(cpu, busy_at)
    return m.execute(cpu, STACK, "A", busy_at)


def test_a_core_that_slept_into_c6_reloads_its_lines_from_the_llc():
    """Hindsight rule: C6 600 us after a thread goes idle (cstate_deep_after_us); the
    core's sibling (cpu 4) has been idle since 0. Idle at 100 us: C6 from 700 us."""
    m = machine(FLUSHING)
    warm = _run_after_idle(m, 1e-4, 6.99e-4)       # 1 us before C6: nothing flushed
    assert m.core_flushes == 0 and warm[C_L1M] < 10
    m = machine(FLUSHING)
    cold = _run_after_idle(m, 1e-4, 7e-4)          # at C6: L1 and L2 empty
    assert m.core_flushes == 1
    # every line misses the L1 and the L2 and hits the LLC, which still holds them
    assert cold[C_L1M] == pytest.approx(300, rel=1e-3)
    assert cold[C_LLCL] == pytest.approx(300, rel=1e-3)
    assert cold[C_LLCM] == pytest.approx(0.0, abs=1e-6)


def test_the_state_is_the_one_the_core_was_in_when_woken_not_after_its_exit():
    """Woken at 699 us (in C1: exit 5 + 2 us on the test machine), running at 706 us,
    after C6 would have begun: the core left C1, nothing was flushed."""
    m = machine(FLUSHING)
    m.cpu_busy(0, 0.0)
    m.execute(0, STACK, "A", 0.0)
    m.cpu_idle(0, 1e-4)
    exit_s = m.wake_latency(0, 1e-4, 6.99e-4)
    assert exit_s == pytest.approx(7e-6)
    m.cpu_busy(0, 6.99e-4 + exit_s)
    assert m.core_flushes == 0
    assert m.execute(0, STACK, "A", 7.06e-4)[C_L1M] < 10


def test_a_busy_sibling_keeps_the_core_and_its_caches_awake():
    m = machine(FLUSHING)
    m.cpu_busy(4, 0.0)                            # cpu 4 shares core 0 and never sleeps
    c = _run_after_idle(m, 1e-4, 5e-3)
    assert m.core_flushes == 0 and c[C_L1M] < 10


def test_the_last_thread_to_reach_the_state_decides():
    """The core is in C6 once both threads are: cpu 4 slept from 1 ms (C6 at 1.6 ms),
    cpu 0 from 100 us (C6 at 700 us): at 1.5 ms the core is still in C1."""
    m = machine(FLUSHING)
    m.cpu_busy(4, 0.0)
    m.cpu_idle(4, 1e-3)
    c = _run_after_idle(m, 1e-4, 1.5e-3)
    assert m.core_flushes == 0 and c[C_L1M] < 10
    m = machine(FLUSHING)
    m.cpu_busy(4, 0.0)
    m.cpu_idle(4, 1e-3)
    c = _run_after_idle(m, 1e-4, 1.6e-3)
    assert m.core_flushes == 1 and c[C_LLCL] == pytest.approx(300, rel=1e-3)


def test_a_preset_without_the_flag_keeps_its_caches_and_so_does_a_run_without_caches():
    m = machine(TEST)
    c = _run_after_idle(m, 1e-4, 5e-3)
    assert m.core_flushes == 0 and c[C_L1M] < 10
    m = machine(FLUSHING, caches=False)
    m.cpu_busy(0, 0.0)
    m.cpu_idle(0, 1e-4)
    m.cpu_busy(0, 5e-3)
    assert m.core_flushes == 0


def test_flushing_states_are_c3_and_deeper():
    ivb = TABLES["ivb"]
    assert ivb[flushing_index(ivb)].name == "C3" and ivb[gating_index(ivb)].name == "C6"
    skx = TABLES["skx"]                            # Skylake-SP: no C3, C6 flushes
    assert skx[flushing_index(skx)].name == "C6"
    assert [s.name for s in idle_states(get_preset("t1000"))][
        flushing_index(idle_states(get_preset("t1000")))] == "C6"


def test_menu_says_when_an_idle_thread_reaches_c3():
    """Ivy Bridge's table (intel_idle ivb_cstates): C3 exit 59 us, target residency 156;
    C6 80 and 300. Eight idles of 200 us: the typical interval is 200, so menu picks C3
    at once (156 <= 200 < 300): the core may flush from the idle's start, and C6 is
    only reached later, when the tick's wake-ups have taught menu the idle is long."""
    idle = CpuIdle(ivb := TABLES["ivb"], 1, next_timer_us=4000, wake_busy_s=4e-6,
                   wake_cap_s=40e-6)
    idle.devices[0] = _device([200] * 8)
    gate = idle.enter(0, 0.001)
    assert idle.flush_after[0] == 0.0 and gate > 0.0
    c3, c6 = ivb[flushing_index(ivb)], ivb[gating_index(ivb)]
    assert c3.target_residency_us <= 200 < c6.target_residency_us
    # idles of 10 us: C1E (target 20) and never C3 before the tick: not at once
    idle.devices[0] = _device([10] * 8)
    idle.enter(0, 0.01)
    assert idle.flush_after[0] > 0.0


def test_which_presets_flush():
    flushing = sorted(n for n, p in PRESETS.items() if p.extra.cstate_flushes_core_caches)
    assert flushing == ["i5-2400", "i7-3770", "i7-920", "i9-7960x", "server-2015", "xeon-sp"]
    assert math.isinf(CpuIdle(TABLES["ivb"], 2).flush_after[1])
