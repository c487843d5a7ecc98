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
    # the hindsight idle rule, whose exit latencies these tests compute by hand (the
    # menu governor's are tests/test_cpuidle.py's)
    return HardwareMachine(get_preset(name), {**PLAIN, **effects}, governor="userspace",
                           userspace_ghz=ghz, idle_governor="hindsight")


# -- item 5: the C-state exit is not busy ------------------------------------------

def test_a_c_state_exit_is_neither_busy_time_nor_dynamic_power():
    """i7-3770 at 1.6 GHz, one thread on CPU 0: 100 us of work (1.3 IPC: 208,000
    instructions = 160,000 cycles = 100 us), a 2 ms sleep (past the 600 us C6 target
    residency), woken, 100 us again. The 2 us switch is stated at the 3.4 GHz top
    P-state and runs at the clock (issue 35 item 2): 2 x 3.4 / 1.6 = 4.25 us. The CPU
    runs 2 x (100 us + 4.25 us) = 208.5 us; its two exits (6 us from the shallow
    state at the start: 4 us IPI + 2 us C1; 40 us from C6 after the sleep) pass
    inside cpuidle: the governor's busy time, PELT and the dynamic energy see
    208.5 us, not 254.5."""
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
    switch = 2 * US * 3.4 / 1.6
    busy = 2 * (100 * US + switch)
    assert k.cpus[0].busy_s == pytest.approx(busy, rel=1e-9)
    assert m.clock.busy_time(0, env.now) == pytest.approx(busy, rel=1e-9)
    pre = get_preset("i7-3770")
    assert m.meter.dynamic_joules(env.now) == pytest.approx(
        dynamic_power_w(pre, 1.6) * busy, rel=1e-9)
    # PELT (y^32 = 1/2 per 1.024 ms period, frequency-invariant): running 6..110.25
    # us, idle 2.040 ms (the 2 ms sleep and the 40 us exit), running 104.25 us to
    # 2.2545 ms, idle to 10 ms
    y = 0.5 ** (1 / 32)

    def n(dt):
        return dt / 1.024e-3

    r = 1.6 / 3.4                        # frequency invariance: f / f_max of a period
    run = 100 * US + switch
    u = 1024 * r * (1 - y ** n(run))
    u *= y ** n(2.040e-3)
    u = u * y ** n(run) + 1024 * r * (1 - y ** n(run))
    u *= y ** n(10e-3 - (6 * US + 2 * run + 2.040e-3))
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


# -- item 3: schedutil as cpufreq_schedutil.c ----------------------------------------

ONE_CPU_I9 = {"machine.preset": "i9-7960x", "machine.cores": 1, "machine.threads_per_core": 1,
              "workload.rate_per_s": 4000.0, "workload.service_us": 100.0}


def test_schedutil_settles_at_the_kernels_fixed_point_on_one_cpu():
    """i9-7960x, one CPU, 4,000 req/s x 100 us. At a userspace 1.5 GHz the CPU is busy
    76.5% of the time: c = 0.765 x 1.5 = 1.15 Gcycles/s of work. With
    frequency-invariant util (1024 x busy x f / f_max = 1024 c / f_max at any f)
    get_next_freq asks 1.25 x f_max x util / 1024 = 1.25 c = 1.43 GHz, RELATION_L
    1.5: schedutil should run near 1.5 GHz. It ran 2.04 (56% busy) when it scaled a
    raw running fraction by f_max (f^2 = 1.25 c f_max)."""
    from tests.helpers import run

    fixed = run("mmc", {**ONE_CPU_I9, "machine.governor": "userspace",
                        "machine.frequency_ghz": 1.5}, seed=1, requests=8000)
    c = fixed["cpus_utilized"] * 1.5
    assert 1.05 < c < 1.25
    f_star = 1.25 * c
    su = run("mmc", ONE_CPU_I9, seed=1, requests=8000)
    assert su["ghz"] == pytest.approx(f_star, abs=0.1)    # one step of the 0.1 GHz table
    assert su["ghz"] < 1.65


def _toy_ctl(domains, initial, **params):
    from warmcore.models.dvfs import DvfsController
    from warmcore.models.presets import Preset

    toy = Preset(name="toy", description="test", sources=("test",), cores_per_socket=2,
                 pstates_ghz=(1.0, 1.5, 2.0, 2.5, 3.0), freq_domain="core",
                 transition_latency_us=0.0)
    ctl = DvfsController(toy, "schedutil", domains, initial_ghz=initial, params=params)
    env = simpy.Environment()
    ctl.bind(env)
    return ctl, env


def test_schedutil_holds_the_clock_of_a_one_cpu_policy_that_has_not_idled():
    """sugov_update_single: a CPU that has not idled since the last evaluation keeps
    its requested clock rather than lower it (sugov_cpu_is_busy); once it idles, the
    util decides. CPU 0 at 3.0 GHz starts running at 0 with util 0: asked 1.0, held
    at 3.0; it idles at 2 ms: util 1024 x (1 - y^(2/1.024)) = 41.5, 1.25 x 3 x 41.5 /
    1024 = 0.15 -> 1.0."""
    ctl, env = _toy_ctl([[0], [1]], 3.0)
    ctl.cpu_busy(0, 0.0)
    assert ctl.ghz(0, 0.0) == 3.0                        # held: it has not idled
    env.run(until=2e-3)
    ctl.cpu_idle(0, 2e-3)
    env.run(until=2.1e-3)
    assert ctl.ghz(0, env.now) == 1.0
    # CPU 1 had no evaluation and no hold rule applied to it: still at 3.0
    assert ctl.ghz(1, env.now) == 3.0


