"""Kernel work of the system calls a server makes per request, charged as system time.

One formula for every call: the CPU time (seconds) a thread spends in the kernel
for one call is

    cost(name, n, kib) = scale * (syscall_us + base_us[name] + n * per_n_us[name]
                                  + kib * per_kib_us[name]) * 1e-6

with the figures (``PresetExtra`` fields, microseconds on the reference core)

    call         base_us               per_n_us (n = ...)        per_kib_us
    null         0                     -                         -
    sched_yield  sched_yield_us        -                         -
    futex_wait   futex_wait_us         -                         -
    futex_wake   see below             -                         -
    read/recv    tcp_recv_us           -                         copy_us_per_kib
    write/send   tcp_send_us           -                         copy_us_per_kib
                 + loopback_rx_us (the peer's receive softirq, on loopback)
    epoll_wait   epoll_wait_us         epoll_event_us (ready events returned)
    epoll_ctl    epoll_ctl_us          -
    poll         0                     poll_fd_us (descriptors scanned)

* ``syscall_us`` is entry and exit (the mode switch, register save, the
  syscall table dispatch): lmbench ``lat_syscall null``.
* ``read``/``write`` on a TCP socket: ``tcp_recvmsg`` (socket lock, dequeue the
  skb, the ACK decision) and ``tcp_sendmsg`` down to the device (segment
  building, ``ip_queue_xmit``, ``dev_queue_xmit``), each plus the copy from or
  to user memory per KiB.
* On loopback the **receive** side of a segment runs on the **sending CPU**,
  inside the sender's ``write``: ``loopback_xmit`` (drivers/net/loopback.c,
  "called with bh's disabled") hands the skb to ``__netif_rx``, which queues it
  on the *current* CPU's backlog (``enqueue_to_backlog(skb,
  smp_processor_id())`` in net/core/dev.c, unless RPS is configured) and
  raises NET_RX_SOFTIRQ there; ``__dev_queue_xmit`` then leaves its
  ``rcu_read_lock_bh`` section, and ``local_bh_enable`` runs the pending softirq
  at once on the same CPU (``net_rx_action`` -> ``process_backlog`` ->
  ``ip_rcv`` -> ``tcp_v4_rcv``: queue the data on the peer socket and wake its
  reader, the epoll callback included). So a loopback ``write`` costs the
  sender its transmit *and* the peer's receive processing (``loopback_rx_us``),
  and the reader's ``read`` only dequeues and copies. A request that came from
  a load generator over loopback therefore cost the *client's* CPU its receive
  processing, not the server's; the server pays it for each response it sends.
* ``epoll_wait`` pays its entry, its own work (``ep_poll``: the ready list
  spliced under the instance's lock) and, per ready event returned,
  ``ep_send_events``' re-poll of the file (``tcp_poll``) and the copy of the
  event out: the more events one call returns, the less each costs, which is
  what makes an event loop cheaper per request as its batches grow with load.
* ``poll`` calls every descriptor's ``->poll`` each time (``do_poll``), ready or
  not: its cost is linear in the descriptors it is given (the O(n) that epoll
  was made to avoid: Banga, Mogul, Druschel, USENIX 1999; Gammo et al., OLS
  2004).
* ``futex_wait`` hashes the address and queues the waiter (``futex_wait_setup``);
  the switch away is the context switch the scheduler charges
  (``ctx_switch_us``). ``futex_wake`` is the preset's ``futex_wake_us``, the cost
  the kernel already charges a waker for every wake-up (models.hardware); it is
  listed here so that strategies may name it.
* ``sched_yield`` runs ``do_sched_yield`` and ``schedule()`` (the run-queue lock
  and a pick of the next task, the same one when nobody else waits).

``scale`` = reference instructions per second / the preset's
(``models.presets.nominal_ips``): the kernel's paths are a fixed number of
instructions, run faster on a faster core, the convention the presets already
use for ``ctx_switch_us``. The reference is the i7-3770 (Ivy Bridge at 3.4 GHz,
base_ipc 1.3), the class of machine the figures were measured on. The result is
the work at the preset's nominal rate (a lone thread at the top P-state); when
it runs, the engine scales it by the CPU's clock and SMT share then
(``HardwareMachine.kernel_slowdown``: kernel paths are instructions, slower at a
lower clock or beside a busy sibling). Kernel work counts no user instructions:
it adds time and cycles at the CPU's clock (the engine's ``charge_kernel``
path), so more system calls per request lower the IPC that perf reports, as
FlexSC (Soares and Stumm, OSDI 2010) measured.

All the costs are zero when the machine's ``switch_costs`` effect is off (the
queueing-theory case).
"""

from __future__ import annotations

from warmcore.models.presets import nominal_ips
from warmcore.simcore.machine import SYSCALLS

# Instructions per second of the reference core: i7-3770, base_ipc 1.3 x 3.4 GHz.
REFERENCE_IPS = 1.3 * 3.4e9


def call_table(extra) -> dict:
    """{call: (base_us, per_n_us, per_kib_us)} of the formula above, entry and exit
    excluded, from a preset's ``extra`` (PresetExtra); futex_wake is not in it (the
    preset's futex_wake_us is the whole call). A socket off loopback (its receive
    softirq on the NIC's CPU) is ``loopback_rx_us`` = 0."""
    e = extra
    send = e.tcp_send_us + e.loopback_rx_us
    return {
        "null": (0.0, 0.0, 0.0),
        "sched_yield": (e.sched_yield_us, 0.0, 0.0),
        "futex_wait": (e.futex_wait_us, 0.0, 0.0),
        "read": (e.tcp_recv_us, 0.0, e.copy_us_per_kib),
        "recv": (e.tcp_recv_us, 0.0, e.copy_us_per_kib),
        "write": (send, 0.0, e.copy_us_per_kib),
        "send": (send, 0.0, e.copy_us_per_kib),
        "epoll_wait": (e.epoll_wait_us, e.epoll_event_us, 0.0),
        "epoll_ctl": (e.epoll_ctl_us, 0.0, 0.0),
        "poll": (0.0, e.poll_fd_us, 0.0),
    }


CALLS = SYSCALLS    # the names strategies may use (simcore.machine)


class SyscallCosts:
    """The kernel work (s) of one system call on one preset (the formula in the
    module docstring); every call free when ``enabled`` is False."""

    __slots__ = ("table",)

    def __init__(self, preset, enabled: bool = True):
        scale = REFERENCE_IPS / nominal_ips(preset) if enabled else 0.0
        us = 1e-6 * scale
        entry = preset.extra.syscall_us
        self.table = {
            name: ((entry + base) * us, per_n * us, per_kib * us)
            for name, (base, per_n, per_kib)
            in call_table(preset.extra).items()}
        # futex_wake: the preset's own figure, entry included (not scaled: it is
        # already the preset's; models.hardware charges the same to every waker)
        self.table["futex_wake"] = (preset.futex_wake_us * 1e-6 if enabled else 0.0,
                                    0.0, 0.0)

    def cost(self, name: str, n: float = 0.0, kib: float = 0.0) -> float:
        """Seconds of kernel work of one call: ``n`` ready events (epoll_wait) or
        descriptors scanned (poll), ``kib`` KiB copied (read, write)."""
        try:
            base, per_n, per_kib = self.table[name]
        except KeyError:
            raise ValueError(f"unknown system call {name!r}; known: "
                             f"{', '.join(sorted(self.table))}") from None
        return base + n * per_n + kib * per_kib
