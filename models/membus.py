"""Shared DRAM bandwidth per socket: loaded latency and bandwidth shares.

Model (MODEL.md "Memory bus and coherence contention")
------------------------------------------------------
Each socket's memory controller sees the DRAM line fills of all its cores.
We keep per socket an exponentially decaying estimate of the fill rate r
(lines/s, time constant ``tau_s`` = 100 us; a segment's fills are posted at
its start). Utilisation rho = r * line_bytes / (mem_bw_gbs * 1e9).

Loaded latency, M/D/1 per channel (deterministic 64-byte bursts, Poisson
arrivals, load spread evenly over ``mem_channels`` channels):

    L = dram_ns + rho * S / (2 (1 - rho)),   S = line_bytes / (mem_bw_gbs / mem_channels) ns

with rho capped at ``rho_cap`` = 0.98. When the demand exceeds the bandwidth
(raw rho > 1) each requester gets the share d_i * B / sum(d) of its demand
(``bandwidth_shares``), i.e. its memory time stretches by raw rho: we return
L * max(1, rho_raw). Because slower segments post fewer fills per second, the
estimate settles near the bandwidth.

Defaults come from the preset: ``dram_ns`` (idle latency, 80 ns, TinyMemBench
figures), ``mem_bw_gbs`` (20 GB/s per socket), ``mem_channels`` (2), 64-byte
lines. The latency a segment sees is computed from the rate *before* its own
fills are added (its own burst does not queue behind itself).
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
    """Per-socket decaying DRAM fill rate and the loaded latency it implies.

    preset   dram_ns, mem_bw_gbs (per socket), mem_channels, line_bytes
    sockets  number of sockets
    tau_s    time constant of the rate estimate (default 100 us)
    rho_cap  utilisation cap for the M/D/1 wait (default 0.98)
    """

    __slots__ = ("dram_ns", "service_ns", "lines_per_s_cap", "tau_s", "inv_tau", "rho_cap",
                 "rate", "t_last", "lines_total")

    def __init__(self, preset, sockets: int | None = None, tau_s: float = 100e-6,
                 rho_cap: float = 0.98):
        n = preset.sockets if sockets is None else sockets
        bw = preset.mem_bw_gbs  # GB/s = bytes/ns
        self.dram_ns = preset.dram_ns
        self.service_ns = preset.line_bytes / (bw / max(1, preset.mem_channels))
        self.lines_per_s_cap = bw * 1e9 / preset.line_bytes
        self.tau_s = tau_s
        self.inv_tau = 1.0 / tau_s
        self.rho_cap = rho_cap
        self.rate = [0.0] * n
        self.t_last = [0.0] * n
        self.lines_total = [0.0] * n

    def rho(self, socket: int, now: float) -> float:
        """Raw utilisation of ``socket``'s memory at ``now`` (can exceed 1)."""
        dt = now - self.t_last[socket]
        r = self.rate[socket]
        if dt > 0.0:
            r *= math.exp(-dt * self.inv_tau)
        return r / self.lines_per_s_cap

    def latency_ns(self, socket: int, now: float) -> float:
        """Loaded latency (ns) a DRAM miss on ``socket`` sees at ``now``."""
        return loaded_latency_ns(self.rho(socket, now), self.dram_ns, self.service_ns,
                                 self.rho_cap)

    def access(self, socket: int, lines: float, now: float) -> float:
        """Post ``lines`` DRAM fills at ``now``; returns the queueing delay per line (ns)
        on top of the idle ``dram_ns`` (computed before these fills are added)."""
        dt = now - self.t_last[socket]
        r = self.rate[socket]
        if dt > 0.0:
            r *= math.exp(-dt * self.inv_tau)
        rho_raw = r / self.lines_per_s_cap
        if rho_raw > 0.0:
            rho = rho_raw if rho_raw < self.rho_cap else self.rho_cap
            lat = self.dram_ns + rho * self.service_ns / (2.0 * (1.0 - rho))
            if rho_raw > 1.0:
                lat *= rho_raw
            extra = lat - self.dram_ns
        else:
            extra = 0.0
        self.rate[socket] = r + lines * self.inv_tau
        self.t_last[socket] = now
        self.lines_total[socket] += lines
        return extra
