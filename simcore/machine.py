"""The interface between the engine and a hardware model, and the ideal machine.

The simulated OS asks the machine three kinds of question:
  * what does this segment cost on this CPU now (``execute``),
  * what do scheduling events cost (context switch, futex wake, wake-up latency),
  * tell me when a CPU goes busy or idle (for governors, SMT sharing and energy).

The ideal machine answers with fixed cycles per instruction and zero overheads,
so that an M/M/c run on it is exactly an M/M/c queue and queueing theory can
check the engine. Real hardware lives in ``models.hardware``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from warmcore.simcore.work import Segment

# The hardware effects a machine model can switch on and off, with what each models:
# the one declaration the scenario's [machine.effects] table, the hardware model and
# the build are made from (each effect is one model: models/hardware.py).
EFFECTS = {
    "caches": "per-core L1d, L1i and L2, one LLC per LLC domain: warmth of footprints "
              "(models/cache.py)",
    "coherence": "a line written by another core comes by a core-to-core transfer "
                 "(models/coherence.py)",
    "contention": "contended read-modify-writes serialise on their line "
                  "(models/coherence.py)",
    "membus": "DRAM latency loaded by the socket's fill rate (models/membus.py)",
    "smt": "busy SMT siblings share their core's throughput (models/smt.py)",
    "dvfs": "each CPU's clock from a cpufreq governor (models/dvfs.py); off: the top "
            "clock, fixed",
    "switch_costs": "context switches, futex wake-ups, wake-up latency and system calls "
                    "(models/syscalls.py); off: free",
    "energy": "joules from the P-state, C-state and static power (models/energy.py)",
}

# The parts of a futex wake-up whose cache lines move between cores, in the order of
# their index (MachineModel.wake_transfer's ``part``), and the PresetExtra field that
# counts each one's lines with ``wake_lines_by_part`` on (off: ``futex_wake_lines`` for
# "wait" and "resume", none for the others; models/presets.py; which part is paid
# where, and from which
# core: simcore/kernel/placement.py, docs/model.md "A wake-up moves its wait structures
# between cores"):
#   wait       the waker, from the sleeper's previous core: futex, task_struct, Parker
#   rq         the waker, from the target CPU's core: its run queue (same LLC)
#   remote     the waker, from the target CPU's core: its wake_list (another LLC); the
#              woken thread reads it back from the waker's
#   resume     the woken thread, from the waker's core: task_struct, futex_q, Parker
#   resume_rq  the woken thread's CPU, from the waker's core: the run queue it enqueued
#   migrate    the woken thread, from its own previous core when it runs on another:
#              its kernel stack's return path and thread state
#   scan       the waker, from each other CPU whose run queue select_task_rq_fair read
WAKE_PARTS = ("wait", "rq", "remote", "resume", "resume_rq", "migrate", "scan")
WAKE_PART_FIELDS = ("wake_wait_lines", "wake_rq_lines", "wake_remote_lines",
                    "wake_resume_lines", "wake_resume_rq_lines", "wake_migrate_lines",
                    "wake_scan_lines")
(WAKE_WAIT, WAKE_RQ, WAKE_REMOTE, WAKE_RESUME, WAKE_RESUME_RQ,
 WAKE_MIGRATE, WAKE_SCAN) = range(len(WAKE_PARTS))

# The system calls a strategy may charge (Thread.syscall; costs: models/syscalls.py).
SYSCALLS = ("epoll_ctl", "epoll_wait", "futex_wait", "futex_wake", "null", "poll", "read",
            "recv", "sched_yield", "send", "write")


class MachineModel(Protocol):
    """What the engine needs from a machine. CPUs are hardware threads 0..n_cpus-1."""

    n_cpus: int
    cpu_core: Sequence[int]   # physical core of each hardware thread (SMT siblings share one)
    cpu_llc: Sequence[int]    # last-level-cache domain of each hardware thread
    cpu_socket: Sequence[int]
    nominal_ips: float        # instructions/s of one lone thread, warm caches, nominal clock
    wake_lines: float         # lines of all a wake-up's parts (0: wake_transfer is free)

    def fixed_seconds_per_instruction(self) -> float:
        """s per instruction if every segment costs exactly that on every CPU at all
        times (no caches, no overheads, a fixed clock), else 0.0. The kernel then
        prices segments itself, without calling ``execute``: the fast path that
        keeps queueing-theory runs quick."""

    def bind(self, env, streams) -> None:
        """Attach to a SimPy environment (start governor sampling and the like)."""

    def execute(self, cpu: int, seg: Segment, thread_key: object, now: float) -> tuple:
        """Cost of running ``seg`` on ``cpu`` starting at ``now``; see work.COST_FIELDS.
        Updates the model's state (cache contents, line owners) as if it ran."""

    def current_ghz(self, cpu: int, now: float) -> float:
        """Clock of ``cpu`` now: kernel work charged as time (switches, syscalls)
        also counts cycles at this rate, as perf counts them."""

    def kernel_slowdown(self, cpu: int, now: float) -> float:
        """Seconds one second of kernel work takes on ``cpu`` now. The costs below
        (switch, futex wake, system calls) are stated at the nominal rate (a lone
        thread at the top P-state); kernel paths are instructions, so they take
        longer at a lower clock or beside a busy SMT sibling, as user work does."""

    def switch_cost(self, cpu: int, prev_key: object, next_key: object) -> float:
        """Direct cost (s) of switching ``cpu`` from one thread to another."""

    def wake_latency(self, cpu: int, idle_since: float, now: float) -> float:
        """Delay (s) before a woken thread runs on ``cpu`` (C-state exit, IPI)."""

    def futex_wake_cost(self) -> float:
        """CPU time (s) the waker spends in the futex-wake syscall."""

    def wake_transfer(self, cpu_a: int, cpu_b: int,
                      part: int = WAKE_WAIT) -> tuple[float, float, float]:
        """(seconds, LLC loads, LLC misses) paid on ``cpu_b`` for one part of a futex
        wake-up (an index of WAKE_PARTS; default the wait structures) whose lines
        ``cpu_a``'s core last wrote."""

    def line_transfer_s(self, cpu_a: int, cpu_b: int) -> float:
        """Seconds for a line written on ``cpu_a`` to reach ``cpu_b`` (a spinner's
        wait after the store, simcore.kernel.spin); 0 on the same CPU."""

    def syscall_cost(self, name: str, n: float = 0.0, kib: float = 0.0) -> float:
        """Kernel work (s) of one system call ``name`` (one of SYSCALLS: read, write,
        epoll_wait with ``n`` ready events, poll of ``n`` descriptors, futex_wait,
        sched_yield, ...), ``kib`` KiB copied; ValueError for an unknown name."""

    def cpu_busy(self, cpu: int, now: float) -> None:
        """``cpu`` starts running a thread."""

    def cpu_idle(self, cpu: int, now: float) -> None:
        """``cpu`` has nothing to run."""

    def finish(self, now: float) -> dict:
        """Close accounting at the end of the run: joules, per-CPU GHz and the like,
        over the measured window when the machine has ``measure_from(now)`` (called
        at the window's start; optional: a machine without it reports from t = 0)."""


