"""Kernel work per system call (models/syscalls.py): each cost against its formula,
with the numbers worked out by hand from the PresetExtra defaults."""

from __future__ import annotations

import pytest
import simpy

from warmcore.models.hardware import HardwareMachine
from warmcore.models.presets import get_preset, nominal_ips, with_overrides
from warmcore.models.syscalls import CALLS, REFERENCE_IPS, SyscallCosts
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.machine import SYSCALLS, IdealMachine
from warmcore.simcore.work import Segment

US = 1e-6
REF = get_preset("i7-3770")      # the reference core: scale 1


def cost_us(name, n=0.0, kib=0.0, preset=REF):
    return SyscallCosts(preset).cost(name, n, kib) / US


# Defaults (us): entry 0.05, tcp_send 1.5, loopback_rx 1.5, tcp_recv 0.7, copy 0.1/KiB,
# epoll_wait 0.3 + 0.08/event, epoll_ctl 0.3, poll 0.05/fd, futex_wait 0.3, yield 0.1.
@pytest.mark.parametrize("name, n, kib, expected_us", [
    ("null", 0, 0, 0.05),
    ("read", 0, 0.2, 0.05 + 0.7 + 0.2 * 0.1),                  # 0.77
    ("recv", 0, 1.0, 0.05 + 0.7 + 0.1),                        # 0.85
    ("write", 0, 0.2, 0.05 + 1.5 + 1.5 + 0.2 * 0.1),           # 3.07: tx + peer's rx softirq
    ("send", 0, 4.0, 0.05 + 1.5 + 1.5 + 0.4),                  # 3.45
    ("epoll_wait", 1, 0, 0.05 + 0.3 + 0.08),                   # 0.43
    ("epoll_wait", 10, 0, 0.05 + 0.3 + 0.8),                   # 1.15
    ("epoll_ctl", 0, 0, 0.05 + 0.3),                           # 0.35
    ("poll", 1, 0, 0.05 + 0.05),                               # 0.10
    ("poll", 200, 0, 0.05 + 200 * 0.05),                       # 10.05: O(n) in the fds
    ("futex_wait", 0, 0, 0.05 + 0.3),                          # 0.35
    ("sched_yield", 0, 0, 0.05 + 0.1),                         # 0.15
    ("futex_wake", 0, 0, 1.2),                                 # the preset's futex_wake_us
])
def test_each_call_costs_its_formula_on_the_reference_core(name, n, kib, expected_us):
    assert cost_us(name, n, kib) == pytest.approx(expected_us, rel=1e-12)


def test_epoll_wait_per_event_falls_as_batches_grow():
    """What lets an event loop get cheaper per request under load: the call's base is
    shared by the events it returns. (0.05 + 0.3 + 0.08 n) / n: 0.43, 0.1675, 0.12375."""
    per_event = [cost_us("epoll_wait", n) / n for n in (1, 4, 8)]
    assert per_event == pytest.approx([0.43, 0.1675, 0.12375], rel=1e-12)


def test_other_presets_scale_by_single_thread_speed():
    """scale = 1.3 x 3.4e9 / nominal_ips: xeon-sp (1.45 x 2.4 GHz) 4.42 / 3.48."""
    xeon = get_preset("xeon-sp")
    assert REFERENCE_IPS == nominal_ips(REF) == pytest.approx(4.42e9)
    scale = 4.42 / 3.48
    assert cost_us("read", 0, 0.2, xeon) == pytest.approx(0.77 * scale, rel=1e-12)
    assert cost_us("epoll_wait", 3, 0, xeon) == pytest.approx(0.59 * scale, rel=1e-12)
    # futex_wake stays the preset's own figure (already per preset)
    assert cost_us("futex_wake", preset=xeon) == pytest.approx(xeon.futex_wake_us)


def test_overridden_fields_change_their_term_only():
    p = with_overrides(REF, extra={"poll_fd_us": 0.2, "loopback_rx_us": 0.0})
    assert cost_us("poll", 10, 0, p) == pytest.approx(0.05 + 2.0)
    assert cost_us("write", 0, 0, p) == pytest.approx(0.05 + 1.5)    # no loopback rx
    assert cost_us("read", 0, 0, p) == pytest.approx(0.75)


def test_switch_costs_off_makes_every_call_free():
    m = HardwareMachine("i7-3770", effects={"switch_costs": False})
    assert all(m.syscall_cost(name, 8, 4.0) == 0.0 for name in CALLS)
    on = HardwareMachine("i7-3770")
    assert on.syscall_cost("write", 0, 0.2) == pytest.approx(3.07 * US)


