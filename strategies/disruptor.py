"""disruptor: the LMAX Disruptor, a preallocated ring buffer between producer
threads and long-lived BatchEventProcessor consumers.

Model (sources: LMAX-Exchange/disruptor, com.lmax.disruptor.*):

* Ring: ``ring_size`` slots (a power of two, default 1024), preallocated.
* Producers (``producers``, default 1): threads that take the arrivals of
  their connections (``conn.id % producers``), claim the next sequence, run
  the request's produce (parse) segment to fill the slot (the event
  translator) and publish it. A single producer claims without a CAS
  (SingleProducerSequencer.next); several claim with one contended
  read-modify-write on the cursor line (MultiProducerSequencer: CAS /
  getAndAdd) and publish through per-slot availability flags, so consumers
  only see the highest *contiguous* published sequence.
* Wrap: a producer whose next sequence would pass the slowest consumer by
  ``ring_size`` waits: ``producer_wait="park-nanos"`` repeats
  LockSupport.parkNanos(1), a timed sleep that Linux stretches by the thread's
  timer slack (``timer_slack_us``, 50 us default timer_slack_ns); "wake" parks
  until a consumer advances (not what LMAX does; for comparison).
* Consumers (``consumers``, default 1): BatchEventProcessor threads, one per
  handler, each reading ALL available events in one batch and publishing its
  sequence once per batch. The handlers are *sharded* (unicast): event s is
  handled by consumer s % consumers, the others skip it (the ordinal/sharding
  pattern of the LMAX docs), so every request is handled exactly once and
  every consumer still gates the producer. A batch costs BatchEventProcessor's
  own instructions, counted on LMAX's source (BATCH_INSTRUCTIONS, GATE_INSTRUCTIONS
  a gating sequence, EVENT_INSTRUCTIONS an event; ``batch_us`` replaces the
  per-batch part), over the lines it touches (the cursor, a line the producer
  writes, the gating sequences, and the store of its own sequence), plus each own
  event's consume segment: the per-event cost falls as batches grow.
  ``max_batch`` caps a batch (Disruptor 4 batchLimit; default unlimited).
* Entries: the ring's entries are preallocated (RingBuffer.fill), so a request's
  own data (work.task_kib) lives in its slot's entry: the producer's translator
  (its produce segment, or TRANSLATE_INSTRUCTIONS) writes it, the handlers read
  it, and the line passes from core to core rather than coming from memory; the
  entries start in the LLC, as the constructor left them.
* Wait strategies (``wait``), what a consumer does when nothing is available:
  - "blocking" (BlockingWaitStrategy, the default): lock + condition; the
    consumer parks, and the producer takes the lock and signalAll()s on every
    publish (``signal_us``). In AQS signalAll only moves the waiters to the
    lock's queue: the producer's unlock wakes one consumer (one futex wake) and
    each woken consumer's unlock wakes the next, so they wake one after another.
  - "busy-spin" (BusySpinWaitStrategy): spins on the cursor and never leaves
    its CPU (``Thread.spin``, simcore/kernel/spin.py): it sees a publish one
    cache-line transfer after the store; its CPU is busy all the while.
  - "yielding" (YieldingWaitStrategy): SPIN_TRIES = 100 turns of a counting
    loop (a bounded spin of 100 x ``spin_turn_cycles`` at the CPU's clock: the
    loop has no PAUSE), then Thread.yield() in a loop: a yielding spin that hands
    its CPU at once to a thread queued there and reads the line between
    sched_yield calls, so an event published during a call is seen when it returns.
  - "sleeping" (SleepingWaitStrategy): DEFAULT_RETRIES = 200: the same 100
    turns, 100 yields (a bounded yielding spin of 100 sched_yield calls at the
    machine's price), then
    LockSupport.parkNanos(DEFAULT_SLEEP = 100 ns) repeatedly, a timed sleep of
    100 ns + timer slack (~50-60 us on Linux).
* ``pin``: consumer i pinned to server CPU i (mod the server's CPUs), as
  latency-sensitive Disruptor deployments do with thread affinity.

Topologies (``topology``): "sharded" (the default, above) or the LMAX paper's
unicast, pipeline, sequencer, multicast and diamond, where every handler handles
every event behind its barrier (docs/strategies.md). The WorkerPool (deprecated
in 4.0) is not modelled. A spinning thread that another thread waits behind on
its CPU is preempted by the simulated kernel when its time slice is used up
(CFS); a yield is ``sched_yield``.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from pydantic import Field, field_validator, model_validator

from warmcore.simcore.config import ConfigError
from warmcore.simcore.work import SHARED, TASK, Footprint, Segment
from warmcore.strategies.base import StrategyParams, Strategy, register

CURSOR = "disruptor-cursor"
LOCK = "disruptor-lock"
SPIN_TRIES = 100          # YieldingWaitStrategy.SPIN_TRIES
SLEEP_RETRIES = 200       # SleepingWaitStrategy.DEFAULT_RETRIES (100 spins, 100 yields)

# Instructions of BatchEventProcessor.run's loop, counted on the source the LMAX paper
# measured (LMAX-Exchange/disruptor, 2011-10-02, commit 1bbbeea7: BatchEventProcessor,
# ProcessingSequenceBarrier.waitFor, WaitStrategy.BusySpinStrategy, RingBuffer.get,
# Util.getMinimumSequence) as HotSpot's C2 compiles them: monomorphic interface calls
# inlined behind a class guard (load the receiver's klass, compare, branch), array
# accesses with a bounds check (load length, compare, branch), a volatile load a plain
# load on x86, Sequence.set a lazySet, a plain store (no fence). docs/strategies.md
# "The cost of a batch, counted" lists them; the machine turns them into cycles at its
# IPC and clock (models.hardware execute), the lines they touch into cache and
# coherence costs.
#   per batch: sequenceBarrier.waitFor (field load, guard 3; checkAlert's volatile load
#   of `alerted`, test, branch 3; waitStrategy/cursor/dependents field loads and a
#   guard 6; dependents.length, test, branch 3; the exit turn of the cursor loop: load
#   the PaddedAtomicLong, its value, compare, branch 4; return 1) 20, the inner loop's
#   first test 2, sequence.set(nextSequence - 1) (field, value ref, subtract, store) 4,
#   the outer loop's jump 1
BATCH_INSTRUCTIONS = 27
#   per gating sequence read by getMinimumSequence: the element's load with the loop's
#   index and bound 3, the Sequence's value ref and value 2, compare and cmov 2, branch 1
GATE_INSTRUCTIONS = 8
#   per event: ringBuffer.get(nextSequence) (ringBuffer, entries, mask fields 3, l2i
#   and `and` 2, bounds check 3, the element 1) 9, the checkcast to the event type 3,
#   eventHandler.onEvent's call (field, guard 3, the endOfBatch compare and setcc 2) 6,
#   nextSequence++ 1, the loop's compare and branch 2 (the handler's own body is the
#   request's consume segment)
EVENT_INSTRUCTIONS = 21
#   the producer's translator with no produce segment, `ringBuffer.get(sequence)
#   .setValue(v)` (ThrottledOnePublisherToThreeProcessorPipelineLatencyTest): get 9,
#   checkcast 3, the store of the value 1
TRANSLATE_INSTRUCTIONS = 13


# The LMAX paper's topologies (LMAX-Exchange/disruptor src/docs/asciidoc/en/disruptor.adoc,
# "Throughput Performance Testing"; the perf tests OnePublisherToOneProcessorUniCast-,
# OnePublisherToThreeProcessorPipeline-, ThreePublisherToOneProcessorSequenced-,
# OnePublisherToThreeProcessorMultiCast- and OnePublisherToThreeProcessorDiamond-
# ThroughputTest): producers, and for each consumer the consumers it is gated on.
TOPOLOGIES = {
    "unicast": (1, ((),)),                      # P1 -> C1
    "pipeline": (1, ((), (0,), (1,))),          # P1 -> C1 -> C2 -> C3
    "sequencer": (3, ((),)),                    # P1, P2, P3 -> C1
    "multicast": (1, ((), (), ())),             # P1 -> C1, C2, C3 (each every event)
    "diamond": (1, ((), (), (0, 1))),           # P1 -> C1, C2 -> C3
}


def topology_threads(topology: str) -> dict:
    """The producers and consumers an LMAX topology has."""
    n_prod, gates = TOPOLOGIES[topology]
    return {"producers": n_prod, "consumers": len(gates)}


def sources_field(wl) -> str:
    """Where a workload sets its number of sources: a stream's producers, a batch's
    jobs (one connection each), the others' connections."""
    for name in ("producers", "jobs", "connections"):
        if name in type(wl).model_fields:
            return f"workload.{name}"
    return "workload"


