"""Units of work: segments that threads run, and the requests they serve.

A *segment* is what a thread does between two scheduling points: some
instructions over a memory footprint, perhaps some contended read-modify-writes
on shared lines, perhaps followed by a blocking wait. The machine model turns a
segment into cycles, misses and time in closed form, so the engine needs one
SimPy timeout per segment however detailed the hardware model is.

Footprints are split by *owner* because warmth belongs to data, not to
threads: a request's parsed bytes are written by the producer and read by the
consumer, a thread's stack follows the thread, code is shared by everyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# Owner kinds. A footprint entry is (kind, key, lines, writes, fresh):
#   TASK   - the request's own data; key is the request id (written by the producer)
#   THREAD - the running thread's private state (stack, buffers); key is the thread id
#   CODE   - instructions and read-mostly data; key names the code path
#   SHARED - lines every thread touches (queues, counters); key names the structure
TASK, THREAD, CODE, SHARED = "task", "thread", "code", "shared"
OWNER_KINDS = (TASK, THREAD, CODE, SHARED)


class Footprint(NamedTuple):
    """Cache lines a segment touches that belong to one owner.

    A named tuple, not a dataclass: the compiled footprint walk
    (models.cache.Hierarchy.touch) unpacks it in one step instead of four
    attribute lookups.
    """

    kind: str
    key: object
    lines: float
    writes: bool = False  # the segment modifies these lines (makes this core their owner)
    # Lines of it the segment writes before it reads them (objects it allocates and
    # fills, bytes it copies into a buffer): a miss on them is a demand RFO, which perf
    # counts as an LLC *store* (LLC-stores), not an LLC load (models.cache.Hierarchy).
    fresh: float = 0.0


@dataclass(slots=True)
class Segment:
    """A stretch of work that runs on one CPU without a scheduling point.

    instructions  retired instructions (the compute part)
    footprint     cache lines touched, by owner
    contended_ops read-modify-writes on the shared line `contended_line`
                  (a lock word, a counter, a queue head) that serialise across cores
    block_s       a blocking wait after the compute (backend call, disk read);
                  the thread leaves its CPU while it waits
    label         what the work is, for traces ("parse", "handle", ...)
    """

    instructions: float
    footprint: tuple[Footprint, ...] = ()
    contended_ops: int = 0
    contended_line: object = None
    block_s: float = 0.0
    label: str = ""

    program = False       # (class attribute) a Segment is one step, not a Program


def compute_part(seg: Segment) -> Segment:
    """``seg`` without its blocking wait: what a thread computes before a call it
    does not block on (a virtual thread unmounting, an event loop's non-blocking
    client request)."""
    return Segment(seg.instructions, seg.footprint, seg.contended_ops, seg.contended_line,
                   0.0, seg.label)


# Step kinds of a request program.
STEP_RUN, STEP_CALL, STEP_ACQUIRE, STEP_RELEASE = range(4)


class Program:
    """A request's handling as a sequence of steps (``work.program``), run by
    ``thread.run(program, req)`` like one segment, or step by step by a strategy that
    schedules the steps itself (virtual threads).

    steps  tuple of (kind, arg): (STEP_RUN, Segment), (STEP_CALL, seconds),
           (STEP_ACQUIRE, resource name), (STEP_RELEASE, resource name)
    """

    __slots__ = ("block_s", "instructions", "steps")
    program = True
    label = "program"

    def __init__(self, steps: tuple):
        self.steps = steps
        self.instructions = sum(a.instructions for k, a in steps if k == STEP_RUN)
        # Seconds of blocking calls: what a strategy asking "does this handler block?"
        # (seg.block_s > 0) needs to know; the kernel runs them as steps.
        self.block_s = sum(a for k, a in steps if k == STEP_CALL)


class CallPlan:
    """A request's backend calls as a plan (``work.backend_calls``): call ``i`` is
    written once every call of ``after[i]`` is answered and waits ``delays_s[i]``;
    its answer costs the reader ``answer_segs[i]`` (None: nothing). ``dependents[i]``
    are the calls waiting for ``i``, ``roots`` those waiting for none, ``critical_s``
    the longest chain of delays (the request's blocked_io when the calls overlap
    as the plan allows)."""

    __slots__ = ("after", "answer_segs", "critical_s", "delays_s", "dependents", "roots")

    def __init__(self, delays_s, after, answer_segs):
        self.delays_s = tuple(delays_s)
        self.after = tuple(tuple(a) for a in after)
        self.answer_segs = tuple(answer_segs)
        n = len(self.delays_s)
        self.dependents = tuple(tuple(j for j in range(n) if i in self.after[j])
                                for i in range(n))
        self.roots = tuple(i for i in range(n) if not self.after[i])
        done_at = []
        for i in range(n):          # calls come after earlier ones only (validated)
            start = max((done_at[j] for j in self.after[i]), default=0.0)
            done_at.append(start + self.delays_s[i])
        self.critical_s = max(done_at)

    def begin(self, req) -> PlanRun:
        """A request's plan in flight; its first calls are ``roots``."""
        return PlanRun(req, len(self.delays_s), [len(a) for a in self.after])

    def answered(self, run: PlanRun, i: int) -> list[int]:
        """Call ``i`` of ``run`` is answered: the calls that waited only for it (to be
        written now); ``run.left`` counts the calls still unanswered."""
        deps = run.deps
        ready = []
        for j in self.dependents[i]:
            deps[j] -= 1
            if not deps[j]:
                ready.append(j)
        run.left -= 1
        return ready


