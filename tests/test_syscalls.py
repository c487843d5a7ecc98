"""Kernel work per system call (models/syscalls.py) and per request (recv on the
first server segment, send when it completes), charged as system time."""

from __future__ import annotations

import pytest
import simpy

from tests.helpers import run
from warmcore.models.presets import get_preset
from warmcore.models.syscalls import SyscallCosts
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.machine import IdealMachine
from warmcore.simcore.work import Segment

US = 1e-6


def test_each_call_costs_its_formula():
    x = get_preset("i7-3770").extra
    c = SyscallCosts(x)
    s = x.syscall_us
    assert c.cost("null") == pytest.approx(s * US)
    assert c.cost("sched_yield") == pytest.approx(s * US)
    assert c.cost("futex_wait") == pytest.approx((s + x.futex_wait_us) * US)
    assert c.cost("recv", kib=2.0) == pytest.approx(
        (s + x.tcp_recv_us + 2.0 * x.copy_us_per_kib) * US)
    assert c.cost("send", kib=0.5) == pytest.approx(
        (s + x.tcp_send_us + 0.5 * x.copy_us_per_kib) * US)
    assert c.cost("epoll_wait", n=7) == pytest.approx(
        (s + x.epoll_wait_us + 7 * x.epoll_event_us) * US)
    assert c.cost("epoll_ctl") == pytest.approx((s + x.epoll_ctl_us) * US)
    assert c.cost("poll", n=200) == pytest.approx((s + 200 * x.poll_fd_us) * US)
    # the defaults, by hand: 0.1 + 2.5 + 0.2 x 0.1 us for a 200-byte response
    assert c.cost("send", kib=0.2) == pytest.approx(2.62 * US)


def test_epoll_per_event_falls_and_poll_grows_with_descriptors():
    c = SyscallCosts(get_preset("i7-3770").extra)
    per_event = [c.cost("epoll_wait", n=n) / n for n in (1, 4, 16)]
    assert per_event[0] > per_event[1] > per_event[2]
    assert c.cost("poll", n=1000) > 10 * c.cost("epoll_wait", n=1)


def test_no_preset_or_no_os_costs_means_free_calls():
    c = SyscallCosts(None)
    assert all(c.cost(n) == 0.0 for n in ("null", "recv", "send", "epoll_wait", "poll"))
    with pytest.raises(ValueError, match="unknown system call 'bogus'"):
        c.cost("bogus")


def test_thread_syscall_is_system_time_from_the_machine():
    class Costly(IdealMachine):
        def syscall_cost(self, name, n=1, kib=0.0):
            return {"recv": 3 * US, "epoll_wait": (1 + n) * US}[name]

    env = simpy.Environment()
    k = Kernel(env, Costly(cores=1, ghz=1.0))
    p = k.process("p")

    def body(t):
        t.syscall("recv")
        t.syscall("epoll_wait", n=2)
        yield t.run(Segment(10_000.0))

    k.spawn(p, "t", body)
    env.run()
    c = k.counters_now()["processes"]["p"]
    assert c["sys_s"] == pytest.approx(6 * US)
    assert c["task_clock_s"] == pytest.approx(16 * US)


def test_each_request_pays_its_recv_and_send_as_system_time():
    """pc on the pipeline scenario: one thread reads, parses, handles and writes each
    request, so its system time per request is at least recv + send (plus its
    selector's epoll_wait), and switching the OS costs off removes it."""
    on = run("pipeline", requests=2000)
    off = run("pipeline", {"machine.effects.switch_costs": False}, requests=2000)
    x = get_preset("i7-3770").extra
    per_req = (x.syscall_us * 2 + x.tcp_recv_us + x.tcp_send_us
               + 0.2 * 2 * x.copy_us_per_kib) * US
    sys_per_req = on["processes"]["server"]["sys_s"] / on["requests"]
    assert per_req <= sys_per_req < 1.5 * per_req
    assert off["processes"]["server"]["sys_s"] == 0.0
    assert on["throughput_rps"] < off["throughput_rps"]


def test_a_batch_has_no_sockets():
    r = run("throughput-machine", {"workload.jobs": 8})
    assert r["processes"]["server"]["sys_s"] < 200 * US    # thread starts only
