"""Kernel work of the system calls a server makes, charged as system time.

What a server's threads ask of the kernel per request, each call's CPU cost in
seconds, from the preset (``PresetExtra`` fields, defaults and sources there and
in docs/model.md "Kernel work per request"):

    null, sched_yield   syscall_us                          entry and exit only
    futex_wait          syscall_us + futex_wait_us          queue the waiter (the
                                                            switch itself is
                                                            ctx_switch_us)
    recv (kib)          syscall_us + tcp_recv_us + kib * copy_us_per_kib
    send (kib)          syscall_us + tcp_send_us + kib * copy_us_per_kib
    epoll_wait (n)      syscall_us + epoll_wait_us + n * epoll_event_us
    epoll_ctl           syscall_us + epoll_ctl_us           one interest change
    poll (n fds)        syscall_us + n * poll_fd_us

``send`` on a loopback TCP socket is the whole stack's work for the segment:
tcp_sendmsg, the loopback device's transmit and the receiver's protocol
processing (net_rx_action -> tcp_v4_rcv, queueing the data and waking the
reader). On loopback that softirq runs on the *sending* CPU, in the sender's
context (loopback_xmit -> netif_rx raises NET_RX on the local CPU, and
local_bh_enable at the end of the send runs it: net/core/dev.c, drivers/net/
loopback.c), so it is charged to the sender. ``recv`` copies the queued data
out (tcp_recvmsg). ``epoll_wait`` pays its own entry, the ready list's scan
and one copy-out per ready event (ep_send_events): the more events one call
returns, the less each costs, which is what lets an event loop get cheaper per
request as load rises. ``poll`` scans every descriptor it is given (do_poll
calls each file's ->poll), so its cost grows with the descriptors, ready or not.
"""

from __future__ import annotations

FIELDS = ("syscall_us", "tcp_send_us", "tcp_recv_us", "copy_us_per_kib", "epoll_wait_us",
          "epoll_event_us", "epoll_ctl_us", "poll_fd_us", "futex_wait_us")
CALLS = ("null", "sched_yield", "futex_wait", "recv", "send", "epoll_wait", "epoll_ctl",
         "poll")


class SyscallCosts:
    """The kernel work (s) of a call on one preset; all zero when OS costs are off."""

    __slots__ = ("copy_s", "epoll_ctl_s", "epoll_event_s", "epoll_s", "futex_wait_s",
                 "poll_fd_s", "recv_s", "send_s", "sys_s")

    def __init__(self, extra=None):
        """``extra``: the preset's PresetExtra (None: every call free)."""
        us = 1e-6
        extra_v = {k: getattr(extra, k) if extra is not None else 0.0 for k in FIELDS}
        self.sys_s = extra_v["syscall_us"] * us
        self.send_s = self.sys_s + extra_v["tcp_send_us"] * us
        self.recv_s = self.sys_s + extra_v["tcp_recv_us"] * us
        self.copy_s = extra_v["copy_us_per_kib"] * us
        self.epoll_s = self.sys_s + extra_v["epoll_wait_us"] * us
        self.epoll_event_s = extra_v["epoll_event_us"] * us
        self.epoll_ctl_s = self.sys_s + extra_v["epoll_ctl_us"] * us
        self.poll_fd_s = extra_v["poll_fd_us"] * us
        self.futex_wait_s = self.sys_s + extra_v["futex_wait_us"] * us

    def cost(self, name: str, n: float = 1, kib: float = 0.0) -> float:
        """Seconds of kernel work for one call: ``n`` ready events (epoll_wait) or
        descriptors scanned (poll); ``kib`` copied (recv, send)."""
        if name == "recv":
            return self.recv_s + kib * self.copy_s
        if name == "send":
            return self.send_s + kib * self.copy_s
        if name == "epoll_wait":
            return self.epoll_s + n * self.epoll_event_s
        if name == "epoll_ctl":
            return self.epoll_ctl_s
        if name == "poll":
            return self.sys_s + n * self.poll_fd_s
        if name == "futex_wait":
            return self.futex_wait_s
        if name in ("null", "sched_yield"):
            return self.sys_s
        raise ValueError(f"unknown system call {name!r} (known: {', '.join(CALLS)})")