def test_unknown_calls_are_refused_by_every_machine():
    assert set(CALLS) == set(SYSCALLS)
    for m in (HardwareMachine("i7-3770"), IdealMachine()):
        with pytest.raises(ValueError, match="unknown system call 'fork'"):
            m.syscall_cost("fork")


def test_thread_syscall_is_system_time_before_the_next_segment():
    """Thread.syscall charges the call as kernel work: task-clock and sys_s grow by
    exactly its cost (besides the switch onto the CPU, ctx_switch_us = 2.0 us on this
    preset), cycles by cost x clock, instructions not at all."""
    env = simpy.Environment()
    m = HardwareMachine("i7-3770", effects={"caches": False, "dvfs": False, "smt": False,
                                            "membus": False, "energy": False})
    k = Kernel(env, m)
    m.bind(env, None)
    p = k.process("p")
    ins = 3.4e9 * 1.3 * 10 * US                 # 10 us of user work at 3.4 GHz, IPC 1.3

    def body(t):
        t.syscall("epoll_wait", n=2)            # 0.05 + 0.3 + 0.16 = 0.51 us
        t.syscall("read", kib=1.0)              # 0.05 + 0.7 + 0.1 = 0.85 us
        yield t.run(Segment(ins))

    k.spawn(p, "t", body)
    env.run()
    c = k.counters_now()["processes"]["p"]
    sys_us = 0.51 + 0.85 + REF.ctx_switch_us
    assert REF.ctx_switch_us == 2.0
    assert c["sys_s"] == pytest.approx(sys_us * US, rel=1e-9)
    assert c["task_clock_s"] == pytest.approx((10 + sys_us) * US, rel=1e-9)
    assert c["instructions"] == pytest.approx(ins)
    assert c["cycles"] == pytest.approx((10 + sys_us) * US * 3.4e9, rel=1e-9)


@pytest.mark.parametrize("fair", [False, True])
def test_a_thread_that_waits_for_a_lock_pays_its_futex_wait(fair):
    """Two threads on two CPUs run one program (acquire a 1-permit resource, 10 us,
    release): the second finds it held and parks, paying FUTEX_WAIT (0.05 + 0.3 us)
    besides the switch onto its CPU and the switch back onto it when it is woken (its
    CPU went idle meanwhile: the thread still runs its halves of that switch); the
    first pays its switch and its wake of the second (counted; the wake's kernel work
    would run at its next segment, and it has none). System time: 3 x 2.0 + 0.35 us;
    the second thread ends 10 us of work after it is woken."""
    from warmcore.simcore.kernel import Semaphore
    from warmcore.simcore.work import STEP_ACQUIRE, STEP_RELEASE, STEP_RUN, Program

    env = simpy.Environment()
    m = HardwareMachine("i7-3770", effects={"caches": False, "dvfs": False, "smt": False,
                                            "membus": False, "energy": False})
    k = Kernel(env, m)
    m.bind(env, None)
    k.resources = {"m": Semaphore("m", 1, None, fair=fair)}
    p = k.process("p")
    prog = Program(((STEP_ACQUIRE, "m"), (STEP_RUN, Segment(3.4e9 * 1.3 * 10 * US)),
                    (STEP_RELEASE, "m")))

    def body(t):
        yield t.run(prog)

    first, second = k.spawn(p, "a", body), k.spawn(p, "b", body)
    env.run()
    c = k.counters_now()["processes"]["p"]
    assert c["sys_s"] == pytest.approx((3 * 2.0 + 0.35) * US, rel=1e-9)
    assert (first.futex_wakes, second.futex_wakes) == (1, 0)
    assert k.resources["m"].waits == 1 and k.resources["m"].free == 1
    assert env.now > 2 * 10 * US


def _kernel_and_user_us(effects, governor=None, ghz=None, sibling_us=0.0, preset=REF):
    """Run 10 us of user work (at 3.4 GHz, IPC 1.3) after an epoll_wait (n=2) and a
    read (1 KiB) on CPU 4 of an i7-3770, a ``sibling_us`` segment of another process
    on CPU 0 (CPU 4's SMT sibling) at the same time: (sys us, user us, cycles) of the
    thread on CPU 4."""
    env = simpy.Environment()
    eff = {"caches": False, "membus": False, "energy": False, **effects}
    m = HardwareMachine(preset, effects=eff, governor=governor, userspace_ghz=ghz)
    k = Kernel(env, m)
    m.bind(env, None)
    ins = 3.4e9 * 1.3 * 10 * US

    def body(t):
        t.syscall("epoll_wait", n=2)            # 0.51 us at the nominal rate
        t.syscall("read", kib=1.0)              # 0.85 us
        yield t.run(Segment(ins))

    def busy(t):
        yield t.run(Segment(3.4e9 * 1.3 * sibling_us * US))

    if sibling_us:
        k.spawn(k.process("sibling"), "s", busy, cpus=[0])
    k.spawn(k.process("p"), "t", body, cpus=[4])
    env.run()
    c = k.counters_now()["processes"]["p"]
    return c["sys_s"] / US, (c["task_clock_s"] - c["sys_s"]) / US, c["cycles"]


