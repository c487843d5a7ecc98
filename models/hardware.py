"""HardwareMachine: the MachineModel of simcore/machine.py with real-CPU physics.

Effects (each can be switched off; all off on the ``ideal`` preset gives
exactly IdealMachine's numbers):

caches        per-core L1d, L1i and L2 (shared by SMT siblings), one LLC per LLC
              domain (models.cache: LRU warmth with random set placement); a
              preset with extra["private_l2"] = False (chips whose L2 is the
              LLC) has no private L2: L1 misses go to the LLC
coherence     written lines belong to the writing core; another core's read of
              lines still warm there is a core-to-core transfer (models.coherence)
contention    contended read-modify-writes serialise on their line (models.coherence)
membus        DRAM latency loaded by the socket's fill rate (models.membus)
smt           busy siblings share the core's throughput (models.smt): by the
              preset's curve ("simultaneous"), or on a fine-grained core (the
              UltraSPARC T1) by filling each other's memory stalls only
dvfs          per-CPU clock from a cpufreq governor (models.dvfs); off: max clock fixed
switch_costs  context switch, futex wake, wake-up latency and system calls
              (models.syscalls) from the preset; off: 0
energy        joules from warmcore.models.energy; off: 0

Cost of one segment on ``cpu`` at ``now`` (``execute``), fields of simcore.work.COST_FIELDS:

* compute cycles = instructions / base_ipc / s(k), s from the SMT curve with k
  the busy hardware threads of the core (this one included); compute_s =
  cycles / f, f the CPU's current clock. On a fine-grained core (smt_policy
  "fine-grained") compute_s is the lone thread's plus its wait for the pipe,
  (max(1, U / C) - 1) (compute + memory stalls), U the busy threads' pipe shares
  (models.smt).
* per footprint (kind THREAD with key None is the running thread):
  L1 (L1i for CODE), L2, LLC warm lines from the cache state of this core and
  this CPU's LLC domain; misses chain m1 = L - w1, m2 = min(m1, L - w2),
  m3 = min(m2, L - w3). With coherence on, lines written by another physical
  core and not yet read since are invalid here; those still warm in the
  writer's caches (its L2; its L2 or LLC when in another LLC domain) come by a
  core-to-core transfer at the topology's latency, the rest from the LLC (if
  warm there and valid) or DRAM.
* reload_s = [(m1 - m2)(l2_lat - l1_lat) + llc_hits (llc_lat - l1_lat)] / f
  + dram_lines * dram_ns, all / mlp (cycles scale with the clock, DRAM ns do not);
  coherence_s = transfers * c2c_ns / mlp; contention_s = contended-line stall
  + dram_lines * (loaded - idle DRAM latency) / mlp (docs/design/MODEL.md's "contention"
  cause is contended lines and the memory-bus queue).
* duration_s = compute_s + reload_s + coherence_s + contention_s;
  cycles = compute cycles + stall time * f (perf counts stall cycles).

Streams (issue 35 item 1): a core's demand misses in flight are its workload's
``mlp``, at most the L1D's ``fill_buffers`` (Intel 64 and IA-32 Architectures
Optimization Reference Manual, Sandy Bridge "L1 DCache": 10 fill buffers). With
``stream_ahead_lines`` > 0 the L2 streamer is modeled (the same manual, Sandy
Bridge "Data Prefetching": it "monitors read requests from the L1 cache for
ascending and descending sequences of addresses", prefetches only within the
4 KiB page and "can run up to 20 lines ahead of the load request"). It follows
what is walked in address order, and the model knows which footprints those are
from their owner kind (simcore.work): a TASK footprint is a request's bytes or a
message, a buffer read or written front to back (a parse, a copy); a THREAD
footprint with its own key is an object a thread owns and touches whole (a
virtual thread's stack chunk, which freeze and thaw copy front to back). The
running thread's own state (THREAD, key None: a stack re-touched in place,
frames pushed and popped around the same lines, and the thread's scattered
private objects) and SHARED footprints (queue
heads, counters, connection state, a read-mostly working set of objects reached
by pointers) give no run of misses in one direction within a page: their DRAM
lines stay demand misses at the mlp. CODE is left out too (an assumption: the
manual says code fetches are monitored, but a handler's hot code is a path of
calls and branches across functions, and it rarely comes from DRAM). Of a
segment's DRAM lines of walks (``Hierarchy.walk_dram_lines``),
``stream_trigger_lines`` per 4 KiB page are demand misses (the stream is
detected after them; it does not cross the page), the rest come
``stream_ahead_lines`` at a time, in the background of the core's work: they
stall it only for the part of their time, streamed x dram_ns / ahead, beyond
the segment's other time (compute, cache hits, demand misses, coherence). The
memory bus's M/D/1 wait per line is overlapped the same way. So one core's
demand can reach the bus (Little's law: ahead x 64 B / latency) and a few
streaming cores fill it (Williams, Waterman, Patterson, "Roofline", CACM 2009;
McCalpin, STREAM).

Counters (what ``perf stat`` would show; only with caches on, else 0):

* l1d_loads = max(instructions * loads_per_instruction, data lines touched):
  perf's L1-dcache-loads counts load instructions, not lines. Default
  loads_per_instruction = 0.33 (preset.extra["loads_per_instruction"]); source:
  data/measurements/jetty-8.perf.txt, 16.41e9 L1-dcache-loads / 49.40e9
  instructions = 0.332, in line with the 25-35% load share of SPEC integer mixes.
* l1d_misses = data lines missing L1d (CODE footprints go to L1i and are not
  counted) plus contended-op transfers.
* llc_loads = data L2 misses that are demand reads (all reach the LLC: LLC
  hits, snoops of another core's caches, DRAM) plus contended-op transfers.
* llc_misses = those of them from DRAM plus lines fetched from a cache *outside*
  this LLC domain (another CCX or socket): a snoop hit on a core that shares
  this LLC is an LLC hit for perf, a line from another L3 is not.
* llc_stores, llc_store_misses = the same for the data L2 misses that are demand
  RFOs: the lines a footprint writes before reading (``Footprint.fresh``), which
  perf counts as LLC-stores, not LLC-loads (models.cache.Hierarchy, "Loads and
  stores"). Contended-op transfers and a wake-up's lines stay loads.

Kernel work: the OS costs below and models.syscalls' are stated at the nominal
rate (a lone thread at the top P-state); ``kernel_slowdown(cpu, now)`` =
(f_nominal / f) / s(k) is what one such second takes on ``cpu`` now, the same
clock and SMT factors as user compute (the SMT factor only with
extra.kernel_smt_share, off by default) (docs/model.md "Kernel work runs at the
clock and shares the core"). A wake-up's line transfers (``wake_transfer``) are
memory stalls and keep their nanoseconds.

Context switches: ``switch_cost`` = preset.ctx_switch_us (the direct cost,
Li, Ding and Shen, ExpCS 2007); the indirect cost is not a constant: the
switched-in thread's footprint went cold while others ran, and ``execute``
charges it. ``wake_latency``: wake_latency_busy_us if the CPU is running; if
idle, under the default hindsight rule a shallow C-state (busy latency +
cstate_shallow_exit_us, default 2 us: intel_idle's C1/C1E exit latencies) until
it has slept cstate_deep_after_us (default 600 us: intel_idle's C6 target
residency on Skylake-SP), then wake_latency_idle_us; both knobs are read from
preset.extra. Under ``idle_governor="menu"`` the state Linux's menu governor chose
(models/cpuidle.py): min(busy latency + its exit latency, wake_latency_idle_us).

Idle states empty a core's caches: on presets with
``extra.cstate_flushes_core_caches`` (Intel's, from their datasheets' "Core C3
State": the core "flushes the contents of its L1 instruction cache, L1 data cache,
and L2 cache to the shared L3 cache"; C6 too) a core all of whose threads reached C3
or deeper since they went idle has lost its L1s and L2: when a thread runs on it
again (``cpu_busy``) the hierarchy forgets them (``Hierarchy.flush_core``), and what
it touches next reloads from the LLC. Under the hindsight rule the states are C1 and
C6 (after cstate_deep_after_us); under menu, the first state of C3 or deeper it
chose or was promoted to (models.cpuidle ``flush_after``). The core's dirty lines
are then in the LLC, where the directory still points other readers at the core:
they pay a core-to-core transfer for them, as before, rather than an LLC hit.

CPU numbering: models.presets.cpu_topology (Linux's: one thread of every core
first, then the SMT siblings; cpu N's sibling is cpu N + cores).
"""