class PlanRun:
    """One request's call plan in flight: its calls not yet answered (``left``), the
    unanswered calls each call still waits for (``deps``), and the thread waiting
    for the last answer, if one parks for it (``waiter``)."""

    __slots__ = ("deps", "left", "req", "waiter")

    def __init__(self, req, left: int, deps: list):
        self.req = req
        self.left = left
        self.deps = deps
        self.waiter = None


# Breakdown causes, in the order results print them.
CAUSES = (
    "queue_wait",      # runnable but waiting for a thread or a CPU
    "dispatch",        # hand-off: wake-up latency, context switch, futex syscalls
    "compute",         # instructions at the current clock with warm caches
    "cache_reload",    # misses to L2/LLC/DRAM for data that went cold
    "coherence",       # lines fetched from another core's cache
    "contention",      # stalls on contended lines and the memory bus queue
    "blocked_io",      # blocking waits (backend, disk)
)


class Request:
    """One request (or message) travelling through the system.

    Plain attributes with __slots__: a run creates hundreds of thousands.
    Times are simulated seconds; `bd` accumulates the breakdown by cause.
    """

    __slots__ = ("id", "conn", "t_arrive", "t_start", "t_acc", "produce", "consume", "bd",
                 "invocation", "produced_by", "consumed_by")

    def __init__(self, rid: int, t_arrive: float, conn: int = 0):
        self.id = rid
        self.conn = conn
        self.t_arrive = t_arrive
        self.t_start = -1.0          # first instant a thread started working on it
        self.t_acc = t_arrive        # its time is accounted (breakdown) up to here
        self.produce: Segment | None = None
        self.consume: Segment | None = None
        self.bd = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]   # seconds by cause (CAUSES order)
        self.invocation = "BLOCKING"
        self.produced_by = -1        # thread ids, set by the kernel when the segments run
        self.consumed_by = -1

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Request({self.id}, conn={self.conn}, t={self.t_arrive:.6f})"


class SegmentCost(NamedTuple):
    """What running a segment costs, as the machine model returns it (``execute``).

    ``duration_s`` is wall time holding the CPU; ``compute_s + reload_s +
    coherence_s + contention_s`` add up to it. The kernel unpacks it in one step
    on the hot path (fields in this order; ``C_*`` index them).

    The machines return a plain tuple in this layout, not a SegmentCost: building
    the named tuple (a Python-level ``__new__``) made ``pipeline`` 10% slower
    (0.263 -> 0.29 s for 20,000 requests, best of three). ``SegmentCost(*cost)``
    gives the named view wherever speed does not matter (tests, debugging)."""

    duration_s: float
    cycles: float
    instructions: float
    l1d_loads: float
    l1d_misses: float
    llc_loads: float
    llc_misses: float
    compute_s: float
    reload_s: float
    coherence_s: float
    contention_s: float
    # L2 misses that are demand RFOs (stores to lines the core does not hold: the
    # ``fresh`` lines of a footprint), and those of them the LLC did not hold: perf's
    # LLC-stores and LLC-store-misses. llc_loads and llc_misses are demand reads only.
    llc_stores: float
    llc_store_misses: float


COST_FIELDS = SegmentCost._fields
(C_DUR, C_CYC, C_INS, C_L1L, C_L1M, C_LLCL, C_LLCM,
 C_COMPUTE, C_RELOAD, C_COHER, C_CONTEND, C_LLCS, C_LLCSM) = range(len(COST_FIELDS))


class Continuation(NamedTuple):
    """The rest of a segment the kernel drives chunk by chunk (time slices,
    preemption, a blocking wait after it): ``Thread.cont``."""

    remaining_s: float      # CPU time still to run
    block_s: float          # blocking wait after the CPU part (I/O)
    total_s: float          # the segment's whole CPU time (for pro-rata credits)
    cost: tuple             # its SegmentCost, scaled by fluid rate changes
    label: str
    request_id: int         # -1: no request
    sys_s: float            # kernel work charged at its start (system time)