def check_sources(ctx, producers: int, topology: str) -> None:
    """ConfigError if the workload has fewer sources (connections) than the topology
    has producers: each producer takes the events of its own sources
    (``conn.id % producers``), so the others would publish nothing and a 3P-1C
    sequencer would run as 1P-1C without saying so."""
    n = len(ctx.workload.connections)
    if n < producers:
        raise ConfigError(sources_field(ctx.cfg.workload), (
            f"the {topology} topology's {producers} producers each publish the events "
            f"of their own sources (connection % {producers}); {n} would leave "
            f"{producers - n} of them idle: give at least {producers}"))


def seq_key(index: int) -> str:
    """The cache-model owner of consumer ``index``'s sequence line."""
    return f"disruptor-seq-{index}"


def entry_key(slot: int) -> tuple:
    """The cache-model owner of ring slot ``slot``'s preallocated entry."""
    return ("disruptor-entry", slot)


def read_of(key) -> tuple:
    """A read of the one shared line ``key``: what a spinner on it loads
    (simcore.kernel.spin: the read that follows the spin hits that line)."""
    return (Footprint(SHARED, key, 1, False),)


def in_entry(seg: Segment, slot: int, writes: bool) -> Segment:
    """``seg`` with the request's own lines (TASK) in ring slot ``slot``'s entry instead:
    the ring's entries are preallocated and reused every ``ring_size`` events
    (RingBuffer.fill at construction; the translator overwrites an entry, the handlers
    read it), so they are warm lines a producer and its consumers pass between them,
    not new memory per event. The producer's segment ``writes`` the entry, a
    handler's reads it (the LMAX perf tests' handlers only read their events)."""
    key = entry_key(slot)
    fps = tuple(Footprint(SHARED, key, f.lines, writes) if f.kind == TASK else f
                for f in seg.footprint)
    return Segment(seg.instructions, fps, seg.contended_ops, seg.contended_line,
                   seg.block_s, seg.label)