def test_schedutil_changes_at_most_once_per_rate_limit():
    """CPU 0 of a two-CPU policy runs throughout from 1.0 GHz, so the clock climbs to
    the top; CPU 1 comes and goes every 100 us (utilisation updates). Without a limit
    the steps come 40, 33 and 28 ms apart (as the util grows); with rate_limit_us =
    50 ms a change restarts the limit (sugov_should_update_freq,
    sugov_update_next_freq) and the first update past it (a 100 us step, not a 4 ms
    tick) makes the next change: 50 ms apart, to within an update or two."""
    ctl, env = _toy_ctl([[0, 1]], 1.0, rate_limit_us=50000.0)
    ctl.cpu_busy(0, 0.0)
    t = 100e-6
    for i in range(4000):                                # 400 ms of 100 us updates
        env.run(until=t)
        (ctl.cpu_busy if i % 2 else ctl.cpu_idle)(1, t)
        t += 100e-6
    times = [ct for ct, _d, _g in ctl.changes][1:]
    assert [g for _t, _d, g in ctl.changes][1:] == [1.5, 2.0, 2.5, 3.0]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert all(50e-3 - 1e-9 <= g <= 50e-3 + 200e-6 for g in gaps)


# -- item 6: idle power gated by the C-states -----------------------------------------

def _one_core(deep_after_us=600.0):
    from warmcore.models.presets import Preset, PresetExtra

    return Preset(name="one", description="test", sources=("test",), cores_per_socket=1,
                  threads_per_core=2, smt_throughput=(1.0, 1.25), pstates_ghz=(1.0, 2.0),
                  static_w_per_core=4.0,
                  package_static_w=5.0, dyn_w_per_core_max=10.0, v_min=0.8, v_max=1.2,
                  extra=PresetExtra(cstate_deep_after_us=deep_after_us))


def _job_joules(preset, ghz, window=0.05, cycles=2e7):
    """Joules over ``window`` of one job of ``cycles`` run at ``ghz`` from t = 0."""
    from warmcore.models.energy import EnergyMeter

    m = EnergyMeter(preset)
    m.busy(0, 0.0, ghz)
    m.idle(0, cycles / (ghz * 1e9))
    return m.joules(window)


def test_race_to_idle_wins_once_idle_power_is_gated():
    """Le Sueur and Heiser (HotPower 2010): with idle power gated, finishing fast and
    sleeping can beat running slowly. One core (4 W static, 5 W package, 10 W dynamic
    at 2 GHz, 2.22 W at 1 GHz: 10 x (0.8/1.2)^2 x 1/2), a job of 2e7 cycles in a
    50 ms window.
    Racing at 2 GHz: 10 ms busy: 0.1 J dynamic; 9 W static until 10.6 ms (C6 and
    package C6 after the 600 us residency): 0.0954 J; then 2 W (the package's 40%):
    39.4 ms x 2 W = 0.0788 J; 0.2742 J.
    At 1 GHz: 20 ms busy: 0.0444 J; 9 W x 20.6 ms = 0.1854 J; 2 W x 29.4 ms = 0.0588 J;
    0.2887 J. Without idle states (C6 never reached) static is 9 W throughout: 0.55 J
    racing against 0.4944 J slow: the slow clock wins, as the old model always had it."""
    gated = _one_core()
    race, slow = _job_joules(gated, 2.0), _job_joules(gated, 1.0)
    assert race == pytest.approx(0.1 + 9 * 0.0106 + 2 * 0.0394, rel=1e-9)
    assert slow == pytest.approx(10 * (0.8 / 1.2) ** 2 * 0.5 * 0.02 + 9 * 0.0206 + 2 * 0.0294,
                                 rel=1e-9)
    assert race < slow
    never = _one_core(deep_after_us=1e6)
    assert _job_joules(never, 2.0) == pytest.approx(0.55, rel=1e-9)
    assert _job_joules(never, 1.0) == pytest.approx(0.02 * 10 * (0.8 / 1.2) ** 2 * 0.5 + 0.45,
                                                    rel=1e-9)
    assert _job_joules(never, 1.0) < _job_joules(never, 2.0)


def test_a_core_enters_c6_only_when_every_thread_is_idle():
    """CPUs 0 and 1 are the one core's two threads. CPU 0 runs 0..1 s, CPU 1 never: the
    core stays in C0 for the whole second (9 W static), then C6 and package C6 after
    600 us (2 W)."""
    from warmcore.models.energy import EnergyMeter

    m = EnergyMeter(_one_core())
    m.busy(0, 0.0, 2.0)
    assert m.gated_joules(1.0) == 0.0
    m.idle(0, 1.0)
    assert m.gated_joules(2.0) == pytest.approx(0.9994 * (4.0 + 3.0), rel=1e-9)

