"""Shared DRAM bandwidth per socket: loaded latency and bandwidth shares.

Model (docs/design/MODEL.md "Memory bus and coherence contention")
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
from array import array
from collections.abc import Sequence
from heapq import heappop, heappush


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
    * Loaded latency below the cap: M/D/1 per channel (docs/design/MODEL.md) with the
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


def maxmin_shares(demands: Sequence[float], capacity: float) -> list[float]:
    """Max-min fair shares of one resource (water-filling): each requester gets its
    demand if that is below an equal split of what the smaller ones leave, else the
    equal split. For a single constraint this is what SimGrid's LMM solver computes
    (lmm::System::solve, every variable with weight 1)."""
    n = len(demands)
    out = [0.0] * n
    left = capacity
    order = sorted(range(n), key=lambda i: demands[i])
    for pos, i in enumerate(order):
        fair = left / (n - pos)
        d = demands[i]
        if d <= fair:
            out[i] = d
            left -= d
        else:
            for j in order[pos:]:
                out[j] = fair
            break
    return out


class FluidBus:
    """Per-socket DRAM bus as a fluid resource (SimGrid's model for a shared link).

    Every segment with DRAM fills is a *flow* while it runs: ``lines`` fills spread
    evenly over its duration, so it asks for ``lam = lines / d`` lines per second,
    ``d`` its duration without bandwidth limits. The socket's capacity is
    ``B = mem_bw / line_bytes`` lines per second. While sum(lam) <= B every flow runs
    at its own pace; above, flows get max-min fair shares (``maxmin_shares``) and a
    flow whose share is below its demand is *bus-bound*: it lasts ``lines / share``.
    Shares change when a flow starts, ends, or changes pace (its SMT sibling or its
    clock changed); the machine then asks the engine to re-rate the flows whose
    share changed (``on_change(cpu, now)``), and keeps a timer on the earliest end of
    a flow while the bus is saturated, so that the others speed up at that instant.

    Loaded latency below saturation: each fill of a new segment waits the M/D/1 time
    ``rho * S / (2 (1 - rho))`` (models.membus.md1_wait, S the line's service time on
    one channel), ``rho`` the bus utilisation as an exponential average (time constant
    ``tau_s``) of the fluid traffic actually carried, capped at ``rho_cap``. That wait
    is fixed when the segment starts (it is part of its latency-bound pace).
    """

    def __init__(self, preset, env=None, on_change=None, tau_s: float = 100e-6,
                 rho_cap: float = 0.98):
        n = preset.sockets
        bw = preset.mem_bw_gbs
        self.dram_ns = preset.dram_ns
        self.service_ns = preset.line_bytes / (bw / max(1, preset.mem_channels))
        self.s_per_line = preset.line_bytes / (bw * 1e9)
        self.cap = 1.0 / self.s_per_line          # lines per second
        self.inv_mlp = 1.0 / preset.mlp
        self.tau_s = tau_s
        self.rho_cap = rho_cap
        self.env = env
        self.on_change = on_change
        # per socket: cpu -> [lines, lam, share, end]; a heap of (end, seq, cpu) to
        # close them in order (entries whose flow moved or left are skipped)
        self.flows: list[dict] = [{} for _ in range(n)]
        self.heap: list[list] = [[] for _ in range(n)]
        self.seq = 0
        # per socket (arrays: typed C doubles when compiled)
        self.lam_sum = array("d", [0.0] * n)     # sum of demands
        self.util = array("d", [0.0] * n)        # exponential average of carried / capacity
        self.rate = array("d", [0.0] * n)        # carried traffic / capacity now
        self.t_util = array("d", [0.0] * n)
        self.saturated = [False] * n
        self.timer_at = array("d", [math.inf] * n)
        self.lines_total = array("d", [0.0] * n)

    # -- utilisation -----------------------------------------------------------------
    def _decay(self, s: int, t: float) -> None:
        dt = t - self.t_util[s]
        if dt > 0.0:
            r = self.rate[s]
            self.util[s] = r + (self.util[s] - r) * math.exp(-dt / self.tau_s)
            self.t_util[s] = t

    def rho(self, s: int, now: float) -> float:
        self.advance(s, now)
        return min(self.util[s], 1.0)

    def advance(self, s: int, now: float) -> None:
        """Close the flows that ended by ``now``, in order of their ends."""
        h = self.heap[s]
        if h and h[0][0] <= now:
            flows = self.flows[s]
            while h and h[0][0] <= now:
                end, _, cpu = heappop(h)
                f = flows.get(cpu)
                if f is None or f[3] != end:
                    continue                  # stale entry
                self._decay(s, end)
                del flows[cpu]
                self._left(s, f, end, cpu)
        self._decay(s, now)

    def _push(self, s: int, cpu: int, end: float) -> None:
        self.seq += 1
        heappush(self.heap[s], (end, self.seq, cpu))

    def _left(self, s: int, f: list, t: float, cpu: int) -> None:
        """Flow ``f`` of ``cpu`` left at ``t`` (the utilisation is decayed to t)."""
        if not self.flows[s]:
            self.lam_sum[s] = 0.0
            self.rate[s] = 0.0
            self.saturated[s] = False
            return
        self.lam_sum[s] -= f[1]
        if self.saturated[s]:
            self._reshare(s, t, cpu)
        else:
            self.rate[s] -= f[2] * self.s_per_line

    # -- flows -----------------------------------------------------------------------
    def start(self, s: int, cpu: int, lines: float, d: float, now: float,
              overlap: float = -1.0) -> float:
        """A segment of ``cpu`` starts ``lines`` fills over ``d`` s at its own pace.
        Returns its M/D/1 wait (s, overlapped by the MLP, or by ``overlap`` per line
        when given: the core's mean inverse concurrency over its fills, lower for
        streamed lines), computed before it joins the bus; it is registered to end
        at ``now`` + its duration at its share (``set_end`` moves that)."""
        self.advance(s, now)
        rho = self.util[s]
        if rho > self.rho_cap:
            rho = self.rho_cap
        if overlap < 0.0:
            overlap = self.inv_mlp
        wait = lines * md1_wait(rho, self.service_ns) * 1e-9 * overlap
        self.lines_total[s] += lines
        flows = self.flows[s]
        old = flows.pop(cpu, None)
        if old is not None:                   # its previous segment left early
            self._left(s, old, now, cpu)
        dd = d + wait
        lam = lines / dd if dd > 0.0 else self.cap
        f = [lines, lam, lam, now + dd]
        flows[cpu] = f
        self.lam_sum[s] += lam
        if self.saturated[s] or self.lam_sum[s] > self.cap:
            self._reshare(s, now, cpu)
            if f[2] < f[1]:                   # bus-bound from the start
                f[3] = now + lines / f[2]
        else:
            self.rate[s] += lam * self.s_per_line
        self._push(s, cpu, f[3])
        if self.saturated[s]:
            self._arm(s)
        return wait

    def leave(self, s: int, cpu: int, left: float, now: float) -> None:
        """The segment of ``cpu`` leaves its CPU at ``now`` (preempted) with ``left`` of
        its fills not made: its flow ends now and they no longer count for this socket
        (``join`` puts them where it resumes)."""
        self.close(s, cpu, now)
        self.lines_total[s] -= left

    def join(self, s: int, cpu: int, lines: float, left: float, now: float) -> None:
        """A segment that left another CPU (``leave``) resumes on ``cpu`` at ``now`` with
        ``left`` of its ``lines`` fills not made. Its flow starts with no demand: the
        machine's ``cost_now`` sets its pace (``pace``, as for a re-rating: ``lines``
        over the whole segment's duration, so ``duration`` stays the whole segment's)
        and the engine its end (``set_end``). No M/D/1 wait is drawn again."""
        self.advance(s, now)
        self.lines_total[s] += left
        flows = self.flows[s]
        old = flows.pop(cpu, None)
        if old is not None:                   # the CPU's previous segment left early
            self._left(s, old, now, cpu)
        flows[cpu] = [lines, 0.0, 0.0, math.inf]

    def pace(self, s: int, cpu: int, d: float, now: float) -> None:
        """The flow of ``cpu`` now goes at a new own pace (``d``: its whole duration
        without bandwidth limits)."""
        if cpu not in self.flows[s]:
            return
        self.advance(s, now)
        f = self.flows[s].get(cpu)
        if f is None:
            return
        lam = f[0] / d if d > 0.0 else self.cap
        self.lam_sum[s] += lam - f[1]
        if self.saturated[s] or self.lam_sum[s] > self.cap:
            f[1] = lam
            self._reshare(s, now, cpu)
        else:
            self.rate[s] += (lam - f[2]) * self.s_per_line
            f[1] = f[2] = lam

    def duration(self, s: int, cpu: int, d: float) -> float:
        """Whole duration of the flow of ``cpu`` at its current share (``d`` without
        bandwidth limits)."""
        f = self.flows[s].get(cpu)
        if f is None or f[2] >= f[1]:
            return d
        return f[0] / f[2]

    def set_end(self, s: int, cpu: int, end: float) -> None:
        f = self.flows[s].get(cpu)
        if f is not None and f[3] != end:
            f[3] = end
            self._push(s, cpu, end)
            if self.saturated[s]:
                self._arm(s)

    def close(self, s: int, cpu: int, now: float) -> None:
        """The segment of ``cpu`` ended (or left the CPU) before its registered end."""
        if cpu in self.flows[s]:
            self.advance(s, now)
            f = self.flows[s].pop(cpu, None)
            if f is not None:
                self._left(s, f, now, cpu)

    def _reshare(self, s: int, now: float, origin: int) -> None:
        """Max-min shares from scratch; re-rate the flows whose share changed while
        the bus is or was saturated."""
        flows = self.flows[s]
        was = self.saturated[s]
        lams = [f[1] for f in flows.values()]
        total = sum(lams)
        self.lam_sum[s] = total
        sat = total > self.cap
        self.saturated[s] = sat
        shares = maxmin_shares(lams, self.cap) if sat else lams
        changed = []
        for (cpu, f), x in zip(flows.items(), shares, strict=True):
            if f[2] != x:
                bound_before = 0.0 < f[2] < f[1]
                f[2] = x
                if cpu != origin and (was or sat) and (bound_before or x < f[1]):
                    changed.append(cpu)
        self._decay(s, now)
        self.rate[s] = sum(shares) * self.s_per_line
        if sat:
            self._arm(s)
        if changed and self.on_change is not None:
            for cpu in changed:
                self.on_change(cpu, now)

    def _arm(self, s: int) -> None:
        """While saturated, an event at the earliest end of a flow."""
        flows = self.flows[s]
        if not flows or self.env is None:
            return
        t = min(f[3] for f in flows.values())
        if t < self.timer_at[s]:
            self.timer_at[s] = t
            now = self.env.now
            self.env.timeout(t - now if t > now else 0.0).callbacks.append(
                lambda _e, s=s, t=t: self._timer(s, t))

    def _timer(self, s: int, t: float) -> None:
        if self.timer_at[s] == t:
            self.timer_at[s] = math.inf
        self.advance(s, self.env.now)
        if self.saturated[s]:
            self._arm(s)