def task_lines(seg) -> float:
    """Lines of the request's own data a segment touches (0 for a program)."""
    if seg is None or seg.program:
        return 0.0
    return sum(f.lines for f in seg.footprint if f.kind == TASK)


class Params(StrategyParams):
    ring_size: int = Field(default=1024, ge=1, le=1 << 22,
                           description="RingBuffer bufferSize, a power of two; capped at "
                                       "2^22 slots (preallocated)")
    producers: int = Field(default=1, gt=0)
    producer_type: Literal["single", "multi"] | None = Field(
        default=None, description='default: single iff 1 producer')
    consumers: int = Field(default=1, gt=0)
    wait: Literal["blocking", "busy-spin", "yielding", "sleeping"] = "blocking"
    topology: Literal["sharded", "unicast", "pipeline", "sequencer", "multicast",
                      "diamond"] = Field(default="sharded", description=(
        "sharded: `consumers` handlers each taking every n-th event; the others are the "
        "LMAX paper's, each handler handling every event, a request done when its last "
        "handler has run (they fix producers and consumers: another number is refused)"))
    pin: bool = False
    producer_wait: Literal["park-nanos", "wake"] = "park-nanos"
    producer_idle: Literal["park", "spin"] = Field(default="park", description=(
        "a producer with nothing to publish: parks until an arrival wakes it, or spins "
        "(the LMAX latency test's publisher busy-waits on System.nanoTime() between "
        "events: ThrottledOnePublisherToThreeProcessorPipelineLatencyTest)"))
    max_batch: int | None = Field(default=None, gt=0)
    batch_us: float | None = Field(default=None, ge=0, description=(
        "per batch, us of work replacing the loop's own instructions (BATCH_INSTRUCTIONS "
        "and GATE_INSTRUCTIONS per gating sequence, counted on LMAX's source; None: "
        "those); the cursor, gating and own sequence lines are touched either way"))
    publish_us: float = Field(default=0.01, ge=0, description='cursor / availableBuffer store')
    claim_us: float = Field(default=0.02, ge=0, description='multi-producer CAS on the cursor')
    signal_us: float = Field(default=0.05, ge=0, description='blocking: lock, signalAll, unlock')
    spin_turn_cycles: float = Field(default=2.0, gt=0, le=1000, description=(
        "cycles of one turn of YieldingWaitStrategy's and SleepingWaitStrategy's first "
        "100 turns: the sequence's volatile load, checkAlert's load of `alerted`, the "
        "counter's decrement, a compare, two branches (about 7 instructions, no PAUSE; "
        "Nehalem-Sandy Bridge retire one taken branch and 4 instructions a cycle)"))
    spin_ipc: float = Field(default=0.25, gt=0, le=8, description=(
        'instructions per cycle of the spin loop (load, compare, branch, PAUSE of ~10 '
        'cycles on Nehalem-Sandy Bridge: about 4 per 10-16 cycles)'))
    sleep_ns: float = Field(default=100.0, ge=0, description='SleepingWaitStrategy DEFAULT_SLEEP')
    timer_slack_us: float = Field(default=50.0, ge=0, description='Linux default timer_slack_ns')

    @field_validator("ring_size")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError("must be a power of two")
        return v

    @model_validator(mode="after")
    def _topology_sets_the_threads(self):
        """An LMAX topology fixes its producers and consumers: a count set to another
        number is refused (it would be silently replaced), the same number accepted."""
        if self.topology != "sharded":
            fixed = topology_threads(self.topology)
            for name, n in fixed.items():
                if name in self.model_fields_set and getattr(self, name) != n:
                    raise ConfigError(name, (
                        f"the {self.topology} topology has {n} {name[:-1]}"
                        f"{'s' if n > 1 else ''} (got {getattr(self, name)}); leave it "
                        f"unset, or use topology = 'sharded' to choose the number"))
                setattr(self, name, n)
        return self

    @model_validator(mode="after")
    def _single_means_one(self):
        if self.producer_type == "single" and self.producers > 1:
            raise ConfigError("producer_type", "'single' needs producers = 1")
        return self


