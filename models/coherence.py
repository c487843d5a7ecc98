"""Coherence: who owns written lines, and contended read-modify-writes.

Topology and transfer latencies
-------------------------------
A line moves between cores at the latency of their relation (preset fields,
ns; defaults from docs/design/MODEL.md's table, core-to-core-latency benchmark README):
SMT siblings ``c2c_smt_ns`` (7), same LLC domain ``c2c_llc_ns`` (40), other
LLC domain on the socket (another CCX) ``c2c_cross_llc_ns`` (100), other
socket ``c2c_socket_ns`` (130). Siblings share L1/L2, so for ordinary
footprints a sibling's write is a hit; ``c2c_smt_ns`` is charged only to
contended read-modify-writes that ping-pong between siblings.

Line ownership (``Directory``)
------------------------------
A footprint with ``writes=True`` makes the writing *physical core* the owner
of those lines and bumps the owner key's version (MESI "Modified"). Cache
entries (models.cache.CacheState) remember the version they saw, so copies in
other cores' private caches (and in other LLC domains) become invalid. A read
by another core while the lines are dirty is served by a core-to-core
transfer from the writer's caches - for the lines still warm there - and
downgrades them to shared (clean): later readers get them from the LLC or
DRAM as usual. The directory is a bounded table (default 65536 owner keys,
the least recently written half dropped when full); a forgotten key reads as
never written.

Contended lines (``ContendedLines``)
------------------------------------
Read-modify-writes on one line (a lock word, a counter, a queue head)
serialise: the line is a single server. Per line we keep its last owner CPU
and exponentially decaying estimates (time constant ``tau_s`` = 100 us) of
its op rate and of its utilisation (line-busy seconds per second), in total
and per CPU, so what the *other* CPUs contribute is total minus one's own
(O(1) per segment). A segment doing n ops on the line at CPU c:

* the first op costs one transfer unless c is the line's last owner;
* each further op costs one transfer with the probability p that another
  CPU took the line in between: p = 1 - exp(-lambda_o * gap), lambda_o the
  others' op rate and gap the time between two of c's ops: its share of the
  segment's other work plus the op itself (a hit, or a transfer and its wait,
  so p solves a small fixed point: dense ops on several cores all transfer);
* a transfer costs t (topology latency to the last other CPU) plus the M/D/1
  wait rho * t / (2 (1 - rho)), rho the others' utilisation of the line,
  capped at ``rho_cap`` = 0.98;
* the other ops are L1 hits (``hit_s``: the L1 latency).

Handover grows with the waiters
-------------------------------
A contended line's handover is not a fixed transfer: every other core waiting
on the line holds or re-reads a copy (a spinning lock word, a CAS loop's read,
a queue head polled), so each ownership change also invalidates and serves
those waiters, serialised at the line, and a CAS that lost the race retries.
Measured, the cost of one operation on a single contended line grows with the
number of contending cores and jumps across sockets (David, Guerraoui and
Trigonakis, "Everything you always wanted to know about synchronization but
were afraid to ask", SOSP 2013, section 5: atomic operations on one line,
latency against threads, on Opteron, Xeon, Niagara and Tilera), and a ticket
lock's hand-off time grows linearly with the number of waiters until the lock
collapses (Boyd-Wickizer, Kaashoek, Morris and Zeldovich, "Non-scalable locks
are dangerous", Linux Symposium 2012; Anderson, IEEE TPDS 1(1), 1990: O(k)
coherence traffic per release of a test-and-test-and-set lock). So a transfer
with w other waiters costs

    t_w = t * (1 + beta * w),   w = max(0, N_o - 1),

t the topology latency above, beta the preset's ``contended_waiter_cost``
(default 1: each waiter's copy is one more line transfer per handover, the
test-and-test-and-set and ticket-lock case; a pure fetch-and-add counter has
less), and N_o the number of *other* CPUs whose ops on the line are in
progress at the handover: each CPU's ops of a segment span from its start
over (n - 1) x its spacing plus its stall (the time it spends in the op loop,
waiting included), and the line remembers when each CPU's span ends. The
line's busy time and the M/D/1 wait use t_w. With one other contender (two
CPUs) w = 0 and the model is as above; with k contenders the line serves about
1 / (t (1 + beta (k - 2))) ops per second: the contended server's throughput
falls as cores are added (docs/design/MODEL.md phenomenon 3).

(Before, N_o was the inverse Simpson index of the other CPUs' decaying shares
of the line's busy time. A segment posts its ops at its start, so a line used
by long contended segments looked bursty to that estimate: on ``contended``
with four server CPUs all inside their op loops it counted 1.3-2 contenders,
not 3, and the handover barely grew from 4 CPUs to 8; docs/model-caches.md.)

So one CPU alone pays only hits, while dense ops from several CPUs pay a
transfer and a queueing wait each, and the line serves at most about 1 / t ops
per second, less the more cores wait on it (docs/design/MODEL.md "Memory bus and coherence
contention"; phenomenon 3: a contended server runs faster on fewer cores).
"""

