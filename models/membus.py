"""Shared DRAM bandwidth per socket: loaded latency and bandwidth shares.

Model (MODEL.md "Memory bus and coherence contention")
------------------------------------------------------
Each socket's memory controller sees the DRAM line fills of all its cores.
Loaded latency below the bandwidth, M/D/1 per channel (deterministic 64-byte
bursts, Poisson arrivals, load spread evenly over ``mem_channels`` channels):

    L = dram_ns + rho * S / (2 (1 - rho)),   S = line_bytes / (mem_bw_gbs / mem_channels) ns

with rho capped at ``rho_cap`` = 0.98; at the bandwidth, requesters share it
(``bandwidth_shares``: d_i * min(1, B / sum d)), which ``MemoryBus`` enforces
with a reservation of bus time (see its docstring). A first version estimated
rho from the fills *posted* and multiplied the latency by rho when above 1;
a burst of long segments starting together then posted a "rate" dozens of
times the bandwidth and slowed memory far below what the bus can deliver.

Defaults come from the preset: ``dram_ns`` (idle latency, 80 ns, TinyMemBench
figures), ``mem_bw_gbs`` (20 GB/s per socket), ``mem_channels`` (2), 64-byte
lines. The utilisation a segment sees is computed *before* its own fills are added
(its own burst does not queue behind itself).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def bandwidth_shares(demands: Sequence[float], capacity: float) -> list[float]:
    """Bandwidth each requester gets: d_i * min(1, B / sum d) (max-min fair when overloaded)."""
    total = float(sum(demands))
    if total <= 0.0:
        return [0.0 for _ in demands]
    f = min(1.0, capacity / total)
    return [d * f for d in demands]


def md1_wait(rho: float, service: float) -> float:
    """Mean M/D/1 queueing wait rho * S / (2 (1 - rho)) (rho < 1)."""
    if rho <= 0.0:
        return 0.0
    return rho * service / (2.0 * (1.0 - rho))


def loaded_latency_ns(rho_raw: float, dram_ns: float, service_ns: float,
                      rho_cap: float = 0.98) -> float:
    """Loaded DRAM latency for a raw utilisation (may exceed 1: bandwidth-limited)."""
    rho = rho_raw if rho_raw < rho_cap else rho_cap
    lat = dram_ns + md1_wait(rho, service_ns)
    return lat * rho_raw if rho_raw > 1.0 else lat


class MemoryBus:
    """Per-socket DRAM bus: the bandwidth cap, and the loaded latency below it.

    Two mechanisms, both O(1) per segment:

    * Bandwidth. The bus is a FIFO reservation of bus time: a segment fetching n
      lines occupies it for n * line_bytes / bandwidth from max(now, free_at).
      If that reservation ends after the segment's own latency-bound memory
      time (n * idle latency / MLP), the difference is queueing delay. However
      many cores stream at once, the socket never moves more than its bandwidth;
      a lone thread (latency-bound) never waits.
    * Loaded latency below the cap: M/D/1 per channel (MODEL.md) with the
      utilisation rho of the bus time granted over the last ``tau_s`` (a decaying
      sum of reservations), capped at ``rho_cap``; each line waits
      rho * S / (2 (1 - rho)), overlapped by the MLP like the latency itself.

    The segment pays the larger of the two (they are the same queue seen at two
    time scales). Fills are posted when a segment starts, so within a burst of
    simultaneous segments the first to start is served first (FIFO), which
    keeps the total right and the order deterministic.

    preset   dram_ns, mem_bw_gbs (per socket), mem_channels, line_bytes, mlp
    tau_s    window of the utilisation estimate (default 100 us)
    rho_cap  utilisation cap for the M/D/1 wait (default 0.98)
    """

    __slots__ = ("dram_ns", "service_ns", "s_per_line", "inv_mlp", "tau_s", "inv_tau",
                 "rho_cap", "util", "t_last", "free_at", "lines_total")

    def __init__(self, preset, sockets: int | None = None, tau_s: float = 100e-6,
                 rho_cap: float = 0.98):
        n = preset.sockets if sockets is None else sockets
        bw = preset.mem_bw_gbs  # GB/s = bytes/ns
        self.dram_ns = preset.dram_ns
        self.service_ns = preset.line_bytes / (bw / max(1, preset.mem_channels))
        self.s_per_line = preset.line_bytes / (bw * 1e9)
        self.inv_mlp = 1.0 / preset.mlp
        self.tau_s = tau_s
        self.inv_tau = 1.0 / tau_s
        self.rho_cap = rho_cap
        self.util = [0.0] * n        # decaying sum of reserved bus time / tau
        self.t_last = [0.0] * n
        self.free_at = [0.0] * n
        self.lines_total = [0.0] * n

    def rho(self, socket: int, now: float) -> float:
        """Utilisation of ``socket``'s bus over the recent past (1 while backlogged)."""
        if self.free_at[socket] > now:
            return 1.0
        dt = now - self.t_last[socket]
        u = self.util[socket]
        if dt > 0.0:
            u *= math.exp(-dt * self.inv_tau)
        return min(1.0, u)

    def latency_ns(self, socket: int, now: float) -> float:
        """Loaded latency (ns) a DRAM miss on ``socket`` sees at ``now``."""
        rho = min(self.rho(socket, now), self.rho_cap)
        return self.dram_ns + md1_wait(rho, self.service_ns)

    def access(self, socket: int, lines: float, now: float) -> float:
        """Post ``lines`` DRAM fills at ``now``; returns the queueing delay (seconds,
        already overlapped by the MLP) that they add to the segment."""
        rho = self.rho(socket, now)
        busy = lines * self.s_per_line
        start = self.free_at[socket]
        if start < now:
            start = now
        self.free_at[socket] = start + busy
        mem_s = lines * self.dram_ns * 1e-9 * self.inv_mlp
        bw_wait = start + busy - now - mem_s
        if rho > self.rho_cap:
            rho = self.rho_cap
        md1 = lines * md1_wait(rho, self.service_ns) * 1e-9 * self.inv_mlp
        dt = now - self.t_last[socket]
        u = self.util[socket]
        if dt > 0.0:
            u *= math.exp(-dt * self.inv_tau)
        self.util[socket] = u + busy * self.inv_tau
        self.t_last[socket] = now
        self.lines_total[socket] += lines
        return bw_wait if bw_wait > md1 else md1