class Producer:
    __slots__ = ("backlog", "current", "idle", "index", "line", "thread", "waiting")

    def __init__(self, index: int):
        self.index = index
        self.line = None          # what a spinning idle producer watches (producer_idle)
        self.backlog: deque = deque()
        self.idle = False
        self.waiting = False      # parked on a full ring (producer_wait="wake")
        self.current = None       # taken from the backlog, not yet in the ring
        self.thread = None


class Consumer:
    __slots__ = ("batches", "current", "deps", "events", "handled", "index", "line", "log",
                 "seq", "terminal", "thread")

    def __init__(self, index: int):
        self.index = index
        self.deps: tuple = ()         # the consumers it is gated on (topologies)
        self.terminal = True          # no consumer is gated on it
        self.line = None              # its sequence's line, for dependents spinning on it
        self.seq = -1             # Sequence.INITIAL_VALUE
        self.batches = 0
        self.events = 0           # events seen (own and skipped)
        self.handled = 0
        self.log: list | None = None
        self.current = None       # the request being handled
        self.thread = None


@register
class Disruptor(Strategy):
    name = "disruptor"
    summary = "LMAX Disruptor: ring buffer, batching consumers, wait strategies"
    # Sequencer.next() waits for the slowest consumer on a full ring: back pressure.
    no_queue_capacity = ("its ring is bounded by strategy.params.ring_size, and a full one "
                         "makes the publisher wait in next() (the LMAX tests never call "
                         "tryNext): it refuses nothing")
    Params = Params

    def start(self) -> None:
        p = self.p
        ctx = self.ctx
        self.size = p.ring_size
        self.mask = p.ring_size - 1
        self.ring: list = [None] * p.ring_size
        self.multi = p.producer_type == "multi" or (p.producer_type is None and p.producers > 1)
        self.claimed = -1          # last claimed sequence
        self.cursor = -1           # highest contiguous published sequence
        self.flags = [-1] * p.ring_size    # availableBuffer: sequence published in each slot
        self.waiting: list[Consumer] = []  # parked in BlockingWaitStrategy (the condition)
        # AQS: signalAll moves the condition's waiters to the lock's queue; each unlock
        # wakes the queue's head (ReentrantLock.unlock -> AQS.release -> unparkSuccessor)
        self.lock_queue: deque[Consumer] = deque()
        self.handing_over = False          # a woken consumer has yet to unlock
        self.cursor_line = self.kernel.spin_line(CURSOR, read_of(CURSOR))
        self.prefilled = False             # the entries' lines put in the LLC (first event)
        self.stats = {"producer_waits": 0, "published": 0, "max_outstanding": 0,
                      "signals": 0}
        ips = ctx.machine.nominal_ips
        self.ips = ips
        self.publish_seg = self._seg(p.publish_us + (p.signal_us if p.wait == "blocking" else 0),
                                     ((SHARED, CURSOR, 1),) + (((SHARED, LOCK, 1),)
                                                               if p.wait == "blocking" else ()),
                                     0, None, "publish")
        self.claim_seg = self._seg(p.claim_us, ((SHARED, CURSOR, 1),), 1, CURSOR, "claim")
        self.producers = [Producer(i) for i in range(p.producers)]
        self.consumers = [Consumer(i) for i in range(p.consumers)]
        self.staged = p.topology != "sharded"
        if self.staged:
            for c, deps in zip(self.consumers, TOPOLOGIES[p.topology][1], strict=True):
                c.deps = tuple(self.consumers[d] for d in deps)
                for d in c.deps:
                    d.terminal = False
            for c in self.consumers:
                c.line = self.kernel.spin_line(seq_key(c.index), read_of(seq_key(c.index)))
            # handlers still to run on each slot's event (the terminal ones)
            self.left = [0] * p.ring_size
            self.n_terminal = sum(c.terminal for c in self.consumers)
        if self.staged:
            check_sources(ctx, p.producers, p.topology)
        cpus = ctx.server_cpus
        for pr in self.producers:
            pr.line = self.kernel.spin_line(f"disruptor-arrivals-{pr.index}")
            pr.thread = self.kernel.spawn(ctx.server, f"disruptor-producer-{pr.index}",
                                          lambda t, pr=pr: self._producer(t, pr))
        for c in self.consumers:
            pin = [cpus[c.index % len(cpus)]] if p.pin else None
            body = self._stage if self.staged else self._consumer
            c.thread = self.kernel.spawn(ctx.server, f"disruptor-consumer-{c.index}",
                                         lambda t, c=c, body=body: body(t, c), cpus=pin)
            c.thread.data = c

    def _prefill_entries(self, lines: float) -> None:
        """The ring's entries exist before the first event: RingBuffer's constructor
        allocates every one (``fill(eventFactory)``), so their lines are in the LLC, not
        in DRAM, when the producer first writes them, as a wrapped ring finds them (the
        LLC of socket 0: the model does not know which socket built the ring; LMAX's
        machines had one). As many as the LLC holds; nothing without caches."""
        h = getattr(self.ctx.machine, "hierarchy", None)
        if h is None or not lines or not h.llc:
            return
        llc = h.llc[0]
        for slot in range(min(self.size, int(llc.lines // lines))):
            llc.access(h.owner_id(SHARED, entry_key(slot)), lines)

    def _seg(self, us: float, lines, ops: int, line, label: str) -> Segment | None:
        if us <= 0 and not ops:
            return None
        fp = tuple(Footprint(kind, key, n, True) for kind, key, n in lines)
        return Segment(us * 1e-6 * self.ips, fp, ops, line, label=label)

    # -- producers ---------------------------------------------------------------------

    def on_arrival(self, conn) -> None:
        req = conn.take()
        if req is None:           # nothing readable (a serial connection still busy)
            return
        pr = self.producers[conn.id % len(self.producers)]
        pr.backlog.append(req)
        if pr.idle:
            pr.idle = False
            self.kernel.wake(pr.thread)
        else:
            pr.line.written(None)     # a spinning producer sees it at once

    def min_gating(self) -> int:
        return min(c.seq for c in self.consumers)

    def _producer(self, t, pr: Producer):
        p = self.p
        st = self.stats
        park_s = 1e-9 + p.timer_slack_us * 1e-6      # LockSupport.parkNanos(1L)
        size = self.size
        while True:
            if not pr.backlog:
                if p.producer_idle == "spin":
                    yield t.spin(pr.line, p.spin_ipc)
                    continue
                pr.idle = True
                t.syscall("futex_wait")
                yield t.park()
                continue
            req = pr.backlog.popleft()
            pr.current = req
            # claim: wait while the next sequence would wrap past the slowest consumer
            while self.claimed + 1 - size > self.min_gating():
                st["producer_waits"] += 1
                if p.producer_wait == "park-nanos":
                    yield t.block(park_s)
                else:
                    pr.waiting = True
                    yield t.park()
            seq = self.claimed + 1
            self.claimed = seq
            out = seq - self.min_gating()
            if out > st["max_outstanding"]:
                st["max_outstanding"] = out
            if self.multi and self.claim_seg is not None:
                yield t.run(self.claim_seg)
            slot = seq & self.mask
            assert self.ring[slot] is None, "ring slot overwritten before it was consumed"
            self.ring[slot] = req
            if self.staged:
                self.left[slot] = self.n_terminal
            pr.current = None
            self.read(t)                              # the producer reads the request
            lines = self._into_entry(req, slot)
            if req.produce is not None:
                yield t.run(req.produce, req)         # the event translator fills the slot
            else:
                yield t.run(self._translator(slot, lines))
            self._publish(seq, t)
            if self.publish_seg is not None:
                yield t.run(self.publish_seg)

    def _into_entry(self, req, slot: int) -> float:
        """Put ``req``'s own data in ring slot ``slot``'s entry (``in_entry``): its produce
        segment writes the entry, its consume segment reads it. Returns the entry's lines
        (0: the request has no data of its own, or a program consumes it)."""
        lines = task_lines(req.consume)
        if lines:
            if not self.prefilled:
                self.prefilled = True
                self._prefill_entries(lines)
            req.consume = in_entry(req.consume, slot, False)
        if task_lines(req.produce):
            req.produce = in_entry(req.produce, slot, True)
        return lines

    @staticmethod
    def _translator(slot: int, lines: float) -> Segment:
        """The event translator of a request without a produce segment: LMAX's
        ``ringBuffer.get(sequence).setValue(v)`` (TRANSLATE_INSTRUCTIONS), writing the
        slot's entry (``lines`` of it)."""
        fp = ((Footprint(SHARED, entry_key(slot), lines, True),) if lines else ())
        return Segment(TRANSLATE_INSTRUCTIONS, fp, label="translate")

    def _batch_seg(self, fps: tuple, events: int, gates: int) -> Segment:
        """BatchEventProcessor.run's own work for a batch of ``events`` events behind
        ``gates`` gating sequences (BATCH_, GATE_ and EVENT_INSTRUCTIONS, or ``batch_us``
        per batch), touching the lines ``fps`` (the cursor and the gating sequences read,
        its own sequence stored)."""
        p = self.p
        per_batch = (p.batch_us * 1e-6 * self.ips if p.batch_us is not None
                     else BATCH_INSTRUCTIONS + gates * GATE_INSTRUCTIONS)
        return Segment(per_batch + events * EVENT_INSTRUCTIONS, fps, label="batch")

    def _publish(self, seq: int, t) -> None:
        self.stats["published"] += 1
        if self.multi:
            mask = self.mask
            flags = self.flags
            flags[seq & mask] = seq
            c = self.cursor
            while flags[(c + 1) & mask] == c + 1:
                c += 1
            self.cursor = c
        else:
            self.cursor = seq
        self.cursor_line.written(t)
        if self.p.wait == "blocking" and self.waiting:
            self.stats["signals"] += 1
            self._signal_all(t)

    def _signal_all(self, t) -> None:
        """BlockingWaitStrategy.signalAllWhenBlocking (Disruptor 3.x: lock,
        Condition.signalAll, unlock). AQS ConditionObject.signalAll only moves the
        waiters to the lock's queue (doSignalAll -> transferForSignal); the unlock
        wakes the queue's head (release -> unparkSuccessor), and each woken consumer
        wakes the next with its own unlock (_handed_over). The producer pays one
        futex wake, not one per consumer."""
        self.lock_queue.extend(self.waiting)
        self.waiting.clear()
        if not self.handing_over:
            self._unpark_next(t)

    def _unpark_next(self, t) -> None:
        """An unlock of the wait strategy's lock: wake the first queued consumer."""
        if self.lock_queue:
            self.handing_over = True
            self.kernel.wake(self.lock_queue.popleft().thread, t)
        else:
            self.handing_over = False

    # -- consumers -------------------------------------------------------------------------

    def _consumer(self, t, c: Consumer):
        p = self.p
        n_cons = len(self.consumers)
        mine = c.index
        mask = self.mask
        ring = self.ring
        max_batch = p.max_batch
        # A batch reads the cursor (written by the producer) and stores the own sequence.
        fps = (Footprint(SHARED, CURSOR, 1, False), Footprint(SHARED, seq_key(c.index), 1, True))
        nxt = c.seq + 1
        while True:
            if self.cursor < nxt:
                yield from self._wait_for(t, nxt)
                continue
            end = self._take_batch(c, nxt, self.cursor, max_batch)
            yield t.run(self._batch_seg(fps, end - nxt + 1, 0))
            for s in range(nxt, end + 1):
                if s % n_cons != mine:
                    continue
                slot = s & mask
                req = ring[slot]
                ring[slot] = None
                c.current = req
                yield t.run(req.consume, req)
                c.current = None
                c.handled += 1
                if c.log is not None:
                    c.log.append((s, req.id))
                self.ctx.done(req, t)
            c.seq = end                 # sequence.set once per batch
            nxt = end + 1
            for pr in self.producers:
                if pr.waiting:
                    pr.waiting = False
                    self.kernel.wake(pr.thread, t)

    def _stage(self, t, c: Consumer):
        """A BatchEventProcessor of a topology: it handles every event once its
        barrier (the cursor, and the sequences of the consumers it is gated on:
        ProcessingSequenceBarrier.waitFor) lets it; the last terminal handler of an
        event completes the request and frees the slot."""
        p = self.p
        mask = self.mask
        ring = self.ring
        left = self.left
        max_batch = p.max_batch
        # A batch reads the cursor and the gating sequences and stores the own one.
        reads = [Footprint(SHARED, seq_key(d.index), 1, False) for d in c.deps]
        fps = (Footprint(SHARED, CURSOR, 1, False), *reads,
               Footprint(SHARED, seq_key(c.index), 1, True))
        gates = len(c.deps)
        nxt = c.seq + 1
        while True:
            if self.cursor < nxt:
                yield from self._wait_for(t, nxt)
                continue
            lag = next((d for d in c.deps if d.seq < nxt), None)
            if lag is not None:
                yield from self._wait_for_dependent(t, lag, nxt)
                continue
            ready = min([self.cursor] + [d.seq for d in c.deps])
            end = self._take_batch(c, nxt, ready, max_batch)
            yield t.run(self._batch_seg(fps, end - nxt + 1, gates))
            for s in range(nxt, end + 1):
                slot = s & mask
                req = ring[slot]
                c.current = req
                yield t.run(req.consume, req)
                c.current = None
                c.handled += 1
                if c.log is not None:
                    c.log.append((s, req.id))
                if c.terminal:
                    left[slot] -= 1
                    if not left[slot]:
                        ring[slot] = None
                        self.ctx.done(req, t)
            c.seq = end
            c.line.written(t)
            nxt = end + 1
            for pr in self.producers:
                if pr.waiting:
                    pr.waiting = False
                    self.kernel.wake(pr.thread, t)

    def _wait_for_dependent(self, t, dep: Consumer, nxt: int):
        """The cursor is there, a consumer it is gated on is not: every wait strategy
        waits on that consumer's sequence (Disruptor 3.x: ``while
        (dependentSequence.get() < sequence)``, BlockingWaitStrategy with a busy
        spin, the others with their own wait method)."""
        yield from self._spin_wait(t, dep.line, lambda: dep.seq >= nxt)

    @staticmethod
    def _take_batch(c, nxt: int, end: int, max_batch: int | None) -> int:
        """The last sequence of the batch a consumer at ``nxt`` takes when ``end`` is
        available (at most ``max_batch`` events), counted in its batches and events."""
        if max_batch is not None and end - nxt + 1 > max_batch:
            end = nxt + max_batch - 1
        c.batches += 1
        c.events += end - nxt + 1
        return end

    def _wait_for(self, t, nxt: int):
        """SequenceBarrier.waitFor(nxt) with the configured wait strategy; returns
        once the cursor has reached ``nxt``."""
        if self.p.wait == "blocking":
            while self.cursor < nxt:
                self.waiting.append(self._me(t))
                t.syscall("futex_wait")   # BlockingWaitStrategy: Condition.await
                yield t.park()
                # woken holding the lock (acquireQueued): the await's re-check and the
                # unlock in waitFor's finally (or the next await) wake the next waiter
                self._unpark_next(t)
            return
        yield from self._spin_wait(t, self.cursor_line, lambda: self.cursor >= nxt)

    def _spin_wait(self, t, line, ready):
        """Wait until ``ready()`` watching ``line`` (simcore.kernel.spin), as the wait
        strategy's applyWaitMethod does:

        * busy-spin (and blocking's wait on a gating sequence): spin;
        * yielding: SPIN_TRIES turns of its counting loop (a bounded spin,
          ``_counting_turns_s``), then Thread.yield() in a loop (a yielding spin:
          it hands its CPU at once to a thread queued there and reads the line
          between sched_yield calls, so it sees a write when the call in progress
          returns);
        * sleeping: the same 100 turns, 100 yields (a bounded yielding spin of 100
          sched_yield calls at the machine's price), then
          LockSupport.parkNanos(sleep_ns) + timer slack in a loop.

        LMAX-Exchange/disruptor ``YieldingWaitStrategy.applyWaitMethod`` (``if (0
        == counter) Thread.yield(); else --counter``, counter from SPIN_TRIES 100
        at each waitFor) and ``SleepingWaitStrategy.applyWaitMethod`` (``counter >
        100``: decrement; ``> 0``: decrement and Thread.yield(); else
        parkNanos), the same in 2.x and 3.x; ``BusySpinWaitStrategy``'s loop
        only re-reads the sequence (Thread.onSpinWait since 4.0)."""
        p = self.p
        env = self.env
        if p.wait in ("busy-spin", "blocking"):
            while not ready():
                yield t.spin(line, p.spin_ipc)
            return
        end = env.now + self._counting_turns_s(t)
        while not ready() and env.now < end:
            yield t.spin(line, p.spin_ipc, timeout=end - env.now)
        if p.wait == "yielding":
            while not ready():
                yield t.spin(line, p.spin_ipc, yielding=True)
            return
        turn = self.ctx.machine.syscall_cost("sched_yield")
        left = SLEEP_RETRIES - SPIN_TRIES if turn else 0
        while left > 0 and not ready():
            t0 = env.now
            yield t.spin(line, p.spin_ipc, yielding=True, timeout=left * turn)
            # the turns done: all of them, or up to where it gave its CPU away
            left -= max(1, round((env.now - t0) / turn))
        sleep_s = p.sleep_ns * 1e-9 + p.timer_slack_us * 1e-6
        while not ready():
            yield t.block(sleep_s)

    def _counting_turns_s(self, t) -> float:
        """Seconds of the wait strategies' SPIN_TRIES counting turns on ``t``'s CPU,
        at its clock now (a loop of L1 hits runs at the core's clock)."""
        ghz = self.ctx.machine.current_ghz(t.cpu.id, self.env.now)
        return SPIN_TRIES * self.p.spin_turn_cycles / (ghz * 1e9)

    def _me(self, t) -> Consumer:
        return t.data

    # -- inspection ----------------------------------------------------------------------

    def outstanding(self) -> list:
        reqs = [r for r in self.ring if r is not None]
        for pr in self.producers:
            reqs.extend(pr.backlog)
            if pr.current is not None:
                reqs.append(pr.current)
        # (in a topology an event being handled stays in its slot for the others)
        reqs.extend(c.current for c in self.consumers
                    if c.current is not None and not self.staged)
        return reqs