from __future__ import annotations

import math


class Topology:
    """CPU numbering (models.presets.cpu_topology: Linux's, SMT siblings cores apart)
    and pairwise line-transfer latency; LLC domains split a socket's cores evenly.
    """

    def __init__(self, preset):
        from warmcore.models.presets import cpu_topology

        p = preset
        tpc = max(1, p.threads_per_core)
        cps = max(1, p.cores_per_socket)
        doms = max(1, p.llc_domains_per_socket)
        self.n_cpus = p.sockets * cps * tpc
        self.n_cores = p.sockets * cps
        self.cpu_core, self.cpu_llc, self.cpu_socket, self.cpu_thread = cpu_topology(p)
        self.n_llc = p.sockets * doms
        self.core_llc = [0] * self.n_cores
        self.core_socket = [0] * self.n_cores
        for cpu in range(self.n_cpus):
            self.core_llc[self.cpu_core[cpu]] = self.cpu_llc[cpu]
            self.core_socket[self.cpu_core[cpu]] = self.cpu_socket[cpu]
        self.ns_smt = p.c2c_smt_ns
        self.ns_llc = p.c2c_llc_ns
        self.ns_cross = p.c2c_cross_llc_ns
        self.ns_socket = p.c2c_socket_ns

    def core_transfer_ns(self, core_a: int, core_b: int) -> float:
        """Latency of moving a line between the private caches of two physical cores."""
        if core_a == core_b:
            return self.ns_smt
        if self.core_llc[core_a] == self.core_llc[core_b]:
            return self.ns_llc
        if self.core_socket[core_a] == self.core_socket[core_b]:
            return self.ns_cross
        return self.ns_socket

    def transfer_ns(self, cpu_a: int, cpu_b: int) -> float:
        """Latency of moving a line between two hardware threads (0 for the same one)."""
        if cpu_a == cpu_b:
            return 0.0
        return self.core_transfer_ns(self.cpu_core[cpu_a], self.cpu_core[cpu_b])