class FluidMachine(MachineModel, Protocol):
    """A machine whose rates can change while a segment runs (``fluid`` true:
    docs/engine.md "Fluid rates"). The kernel sets ``rate_hook`` to
    ``Kernel.rerate`` and the machine calls it (``rate_hook(cpu, now)``) when what
    the segment running on ``cpu`` shares changes. ``execute`` keeps, per CPU, the
    rate-independent *parts* of the segment it costs (for ``cost_now``). The ideal
    machine has no ``fluid`` attribute and needs none of this."""

    fluid: bool
    rate_hook: object         # set by the kernel: rate_hook(cpu, now)

    def cost_now(self, cpu: int, now: float) -> tuple:
        """Cost of the whole segment whose parts ``cpu`` holds, at ``cpu``'s rates of
        ``now`` (its clock, busy SMT siblings, bus share); see work.COST_FIELDS."""

    def flow_end(self, cpu: int, end: float) -> None:
        """The engine's end time for the segment running on ``cpu`` (after a re-rating
        or a resumption): a memory-bus flow ends then."""

    def parts_of(self, cpu: int, now: float, remaining: float) -> tuple:
        """The segment running on ``cpu`` is preempted at ``now`` with ``remaining``
        (a fraction of the whole) of its work left: return its parts, and take what
        it holds on shared resources off ``cpu`` (its bus flow leaves the socket;
        the ``remaining`` fraction of its fills goes with the parts)."""

    def adopt_parts(self, cpu: int, parts: tuple, now: float, remaining: float) -> tuple:
        """A preempted segment (``parts`` from ``parts_of``) resumes on ``cpu`` at
        ``now`` with ``remaining`` of its work left: ``cpu`` holds its parts from now,
        its fills not yet made go on ``cpu``'s socket's bus, and the cost of the whole
        segment at ``cpu``'s rates now is returned (as ``cost_now``); the kernel
        re-rates the remaining fraction and then calls ``flow_end``."""


class IdealMachine:
    """Fixed cycles per instruction at a fixed clock; no caches, no overheads.

    cores  number of CPUs (one hardware thread each, one LLC domain)
    ghz    clock (default 1 GHz: one instruction per nanosecond at cpi 1)
    cpi    cycles per instruction
    """

    def __init__(self, cores: int = 1, ghz: float = 1.0, cpi: float = 1.0):
        self.n_cpus = cores
        self.cpu_core = list(range(cores))
        self.cpu_llc = [0] * cores
        self.cpu_socket = [0] * cores
        self.ghz = ghz
        self.cpi = cpi
        self.nominal_ips = ghz * 1e9 / cpi
        self._s_per_instr = cpi / (ghz * 1e9)

    def bind(self, env, streams) -> None:
        return None

    def fixed_seconds_per_instruction(self) -> float:
        return self._s_per_instr

    def execute(self, cpu, seg, thread_key, now):
        ins = seg.instructions
        dur = ins * self._s_per_instr
        return (dur, ins * self.cpi, ins, 0.0, 0.0, 0.0, 0.0, dur, 0.0, 0.0, 0.0, 0.0, 0.0)

    def current_ghz(self, cpu, now):
        return self.ghz

    def kernel_slowdown(self, cpu, now):
        return 1.0          # one clock, no SMT

    def switch_cost(self, cpu, prev_key, next_key):
        return 0.0

    def wake_latency(self, cpu, idle_since, now):
        return 0.0

    def futex_wake_cost(self):
        return 0.0

    wake_lines = 0.0

    def wake_transfer(self, cpu_a, cpu_b, part=WAKE_WAIT):
        return (0.0, 0.0, 0.0)

    def line_transfer_s(self, cpu_a, cpu_b):
        return 0.0

    def syscall_cost(self, name, n=0.0, kib=0.0):
        if name not in SYSCALLS:
            raise ValueError(f"unknown system call {name!r}; known: {', '.join(SYSCALLS)}")
        return 0.0

    def cpu_busy(self, cpu, now):
        return None

    def cpu_idle(self, cpu, now):
        return None

    def finish(self, now):
        return {"joules": 0.0, "cpu_ghz": [self.ghz] * self.n_cpus}
