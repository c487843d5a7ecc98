"""The kernel's records: thread states, processes, CPUs with their run queues, and
the trace buffer of recent scheduling events."""

from __future__ import annotations

from collections import deque

from warmcore.simcore.kernel.accounting import CTR_FIELDS

RUNNING, RUNNABLE, PARKED, BLOCKED, DEAD = "running", "runnable", "parked", "blocked", "dead"


class Process:
    """A process: a name, an affinity mask (what `taskset` sets) and its threads."""

    def __init__(self, pid: int, name: str, affinity: frozenset[int] | None):
        self.pid = pid
        self.name = name
        self.affinity = affinity
        self.threads: list = []           # live threads
        # Counters of threads that have exited (perf keeps counting them for the
        # process; the Thread objects themselves are dropped to bound memory).
        self.dead_ctr = [0.0] * len(CTR_FIELDS)
        self.dead_events = [0, 0, 0]      # context switches, migrations, futex wakes


class Cpu:
    """One hardware thread with its run queue."""

    __slots__ = (
        "busy_s",
        "core",
        "current",
        "exit_end",
        "id",
        "idle_since",
        "last_tid",
        "llc",
        "min_vruntime",
        "preempt_next",
        "rq",
        "balance_pending",
    )

    def __init__(self, cid: int, core: int, llc: int):
        self.id = cid
        self.core = core
        self.llc = llc
        self.current = None                  # the Thread holding this CPU
        self.rq: deque = deque()             # runnable threads waiting for it
        self.idle_since = 0.0                # >= 0 while idle
        self.last_tid = -1
        self.busy_s = 0.0                    # executing time, accounted per chunk at its start
        self.exit_end = -1.0                 # end of the C-state exit under way (Kernel._dispatch)
        self.balance_pending = False         # an idle-balance retry is scheduled
        # CFS wake-up preemption (Kernel.wakeup_preemption): the run queue's monotonic
        # min_vruntime, and a woken thread waiting to preempt the current one
        self.min_vruntime = 0.0
        self.preempt_next = False


class TraceBuffer(deque):
    """The last ``maxlen`` kernel events (``run.trace_events``), and each CPU's clock
    as it was before the oldest event kept (``ghz0``): a ``freq`` row that falls off
    the front hands its clock over, so the window's clocks are known from its start.

    A row is (time, cpu, thread id, kind, label, seconds, request id); kinds are
    "dispatch", "run" (a chunk of a segment) and "freq" (the new GHz as label)."""

    def __init__(self, maxlen: int, ghz0: list[float]):
        super().__init__(maxlen=maxlen)
        self.ghz0 = list(ghz0)

    def append(self, row) -> None:
        if len(self) == self.maxlen:
            old = self[0]
            if old[3] == "freq":
                self.ghz0[old[1]] = old[4]
        super().append(row)
