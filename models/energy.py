"""Energy: static power gated by the C-states, dynamic CMOS power of busy cores.

Model (per socket, all in watts):
  static  = package_static_w per socket + static_w_per_core per core (uncore, LLC
            and leakage), gated by the idle states (Le Sueur and Heiser, "Dynamic
            voltage and frequency scaling: the laws of diminishing returns",
            HotPower 2010: idle power decides whether racing to idle pays):
            * a core all of whose hardware threads are idle is in a shallow
              C-state (C1/C1E/C3: its leakage stays) until every thread of it
              is in C6 or deeper as the menu governor chose (models.cpuidle,
              ``use_idle_model``), or, under the hindsight rule, until it has
              been idle cstate_deep_after_us (extra; intel_idle's C6 target
              residency on Skylake-SP); then in C6: its voltage is cut to zero
              (Intel Xeon E3-1200 v3 datasheet vol. 1, 4.2.4 "Core C6 state":
              the state saved to SRAM, the core's voltage reduced to zero), so
              its static power is 0; a core with one busy thread is in C0
              whatever its siblings do;
            * a socket all of whose cores are in C6 is in package C6: its uncore
              draws package_c6_power_fraction (extra) of package_static_w.
            The exit latencies are the machine's wake-up latencies
            (models.hardware.wake_latency, models.cpuidle).
  dynamic = for each physical core that has at least one busy hardware thread,
            dyn_w_per_core_max * (V(f) / v_max)^2 * (f / f_top)

The dynamic term is the switching power of CMOS logic, P = a * C * V^2 * f
(activity a, switched capacitance C; e.g. Weste & Harris, "CMOS VLSI Design",
ch. 5, and Rabaey, "Digital Integrated Circuits", ch. 5), normalised so that a
busy core at the top clock draws ``dyn_w_per_core_max``. The voltage of a
DVFS operating point rises with its frequency; we take V linear from ``v_min``
at the lowest P-state to ``v_max`` at the top clock f_top (``turbo_ghz`` when
the preset has one, else the highest P-state, whether or not turbo is enabled,
so that the power at a given clock does not depend on the turbo switch).
Hence dynamic power grows roughly as f^3 at the top of the range and as f at
the bottom. SMT siblings share their core's clock and pipeline: a core counts
once however many of its threads are busy.

Notifications come from the machine model: ``busy(cpu, now, ghz)``,
``idle(cpu, now)``, ``freq_change(cpu, now, ghz)`` (a DvfsController listener
has this signature). Times that run backwards for a core are clamped to its
last event, so energy never decreases and never falls below the all-idle floor
(``idle_floor_w``: every socket in package C6) times the elapsed time.
"""

from __future__ import annotations

import heapq

__all__ = ["EnergyMeter", "dynamic_power_w", "static_power_w", "voltage"]


def _f_top(preset) -> float:
    return float(preset.turbo_ghz) if preset.turbo_ghz else float(preset.pstates_ghz[-1])


def voltage(preset, ghz: float) -> float:
    """Core voltage at ``ghz``: linear from v_min at the lowest P-state to v_max at f_top."""
    f_lo, f_hi = float(preset.pstates_ghz[0]), _f_top(preset)
    if f_hi <= f_lo:
        return float(preset.v_max)
    x = min(1.0, max(0.0, (ghz - f_lo) / (f_hi - f_lo)))
    return preset.v_min + (preset.v_max - preset.v_min) * x


def dynamic_power_w(preset, ghz: float) -> float:
    """Dynamic power of one busy core at ``ghz`` (W): P_max * (V/V_max)^2 * f/f_top."""
    if ghz <= 0.0:
        return 0.0
    v = voltage(preset, ghz) / preset.v_max
    return preset.dyn_w_per_core_max * v * v * (ghz / _f_top(preset))


def static_power_w(preset, n_cpus: int | None = None) -> float:
    """Always-on power of the cores and packages covering ``n_cpus`` hardware threads."""
    n_cores, n_sockets = _counts(preset, preset.n_cpus if n_cpus is None else n_cpus)
    return n_cores * preset.static_w_per_core + n_sockets * preset.package_static_w