from __future__ import annotations

import math
from array import array

from warmcore.models.cache import CacheState, Hierarchy
from warmcore.models.coherence import ContendedLines, Directory, Topology
from warmcore.models.membus import FluidBus, MemoryBus
from warmcore.models.presets import nominal_ips
from warmcore.models.smt import fine_grained_factor, pipe_share, speed_table
from warmcore.models.syscalls import SyscallCosts
from warmcore.simcore.config import ConfigError
from warmcore.simcore.machine import EFFECTS, WAKE_PART_FIELDS, WAKE_RESUME, WAKE_WAIT

# execute's rate-independent parts of a segment, per CPU (cost_now re-rates them):
# compute cycles of a lone thread, cache-hit cycles / MLP, DRAM seconds / MLP,
# coherence s, contended-line stall s, M/D/1 wait s, DRAM lines (flow), instructions,
# L1 loads, L1 misses, LLC loads, LLC misses
NPARTS = 14

# wake_transfer's answer when nothing moves
NO_TRANSFER = (0.0, 0.0, 0.0)


# loads_per_instruction and the C-state knobs: models.presets.PresetExtra (defaults
# and sources there).


class _FixedClock:
    """Stand-in for a DvfsController: every CPU at one clock."""

    freq_changes = 0

    def __init__(self, ghz: float):
        self._ghz = ghz

    def bind(self, env) -> None:
        return None

    def cpu_busy(self, cpu, now) -> None:
        return None

    def cpu_idle(self, cpu, now) -> None:
        return None

    def ghz(self, cpu, now) -> float:
        return self._ghz

    def mean_ghz(self, cpu, now) -> float:
        return self._ghz

    def ghz_seconds(self, cpu, now) -> float:
        return self._ghz * now


def _make_controller(preset, governor, userspace_ghz, governor_params):
    try:
        from warmcore.models.dvfs import DvfsController, frequency_domains
    except ImportError:
        return None
    try:
        return DvfsController(preset, governor or preset.default_governor,
                              frequency_domains(preset), userspace_ghz=userspace_ghz,
                              params=governor_params)
    except ConfigError as e:        # the controller's params are the machine's governor_params
        raise e.under("", {"params": "governor_params"}) from None


def _make_meter(preset, n_cpus):
    try:
        from warmcore.models.energy import EnergyMeter
    except ImportError:
        return None
    return EnergyMeter(preset, n_cpus)


