"""Issue 35: the machine's physics as Linux and Intel do them, each on a case
computed by hand (items 3, 5, 6 and 7; item 4, the measured window, is in
tests/test_energy.py)."""

from __future__ import annotations

import pytest
import simpy

from warmcore.models.energy import dynamic_power_w
from warmcore.models.hardware import HardwareMachine
from warmcore.models.presets import get_preset
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.work import Segment

US = 1e-6
# Only the clock, the OS costs and energy: every duration is then instructions /
# base_ipc / f, the switch cost and the C-state exit, nothing else.
PLAIN = {"caches": False, "coherence": False, "contention": False, "membus": False,
         "smt": True, "dvfs": True, "switch_costs": True, "energy": True}


def _machine(name="i7-3770", ghz=1.6, **effects):
    return HardwareMachine(get_preset(name), {**PLAIN, **effects}, governor="userspace",
                           userspace_ghz=ghz)


# -- item 5: the C-state exit is not busy ------------------------------------------

def test_a_c_state_exit_is_neither_busy_time_nor_dynamic_power():
    """i7-3770 at 1.6 GHz, one thread on CPU 0: 100 us of work (1.3 IPC: 208,000
    instructions = 160,000 cycles = 100 us), a 2 ms sleep (past the 600 us C6 target
    residency), woken, 100 us again. The CPU runs 2 x (100 us + the 2 us switch) =
    204 us; its two exits (6 us from the shallow state at the start: 4 us IPI + 2 us
    C1; 40 us from C6 after the sleep) pass inside cpuidle: the governor's busy
    time, PELT and the dynamic energy see 204 us, not 250."""
    env = simpy.Environment()
    m = _machine()
    k = Kernel(env, m)
    m.bind(env, None)
    p = k.process("p", cpus=[0])
    work = Segment(208_000.0)

    def body(t):
        yield t.run(work)
        yield t.block(2e-3)
        yield t.run(work)

    k.spawn(p, "t", body)
    env.run(until=0.01)
    busy = 2 * (100 * US + 2 * US)
    assert k.cpus[0].busy_s == pytest.approx(busy, rel=1e-9)
    assert m.clock.busy_time(0, env.now) == pytest.approx(busy, rel=1e-9)
    pre = get_preset("i7-3770")
    assert m.meter.dynamic_joules(env.now) == pytest.approx(
        dynamic_power_w(pre, 1.6) * busy, rel=1e-9)
    # PELT (y^32 = 1/2 per 1.024 ms period): running 6..108 us, idle to 2.148 ms (the
    # 2 ms sleep and the 40 us exit), running to 2.250 ms, idle to 10 ms
    y = 0.5 ** (1 / 32)

    def n(dt):
        return dt / 1.024e-3

    u = 1024 * (1 - y ** n(102 * US))
    u *= y ** n(2.040e-3)
    u = u * y ** n(102 * US) + 1024 * (1 - y ** n(102 * US))
    u *= y ** n(10e-3 - 2.250e-3)
    assert m.clock.util(0, env.now) == pytest.approx(u, rel=1e-9)


def test_a_waking_sibling_takes_no_share_of_its_core_during_its_exit():
    """CPU 4 is CPU 0's SMT sibling. CPU 0 runs a long segment; at 10 us a thread
    pinned to CPU 4 wakes it from a shallow C-state (idle for 10 us, under the 600 us
    C6 residency: 4 us IPI + 2 us C1 exit = 6 us). Until 16 us the core has one
    busy thread (CPU 0 keeps the whole pipeline), from 16 us two."""
    env = simpy.Environment()
    m = _machine()
    k = Kernel(env, m)
    m.bind(env, None)
    seen = []

    def hog(t):
        yield t.run(Segment(4_160_000.0))     # 2 ms alone at 1.6 GHz

    def other(t):
        seen.append((env.now, m.busy_siblings(0)))
        yield t.run(Segment(416_000.0))

    k.spawn(k.process("a", cpus=[0]), "hog", hog)
    env.run(until=10 * US)
    assert m.busy_siblings(0) == 1
    k.spawn(k.process("b", cpus=[4]), "other", other)
    env.run(until=15.9 * US)                   # CPU 4 still inside its exit
    assert m.busy_siblings(0) == 1
    env.run(until=16.1 * US)
    assert seen == [(pytest.approx(16 * US, abs=1e-12), 2)]
