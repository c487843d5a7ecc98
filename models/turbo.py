"""Turbo limits: the package's turbo ratio by active core count, held to its RAPL
power limits (issue 35 item 7).

With turbo on, a core that asks for the top of the cpufreq table (acpi-cpufreq's
turbo entry) gets what the package's power control unit (PCU) grants, not the
single-core maximum whatever the load:

* **Turbo bins.** The highest ratio depends on the number of *active* cores, cores
  in C0 or C1; cores in C3/C6 do not count (Intel SDM vol. 3, MSR_TURBO_RATIO_LIMIT
  "maximum turbo ratio limit of N core active"; Tom's Hardware on Nehalem's PCU:
  "with only one core active (in C0 or C1)", idle cores "in C3 or C6"). Here a core
  is active while a hardware thread of it runs or it has not reached C6: under the
  hindsight rule, idle less than ``cstate_deep_after_us``; under menu, until every
  thread of it entered a state of C6 or deeper (models.energy, models.cpuidle; a
  core whose threads chose C3 counts as active here).
  ``PresetExtra.turbo_bins_ghz[k-1]`` is the limit with k active cores (the last
  entry for more); empty: ``turbo_ghz`` whatever the count.
* **RAPL.** The package's power is kept at or below PL1 = TDP averaged over the
  time window tau, and below PL2 = ``power_limit_2_ratio`` x TDP over a few
  milliseconds (MSR_PKG_POWER_LIMIT, 610h: Intel SDM vol. 3B "Package RAPL
  Domain"; the desktop datasheets' "Turbo Boost Technology 2.0 Package Power
  Control Settings" table, e.g. Xeon E3-1200 v3 datasheet vol. 1: PL1 default the
  SKU's TDP, POWER_LIMIT_1_TIME hardware default 1 s (28 s recommended for mobile),
  PL2 default 1.25 x TDP "may exceed this limit for up to 10 ms"; the 9th-generation
  Core datasheet vol. 1, 5.1.3: the average is an exponentially weighted moving
  average, EWMA, with time constant tau). The average updates per PCU interval as

      avg <- avg * exp(-dt / tau) + P * (1 - exp(-dt / tau))

  with P the package's mean power over the interval (its RAPL energy counter).
* **The control.** Every ``pcu_interval_us`` (500 us: Hackenberg et al., "An
  energy efficiency feature survey of the Intel Haswell processor", IPDPSW 2015,
  found frequency changes applied on a ~500 us grid) the PCU steps the package's
  turbo ceiling one bin down if the average is above PL1 or the last interval's
  power above PL2, else one bin up, never above the active cores' bin and never
  below the base clock (the top P-state): without the PL1 clamp bit, set by
  nobody by default, RAPL does not go below P1 (datasheet table above, "PL1
  Clamp bit [16]"). "When temperature, power, or current exceeds factory-configured
  limits and the processor is running above the base operating frequency, the
  processor automatically steps the core frequency back down ... then monitors
  ... and re-evaluates" (Intel Turbo Boost 2.0, as Lenovo's x3850 X6 guide
  quotes it). A core's clock is then min(its governor's request, the ceiling).

The package's power is the energy model's (models.energy: static power gated by
the C-states, CMOS dynamic power of busy cores), one meter per socket.
"""

from __future__ import annotations

import math

__all__ = ["PackageControl", "ewma", "turbo_levels"]


def ewma(avg: float, power_w: float, dt: float, tau: float) -> float:
    """RAPL's running average after ``dt`` seconds at ``power_w`` (time constant tau)."""
    if dt <= 0.0:
        return avg
    a = math.exp(-dt / tau)
    return avg * a + power_w * (1.0 - a)


def turbo_levels(preset) -> tuple[float, ...]:
    """Clocks the ceiling steps through, base clock to the top turbo bin: 100 MHz
    ratios (the bus clock of Sandy Bridge and later: Intel SDM MSR_PLATFORM_INFO,
    ratio x 100 MHz) when the P-states are 100 MHz apart, plus the turbo bins."""
    base = float(preset.pstates_ghz[-1])
    top = float(preset.turbo_ghz)
    levels = {base, top, *(float(b) for b in preset.extra.turbo_bins_ghz)}
    ps = preset.pstates_ghz
    if len(ps) > 1 and abs(ps[-1] - ps[-2] - 0.1) < 1e-6:
        k = 1
        while base + 0.1 * k < top - 1e-6:
            levels.add(round(base + 0.1 * k, 3))
            k += 1
    return tuple(sorted(f for f in levels if base - 1e-9 <= f <= top + 1e-9))


def limits_apply(preset) -> bool:
    """Whether a preset's turbo is limited at all (bins or a power limit)."""
    extra = preset.extra
    return bool(preset.turbo and preset.turbo_ghz and preset.turbo_ghz > preset.pstates_ghz[-1]
                and (extra.turbo_bins_ghz or (extra.power_limit_tau_s > 0 and preset.tdp_w)))