def _counts(preset, n_cpus: int) -> tuple[int, int]:
    """Physical cores and sockets that the first ``n_cpus`` CPUs span (Linux
    numbering, models.presets.cpu_topology); beyond the preset's CPUs, the extra
    ones are counted as further SMT threads of its cores."""
    if n_cpus < 1:
        raise ValueError(f"n_cpus: {n_cpus} must be >= 1")
    from warmcore.models.presets import cpu_topology

    core, _llc, socket, _thread = cpu_topology(preset)
    n = min(n_cpus, len(core))
    return len(set(core[:n])), len(set(socket[:n]))


class EnergyMeter:
    """Joules of a run. CPU numbering as in models.dvfs.frequency_domains
    (models.presets.cpu_topology: Linux's numbering).

    preset  a models.presets.Preset
    n_cpus  hardware threads simulated (usually preset.n_cpus)
    start   time at which the meter starts counting (s)
    """

    def __init__(self, preset, n_cpus: int | None = None, start: float = 0.0):
        self.preset = preset
        self.n_cpus = preset.n_cpus if n_cpus is None else int(n_cpus)
        self.n_cores, self.n_sockets = _counts(preset, self.n_cpus)
        from warmcore.models.presets import cpu_topology

        cores, _llc, sockets, _thr = cpu_topology(preset)
        # CPUs beyond the preset's (a meter for fewer CPUs) keep the same numbering.
        self.core_of = [cores[c] if c < len(cores) else c % self.n_cores
                        for c in range(self.n_cpus)]
        self.static_w = static_power_w(preset, self.n_cpus)     # everything in C0
        self.t0 = float(start)
        self._init_idle_states(preset, cores, sockets)
        self._busy = [False] * self.n_cpus
        self._nbusy = [0] * self.n_cores          # busy threads per core
        self._ghz = [0.0] * self.n_cores          # core clock (last reported)
        self._p = [0.0] * self.n_cores            # dynamic W now
        self._t = [self.t0] * self.n_cores        # last accounting time per core
        self._dyn_j = 0.0
        self._pcache: dict[float, float] = {}

    def _init_idle_states(self, preset, cores, sockets) -> None:
        """Every core starts idle at ``t0`` (a shallow C-state, C6 after the residency),
        every socket with all its cores so."""
        extra = preset.extra
        self.deep_after_s = extra.cstate_deep_after_us * 1e-6
        self._core_w = float(preset.static_w_per_core)
        self._pkg_saved_w = float(preset.package_static_w) * (1.0 - extra.package_c6_power_fraction)
        socket_of = {}
        for cpu in range(min(self.n_cpus, len(cores))):
            socket_of[cores[cpu]] = sockets[cpu]
        self._socket_of_core = [socket_of.get(c, 0) for c in range(self.n_cores)]
        ids = sorted(set(self._socket_of_core))
        index = {s: i for i, s in enumerate(ids)}
        self._socket_of_core = [index[s] for s in self._socket_of_core]
        self._socket_cores = [self._socket_of_core.count(i) for i in range(len(ids))]
        self._idle_since = [self.t0] * self.n_cores
        # seconds from a core's idle_since to its C6: the hindsight rule's residency,
        # or what the cpuidle governor chose for its threads (use_idle_model)
        self._deep_delay = [self.deep_after_s] * self.n_cores
        self._thread_deep = None    # per thread: when it reaches a gating state (menu)
        self._gated_s = 0.0                       # core-seconds in C6, closed intervals
        self._idle_cores = list(self._socket_cores)
        self._pkg_from = [self.t0 + self.deep_after_s] * len(ids)   # package C6 from
        self._pkg_gated_s = 0.0                   # socket-seconds in package C6, closed
        # every core in C6 and every socket in package C6
        self.idle_floor_w = len(ids) * (float(preset.package_static_w) - self._pkg_saved_w)

    def _core_wakes(self, core: int, now: float) -> None:
        """``core`` leaves its idle state at ``now``: close its C6 and its package's."""
        since = max(self._idle_since[core], self.t0)
        self._gated_s += max(0.0, now - since - self._deep_delay[core])
        s = self._socket_of_core[core]
        if self._idle_cores[s] == self._socket_cores[s]:
            self._pkg_gated_s += max(0.0, now - self._pkg_from[s])
        self._idle_cores[s] -= 1

    def _core_sleeps(self, core: int, now: float) -> None:
        """``core`` has no busy thread from ``now``: C6 after the residency (or once
        every thread of it reached a gating state); its package in C6 once the last
        of its cores is."""
        self._idle_since[core] = now
        s = self._socket_of_core[core]
        if self._thread_deep is not None:
            self._schedule_core_c6(core, now)
        self._idle_cores[s] += 1
        if self._idle_cores[s] == self._socket_cores[s]:
            if self._thread_deep is None:
                self._pkg_from[s] = now + self.deep_after_s
            else:
                self._pkg_from[s] = self._socket_deep_at(s)

    def _schedule_core_c6(self, core: int, since: float) -> None:
        """Idle ``core`` (since ``since``) reaches C6 when the last of its threads
        reaches a gating state (use_idle_model)."""
        last = max(self._thread_deep[c] for c in self._threads_of[core])
        self._deep_delay[core] = d = max(0.0, last - since)
        self._push_deep_at(self._socket_of_core[core], core, since + d)

    def _push_deep_at(self, s: int, core: int, at: float) -> None:
        """Remember when idle ``core`` reaches C6 (a max-heap per socket with stale
        entries dropped lazily, so that the package's C6 costs O(log cores))."""
        self._core_ver[core] += 1
        heap = self._deep_heap[s]
        heapq.heappush(heap, (-at, core, self._core_ver[core]))
        if len(heap) > 4 * self._socket_cores[s] + 8:
            heap[:] = [e for e in heap if self._current(e)]
            heapq.heapify(heap)

    def _current(self, entry) -> bool:
        _at, core, ver = entry
        return ver == self._core_ver[core] and not self._nbusy[core]

    def _socket_deep_at(self, s: int) -> float:
        """When the last core of socket ``s`` (all idle) reaches C6."""
        heap = self._deep_heap[s]
        while not self._current(heap[0]):
            heapq.heappop(heap)
        return -heap[0][0]

    def use_idle_model(self, deep_after) -> None:
        """Gate by the idle states a cpuidle governor chose (models.cpuidle) instead of
        the hindsight rule: ``deep_after[cpu]`` is when thread ``cpu``, idle from the
        start, reaches a gating state (s after start); ``idle`` then takes each idle
        period's. A core is in C6 once all its threads are (Intel SDM vol. 3, 14.5:
        the core's C-state is the shallowest of its threads')."""
        self._thread_deep = [self.t0 + deep_after[c] for c in range(self.n_cpus)]
        self._threads_of = [[] for _ in range(self.n_cores)]
        self._core_ver = [0] * self.n_cores
        self._deep_heap = [[] for _ in self._socket_cores]
        for c in range(self.n_cpus):
            self._threads_of[self.core_of[c]].append(c)
        for core in range(self.n_cores):
            if not self._nbusy[core]:
                self._schedule_core_c6(core, self._idle_since[core])
        for s in range(len(self._socket_cores)):
            if self._idle_cores[s] == self._socket_cores[s]:
                self._pkg_from[s] = self._socket_deep_at(s)

    def active_cores(self, now: float) -> int:
        """Cores in C0 or C1 at ``now``: a hardware thread of it runs, or it has been idle
        less than the C6 residency (what Intel's turbo bins count as active cores)."""
        d = self._deep_delay
        return sum(1 for core in range(self.n_cores)
                   if self._nbusy[core] or now - max(self._idle_since[core], self.t0) < d[core])

    def gated_joules(self, now: float) -> float:
        """Static energy the idle states saved since ``start`` (J)."""
        core_s = self._gated_s
        d = self._deep_delay
        for core in range(self.n_cores):
            if not self._nbusy[core]:
                core_s += max(0.0, now - max(self._idle_since[core], self.t0) - d[core])
        pkg_s = self._pkg_gated_s
        for s, n in enumerate(self._socket_cores):
            if self._idle_cores[s] == n:
                pkg_s += max(0.0, now - self._pkg_from[s])
        return core_s * self._core_w + pkg_s * self._pkg_saved_w

    def _power(self, ghz: float) -> float:
        p = self._pcache.get(ghz)
        if p is None:
            p = self._pcache[ghz] = dynamic_power_w(self.preset, ghz)
        return p

    def _close(self, core: int, now: float) -> None:
        t = self._t[core]
        if now > t:
            self._dyn_j += self._p[core] * (now - t)
            self._t[core] = now

    def busy(self, cpu: int, now: float, ghz: float) -> None:
        """``cpu`` starts running at ``ghz``."""
        core = self.core_of[cpu]
        self._close(core, now)
        if not self._busy[cpu]:
            self._busy[cpu] = True
            if not self._nbusy[core]:
                self._core_wakes(core, max(now, self._t[core]))
            self._nbusy[core] += 1
        self._ghz[core] = ghz
        self._p[core] = self._power(ghz)

    def idle(self, cpu: int, now: float, deep_after: float | None = None) -> None:
        """``cpu`` stops running; under an idle model (use_idle_model) it reaches a
        gating state ``deep_after`` s later (inf: not in this idle period)."""
        if not self._busy[cpu]:
            return
        if deep_after is not None and self._thread_deep is not None:
            self._thread_deep[cpu] = now + deep_after
        core = self.core_of[cpu]
        self._close(core, now)
        self._busy[cpu] = False
        self._nbusy[core] -= 1
        if self._nbusy[core] == 0:
            self._p[core] = 0.0
            self._core_sleeps(core, self._t[core])

    def freq_change(self, cpu: int, now: float, ghz: float) -> None:
        """The clock of ``cpu``'s core becomes ``ghz`` at ``now``."""
        core = self.core_of[cpu]
        self._close(core, now)
        self._ghz[core] = ghz
        if self._nbusy[core]:
            self._p[core] = self._power(ghz)

    def dynamic_joules(self, now: float) -> float:
        e = self._dyn_j
        for core in range(self.n_cores):
            p = self._p[core]
            if p:
                dt = now - self._t[core]
                if dt > 0.0:
                    e += p * dt
        return e

    def static_joules(self, now: float) -> float:
        """Static energy since ``start``: all of it in C0, less what C6 gated."""
        return self.static_w * max(0.0, now - self.t0) - self.gated_joules(now)

    def joules(self, now: float) -> float:
        """Energy since ``start`` (J); O(cores)."""
        return self.static_joules(now) + self.dynamic_joules(now)

    def watts(self, now: float | None = None) -> float:
        """Power drawn at ``now`` (W); without ``now``, as if every core were in C0
        (the static power not gated, as before the idle states)."""
        if now is None:
            return self.static_w + sum(self._p)
        d = self._deep_delay
        gated = sum(self._core_w for core in range(self.n_cores)
                    if not self._nbusy[core] and now - self._idle_since[core] >= d[core])
        gated += sum(self._pkg_saved_w for s, n in enumerate(self._socket_cores)
                     if self._idle_cores[s] == n and now >= self._pkg_from[s])
        return self.static_w - gated + sum(self._p)

    def finish(self, now: float) -> dict:
        s, d = self.static_joules(now), self.dynamic_joules(now)
        span = now - self.t0
        return {"joules": s + d, "static_joules": s, "dynamic_joules": d,
                "gated_joules": self.gated_joules(now),
                "mean_watts": (s + d) / span if span > 0 else self.static_w}