class HardwareMachine:
    """A preset's CPU with the effects of docs/design/MODEL.md's hardware model (see the
    module docstring).

    preset          a models.presets.Preset (or a preset name)
    effects         {"caches": bool, ...}; missing keys default to True
    governor        cpufreq governor (default preset.default_governor)
    userspace_ghz   clock for the "userspace" governor
    governor_params governor tunables passed to the DVFS controller
    idle_governor   which idle state a CPU enters: "menu" (Linux's, models.cpuidle) or
                    "hindsight" (C6 once idle cstate_deep_after_us); None: the default
                    (models.cpuidle.DEFAULT_IDLE_GOVERNOR)
    idle_next_timer_us  menu's next timer event T (models.cpuidle; None: one tick)
    """

    def __init__(self, preset, effects: dict[str, bool] | None = None,
                 governor: str | None = None, userspace_ghz: float | None = None,
                 governor_params: dict | None = None, idle_governor: str | None = None,
                 idle_next_timer_us: int | None = None):
        if isinstance(preset, str):
            from warmcore.models.presets import get_preset
            preset = get_preset(preset)
        eff = dict.fromkeys(EFFECTS, True)
        if effects:
            unknown = set(effects) - set(EFFECTS)
            if unknown:
                raise ConfigError("effects", f"unknown effects {sorted(unknown)}; known: "
                                             f"{', '.join(EFFECTS)}")
            eff.update({k: bool(v) for k, v in effects.items()})
        self.preset = p = preset
        self.effects = eff
        topo = self.topology = Topology(p)
        self.n_cpus = topo.n_cpus
        self.cpu_core = topo.cpu_core
        self.cpu_llc = topo.cpu_llc
        self.cpu_socket = topo.cpu_socket
        self.nominal_ips = nominal_ips(p)
        extra = p.extra              # models.presets.PresetExtra

        # clocks
        self.max_ghz = p.max_ghz
        # the clock the preset's kernel costs are stated at (nominal_ips: the top P-state)
        self._nominal_ghz = p.pstates_ghz[-1]
        self._fixed_ghz = p.max_ghz
        ctl = None
        if eff["dvfs"]:
            ctl = _make_controller(p, governor, userspace_ghz, governor_params)
        self.dvfs_available = ctl is not None or not eff["dvfs"]
        self._dvfs = ctl is not None
        self.clock = ctl if ctl is not None else _FixedClock(self._fixed_ghz)
        # The controller's per-CPU clocks and pending-change times, read in place on the
        # hot path (clock_ghz): a change applies through clock.ghz only when one is due.
        self._ghz_now = getattr(ctl, "cpu_ghz", None)
        self._due_at = getattr(ctl, "due_at", None)
        if self._ghz_now is None or self._due_at is None:
            self._ghz_now = self._due_at = None
        self.governor = (governor or p.default_governor) if ctl is not None else "fixed"
        self.meter = _make_meter(p, self.n_cpus) if eff["energy"] else None
        self.freq_changes = 0
        if ctl is not None and hasattr(ctl, "add_listener"):
            ctl.add_listener(self._on_freq_change)

        # SMT
        self._smt = eff["smt"] and p.threads_per_core > 1
        self._kernel_smt = self._smt and extra.kernel_smt_share
        self._speed = speed_table(p.smt_throughput, p.threads_per_core)
        # fine-grained multithreading (models/smt.py): each CPU's pipe share d of the
        # segment it runs, and the pipe's capacity with k busy threads (the curve)
        self._fgmt = self._smt and p.smt_policy == "fine-grained"
        self._share = array("d", [1.0] * self.n_cpus)
        self._capacity = [1.0] + [k * self._speed[k] for k in range(1, len(self._speed))]
        self._busy = [False] * self.n_cpus
        self._core_busy = [0] * topo.n_cores

        # pipeline and caches
        self._ipc = p.base_ipc
        self._caches = eff["caches"]
        self._coh = eff["caches"] and eff["coherence"]
        lb = p.line_bytes
        if self._caches:
            l1i_ways = extra.l1i_ways
            self.l1d = [CacheState(p.l1d_kib * 1024, p.l1d_ways, lb, name=f"L1d{c}")
                        for c in range(topo.n_cores)]
            self.l1i = [CacheState(p.l1i_kib * 1024, l1i_ways, lb, name=f"L1i{c}")
                        if p.l1i_kib > 0 else None for c in range(topo.n_cores)]
            # chips without a private L2 (their L2 is the LLC) mark it
            # extra["private_l2"] = False: L1 misses go straight to the LLC
            self._has_l2 = extra.private_l2
            self.l2 = [CacheState(p.l2_kib * 1024, p.l2_ways, lb, name=f"L2{c}")
                       for c in range(topo.n_cores)] if self._has_l2 else self.l1d
            self.llc = [CacheState(p.llc_mib * 1024 * 1024, p.llc_ways, lb, name=f"LLC{d}")
                        for d in range(topo.n_llc)]
        else:
            self.l1d = self.l1i = self.l2 = self.llc = []
            self._has_l2 = True
        self.directory = Directory()
        self.hierarchy = (Hierarchy(self.l1d, self.l1i, self.l2, self.llc, self._has_l2,
                                    self._coh, self.directory, topo)
                          if self._caches else None)
        self._l2_cyc = max(0.0, p.l2_lat_cyc - p.l1_lat_cyc)
        self._llc_cyc = max(0.0, p.llc_lat_cyc - p.l1_lat_cyc)
        # demand misses in flight: the workload's MLP, at most the L1D's fill buffers
        self._inv_mlp = 1.0 / max(1e-9, min(p.mlp, extra.fill_buffers))
        # the L2 streamer (module docstring "Streams"); 0: none modeled
        self._stream_ahead = extra.stream_ahead_lines
        self._stream_trigger = extra.stream_trigger_lines
        self._walks_only = extra.stream_walks_only
        self._inv_page_lines = p.line_bytes / 4096.0
        self._dram_ns = p.dram_ns
        self._lpi = extra.loads_per_instruction

        # memory bus and contended lines
        self._membus_on = eff["membus"] and self._caches
        self.membus = MemoryBus(p)
        self._contention = eff["contention"]
        self.lines = ContendedLines(topo, hit_s=p.l1_lat_cyc / (p.max_ghz * 1e9),
                                    waiter_cost=p.extra.contended_waiter_cost)

        # OS costs
        sw = eff["switch_costs"]
        self._ctx_s = p.ctx_switch_us * 1e-6 if sw else 0.0
        self._futex_s = p.futex_wake_us * 1e-6 if sw else 0.0
        # a wake-up's lines, per part (wake_transfer): kernel work, with coherence on
        on = sw and self._coh
        if extra.wake_lines_by_part:
            counts = tuple(getattr(extra, field) for field in WAKE_PART_FIELDS)
        else:       # one count each way: the waker's (wait) and the woken thread's
            n = extra.futex_wake_lines
            counts = tuple(n if i in (WAKE_WAIT, WAKE_RESUME) else 0.0
                           for i in range(len(WAKE_PART_FIELDS)))
        self._wake_part_lines = tuple(c if on else 0.0 for c in counts)
        self.wake_lines = sum(self._wake_part_lines)
        self._wake_xfer = {}
        self.syscalls = SyscallCosts(p, enabled=sw)       # models/syscalls.py
        self._wake_busy_s = p.wake_latency_busy_us * 1e-6 if sw else 0.0
        self._wake_idle_s = p.wake_latency_idle_us * 1e-6 if sw else 0.0
        shallow = p.wake_latency_busy_us + extra.cstate_shallow_exit_us
        self._wake_shallow_s = min(shallow, p.wake_latency_idle_us) * 1e-6 if sw else 0.0
        self._deep_after_s = extra.cstate_deep_after_us * 1e-6
        # idle states that flush a core's caches (module docstring): when each idle
        # thread reaches one (s; every thread idle from time 0), and how often a core
        # woke with its caches flushed
        self._flush_on_idle = self._caches and extra.cstate_flushes_core_caches
        self._flush_at = [self._deep_after_s] * self.n_cpus
        self._woke_at = [-1.0] * self.n_cpus   # the wake-up's time, its exit not yet run
        self.core_flushes = 0
        self._init_cpuidle(p, idle_governor, idle_next_timer_us, ctl)

        self._ns_llc = topo.ns_llc
        # a NIC's DMA writes the LLC (dma_write); only with caches to write into
        self.ddio = extra.ddio and self._caches

        # run statistics; _mark: the measured window's start (measure_from)
        self._mark = None
        self.c2c_ns = 0.0
        self.dram_lines = 0.0

        # Rates that change during work (docs/engine.md "Fluid rates"): with an SMT
        # curve, a governor that changes the clock or the memory bus, a running
        # segment's pace can change before it ends; the engine then asks
        # ``cost_now`` for the cost of the whole segment at the new rates and goes on
        # at that pace (``rate_hook(cpu, now)``, set by the kernel).
        self._dyn_clock = ctl is not None and not getattr(ctl, "fixed", True)
        self.fluid = self._smt or self._dyn_clock or self._membus_on
        self.rate_hook = None
        # per CPU, the rate-independent parts of the segment it runs (NPARTS doubles):
        # written by execute without allocating (or by adopt_parts when a preempted
        # segment resumes here), read by cost_now and parts_of
        self._parts = array("d", bytes(8 * NPARTS * self.n_cpus))
        self.bus = FluidBus(p, on_change=self._bus_change) if self._membus_on else None
        cores = self.cpu_core
        self._siblings = [tuple(c2 for c2 in range(self.n_cpus)
                                if cores[c2] == cores[c] and c2 != c)
                          for c in range(self.n_cpus)]
        if self._dyn_clock and hasattr(ctl, "on_pending"):
            ctl.on_pending = self._clock_pending

    # ------------------------------------------------------------------ engine API
    def bind(self, env, streams) -> None:
        self.env = env
        self.clock.bind(env)
        if self.bus is not None:
            self.bus.env = env

    def fixed_seconds_per_instruction(self) -> float:
        return 0.0          # costs depend on caches, clock and sharing: ask execute()

    def clock_ghz(self, cpu, now):
        """``clock.ghz(cpu, now)``, without a call while no clock change is due on
        ``cpu`` (DvfsController keeps both lists in place)."""
        due = self._due_at
        if due is not None and now < due[cpu]:
            return self._ghz_now[cpu]
        return self.clock.ghz(cpu, now)

    def execute(self, cpu, seg, thread_key, now):
        ghz = self.clock_ghz(cpu, now) if self._dvfs else self._fixed_ghz
        s_per_cyc = 1.0 / (ghz * 1e9)
        ins = seg.instructions
        cyc = ins / self._ipc
        if self._smt and not self._fgmt:
            k = self._core_busy[self.cpu_core[cpu]] + (0 if self._busy[cpu] else 1)
            cyc = cyc / self._speed[k if k < len(self._speed) else -1]
        compute_s = cyc * s_per_cyc
        reload_s = coher_s = contend_s = dram_s = 0.0
        l1l = l1m = llcl = llcm = llcs = llcsm = 0.0
        dram = l2_hits = llc_hits = 0.0
        inv_mlp = overlap = self._inv_mlp

        footprint = seg.footprint
        if footprint and self._caches:
            h = self.hierarchy
            h.touch(self.cpu_core[cpu], self.cpu_llc[cpu], footprint, thread_key)
            l2_hits = h.l2_hits
            llc_hits = h.llc_hits
            dram = h.dram_lines
            c2c_ns = h.c2c_ns
            touched = h.data_lines
            l1m = h.l1_misses
            llcl = h.llc_loads
            llcm = h.llc_misses
            llcs = h.llc_stores
            llcsm = h.llc_store_misses
            inv_mlp = self._inv_mlp
            if c2c_ns:
                coher_s = c2c_ns * 1e-9 * inv_mlp
                self.c2c_ns += c2c_ns
            walked = h.walk_dram_lines if self._walks_only else dram
            if self._stream_ahead > 0.0 and walked > 0.0:
                # the L2 streamer (module docstring "Streams") follows the sequential
                # walks only: of their lines the first of each page are demand misses
                # and the rest arrive ahead of the core; every other DRAM line (a
                # stack, scattered objects) is a demand miss
                hit_s = (l2_hits * self._l2_cyc + llc_hits * self._llc_cyc) * s_per_cyc * inv_mlp
                trigger = self._stream_trigger * math.ceil(walked * self._inv_page_lines)
                if trigger > walked:
                    trigger = walked
                streamed = walked - trigger
                demand = trigger + (dram - walked)
                dram_s = demand * self._dram_ns * 1e-9 * inv_mlp
                ahead_s = streamed * self._dram_ns * 1e-9 / self._stream_ahead
                core_s = compute_s + hit_s + dram_s + coher_s
                if ahead_s > core_s:              # the stream outruns the core's work
                    dram_s += ahead_s - core_s
                reload_s = hit_s + dram_s
                overlap = (demand * inv_mlp + streamed / self._stream_ahead) / dram
            else:
                reload_s = ((l2_hits * self._l2_cyc + llc_hits * self._llc_cyc) * s_per_cyc
                            + dram * self._dram_ns * 1e-9) * inv_mlp
                dram_s = dram * self._dram_ns * 1e-9 * inv_mlp
            if dram > 0.0:
                self.dram_lines += dram
            l1l = ins * self._lpi
            if l1l < touched:
                l1l = touched

        stall = 0.0
        n_ops = seg.contended_ops
        if n_ops and self._contention:
            spacing = (compute_s + reload_s + coher_s) / n_ops
            stall, transfers, t_ns = self.lines.ops(seg.contended_line, cpu, n_ops, now, spacing)
            contend_s += stall
            if self._caches:
                l1l += n_ops
                l1m += transfers
                llcl += transfers
                if self.lines.cross_llc:     # from another LLC (not t_ns: waiters scale it)
                    llcm += transfers

        if self._fgmt:
            # the siblings fill only this thread's memory stalls (models/smt.py)
            waiting = reload_s + coher_s + contend_s
            share = pipe_share(compute_s, waiting)
            queued = self._issue_wait(cpu, share, compute_s, waiting, now)
            compute_s += queued
            cyc += queued * ghz * 1e9

        wait = 0.0
        lines = 0.0
        if dram > 0.0 and self._membus_on:
            # The fills go on the bus spread over the segment (a fluid flow): the
            # M/D/1 wait from the bus's recent load, then the bandwidth share.
            lines = dram
            d0 = compute_s + reload_s + coher_s + contend_s
            bus = self.bus
            sock = self.cpu_socket[cpu]
            wait = bus.start(sock, cpu, dram, d0, now, overlap)
            d1 = d0 + wait
            contend_s += wait + (bus.duration(sock, cpu, d1) - d1)
        if self.fluid:
            pa = self._parts
            b = cpu * NPARTS
            pa[b] = ins / self._ipc
            pa[b + 1] = (l2_hits * self._l2_cyc + llc_hits * self._llc_cyc) * inv_mlp
            pa[b + 2] = dram_s
            pa[b + 3] = coher_s
            pa[b + 4] = stall
            pa[b + 5] = wait
            pa[b + 6] = lines
            pa[b + 7] = ins
            pa[b + 8] = l1l
            pa[b + 9] = l1m
            pa[b + 10] = llcl
            pa[b + 11] = llcm
            pa[b + 12] = llcs
            pa[b + 13] = llcsm
        dur = compute_s + reload_s + coher_s + contend_s
        cycles = cyc + (reload_s + coher_s + contend_s) * ghz * 1e9
        return (dur, cycles, ins, l1l, l1m, llcl, llcm, compute_s, reload_s, coher_s, contend_s,
                llcs, llcsm)

    def cost_now(self, cpu, now):
        """The cost of the whole segment running on ``cpu`` (its parts as ``execute``
        left them) at the rates of ``now``: the CPU's clock, its SMT siblings and its
        memory-bus share; the same formulas as ``execute``."""
        pa = self._parts
        b = cpu * NPARTS
        cyc0 = pa[b]
        rcyc = pa[b + 1]
        dram_s = pa[b + 2]
        coher_s = pa[b + 3]
        stall = pa[b + 4]
        wait = pa[b + 5]
        lines = pa[b + 6]
        ins = pa[b + 7]
        l1l = pa[b + 8]
        l1m = pa[b + 9]
        llcl = pa[b + 10]
        llcm = pa[b + 11]
        llcs = pa[b + 12]
        llcsm = pa[b + 13]
        ghz = self.clock_ghz(cpu, now) if self._dvfs else self._fixed_ghz
        s_per_cyc = 1.0 / (ghz * 1e9)
        cyc = cyc0
        if self._smt and not self._fgmt:
            k = self._core_busy[self.cpu_core[cpu]] + (0 if self._busy[cpu] else 1)
            cyc = cyc / self._speed[k if k < len(self._speed) else -1]
        compute_s = cyc * s_per_cyc
        reload_s = rcyc * s_per_cyc + dram_s
        contend_s = stall
        if self._fgmt:
            f = self._fgmt_factor(cpu, self._share[cpu])
            if f > 1.0:
                queued = (f - 1.0) * (compute_s + reload_s + coher_s + contend_s)
                compute_s += queued
                cyc += queued * ghz * 1e9
        if lines > 0.0:
            d1 = compute_s + reload_s + coher_s + contend_s + wait
            bus = self.bus
            sock = self.cpu_socket[cpu]
            bus.pace(sock, cpu, d1, now)
            contend_s += wait + (bus.duration(sock, cpu, d1) - d1)
        dur = compute_s + reload_s + coher_s + contend_s
        cycles = cyc + (reload_s + coher_s + contend_s) * ghz * 1e9
        return (dur, cycles, ins, l1l, l1m, llcl, llcm, compute_s, reload_s, coher_s, contend_s,
                llcs, llcsm)

    def parts_of(self, cpu, now, remaining):
        """The segment running on ``cpu`` leaves it at ``now`` with ``remaining`` of its
        work (a fraction of the whole) not done (it is preempted): returns its
        rate-independent parts (the NPARTS values ``execute`` or ``adopt_parts`` left
        for ``cpu``), for ``adopt_parts`` on the CPU it resumes on. Its memory-bus flow
        leaves the socket now; the fills not yet made (``remaining`` of them) go with
        the parts."""
        pa = self._parts
        b = cpu * NPARTS
        parts = tuple([pa[b + i] for i in range(NPARTS)])
        if self.bus is not None and parts[6] > 0.0:
            self.bus.leave(self.cpu_socket[cpu], cpu, remaining * parts[6], now)
        return parts

    def adopt_parts(self, cpu, parts, now, remaining):
        """A segment preempted elsewhere (its ``parts`` from ``parts_of``) resumes on
        ``cpu`` at ``now`` with ``remaining`` of its work left: ``cpu`` now holds its
        parts, its fills not yet made become a flow on ``cpu``'s socket, and the cost
        of the whole segment at ``cpu``'s rates now is returned (as ``cost_now``: the
        engine re-rates the remaining fraction and then sets the flow's end with
        ``flow_end``). Cache misses, the coherence and contended-line stalls and the
        M/D/1 wait stay what they were when the segment started."""
        pa = self._parts
        b = cpu * NPARTS
        for i in range(NPARTS):
            pa[b + i] = parts[i]
        if self.bus is not None and parts[6] > 0.0:
            self.bus.join(self.cpu_socket[cpu], cpu, parts[6], remaining * parts[6], now)
        if self._fgmt:
            # the segment's pipe share comes with it (the clock is the T1's one)
            s_per_cyc = 1.0 / (self.current_ghz(cpu, now) * 1e9)
            share = pipe_share(parts[0] * s_per_cyc,
                               parts[1] * s_per_cyc + parts[2] + parts[3] + parts[4])
            self._set_share(cpu, share, now)
        return self.cost_now(cpu, now)

    def flow_end(self, cpu, end):
        """The engine's end time of ``cpu``'s running segment (for the bus's flows)."""
        if self.bus is not None:
            self.bus.set_end(self.cpu_socket[cpu], cpu, end)

    def _bus_change(self, cpu, now):
        if self.rate_hook is not None:
            self.rate_hook(cpu, now)

    def _clock_pending(self, d, due):
        """The governor decided a change that applies at ``due``: apply it then (and so
        re-rate the segments running in the domain) instead of at the next look."""
        env = self.env
        cpu0 = self.clock.domains[d][0]
        env.timeout(max(0.0, due - env.now)).callbacks.append(
            lambda _e: self.clock.ghz(cpu0, env.now))

    @property
    def c2c_lines(self) -> float:
        """Lines moved core to core so far (coherence transfers)."""
        return self.hierarchy.c2c_lines if self.hierarchy is not None else 0.0

    def current_ghz(self, cpu, now) -> float:
        """The clock of ``cpu`` now (for cycles of kernel work the engine charges)."""
        return self.clock_ghz(cpu, now) if self._dvfs else self._fixed_ghz

    def kernel_slowdown(self, cpu, now) -> float:
        """Seconds that one second of kernel work at the nominal rate (a lone thread at
        the top P-state: how the preset's OS costs and models.syscalls' are stated)
        takes on ``cpu`` now. Kernel paths are instructions like any other: the core
        runs them at its clock, shared with its busy SMT siblings, as ``execute`` runs
        user work: (f_nominal / f) / s(k), k the busy hardware threads of the core
        with this one (module docstring "Kernel work"); s(k) only with
        ``PresetExtra.kernel_smt_share`` (off by default: docs/model.md)."""
        ghz = self.clock_ghz(cpu, now) if self._dvfs else self._fixed_ghz
        r = self._nominal_ghz / ghz
        if self._kernel_smt:
            if self._fgmt:          # kernel paths never wait on memory here: d = 1
                return r * self._fgmt_factor(cpu, 1.0)
            k = self._core_busy[self.cpu_core[cpu]] + (0 if self._busy[cpu] else 1)
            r = r / self._speed[k if k < len(self._speed) else -1]
        return r

    def _fgmt_factor(self, cpu, share):
        """How many times slower than alone a thread with pipe share ``share`` runs on
        ``cpu`` with the core's busy siblings: max(1, U / C) (models/smt.py)."""
        total = share
        k = 1
        busy = self._busy
        shares = self._share
        for sib in self._siblings[cpu]:
            if busy[sib]:
                total += shares[sib]
                k += 1
        cap = self._capacity
        return fine_grained_factor(total, cap[k if k < len(cap) else -1])

    def _set_share(self, cpu, share, now):
        """``cpu`` now runs a segment with pipe share ``share``: its busy siblings'
        segments re-rate if it changed (their U did). A CPU not yet busy joins its
        siblings' U through ``cpu_busy``."""
        if share == self._share[cpu]:
            return
        self._share[cpu] = share
        if self._busy[cpu] and self.rate_hook is not None:
            for sib in self._siblings[cpu]:
                if self._busy[sib]:
                    self.rate_hook(sib, now)

    def _issue_wait(self, cpu, share, compute_s, waiting, now):
        """Seconds a segment of ``compute_s`` compute and ``waiting`` memory stalls
        waits for its fine-grained core's pipe (models/smt.py): (f - 1) (c + m)."""
        self._set_share(cpu, share, now)
        f = self._fgmt_factor(cpu, share)
        if f <= 1.0:
            return 0.0
        return (f - 1.0) * (compute_s + waiting)

    def switch_cost(self, cpu, prev_key, next_key):
        return self._ctx_s

    def _init_cpuidle(self, p, idle_governor, next_timer_us, ctl):
        """The menu governor's per-thread state (models.cpuidle), told to the energy
        meter and the package's turbo control; None under the hindsight rule."""
        from warmcore.models.cpuidle import (DEFAULT_IDLE_GOVERNOR, IDLE_GOVERNORS,
                                             TICK_USEC_HZ250, CpuIdle, idle_states)

        gov = DEFAULT_IDLE_GOVERNOR if idle_governor is None else idle_governor
        if gov not in IDLE_GOVERNORS:
            raise ConfigError("idle_governor", f"unknown idle governor {gov!r}; known: "
                                               f"{', '.join(IDLE_GOVERNORS)}")
        self.idle_governor = gov
        self.cpuidle = None
        self._deep_after = None
        if gov != "menu":
            return
        t = TICK_USEC_HZ250 if next_timer_us is None else int(next_timer_us)
        if t < 1:
            raise ConfigError("idle_next_timer_us", f"must be at least 1 us (got {t})")
        idle = self.cpuidle = CpuIdle(idle_states(p), self.n_cpus, next_timer_us=t,
                                      wake_busy_s=self._wake_busy_s,
                                      wake_cap_s=self._wake_idle_s)
        self._deep_after = [idle.enter(c, 0.0) for c in range(self.n_cpus)]
        self._flush_at = list(idle.flush_after)
        if self.meter is not None:
            self.meter.use_idle_model(self._deep_after)
        pcu = getattr(ctl, "pcu", None)
        if pcu is not None:
            pcu.use_idle_model(self._deep_after)

    def wake_latency(self, cpu, idle_since, now):
        if idle_since < 0.0:
            return self._wake_busy_s
        if self._flush_on_idle:
            # the state the core wakes from is the one it was in now, not after the exit
            self._woke_at[cpu] = now
        if self.cpuidle is not None:
            return self.cpuidle.wake(cpu, now)
        if now - idle_since >= self._deep_after_s:
            return self._wake_idle_s
        return self._wake_shallow_s

    def futex_wake_cost(self):
        return self._futex_s

    def syscall_cost(self, name, n=0.0, kib=0.0):
        return self.syscalls.cost(name, n, kib)

    def dma_write(self, kind, key, lines):
        """A NIC's DMA wrote ``lines`` of owner (kind, key), a request's bytes received
        from a client off the machine. With DDIO (PresetExtra.ddio) they are written into
        the LLC of socket 0, where the NIC is taken to be attached: the first core to
        read them finds them there, no core owns them; without DDIO, or with caches off,
        they are in DRAM and nothing changes (docs/model.md "Where a request's bytes come
        from")."""
        if not self.ddio or lines <= 0.0:
            return
        h = self.hierarchy
        self.llc[0].access(h.owner_id(kind, key), lines)

    def wake_transfer(self, cpu_a, cpu_b, part=WAKE_WAIT):
        """(seconds, LLC loads, LLC misses) of one part of a futex wake-up (``part``, an
        index of simcore.machine.WAKE_PARTS: the wait structures, the target's run queue,
        its wake list, what the woken thread reads back...), paid on ``cpu_b`` for the
        lines ``cpu_a``'s core last wrote: that part's count of lines (PresetExtra, one
        field per part, counted from the kernel's structures, with wake_lines_by_part;
        without it futex_wake_lines for the waker's and the woken thread's part and
        nothing for the others) moved one after the other
        (each access depends on the lock or pointer before it, so no overlap):
        ``lines * transfer_ns``. Between SMT siblings they stay in the shared L1/L2 (no
        LLC load); across sockets each one is an LLC miss. Nothing on the same CPU.
        Which parts a wake-up pays, and from which cores, is the kernel's
        (simcore.kernel.placement)."""
        n = self._wake_part_lines[part]
        if cpu_a == cpu_b or not n:
            return NO_TRANSFER
        key = (part * self.n_cpus + cpu_a) * self.n_cpus + cpu_b
        x = self._wake_xfer.get(key)
        if x is None:
            ns = self.topology.transfer_ns(cpu_a, cpu_b)
            loads = 0.0 if self.cpu_core[cpu_a] == self.cpu_core[cpu_b] else n
            misses = loads if ns > self._ns_llc else 0.0
            x = self._wake_xfer[key] = (n * ns * 1e-9, loads, misses)
        return x

    def line_transfer_s(self, cpu_a, cpu_b):
        """Seconds for a line written on ``cpu_a`` to reach ``cpu_b``, whose copy the
        write invalidated: one core-to-core transfer at the topology's latency (the
        SMT siblings' shared L1/L2, the shared LLC, another LLC or socket); 0 on the
        same CPU or with coherence off. What a spinner waits after a store
        (simcore.kernel.spin)."""
        if cpu_a == cpu_b or not self._coh:
            return 0.0
        return self.topology.transfer_ns(cpu_a, cpu_b) * 1e-9

    def cpu_busy(self, cpu, now):
        if self._busy[cpu]:
            return
        self._busy[cpu] = True
        core = self.cpu_core[cpu]
        if self._flush_on_idle and not self._core_busy[core]:
            woke = self._woke_at[cpu]
            self._flush_if_deep(cpu, woke if woke >= 0.0 else now)
        self._core_busy[core] += 1
        clock = self.clock
        clock.cpu_busy(cpu, now)
        if self.meter is not None:
            self.meter.busy(cpu, now, clock.ghz(cpu, now))
        if self._smt and self.rate_hook is not None:
            for sib in self._siblings[cpu]:      # they now share the core with it
                self.rate_hook(sib, now)

    def cpu_idle(self, cpu, now):
        if self.cpuidle is not None:
            # the governor's choice first: the clock's package control reads it
            self._deep_after[cpu] = self.cpuidle.enter(cpu, now)
            self._flush_at[cpu] = now + self.cpuidle.flush_after[cpu]
        if not self._busy[cpu]:
            return
        if self._flush_on_idle:
            self._woke_at[cpu] = -1.0       # this idle period's wake-up is still to come
            if self.cpuidle is None:
                self._flush_at[cpu] = now + self._deep_after_s
        self._busy[cpu] = False
        self._core_busy[self.cpu_core[cpu]] -= 1
        self.clock.cpu_idle(cpu, now)
        if self.meter is not None:
            d = self._deep_after
            self.meter.idle(cpu, now, None if d is None else d[cpu])
        if self.bus is not None:
            self.bus.close(self.cpu_socket[cpu], cpu, now)
        if self._smt and self.rate_hook is not None:
            for sib in self._siblings[cpu]:
                self.rate_hook(sib, now)

    def _flush_if_deep(self, cpu, now):
        """``cpu``'s core is woken at ``now`` with no thread running: if every thread of
        it had reached a state that flushes the core's caches (module docstring), they
        are empty."""
        flush_at = self._flush_at
        at = flush_at[cpu]
        for sib in self._siblings[cpu]:
            if flush_at[sib] > at:
                at = flush_at[sib]
        if now >= at:
            self.hierarchy.flush_core(self.cpu_core[cpu])
            self.core_flushes += 1

    def _on_freq_change(self, cpu, t, ghz):
        """DvfsController listener: a CPU's clock changed at ``t``."""
        ctl = self.clock
        if ctl.domains[ctl.cpu_domain[cpu]][0] == cpu:
            self.freq_changes += 1  # count each domain change once
        if self.meter is not None:
            self.meter.freq_change(cpu, t, ghz)
        if self.rate_hook is not None:
            self.rate_hook(cpu, t)

    def _totals(self, now) -> tuple:
        """Joules, each CPU's clock integral (GHz x s) and clock changes since t = 0."""
        clock = self.clock
        joules = float(self.meter.joules(now)) if self.meter is not None else 0.0
        return (joules, [clock.ghz_seconds(c, now) for c in range(self.n_cpus)],
                self.freq_changes)

    def measure_from(self, now) -> None:
        """The measured window starts at ``now``: ``finish`` reports every figure over
        the window from here, as the kernel's counters are (issue 35 item 4: joules
        counted from t = 0 but divided by the window's requests)."""
        self._mark = (now, self._totals(now))

    def finish(self, now):
        """Joules, mean clock per CPU and clock changes over the measured window (from
        ``measure_from``, else from t = 0)."""
        t0, (j0, gs0, n0) = self._mark or (0.0, (0.0, [0.0] * self.n_cpus, 0))
        joules, gs, changes = self._totals(now)
        span = now - t0
        cpu_ghz = ([(b - a) / span for a, b in zip(gs0, gs, strict=True)] if span > 0
                   else [self.clock_ghz(c, now) if self._dvfs else self._fixed_ghz
                         for c in range(self.n_cpus)])
        return {"joules": joules - j0, "cpu_ghz": cpu_ghz, "freq_changes": changes - n0}

    # ------------------------------------------------------------------ helpers
    def busy_siblings(self, cpu: int) -> int:
        """Busy hardware threads on ``cpu``'s core."""
        return self._core_busy[self.cpu_core[cpu]]
