"""Linux cpufreq governors, the PELT utilisation signal and a DVFS controller.

Governors are pure policies: one instance per frequency domain (a cpufreq
*policy* in Linux terms), sampled every ``period_s`` seconds (``None`` for the
fixed governors), each answering ``next_freq(now, cur_ghz, loads, utils,
iowait_boost)`` with a frequency from the domain's table (the preset's
``pstates_ghz``, plus ``turbo_ghz`` when ``preset.turbo``).

Sources (Linux, v4.7 onwards unless noted):
  * ``drivers/cpufreq/cpufreq_ondemand.c`` (``od_update``): load > up_threshold
    -> max; else ``f = min_f + load * (max_f - min_f) / 100`` (the formula since
    v3.12; Linux 3.5 still scaled load by the current frequency);
    ``MICRO_FREQUENCY_UP_THRESHOLD`` = 95 (idle micro-accounting),
    ``DEF_FREQUENCY_UP_THRESHOLD`` = 80; ``sampling_down_factor`` keeps the
    maximum for that many periods.
  * ``drivers/cpufreq/cpufreq_conservative.c`` (``cs_dbs_update``): a
    ``requested_freq`` moved by ``freq_step`` % of max per sample; up with
    ``CPUFREQ_RELATION_H``, down with ``CPUFREQ_RELATION_L``; defaults
    up 80, down 20, step 5.
  * ``drivers/cpufreq/cpufreq_governor.c`` (``dbs_update``): load = integer
    percentage busy over the period, maximum over the policy's CPUs.
  * ``kernel/sched/cpufreq_schedutil.c``: ``get_next_freq`` = 1.25 * max_freq *
    util / max when util is frequency-invariant (``arch_scale_freq_invariant()``),
    else 1.25 * cur_freq * util / max, resolved with RELATION_L; evaluated on the
    scheduler's utilisation updates (a CPU starts or stops running, and the tick
    while it runs) once ``rate_limit_us`` has passed since the last frequency
    *change* (``sugov_should_update_freq``; ``last_freq_update_time`` moves only
    when ``next_freq`` changes, ``sugov_update_next_freq``); a one-CPU policy does
    not lower the clock of a CPU that has not idled since the last evaluation
    (``sugov_cpu_is_busy``); iowait boost starting at ``IOWAIT_BOOST_MIN`` =
    SCHED_CAPACITY_SCALE / 8, doubling per iowait wake-up up to 1024, halving per
    update without one.
  * ``kernel/sched/pelt.c``: y^32 = 0.5, 1024 us periods; a running period's
    contribution scaled by the CPU's frequency and capacity
    (``accumulate_sum``: ``cap_scale(contrib, arch_scale_freq_capacity)`` then
    ``arch_scale_cpu_capacity``): util is then the work done at the top clock of
    the biggest CPU, whatever the clock it ran at. Capacity is
    SCHED_CAPACITY_SCALE on every CPU here (the presets are homogeneous SMP, as
    x86 reports since Linux 4.19 dropped smt_gain); frequency scale =
    f / f_max, f_max the top of the domain's table.

Per-CPU policies (``PresetExtra.cpufreq_policy = "cpu"``, the Sandy/Ivy Bridge client
presets): where the firmware's ACPI _PSD asks for hardware coordination (HW_ALL),
acpi-cpufreq gives every CPU its own policy (``acpi_cpufreq_cpu_init`` copies the
domain into ``policy->cpus`` only for SW_ALL/SW_ANY), so each CPU runs its own
ondemand (or conservative) on its own load alone, with its own sampling_down_factor,
and writes its own request. Linux 3.x's timer per policy (``do_dbs_timer``) is
aligned to the period ("delay -= jiffies % delay") and deferrable: an idle CPU is
not woken for it, it runs at the first tick after the CPU wakes, over the whole
window since its last sample. The package's cores share one clock, which runs the
highest P-state requested among the *active* cores (Intel's desktop datasheets,
e.g. 3rd Gen Core Desktop Datasheet vol. 1, 4.2.1 Enhanced Intel SpeedStep
Technology: "the highest frequency P-state requested amongst all active cores";
an idle core in a C-state has no vote), a new resolution waiting for a transition
in progress to complete ("the new transition is deferred until the previous
transition is completed"). So a thread whose work is spread over CPUs makes each
CPU's governor see part of the load and the package run the request of whichever
CPUs run at the moment. The governors' rule itself is the one above (the later
kernels' f = min_f + load * (max_f - min_f) / 100), not 3.5's load * freq_avg
against up_threshold * cur with its down_differential (docs/model.md, "The
governor's view of a thread that moves").

Simplifications: the tick is CONFIG_HZ=250's 4 ms (the default of
kernel/Kconfig.hz); per-domain (not per-CPU) iowait boost, which only
``DvfsController.iowait_wakeup`` sets (no simulated wait is an iowait: Linux
counts block-device waits, io_schedule, not the socket waits the strategies
make); no ``io_is_busy``, ``ignore_nice_load``. ondemand's ``powersave_bias``
(powersave_bias_target) alternates the two P-states around its lowered target
within a period: a sub-sample sets the low one after the high one's share.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from numbers import Real
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from warmcore.simcore.config import ConfigError, config_error

__all__ = [
    "GOVERNORS",
    "IOWAIT_BOOST_MIN",
    "PELT_PERIOD_S",
    "PELT_Y",
    "SCHED_CAPACITY_SCALE",
    "TICK_S",
    "Conservative",
    "DvfsController",
    "Governor",
    "Ondemand",
    "Pelt",
    "Performance",
    "Powersave",
    "Schedutil",
    "Userspace",
    "available_ghz",
    "frequency_domains",
    "make_governor",
]

PELT_PERIOD_S = 1.024e-3                 # kernel/sched/pelt.c: 1024 us periods
TICK_S = 4e-3                            # CONFIG_HZ=250, kernel/Kconfig.hz's default
PELT_Y = 0.5 ** (1.0 / 32.0)             # y^32 = 0.5: half-life 32 periods
SCHED_CAPACITY_SCALE = 1024
# Linux 3.x (to 3.10) cpufreq_ondemand.c with idle micro-accounting (cpufreq_gov_dbs_init:
# "Idle micro accounting is supported. Use finer thresholds"): up_threshold 95 and
# down_differential 3 (MICRO_FREQUENCY_UP_THRESHOLD, MICRO_FREQUENCY_DOWN_DIFFERENTIAL)
MICRO_FREQUENCY_DOWN_DIFFERENTIAL = 3
IOWAIT_BOOST_MIN = SCHED_CAPACITY_SCALE // 8
_LN_Y_PER_S = math.log(PELT_Y) / PELT_PERIOD_S
_INF = math.inf


# --------------------------------------------------------------------------
# Frequency tables and domains
# --------------------------------------------------------------------------

def available_ghz(preset) -> tuple[float, ...]:
    """Frequencies a domain may run at: P-states, plus turbo when enabled."""
    table = tuple(float(f) for f in preset.pstates_ghz)
    if preset.turbo and preset.turbo_ghz and preset.turbo_ghz > table[-1]:
        table = (*table, float(preset.turbo_ghz))
    return table


def _khz(ghz: float) -> int:
    return round(ghz * 1e6)


def _next_multiple(now: float, step: float) -> float:
    """The first multiple of ``step`` after ``now`` (a timer aligned to its period)."""
    return (math.floor(now / step + 1e-9) + 1) * step


def frequency_domains(preset) -> list[list[int]]:
    """CPUs sharing a clock, by ``preset.freq_domain`` ("core" or "package").

    CPU numbering as models.presets.cpu_topology (Linux's). SMT siblings always
    share their core's clock.
    """
    from warmcore.models.presets import cpu_topology

    core, _llc, socket, _thread = cpu_topology(preset)
    if preset.freq_domain == "core":
        return [[cpu for cpu, k in enumerate(core) if k == c]
                for c in range(preset.sockets * preset.cores_per_socket)]
    if preset.freq_domain == "package":
        return [[cpu for cpu, k in enumerate(socket) if k == s]
                for s in range(preset.sockets)]
    raise ConfigError("freq_domain", f"{preset.freq_domain!r} is not a frequency domain kind "
                                     "(expected 'core' or 'package')")


# --------------------------------------------------------------------------
# PELT
# --------------------------------------------------------------------------

class Pelt:
    """Per-CPU PELT utilisation (0..1024), Linux kernel/sched/pelt.c.

    Per 1.024 ms period: u <- u*y + 1024*(1-y)*r with y = 0.5**(1/32) and r the
    running fraction. Over n periods of constant r the closed form is
    u_n = u_0*y^n + 1024*r*(1-y^n); ``update`` applies it for any elapsed time
    (n need not be an integer), so its cost is O(1) however long the gap.
    """

    __slots__ = ("running", "t", "util")

    def __init__(self, util: float = 0.0, now: float = 0.0, running: float = 0.0):
        self.util = float(util)
        self.t = float(now)
        self.running = float(running)

    @staticmethod
    def step(u: float, r: float) -> float:
        """One period of the recurrence."""
        return u * PELT_Y + SCHED_CAPACITY_SCALE * (1.0 - PELT_Y) * r

    @staticmethod
    def closed_form(u0: float, r: float, n: float) -> float:
        """Value after ``n`` periods at running fraction ``r``, from ``u0``."""
        yn = PELT_Y ** n
        return u0 * yn + SCHED_CAPACITY_SCALE * r * (1.0 - yn)

    def value(self, now: float) -> float:
        """Utilisation at ``now`` without changing the state."""
        dt = now - self.t
        if dt <= 0.0:
            return self.util
        yn = math.exp(dt * _LN_Y_PER_S)
        return self.util * yn + SCHED_CAPACITY_SCALE * self.running * (1.0 - yn)

    def update(self, now: float, running: float | None = None) -> float:
        """Advance to ``now`` with the current running state, then set a new one."""
        dt = now - self.t
        if dt > 0.0:
            yn = math.exp(dt * _LN_Y_PER_S)
            self.util = self.util * yn + SCHED_CAPACITY_SCALE * self.running * (1.0 - yn)
            self.t = now
        if running is not None:
            self.running = float(running)
        return self.util


# --------------------------------------------------------------------------
# Governors
# --------------------------------------------------------------------------

def _number(gov: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ConfigError(key, f"{value!r} is not a finite number ({gov} governor)")
    return float(value)


class NoTunables(BaseModel):
    """The fixed governors (performance, powersave, userspace) take no tunables."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class DbsTunables(NoTunables):
    """What the demand-based governors share (cpufreq_governor.c's dbs_data);
    defaults are the kernel's (sampling_rate: 10 ms, the usual transition-latency
    based value on x86)."""

    # Bounded below: each sample is an event on every CPU, and the kernel itself
    # refuses rates under its minimum (cpufreq_governor.c: dbs_data->min_sampling_rate,
    # 10 ms x ... on old kernels; 2 x the transition latency, at least 100 us on x86).
    sampling_rate_us: FiniteFloat = Field(default=10000.0, ge=100, le=1e7,
                                          description="cpufreq_governor.c sampling_rate")
    up_threshold: FiniteFloat = Field(default=95.0, ge=1, le=100, description=(
        "cpufreq_ondemand.c DEF_FREQUENCY_UP_THRESHOLD 80, 95 with idle micro-accounting"))
    sampling_down_factor: FiniteFloat = Field(default=1.0, ge=1, le=100000,
                                              multiple_of=1.0,
                                              description="DEF_SAMPLING_DOWN_FACTOR 1")


class OndemandTunables(DbsTunables):
    powersave_bias: FiniteFloat = Field(default=0.0, ge=0, le=1000, multiple_of=1.0, description=(
        "cpufreq_ondemand.c powersave_bias, per mille (0 by default; store_powersave_bias "
        "caps it at 1000): the target lowered by bias/1000 and met by alternating the "
        "P-states around it within the period (powersave_bias_target)"))


class ConservativeTunables(DbsTunables):
    up_threshold: FiniteFloat = Field(default=80.0, ge=1, le=100, description=(
        "cpufreq_conservative.c DEF_FREQUENCY_UP_THRESHOLD"))
    down_threshold: FiniteFloat = Field(default=20.0, ge=1, le=100, description=(
        "cpufreq_conservative.c DEF_FREQUENCY_DOWN_THRESHOLD"))
    freq_step: FiniteFloat = Field(default=5.0, ge=0, le=100,
                                   description="cpufreq_conservative.c DEF_FREQUENCY_STEP (%)")
    sampling_down_factor: FiniteFloat = Field(default=1.0, ge=1, le=10000, multiple_of=1.0,
                                              description="MAX_SAMPLING_DOWN_FACTOR 10000")

    @model_validator(mode="after")
    def _down_below_up(self):
        if not self.down_threshold < self.up_threshold:
            raise ConfigError("down_threshold", f"{self.down_threshold} must be below "
                                                f"up_threshold ({self.up_threshold})")
        return self


class SchedutilTunables(NoTunables):
    rate_limit_us: FiniteFloat = Field(default=1000.0, gt=0, le=1e7, description=(
        "cpufreq_schedutil.c rate_limit_us (transition latency based, ~1-2 ms)"))


def _defaults(model: type[BaseModel]) -> dict[str, float]:
    return {k: f.default for k, f in model.model_fields.items()}


class Governor:
    """Base of the policies. Subclasses set ``name`` and ``tunables`` (defaults)."""

    name = "base"
    Tunables: ClassVar[type[BaseModel]] = NoTunables
    tunables: ClassVar[dict[str, float]] = {}       # Tunables' defaults
    fixed = True            # no sampling (period_s is None)
    event_driven = False    # also evaluated when a CPU starts or stops running
    needs_busy_ghz = False  # next_freq takes busy_ghz (each CPU's mean clock while busy)

    def __init__(self, preset, params: dict | None = None):
        self._table = [_khz(f) for f in available_ghz(preset)]
        self.table_ghz = tuple(k / 1e6 for k in self._table)
        self.min_khz = self._table[0]
        self.max_khz = self._table[-1]
        self.params = self._check(params)

    @property
    def period_s(self) -> float | None:
        return None

    def _check(self, params: dict | None) -> dict:
        """The tunables, validated by the governor's pydantic model (``Tunables``):
        a ConfigError naming the first bad one (``params.KEY``), in the kernel's words
        (pydantic's "less than or equal to 100")."""
        try:
            return self.Tunables.model_validate(params or {}).model_dump()
        except ValidationError as e:
            valid = ", ".join(sorted(self.tunables)) or "none"
            raise config_error(e, prefix="params", plain=False, note=f"{self.name} governor",
                               unknown=f"not a tunable of the {self.name} governor "
                                       f"(valid: {valid})") from None

    # Snapping, as cpufreq_frequency_table_target() does.
    def _clamp(self, khz: float) -> float:
        return min(max(khz, self.min_khz), self.max_khz)

    def relation_l(self, khz: float) -> int:
        """Lowest table frequency at or above ``khz`` (CPUFREQ_RELATION_L)."""
        t = self._table
        i = bisect_left(t, self._clamp(khz))
        return t[min(i, len(t) - 1)]

    def relation_h(self, khz: float) -> int:
        """Highest table frequency at or below ``khz`` (CPUFREQ_RELATION_H)."""
        t = self._table
        i = bisect_right(t, self._clamp(khz)) - 1
        return t[max(i, 0)]

    def reset(self) -> None:
        """Forget governor state (conservative's requested_freq, iowait boost...)."""

    def next_freq(self, now: float, cur_ghz: float, loads: list[float],
                  utils: list[float], iowait_boost: bool = False) -> float:
        raise NotImplementedError


class Performance(Governor):
    """Always the highest frequency (turbo when enabled)."""

    name = "performance"

    def next_freq(self, now, cur_ghz, loads, utils, iowait_boost=False):
        return self.table_ghz[-1]


class Powersave(Governor):
    """Always the lowest P-state (the cpufreq governor, not intel_pstate's)."""

    name = "powersave"

    def next_freq(self, now, cur_ghz, loads, utils, iowait_boost=False):
        return self.table_ghz[0]


class Userspace(Governor):
    """A fixed frequency set by the user, resolved with RELATION_L."""

    name = "userspace"

    def __init__(self, preset, ghz: float | None, params: dict | None = None):
        super().__init__(preset, params)
        if ghz is None:
            raise ConfigError("userspace_ghz", "required by the userspace governor")
        ghz = _number(self.name, "userspace_ghz", ghz)
        lo, hi = self.table_ghz[0], self.table_ghz[-1]
        if not lo - 1e-9 <= ghz <= hi + 1e-9:
            raise ConfigError("userspace_ghz",
                              f"{ghz} is outside the preset's frequency range {lo}..{hi} GHz")
        self.ghz = self.relation_l(_khz(ghz)) / 1e6

    def next_freq(self, now, cur_ghz, loads, utils, iowait_boost=False):
        return self.ghz


def _load_pct(loads: list[float]) -> int:
    """dbs_update(): integer percent busy, maximum over the policy's CPUs."""
    if not loads:
        return 0
    x = max(loads)
    return min(100, max(0, math.floor(100.0 * x + 1e-9)))


class Ondemand(Governor):
    """cpufreq_ondemand.c: jump to max above up_threshold, else proportional; or, with
    ``PresetExtra.ondemand_rule = "load-freq"``, Linux 3.x's (to 3.10) dbs_check_cpu
    (``load_freq_rule``)."""

    name = "ondemand"
    fixed = False
    Tunables = OndemandTunables
    tunables: ClassVar[dict[str, float]] = _defaults(OndemandTunables)

    def __init__(self, preset, params: dict | None = None):
        super().__init__(preset, params)
        self._rate_mult = 1
        self.rule = preset.extra.ondemand_rule
        self.needs_busy_ghz = self.rule == "load-freq"
        # powersave_bias's alternation after the last sample: the low P-state (GHz; 0:
        # none) and the kHz of powersave_bias_target (freq_avg, freq_lo, freq_hi)
        self.freq_lo = 0.0
        self._split = (0, 0, 1)

    @property
    def period_s(self) -> float:
        return self.params["sampling_rate_us"] * 1e-6 * self._rate_mult

    def reset(self) -> None:
        self._rate_mult = 1

    def next_freq(self, now, cur_ghz, loads, utils, iowait_boost=False, busy_ghz=None):
        self.freq_lo = 0.0                      # dbs_check_cpu / od_update: freq_lo = 0
        if self.rule == "load-freq":
            return self.load_freq_rule(_khz(cur_ghz), loads, busy_ghz) / 1e6
        load = _load_pct(loads)
        if load > self.params["up_threshold"]:
            if _khz(cur_ghz) < self.max_khz:
                self._rate_mult = int(self.params["sampling_down_factor"])
            return self._biased(self.max_khz) / 1e6
        self._rate_mult = 1
        f = self.min_khz + load * (self.max_khz - self.min_khz) // 100
        return self._biased(self.relation_l(f)) / 1e6

    def _biased(self, khz: int) -> int:
        """The P-state asked for, with powersave_bias (powersave_bias_target): the
        target lowered by bias/1000 (freq_avg) and met by the P-states around it, the
        high one first for part of the period (``high_units``), then ``freq_lo``.
        Without a bias, or when freq_avg is a P-state: one P-state."""
        bias = int(self.params["powersave_bias"])
        if not bias:
            return khz
        avg = khz - khz * bias // 1000
        lo, hi = self.relation_h(avg), self.relation_l(avg)
        if lo == hi:
            return lo
        self.freq_lo = lo / 1e6
        self._split = (avg, lo, hi)
        return hi

    def high_units(self, total: int) -> int:
        """Of a period of ``total`` units (jiffies in Linux 3.x, microseconds later),
        how many at the high P-state: ((freq_avg - lo) x total + (hi - lo) / 2) /
        (hi - lo) in integers, as powersave_bias_target rounds it."""
        avg, lo, hi = self._split
        return ((avg - lo) * total + (hi - lo) // 2) // (hi - lo)

    def load_freq_rule(self, cur: int, loads: list[float], busy_ghz: list[float] | None) -> int:
        """Linux 3.x dbs_check_cpu (cpufreq_ondemand.c up to 3.10), in kHz: each CPU's
        integer load times its average clock over the window (freq_avg, acpi-cpufreq's
        getavg from APERF/MPERF: the clock while it ran; policy->cur if it did not run),
        the maximum over the policy's CPUs; above up_threshold x cur: the top (and
        sampling_down_factor); else, unless already at the minimum, below
        (up_threshold - down_differential) x cur: the lowest P-state at or above
        max_load_freq / (up_threshold - down_differential) (RELATION_L); between the
        two: no change. So a CPU busy half the time at 3.4 GHz asks for 1.9 GHz (the
        clock it would be 92 % busy at), not the later kernels' 2.5."""
        p = self.params
        up = p["up_threshold"]
        max_load_freq = 0
        for i, x in enumerate(loads):
            g = busy_ghz[i] if busy_ghz else 0.0
            freq_avg = _khz(g) if g > 0.0 else cur
            max_load_freq = max(max_load_freq, _load_pct([x]) * freq_avg)
        if max_load_freq > up * cur:
            if cur < self.max_khz:
                self._rate_mult = int(p["sampling_down_factor"])
            return self._biased(self.max_khz)
        if cur <= self.min_khz:
            return cur
        band = up - MICRO_FREQUENCY_DOWN_DIFFERENTIAL
        if max_load_freq < band * cur:
            self._rate_mult = 1
            return self._biased(self.relation_l(max(max_load_freq // band, self.min_khz)))
        return cur


class Conservative(Governor):
    """cpufreq_conservative.c: step requested_freq by freq_step % of max."""

    name = "conservative"
    fixed = False
    Tunables = ConservativeTunables
    tunables: ClassVar[dict[str, float]] = _defaults(ConservativeTunables)

    def __init__(self, preset, params: dict | None = None):
        super().__init__(preset, params)
        p = self.params
        step = int(p["freq_step"] * self.max_khz // 100)
        self._step = step if step else 5 * self.max_khz // 100   # DEF_FREQUENCY_STEP
        self._requested: int | None = None
        self._down_skip = 0

    @property
    def period_s(self) -> float:
        return self.params["sampling_rate_us"] * 1e-6

    @property
    def requested_ghz(self) -> float | None:
        return None if self._requested is None else self._requested / 1e6

    def reset(self) -> None:
        self._requested = None
        self._down_skip = 0

    def next_freq(self, now, cur_ghz, loads, utils, iowait_boost=False):
        p = self.params
        cur = _khz(cur_ghz)
        if p["freq_step"] == 0:
            return cur_ghz
        req = self._requested
        if req is None or req > self.max_khz or req < self.min_khz:
            req = cur
        load = _load_pct(loads)
        if load > p["up_threshold"]:
            self._down_skip = 0
            if req == self.max_khz:
                self._requested = req
                return cur_ghz
            req = min(req + self._step, self.max_khz)
            self._requested = req
            return self.relation_h(req) / 1e6
        self._down_skip += 1
        if self._down_skip < p["sampling_down_factor"]:
            self._requested = req
            return cur_ghz
        self._down_skip = 0
        if load < p["down_threshold"]:
            if req == self.min_khz:
                self._requested = req
                return cur_ghz
            req = req - self._step if req > self._step else self.min_khz
            self._requested = req
            return self.relation_l(req) / 1e6
        self._requested = req
        return cur_ghz


class Schedutil(Governor):
    """cpufreq_schedutil.c: f = 1.25 * f_max * util / 1024 for frequency-invariant
    util, else 1.25 * f_cur * util / 1024 (``get_next_freq``), iowait boost. The
    controller evaluates it on utilisation updates and the tick (``event_driven``),
    at most once per ``rate_limit_us`` after a change."""

    name = "schedutil"
    fixed = False
    event_driven = True
    Tunables = SchedutilTunables
    tunables: ClassVar[dict[str, float]] = _defaults(SchedutilTunables)

    def __init__(self, preset, params: dict | None = None):
        super().__init__(preset, params)
        self.boost = 0
        self.freq_invariant = preset.extra.freq_invariance

    @property
    def period_s(self) -> float:
        """The scheduler tick: a running CPU's utilisation update (scheduler_tick ->
        task_tick_fair -> update_load_avg -> cpufreq_update_util)."""
        return TICK_S

    @property
    def rate_limit_s(self) -> float:
        return self.params["rate_limit_us"] * 1e-6

    def reset(self) -> None:
        self.boost = 0

    def next_freq(self, now, cur_ghz, loads, utils, iowait_boost=False):
        util = max(utils) if utils else 0.0
        if iowait_boost:        # sugov_iowait_boost()
            self.boost = (min(self.boost << 1, SCHED_CAPACITY_SCALE) if self.boost
                          else IOWAIT_BOOST_MIN)
        elif self.boost:        # sugov_iowait_apply() without a pending boost
            self.boost >>= 1
            if self.boost < IOWAIT_BOOST_MIN:
                self.boost = 0
        util = min(max(util, self.boost), SCHED_CAPACITY_SCALE)
        # get_next_freq(): invariant util is a share of the top clock's capacity; raw
        # util (a running fraction at the current clock) of the current clock's
        m = self.max_khz if self.freq_invariant else _khz(cur_ghz)
        f = (m + (m >> 2)) * util / SCHED_CAPACITY_SCALE     # map_util_freq()
        return self.relation_l(f) / 1e6


GOVERNORS: dict[str, type[Governor]] = {
    g.name: g for g in (Performance, Powersave, Userspace, Ondemand, Conservative, Schedutil)
}


def make_governor(name: str, preset, params: dict | None = None,
                  userspace_ghz: float | None = None) -> Governor:
    """One governor instance (for one frequency domain)."""
    cls = GOVERNORS.get(name)
    if cls is None:
        raise ConfigError(
            "governor", f"unknown governor {name!r} (known: {', '.join(sorted(GOVERNORS))})")
    if cls is Userspace:
        return Userspace(preset, userspace_ghz, params)
    if userspace_ghz is not None:
        raise ConfigError("userspace_ghz",
                          f"only meaningful with the userspace governor, not {name}")
    return cls(preset, params)


# --------------------------------------------------------------------------
# Controller
# --------------------------------------------------------------------------

def _package_control(preset):
    """The package's turbo limits (models.turbo.PackageControl) if its turbo has any."""
    from warmcore.models.turbo import PackageControl, limits_apply

    return PackageControl(preset) if limits_apply(preset) else None


class DvfsController:
    """Frequencies of all CPUs over a run: governor sampling, transitions, reports.

    preset         a models.presets.Preset
    governor       name in GOVERNORS
    domains        CPUs sharing a clock (see frequency_domains); must partition 0..n-1
    userspace_ghz  the frequency of the userspace governor
    params         governor tunables by their Linux names
    initial_ghz    starting frequency of dynamic governors (default: the table's max,
                   as after boot); fixed governors start at their own frequency
    max_changes    length of the ``changes`` log kept for timelines

    Hot path: ``ghz(cpu, now)`` is one comparison and one list lookup; a change
    decided at a sample takes effect ``transition_latency_us`` later and is applied
    lazily by the first call at or after that time (no SimPy event). Call
    ``cpu_busy``/``cpu_idle`` before notifying other listeners (energy) of the same
    event so that a due change is applied first. Fixed governors start no process
    and their ``ghz`` is a plain list lookup (``cpu_ghz[cpu]``).
    """

    def __init__(self, preset, governor: str, domains: list[list[int]],
                 userspace_ghz: float | None = None, params: dict | None = None,
                 initial_ghz: float | None = None, max_changes: int = 10000):
        self.preset = preset
        self.governor = governor
        self.domains = [list(d) for d in domains]
        cpus = sorted(c for d in self.domains for c in d)
        if not cpus or cpus != list(range(len(cpus))) or any(not d for d in self.domains):
            raise ConfigError("domains", "must be non-empty lists partitioning CPUs 0..n-1")
        self.n_cpus = len(cpus)
        first = make_governor(governor, preset, params, userspace_ghz)
        gov_fixed = first.fixed
        # one governor per cpufreq policy: per frequency domain, or per CPU where the
        # hardware coordinates the domain's requests (PresetExtra.cpufreq_policy)
        self.per_cpu = (preset.extra.cpufreq_policy == "cpu" and not gov_fixed
                        and not first.event_driven)
        policies = self.n_cpus if self.per_cpu else len(self.domains)
        self.governors = [first] + [make_governor(governor, preset, params, userspace_ghz)
                                    for _ in range(policies - 1)]
        self.latency_s = preset.transition_latency_us * 1e-6
        self.table_ghz = self.governors[0].table_ghz
        self.cpu_domain = [0] * self.n_cpus
        for d, dom in enumerate(self.domains):
            for c in dom:
                self.cpu_domain[c] = d
        if gov_fixed:
            f0 = [g.next_freq(0.0, 0.0, [], []) for g in self.governors]
        else:
            if initial_ghz is None:
                g0 = self.table_ghz[-1]
            else:
                g0 = self.governors[0].relation_l(_khz(_number(governor, "initial_ghz",
                                                               initial_ghz))) / 1e6
            f0 = [g0] * len(self.domains)
        self.cpu_ghz = [f0[self.cpu_domain[c]] for c in range(self.n_cpus)]
        # each domain's governor request: its clock unless the package's turbo limits
        # hold it lower (models.turbo; None when the preset's turbo has no limits)
        self._req = list(f0)
        self.pcu = _package_control(preset)
        # the controller is fixed (a plain lookup) only without a PCU changing clocks
        self.fixed = gov_fixed and self.pcu is None
        self._gov_fixed = gov_fixed
        self.changes: deque = deque(maxlen=max_changes)
        self.freq_changes = 0                   # changes applied so far (all domains)
        self._listeners: list[Callable[[int, float, float], None]] = []
        # on_pending(domain, due): a change was decided that applies at ``due`` (the
        # hardware model uses it to apply it on time when rates change during work)
        self.on_pending: Callable[[int, float], None] | None = None
        n, nd = self.n_cpus, len(self.domains)
        # per CPU: time a pending change is due; read in place with cpu_ghz by the
        # hardware model (HardwareMachine.clock_ghz): both lists are only ever mutated
        self.due_at = [_INF] * n
        self._pending: list[tuple[float, float] | None] = [None] * nd
        self._busy_since = [-1.0] * n           # -1: idle
        self._busy_total = [0.0] * n
        self._busy_mark = [0.0] * n             # busy total at the last sample
        self._cyc = [0.0] * n                   # GHz*s while busy (for busy-weighted GHz)
        self._cyc_t = [0.0] * n
        self._cyc_mark = [0.0] * n              # cycles at the last sample (load-freq rule)
        self._iowait = [False] * nd
        self.pelt = [Pelt() for _ in range(n)]
        # PELT's frequency invariance (kernel/sched/pelt.c): a running CPU contributes
        # f / f_max of a period; raw running time without it (Preset.extra)
        self._freq_scale = 1.0 / self.table_ghz[-1] if preset.extra.freq_invariance else 0.0
        # schedutil: evaluated on utilisation updates, rate-limited after a change
        self.event_driven = self.governors[0].event_driven
        self._freq_update_t = [-_INF] * nd      # sugov last_freq_update_time
        self._idle_calls = [0] * n              # times each CPU went idle
        self._saved_idle_calls = [0] * n        # ... at its domain's last evaluation
        if self.per_cpu:
            self._init_per_cpu()
        if self.pcu is not None:
            sock = self.pcu.socket_of
            self._dom_socket = [sock[dom[0]] for dom in self.domains]
            self.cpu_ghz[:] = [min(f, self.pcu.ceiling[sock[c]])
                               for c, f in enumerate(self.cpu_ghz)]
            self.add_listener(self.pcu.freq_change)
        self._start(0.0)
        if self.fixed:
            cpu_ghz = self.cpu_ghz
            self.ghz = lambda cpu, now: cpu_ghz[cpu]          # hot path: a plain lookup

    # -- setup -------------------------------------------------------------
    def _init_per_cpu(self) -> None:
        """State of per-CPU policies: each CPU's request (its governor's last target,
        the P-state it wrote to its IA32_PERF_CTL) and its deferred timer's wake-up."""
        self.cpu_req = list(self.cpu_ghz)
        self._wake_ev: list = [None] * self.n_cpus

    def _start(self, now: float) -> None:
        self.t_start = now
        nd = len(self.domains)
        self._dom_since = [now] * nd
        self._dom_int = [0.0] * nd
        self._last_sample = [now] * nd
        self._cpu_last_sample = [now] * self.n_cpus
        self.changes.clear()
        for d, dom in enumerate(self.domains):
            self.changes.append((now, d, self.cpu_ghz[dom[0]]))
        for p in self.pelt:
            p.t = now

    def add_listener(self, fn: Callable[[int, float, float], None]) -> None:
        """Call ``fn(cpu, t, ghz)`` for every CPU whose frequency changes (at time t)."""
        self._listeners.append(fn)

    def bind(self, env) -> None:
        """Start one sampling process per domain (none for fixed governors)."""
        self.env = env
        self._start(env.now)
        if self.pcu is not None:
            self.pcu.start(env.now)
            for s in range(len(self.pcu.meters)):
                env.process(self._pcu_loop(env, s))
        if self._gov_fixed:
            return
        if self.per_cpu:
            for c in range(self.n_cpus):
                env.process(self._cpu_sampler(env, c))
            return
        for d in range(len(self.domains)):
            env.process(self._sampler(env, d))

    def _sampler(self, env, d: int):
        gov = self.governors[d]
        dom = self.domains[d]
        busy = self._busy_since
        delay = gov.period_s
        low = low_s = 0.0           # powersave_bias: the low P-state the sub-sample sets
        while True:
            yield env.timeout(delay)
            if low:                 # od_dbs_update's OD_SUB_SAMPLE: freq_lo for the rest
                self._sync(dom[0], env.now)
                self._request(d, env.now, low, in_notice=False)
                low, delay = 0.0, low_s
                continue
            if not self.event_driven:
                self.sample(d, env.now)
            elif any(busy[c] >= 0.0 for c in dom):      # the tick of a running CPU
                self._update_util(d, env.now)
            delay = gov.period_s
            if getattr(gov, "freq_lo", 0.0):            # freq_hi_delay_us, freq_lo_delay_us
                total = round(gov.params["sampling_rate_us"])
                high = gov.high_units(total)
                low, delay, low_s = gov.freq_lo, high * 1e-6, (total - high) * 1e-6

    def _cpu_sampler(self, env, c: int):
        """CPU ``c``'s own governor timer (Linux 3.x cpufreq_ondemand.c do_dbs_timer,
        one per policy): a delayed work of whole jiffies, due at the next multiple of
        its delay ("We want all CPUs to do sampling nearly on same jiffy": delay -=
        jiffies % delay), and deferrable
        (INIT_DELAYED_WORK_DEFERRABLE): an idle CPU is not woken for it; it runs at the
        first tick (TICK_S grid) the CPU is running at after its wake-up."""
        gov = self.governors[c]
        busy = self._busy_since
        wait = None                 # the next delay when not the aligned period
        low = low_wait = 0.0        # powersave_bias: the low P-state the sub-sample sets
        while True:
            if wait is None:
                # usecs_to_jiffies(sampling_rate * rate_mult): whole ticks, rounded up
                # (10 ms at HZ=250: 3 jiffies, 12 ms)
                delay = math.ceil(gov.period_s / TICK_S - 1e-9) * TICK_S
                yield env.timeout(_next_multiple(env.now, delay) - env.now)
            else:
                yield env.timeout(wait)
            while busy[c] < 0.0:
                self._wake_ev[c] = env.event()
                yield self._wake_ev[c]
                yield env.timeout(_next_multiple(env.now, TICK_S) - env.now)
            if low:                 # DBS_SUB_SAMPLE: freq_lo for freq_lo_jiffies
                self._sync(c, env.now)
                self.cpu_req[c] = low
                self._resolve(self.cpu_domain[c], env.now)
                low, wait = 0.0, low_wait
                continue
            self.sample_cpu(c, env.now)
            wait = None
            if getattr(gov, "freq_lo", 0.0):            # freq_hi_jiffies, then freq_lo's
                total = math.ceil(gov.params["sampling_rate_us"] * 1e-6 / TICK_S - 1e-9)
                high = gov.high_units(total)
                low, wait, low_wait = gov.freq_lo, high * TICK_S, (total - high) * TICK_S

    def _running(self, cpu: int) -> float:
        """PELT's running contribution of ``cpu`` now: its clock's share of the top
        clock (frequency invariance), or 1 without invariance."""
        scale = self._freq_scale
        return self.cpu_ghz[cpu] * scale if scale else 1.0

    def _update_util(self, d: int, now: float) -> None:
        """A utilisation update on domain ``d`` (cpufreq_update_util): schedutil
        evaluates once ``rate_limit_us`` has passed since its last frequency change
        (sugov_should_update_freq)."""
        if now - self._freq_update_t[d] >= self.governors[d].rate_limit_s:
            self.sample(d, now)

    # -- hot path ------------------------------------------------------------
    def ghz(self, cpu: int, now: float) -> float:
        """Clock of ``cpu`` at ``now`` (O(1))."""
        if now >= self.due_at[cpu]:
            self._apply(self.cpu_domain[cpu])
        return self.cpu_ghz[cpu]

    def _pcu_loop(self, env, s: int):
        """Socket ``s``'s package control unit: every interval, its turbo ceiling
        (models.turbo) applied to the domains of the socket at once."""
        pcu = self.pcu
        doms = [d for d, sd in enumerate(self._dom_socket) if sd == s]
        while True:
            yield env.timeout(pcu.interval_s)
            now = env.now
            for d in doms:                      # a governor change due now goes first
                self._sync(self.domains[d][0], now)
            ceiling = pcu.tick(s, now)
            for d in doms:
                f = min(self._req[d], ceiling)
                if f != self.cpu_ghz[self.domains[d][0]]:
                    self._change(d, now, f)

    def _apply(self, d: int) -> None:
        t, f = self._pending[d]
        self._pending[d] = None
        dom = self.domains[d]
        for c in dom:
            self.due_at[c] = _INF
        self._req[d] = f
        if self.pcu is not None:                # the package grants at most its ceiling
            f = min(f, self.pcu.ceiling[self._dom_socket[d]])
        if self.pcu is None or f != self.cpu_ghz[dom[0]]:
            self._change(d, t, f)
        if self.per_cpu:                        # the votes, as they are when it completes
            self._resolve(d, t)

    def _change(self, d: int, t: float, f: float) -> None:
        """Domain ``d``'s clock becomes ``f`` at ``t``: busy accounting, PELT, listeners."""
        dom = self.domains[d]
        old = self.cpu_ghz[dom[0]]
        self._dom_int[d] += old * (t - self._dom_since[d])
        self._dom_since[d] = t
        scale = self._freq_scale
        for c in dom:
            if self._busy_since[c] >= 0.0:
                self._cyc[c] += old * (t - self._cyc_t[c])
                self._cyc_t[c] = t
                if scale:                       # PELT's contribution follows the clock
                    self.pelt[c].update(t, f * scale)
            self.cpu_ghz[c] = f
        self.changes.append((t, d, f))
        self.freq_changes += 1
        for fn in self._listeners:
            for c in dom:
                fn(c, t, f)

    def _sync(self, cpu: int, now: float) -> None:
        if now >= self.due_at[cpu]:
            self._apply(self.cpu_domain[cpu])

    # -- notifications -------------------------------------------------------
    def cpu_busy(self, cpu: int, now: float) -> None:
        if self._busy_since[cpu] >= 0.0:
            return
        self._sync(cpu, now)
        self._busy_since[cpu] = now
        self._cyc_t[cpu] = now
        if self.pcu is not None:
            self.pcu.busy(cpu, now, self.cpu_ghz[cpu])
        self.pelt[cpu].update(now, self._running(cpu))
        if self.event_driven:
            self._update_util(self.cpu_domain[cpu], now)
        if self.per_cpu:
            self._resolve(self.cpu_domain[cpu], now)
            ev = self._wake_ev[cpu]
            if ev is not None:                  # its deferred timer runs at the next tick
                self._wake_ev[cpu] = None
                ev.succeed()

    def cpu_idle(self, cpu: int, now: float) -> None:
        since = self._busy_since[cpu]
        if since < 0.0:
            return
        self._sync(cpu, now)
        self._busy_total[cpu] += now - since
        self._cyc[cpu] += self.cpu_ghz[cpu] * (now - self._cyc_t[cpu])
        self._busy_since[cpu] = -1.0
        if self.pcu is not None:
            self.pcu.idle(cpu, now)
        self.pelt[cpu].update(now, 0.0)
        self._idle_calls[cpu] += 1
        if self.event_driven:
            self._update_util(self.cpu_domain[cpu], now)
        if self.per_cpu:
            self._resolve(self.cpu_domain[cpu], now)

    def iowait_wakeup(self, cpu: int, now: float) -> None:
        """A task woke on ``cpu`` after I/O (schedutil's iowait boost at the next sample)."""
        self._iowait[self.cpu_domain[cpu]] = True

    # -- sampling ------------------------------------------------------------
    def busy_time(self, cpu: int, now: float) -> float:
        since = self._busy_since[cpu]
        return self._busy_total[cpu] + (now - since if since >= 0.0 else 0.0)

    def loads(self, d: int, now: float, mark: bool = False) -> list[float]:
        """Busy fraction of each CPU of domain ``d`` since its last sample."""
        span = now - self._last_sample[d]
        out = []
        for c in self.domains[d]:
            b = self.busy_time(c, now)
            out.append(min(1.0, max(0.0, (b - self._busy_mark[c]) / span)) if span > 0 else 0.0)
            if mark:
                self._busy_mark[c] = b
        return out

    def sample(self, d: int, now: float) -> float:
        """Run domain ``d``'s governor at ``now``; returns its target GHz."""
        dom = self.domains[d]
        self._sync(dom[0], now)
        gov = self.governors[d]
        busy_ghz = ([self.window_busy_ghz(c, now, mark=True) for c in dom]
                    if gov.needs_busy_ghz else None)
        loads = self.loads(d, now, mark=True)
        self._last_sample[d] = now
        utils = [self.pelt[c].value(now) for c in dom]
        boost = self._iowait[d]
        self._iowait[d] = False
        cur = self._req[d]           # the request: turbo limits may hold the clock lower
        if busy_ghz is None:
            target = gov.next_freq(now, cur, loads, utils, boost)
        else:
            target = gov.next_freq(now, cur, loads, utils, boost, busy_ghz=busy_ghz)
        pend = self._pending[d]
        if self.event_driven:
            target = self._sugov_hold(d, dom, target, cur if pend is None else pend[1], now)
        self._request(d, now, target, in_notice=self.event_driven)
        return target

    def _request(self, d: int, now: float, target: float, in_notice: bool) -> None:
        """Domain ``d`` is asked for ``target``: a change (or the cancel of one pending)
        that applies ``transition_latency_us`` later."""
        dom = self.domains[d]
        pend = self._pending[d]
        if target == self._req[d]:
            if pend is not None:
                self._pending[d] = None
                for c in dom:
                    self.due_at[c] = _INF
        elif pend is None or pend[1] != target:
            self._pending[d] = (now + self.latency_s, target)
            for c in dom:
                self.due_at[c] = now + self.latency_s
            if self.latency_s <= 0.0 and not in_notice:
                self._apply(d)
            elif self.on_pending is not None:
                # (an evaluation inside a CPU's busy/idle notice: its change applies
                # through the pending list, not in the middle of it)
                self.on_pending(d, now + self.latency_s)

    # -- per-CPU policies ------------------------------------------------------
    def cpu_load(self, cpu: int, now: float, mark: bool = False) -> float:
        """Busy fraction of ``cpu`` since its own policy's last sample (dbs_check_cpu:
        (wall - idle) / wall over the CPU's window)."""
        span = now - self._cpu_last_sample[cpu]
        b = self.busy_time(cpu, now)
        load = min(1.0, max(0.0, (b - self._busy_mark[cpu]) / span)) if span > 0 else 0.0
        if mark:
            self._busy_mark[cpu] = b
            self._cpu_last_sample[cpu] = now
        return load

    def sample_cpu(self, cpu: int, now: float) -> float:
        """Run CPU ``cpu``'s own governor on its own load; its request becomes the
        target, and the package clock the highest request of its active cores
        (package_vote). Returns the CPU's request (GHz)."""
        self._sync(cpu, now)
        gov = self.governors[cpu]
        busy_ghz = [self.window_busy_ghz(cpu, now, mark=True)] if gov.needs_busy_ghz else None
        load = self.cpu_load(cpu, now, mark=True)
        # policy->cur of a per-CPU policy is its own last request (acpi-cpufreq's
        # target() reports the P-state it wrote), not the clock the package granted
        utils = [self.pelt[cpu].value(now)]
        if busy_ghz is None:
            self.cpu_req[cpu] = gov.next_freq(now, self.cpu_req[cpu], [load], utils)
        else:
            self.cpu_req[cpu] = gov.next_freq(now, self.cpu_req[cpu], [load], utils,
                                              busy_ghz=busy_ghz)
        self._resolve(self.cpu_domain[cpu], now)
        return self.cpu_req[cpu]

    def package_vote(self, d: int) -> float | None:
        """The clock domain ``d`` runs at: the highest P-state requested among its
        active cores (3rd Gen Intel Core Desktop Datasheet vol. 1, 4.2.1 Enhanced Intel
        SpeedStep: "All active processor cores share the same frequency and voltage. In
        a multi-core processor, the highest frequency P-state requested amongst all
        active cores is selected"): an idle core, in a C-state, has no vote. A core's
        request is taken as that of its running hardware threads (the datasheet does
        not say how a halted sibling's request counts; with one thread per core the
        two readings agree). ``None`` when nothing runs (the package idles and keeps
        its clock)."""
        busy = self._busy_since
        req = self.cpu_req
        best = None
        for c in self.domains[d]:
            if busy[c] >= 0.0 and (best is None or req[c] > best):
                best = req[c]
        return best

    def _resolve(self, d: int, now: float) -> None:
        """Domain ``d``'s vote may have changed (a request, a CPU started or stopped
        running, a transition completed): the package moves to the highest request of
        its running CPUs. A transition in progress completes first (the datasheet, 4.2.1:
        "If a previous transition is in progress, the new transition is deferred until
        the previous transition is completed"); the votes are taken again then."""
        if self._pending[d] is not None:
            return
        vote = self.package_vote(d)
        if vote is not None and vote != self._req[d]:
            self._request(d, now, vote, in_notice=True)

    def _sugov_hold(self, d: int, dom: list[int], target: float, requested: float,
                    now: float) -> float:
        """schedutil's bookkeeping around get_next_freq: a one-CPU policy keeps the
        requested clock rather than lower it while its CPU has not idled since the
        last evaluation (sugov_update_single, sugov_cpu_is_busy); a new request
        restarts the rate limit (sugov_update_next_freq)."""
        if len(dom) == 1:
            c = dom[0]
            busy = self._idle_calls[c] == self._saved_idle_calls[c]
            self._saved_idle_calls[c] = self._idle_calls[c]
            if busy and target < requested:
                target = requested
        if target != requested:
            self._freq_update_t[d] = now
        return target

    # -- reports -------------------------------------------------------------
    def mean_ghz(self, cpu: int, now: float) -> float:
        """Wall-time-weighted mean clock of ``cpu`` since the start."""
        self._sync(cpu, now)
        d = self.cpu_domain[cpu]
        span = now - self.t_start
        f = self.cpu_ghz[cpu]
        if span <= 0.0:
            return f
        return (self._dom_int[d] + f * (now - self._dom_since[d])) / span

    def ghz_seconds(self, cpu: int, now: float) -> float:
        """Integral of ``cpu``'s clock over wall time since the start (GHz x s): the
        mean clock over any window is the difference of two readings over its span."""
        self._sync(cpu, now)
        d = self.cpu_domain[cpu]
        return self._dom_int[d] + self.cpu_ghz[cpu] * (now - self._dom_since[d])

    def _cycles(self, cpu: int, now: float) -> float:
        """GHz x s ``cpu`` ran so far (its cycles / 1e9)."""
        cyc = self._cyc[cpu]
        if self._busy_since[cpu] >= 0.0:
            cyc += self.cpu_ghz[cpu] * (now - self._cyc_t[cpu])
        return cyc

    def window_busy_ghz(self, cpu: int, now: float, mark: bool = False) -> float:
        """Mean clock of ``cpu`` while it ran since its last sample (what APERF/MPERF
        give acpi-cpufreq's getavg, get_measured_perf); 0 if it did not run. Read it
        before ``loads``/``cpu_load`` mark the window's busy time."""
        busy = self.busy_time(cpu, now) - self._busy_mark[cpu]
        cyc = self._cycles(cpu, now)
        ghz = (cyc - self._cyc_mark[cpu]) / busy if busy > 0.0 else 0.0
        if mark:
            self._cyc_mark[cpu] = cyc
        return ghz

    def busy_mean_ghz(self, cpu: int, now: float) -> float:
        """Mean clock while ``cpu`` was busy (perf's cycles / task-clock)."""
        self._sync(cpu, now)
        cyc = self._cycles(cpu, now)
        busy = self.busy_time(cpu, now)
        return cyc / busy if busy > 0.0 else self.cpu_ghz[cpu]

    def util(self, cpu: int, now: float) -> float:
        """PELT utilisation of ``cpu`` (0..1024)."""
        return self.pelt[cpu].value(now)

    def finish(self, now: float) -> dict:
        """Per-CPU mean clocks, the number of changes and the (bounded) change log."""
        cpu_ghz = [self.mean_ghz(c, now) for c in range(self.n_cpus)]    # applies due changes
        return {
            "cpu_ghz": cpu_ghz,
            "cpu_busy_ghz": [self.busy_mean_ghz(c, now) for c in range(self.n_cpus)],
            "freq_changes": self.freq_changes,
            "freq_timeline": list(self.changes),
        }