def test_kernel_work_slows_with_the_clock_as_user_work_does():
    """Issue 35 item 2: kernel paths are instructions. The same calls and switch (0.51
    + 0.85 + ctx_switch_us 2.0 = 3.36 us at the nominal 3.4 GHz) under the userspace
    governor at 1.6 GHz take 3.36 x 3.4 / 1.6 = 7.14 us, the user work 10 x 3.4 / 1.6
    = 21.25 us; cycles are the same at both clocks (13.36 us x 3.4 GHz = 45,424), so
    IPC does not rise when the clock drops."""
    nominal = 0.51 + 0.85 + REF.ctx_switch_us
    fast = _kernel_and_user_us({"smt": False}, "userspace", 3.4)
    slow = _kernel_and_user_us({"smt": False}, "userspace", 1.6)
    assert fast[0] == pytest.approx(nominal, rel=1e-9)
    assert fast[1] == pytest.approx(10.0, rel=1e-9)
    assert slow[0] == pytest.approx(nominal * 3.4 / 1.6, rel=1e-9)      # 7.14 us
    assert slow[1] == pytest.approx(10.0 * 3.4 / 1.6, rel=1e-9)         # 21.25 us
    assert fast[2] == pytest.approx((10.0 + nominal) * US * 3.4e9, rel=1e-9)
    assert slow[2] == pytest.approx(fast[2], rel=1e-9)                  # same IPC


def test_a_busy_smt_sibling_slows_kernel_work_like_user_work():
    """With ``kernel_smt_share`` on: the i7-3770's two hardware threads give 1.25 x one
    thread's throughput, so each runs at s(2) = 1.25 / 2 = 0.625 of a lone thread
    (models/smt.py). With a 1 ms segment busy on CPU 0 throughout, the thread on CPU
    4 takes 3.36 / 0.625 = 5.376 us of system time and 10 / 0.625 = 16 us of user
    time: both 1.6 x alone. Off (the default, held back: docs/model.md), the system
    time stays 3.36 us."""
    on = with_overrides(REF, extra={"kernel_smt_share": True})
    alone = _kernel_and_user_us({"smt": True, "dvfs": False}, preset=on)
    shared = _kernel_and_user_us({"smt": True, "dvfs": False}, sibling_us=1000.0, preset=on)
    nominal = 0.51 + 0.85 + REF.ctx_switch_us
    assert alone[0] == pytest.approx(nominal, rel=1e-9)
    assert shared[0] == pytest.approx(nominal / 0.625, rel=1e-9)        # 5.376 us
    assert shared[1] == pytest.approx(10.0 / 0.625, rel=1e-9)           # 16 us
    assert shared[0] / alone[0] == pytest.approx(shared[1] / alone[1], rel=1e-9)
    default = _kernel_and_user_us({"smt": True, "dvfs": False}, sibling_us=1000.0)
    assert default[0] == pytest.approx(nominal, rel=1e-9)
    assert default[1] == pytest.approx(10.0 / 0.625, rel=1e-9)


def test_wake_line_transfers_keep_their_nanoseconds_at_a_lower_clock():
    """The kernel's own memory stalls (a futex wake-up's lines, MachineModel.wake_transfer,
    charged as ``pending_stall``) are nanoseconds at any clock: only the instruction
    part of kernel work scales, by 3.4 / 1.6 at 1.6 GHz."""
    def at(ghz):
        m = HardwareMachine("i7-3770", effects={"caches": True, "dvfs": True},
                            governor="userspace", userspace_ghz=ghz)
        m.bind(simpy.Environment(), None)
        return m

    slow, fast = at(1.6), at(3.4)
    assert slow.kernel_slowdown(0, 0.0) == pytest.approx(3.4 / 1.6, rel=1e-12)
    assert fast.kernel_slowdown(0, 0.0) == 1.0
    lines = REF.extra.futex_wake_lines * REF.c2c_llc_ns * 1e-9
    assert slow.wake_transfer(0, 1)[0] == fast.wake_transfer(0, 1)[0] == pytest.approx(lines)