class Directory:
    """Owner key -> [writer core, version, dirty]; a bounded table.

    ``write(key, core)`` returns the new version; ``entries.get(key)`` the list or None.
    Versions are global and increasing, so a cache entry compares one int. When
    the table exceeds ``max_entries`` the least recently written half is
    dropped (amortised O(1) per write); a dropped key reads as never written.
    """

    __slots__ = ("entries", "max_entries", "_version")

    def __init__(self, max_entries: int = 65536):
        self.entries: dict = {}
        self.max_entries = max(2, int(max_entries))
        self._version = 0

    def entry(self, key):
        return self.entries.get(key)

    def write(self, key, core: int) -> int:
        self._version += 1
        v = self._version
        e = self.entries.get(key)
        if e is None:
            self.entries[key] = [core, v, True]
            if len(self.entries) > self.max_entries:
                self._trim()
        else:
            e[0] = core
            e[1] = v
            e[2] = True
        return v

    def _trim(self) -> None:
        # In place: a caller may hold ``entries`` (models.cache.Hierarchy.touch does).
        keep = sorted(self.entries.items(), key=lambda kv: kv[1][1])
        self.entries.clear()
        self.entries.update(keep[len(keep) - self.max_entries // 2:])

    def __len__(self) -> int:
        return len(self.entries)


class ContendedLines:
    """Per contended line: last owner, last other CPU, decaying op rate and utilisation,
    and when each CPU's ops in progress end (the waiters at a handover).

    topology  a Topology (transfer latencies)
    hit_s     cost of an op on a line the CPU already owns (L1 hit), seconds
    tau_s     time constant of the rate estimates (default 100 us)
    rho_cap   utilisation cap for the M/D/1 wait (default 0.98)
    max_lines bound on remembered lines (least recently used half dropped when full)
    waiter_cost  beta: extra transfers per other waiting core at a handover (default 1)
    """

    __slots__ = ("topo", "hit_s", "tau_s", "inv_tau", "rho_cap", "lines", "max_lines",
                 "waiter_cost", "cross_llc")

    def __init__(self, topology: Topology, hit_s: float, tau_s: float = 100e-6,
                 rho_cap: float = 0.98, max_lines: int = 65536, waiter_cost: float = 1.0):
        self.topo = topology
        self.waiter_cost = waiter_cost
        self.hit_s = hit_s
        self.tau_s = tau_s
        self.inv_tau = 1.0 / tau_s
        self.rho_cap = rho_cap
        self.lines: dict = {}
        self.max_lines = max(2, int(max_lines))
        # did the last ``ops`` call's transfers come from outside the CPU's LLC domain
        # (perf counts those in LLC-misses; a transfer within it is an LLC hit)
        self.cross_llc = False

    def _state(self, line, now):
        st = self.lines.get(line)
        if st is None:
            # [owner cpu, last other cpu, t, op rate, utilisation,
            #  {cpu: [t, op rate, util]}, {cpu: end of its ops in progress}]
            st = [-1, -1, now, 0.0, 0.0, {}, {}]
            self.lines[line] = st
            if len(self.lines) > self.max_lines:
                keep = sorted(self.lines.items(), key=lambda kv: kv[1][2])
                self.lines = dict(keep[len(keep) - self.max_lines // 2:])
        return st

    def others(self, line, cpu: int, now: float) -> tuple[float, float]:
        """(op rate /s, utilisation) of ``line`` due to CPUs other than ``cpu`` at ``now``."""
        st = self.lines.get(line)
        if st is None:
            return 0.0, 0.0
        inv_tau = self.inv_tau
        dt = now - st[2]
        f = math.exp(-dt * inv_tau) if dt > 0.0 else 1.0
        lam = st[3] * f
        rho = st[4] * f
        mine = st[5].get(cpu)
        if mine is not None:
            dt = now - mine[0]
            f = math.exp(-dt * inv_tau) if dt > 0.0 else 1.0
            lam -= mine[1] * f
            rho -= mine[2] * f
        return (lam if lam > 0.0 else 0.0), (rho if rho > 0.0 else 0.0)

    def ops(self, line, cpu: int, n: float, now: float,
            spacing_s: float) -> tuple[float, float, float]:
        """Run ``n`` ops of ``cpu`` on ``line`` from ``now``, spaced ``spacing_s`` apart
        by the segment's other work. Returns (stall_s, transfers, transfer latency ns)."""
        if n <= 0:
            return 0.0, 0.0, 0.0
        st = self.lines.get(line)
        if st is None:
            st = self._state(line, now)
        inv_tau = self.inv_tau
        # decay the line's and our own estimates to now (one exp each)
        dt = now - st[2]
        f = math.exp(-dt * inv_tau) if dt > 0.0 else 1.0
        lam_tot = st[3] * f
        u_tot = st[4] * f
        mine = st[5].get(cpu)
        if mine is None:
            lam_me = u_me = 0.0
        else:
            dt = now - mine[0]
            fm = math.exp(-dt * inv_tau) if dt > 0.0 else 1.0
            lam_me = mine[1] * fm
            u_me = mine[2] * fm
        lam_o = lam_tot - lam_me
        rho = u_tot - u_me
        if rho < 0.0:
            rho = 0.0
        elif rho > self.rho_cap:
            rho = self.rho_cap
        owner = st[0]
        if owner != cpu and owner >= 0:
            st[1] = owner
        other = st[1]
        topo = self.topo
        t_ns = topo.transfer_ns(cpu, other) if other >= 0 and other != cpu else topo.ns_llc
        self.cross_llc = t_ns > topo.ns_llc
        # the other waiters at a handover: the other CPUs whose ops on the line are in
        # progress, less the one handing over
        ends = st[6]
        waiters = -1
        for c in ends:
            if c != cpu and ends[c] > now:
                waiters += 1
        if waiters > 0:
            t_ns *= 1.0 + self.waiter_cost * waiters
        t = t_ns * 1e-9
        hit = self.hit_s
        wait = rho * t / (2.0 * (1.0 - rho))
        transfers = 0.0 if owner == cpu or owner < 0 else 1.0
        if n > 1 and lam_o > 0.0:
            # P(another CPU takes the line between two of our ops) = 1 - exp(-lam_o * gap);
            # the gap is our other work plus the op itself, which is slower when it
            # transfers: iterate p = 1 - exp(-lam_o (spacing + hit + p (t + wait - hit)))
            # from p = 1 (decreasing to the largest fixed point)
            c = lam_o * (spacing_s + hit)
            g = lam_o * (t + wait - hit)
            p = 1.0
            for _ in range(6):
                q = 1.0 - math.exp(-c - g * p)
                if p - q < 1e-6:
                    p = q
                    break
                p = q
            transfers += (n - 1) * p
        stall = transfers * (t + wait) + (n - transfers) * hit
        # post our ops and the line time our transfers used
        posted = n * inv_tau
        busy = transfers * t * inv_tau
        st[0] = cpu
        st[2] = now
        st[3] = lam_tot + posted
        st[4] = u_tot + busy
        ends[cpu] = now + (n - 1.0) * spacing_s + stall     # our op loop, waits included
        if mine is None:
            st[5][cpu] = [now, posted, busy]
        else:
            mine[0] = now
            mine[1] = lam_me + posted
            mine[2] = u_me + busy
        return stall, transfers, t_ns