class PackageControl:
    """The PCU of each socket: its turbo ceiling (GHz), its RAPL average (W).

    ``busy``/``idle``/``freq_change`` take the controller's notices (global CPU
    numbers); ``tick(socket, now)`` runs one PCU interval and returns the new
    ceiling of that socket.
    """

    def __init__(self, preset):
        from warmcore.models.energy import EnergyMeter
        from warmcore.models.presets import cpu_topology, with_overrides

        extra = preset.extra
        self.preset = preset
        self.interval_s = extra.pcu_interval_us * 1e-6
        self.levels = turbo_levels(preset)
        self.base_ghz = self.levels[0]
        self.bins = tuple(float(b) for b in extra.turbo_bins_ghz) or (float(preset.turbo_ghz),)
        self.tau_s = extra.power_limit_tau_s if preset.tdp_w else 0.0
        self.pl1_w = float(preset.tdp_w or 0.0)
        self.pl2_w = self.pl1_w * extra.power_limit_2_ratio
        core, _llc, socket, thread = cpu_topology(preset)
        cps = preset.cores_per_socket
        # one meter per socket, on a one-socket copy of the preset: CPU c of the machine
        # is that copy's CPU thread * cores_per_socket + its core within the socket
        one = with_overrides(preset, sockets=1)
        self.meters = [EnergyMeter(one) for _ in range(preset.sockets)]
        self.socket_of = list(socket)
        self.local_cpu = [thread[c] * cps + core[c] - socket[c] * cps for c in range(len(core))]
        self.ceiling = [self.levels[-1]] * preset.sockets        # what the cores get
        self.power_ceiling = [self.levels[-1]] * preset.sockets  # what RAPL allows
        floor = self.meters[0].idle_floor_w
        self.avg_w = [floor] * preset.sockets      # the package was idle before the run
        self.last_w = [floor] * preset.sockets     # mean power of the last interval
        self._mark = [(0.0, 0.0)] * preset.sockets  # (time, joules) at the last tick
        self.deep_after = None     # use_idle_model

    def start(self, now: float) -> None:
        self._mark = [(now, m.joules(now)) for m in self.meters]

    # -- notices (global CPU numbers) ---------------------------------------
    def busy(self, cpu: int, now: float, ghz: float) -> None:
        self.meters[self.socket_of[cpu]].busy(self.local_cpu[cpu], now, ghz)

    def idle(self, cpu: int, now: float) -> None:
        d = self.deep_after
        self.meters[self.socket_of[cpu]].idle(self.local_cpu[cpu], now,
                                              None if d is None else d[cpu])

    def use_idle_model(self, deep_after) -> None:
        """The meters gate by a cpuidle governor's states (EnergyMeter.use_idle_model):
        ``deep_after`` (global CPU numbers) holds, when a CPU goes idle, how long until
        it reaches a gating state; the caller updates it before the idle notice."""
        self.deep_after = deep_after
        for s, meter in enumerate(self.meters):
            local = [0.0] * meter.n_cpus
            for cpu, sock in enumerate(self.socket_of):
                if sock == s and self.local_cpu[cpu] < meter.n_cpus:
                    local[self.local_cpu[cpu]] = deep_after[cpu]
            meter.use_idle_model(local)

    def freq_change(self, cpu: int, now: float, ghz: float) -> None:
        self.meters[self.socket_of[cpu]].freq_change(self.local_cpu[cpu], now, ghz)

    # -- the control ---------------------------------------------------------
    def bin_ghz(self, active: int) -> float:
        """The turbo limit with ``active`` cores in C0/C1 (at least one)."""
        b = self.bins
        return b[min(max(active, 1), len(b)) - 1]

    def tick(self, s: int, now: float) -> float:
        """One PCU interval of socket ``s`` ending at ``now``: the RAPL average, then the
        power ceiling one level down (over PL1 on average or PL2 now) or, while it is
        what binds, one up; the ceiling is the lower of it and the active cores' bin
        (a bin applies at once: it is a limit, not a control)."""
        meter = self.meters[s]
        t0, j0 = self._mark[s]
        j = meter.joules(now)
        self._mark[s] = (now, j)
        top = self.bin_ghz(meter.active_cores(now))
        pc = self.power_ceiling[s]
        if self.tau_s > 0.0 and now > t0:
            p = (j - j0) / (now - t0)
            self.last_w[s] = p
            self.avg_w[s] = avg = ewma(self.avg_w[s], p, now - t0, self.tau_s)
            lv = self.levels
            if avg > self.pl1_w or p > self.pl2_w:
                pc = lv[max(0, lv.index(min(pc, top)) - 1)]
            elif pc < top:
                pc = lv[lv.index(pc) + 1]
            self.power_ceiling[s] = pc
        self.ceiling[s] = c = min(pc, top)
        return c
