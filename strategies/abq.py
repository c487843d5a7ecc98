"""abq: java.util.concurrent.ArrayBlockingQueue between threads, the queue the LMAX
paper compares the Disruptor with, in its topologies.

Model (sources: OpenJDK 8 ``java.util.concurrent.ArrayBlockingQueue``; LMAX-Exchange/
disruptor ``src/docs/asciidoc/en/disruptor.adoc`` "Throughput Performance Testing":
"an ArrayBlockingQueue was applied for each arc of data flow", "in a blocking
programming style"; the queue perf tests ``OnePublisherToThreeProcessor*QueueThrough-
putTest`` and ``ThrottledOnePublisherToThreeProcessorPipelineLatencyTest``):

* A queue: an array of ``capacity`` items behind ONE ``ReentrantLock`` (nonfair,
  AQS) with two conditions, ``notEmpty`` and ``notFull``.
  - ``put(e)``: ``lock.lockInterruptibly()``; ``while (count == items.length)
    notFull.await()``; ``enqueue(e)`` (which calls ``notEmpty.signal()``); unlock.
  - ``take()``: lock; ``while (count == 0) notEmpty.await()``; ``dequeue()``
    (``notFull.signal()``); unlock.
  ``await`` releases the lock (waking the lock's next waiter) and parks; ``signal``
  moves the condition's longest waiter to the lock's queue and the unlock after it
  wakes it (AQS ``transferForSignal``, ``unparkSuccessor``); the woken thread takes
  the lock again before it looks at the queue. The lock is
  strategies.pools.ParkingLock; the work under it (the CAS on the lock word, the
  array store or load, ``count``, the indices) is ``queue_us``, a contended
  read-modify-write on the lock's line.
  A contender retries as JDK 8's AQS does before it parks (``ParkingLock`` with a
  ``line``: ``acquire``'s ``tryAcquire``, ``addWaiter``, ``acquireQueued``'s two
  turns) and sees a short critical section end; the kernel work of the futex
  calls and of a woken thread's switch back is paid outside the lock (after the
  unlock's ``tryRelease``, before a woken thread's ``tryAcquire``). Without
  these the queue saturated at LMAX's one event per microsecond (issue 34).
* Topologies (``topology``, as the Disruptor's): unicast P -> Q -> C; pipeline
  P -> Q1 -> C1 -> Q2 -> C2 -> Q3 -> C3; sequencer P1, P2, P3 -> Q -> C; multicast
  P -> Q1, Q2, Q3 -> C1, C2, C3; diamond P -> Q1 -> C1 -> Q3, P -> Q2 -> C2 -> Q4,
  C3 takes from Q3 and Q4. Every consumer handles every event it takes (the
  request's consume segment); a request is done when its last terminal handler
  has run.
* Producers take the arrivals of their connections (``conn.id % producers``), run
  the request's produce segment and ``put`` it into their queues.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from pydantic import Field

from warmcore.strategies.disruptor import check_sources
from warmcore.strategies.base import Strategy, StrategyParams, register
from warmcore.strategies.pools import queue_lock

# (producers, [(queues a consumer takes from, queues it puts into)], queues): the
# paper's arcs of data flow, one queue each; producers put into the queues no
# consumer puts into.
TOPOLOGIES = {
    "unicast": (1, (((0,), ()),), 1),
    "pipeline": (1, (((0,), (1,)), ((1,), (2,)), ((2,), ())), 3),
    "sequencer": (3, (((0,), ()),), 1),
    "multicast": (1, (((0,), ()), ((1,), ()), ((2,), ())), 3),
    "diamond": (1, (((0,), (2,)), ((1,), (3,)), ((2, 3), ())), 4),
}


class Params(StrategyParams):
    topology: Literal["unicast", "pipeline", "sequencer", "multicast", "diamond"] = "unicast"
    capacity: int = Field(default=8192, gt=0, le=1 << 22, description=(
        "each queue's array (the LMAX queue perf tests: BUFFER_SIZE 1024 * 8)"))
    queue_us: float = Field(default=0.05, ge=0, description=(
        "the work under the lock of one put or take: the lock word's CAS, the array "
        "slot, count and index (a contended RMW on the lock's line)"))
    producer_idle: Literal["park", "spin"] = Field(default="park", description=(
        "a producer with nothing to put: parks until an arrival wakes it, or spins (the "
        "LMAX latency test's publisher busy-waits between events)"))
    spin_ipc: float = Field(default=0.25, gt=0, le=8, description=(
        "instructions per cycle of a spinning producer's loop"))


class BlockingQueue:
    """One ArrayBlockingQueue: one lock, conditions notEmpty and notFull."""

    __slots__ = ("capacity", "items", "lock", "not_empty", "not_full", "signals")

    def __init__(self, name: str, capacity: int, ips: float, queue_us: float, kernel):
        self.capacity = capacity
        self.items: deque = deque()
        self.lock = queue_lock(kernel, name, ips, queue_us, "abq")
        self.not_empty: deque = deque()     # the conditions' waiters, longest first
        self.not_full: deque = deque()
        self.signals = 0

    def _signal(self, cond: deque) -> None:
        """Condition.signal(): the longest waiter moves to the lock's queue; the
        unlock that follows wakes it."""
        if cond:
            self.signals += 1
            self.lock.sem.waiters.append(cond.popleft())

    def _await(self, t, cond: deque):
        """Generator: Condition.await(): join ``cond``, release the lock (fullyRelease
        wakes the lock's next waiter), park; woken by an unlock after a signal, take
        the lock again (acquireQueued). The kernel work is paid where Linux runs it:
        FUTEX_WAIT on the waiter's CPU before it sleeps (queued on the futex
        meanwhile: a wake-up then makes the park return at once), the return from
        schedule() after the wake-up before its tryAcquire, so neither is inside
        the lock."""
        cond.append(t)
        self.lock.unlock(t)
        t.syscall("futex_wait")
        t.prepare_park()
        yield from t.settle_owed()          # FUTEX_WAIT's work, queued, before it sleeps
        yield t.park()
        yield from t.settle_owed()          # the return from schedule()
        yield from self.lock.relock(t)

    def _unlock(self, t):
        """Generator: ReentrantLock.unlock(): tryRelease stores state 0, then
        unparkSuccessor's LockSupport.unpark (a FUTEX_WAKE, if a waiter was woken)
        runs after the lock is free, so its cost is paid here, outside the lock,
        not inside the next one the thread takes."""
        self.lock.unlock(t)
        yield from t.settle_owed()

    def put(self, t, item, req=None):
        """Generator: put(item) on thread ``t``."""
        lock = self.lock
        yield from lock.acquire(t)
        while len(self.items) >= self.capacity:
            yield from self._await(t, self.not_full)
        self.items.append(item)
        if lock.seg is not None:
            yield t.run(lock.seg, req)
        self._signal(self.not_empty)
        yield from self._unlock(t)

    def take(self, t):
        """Generator: take() on thread ``t``; returns the item."""
        lock = self.lock
        yield from lock.acquire(t)
        while not self.items:
            yield from self._await(t, self.not_empty)
        item = self.items.popleft()
        if lock.seg is not None:
            yield t.run(lock.seg, item)
        self._signal(self.not_full)
        yield from self._unlock(t)
        return item


class Handler:
    __slots__ = ("current", "handled", "index", "inputs", "log", "outputs", "terminal")

    def __init__(self, index: int, inputs: list, outputs: list):
        self.index = index
        self.inputs = inputs
        self.outputs = outputs
        self.terminal = not outputs
        self.handled = 0
        self.current = None
        self.log: list | None = None


@register
class ArrayBlockingQueueStrategy(Strategy):
    name = "abq"
    summary = "java.util.concurrent.ArrayBlockingQueue per arc, the LMAX paper's comparator"
    # ArrayBlockingQueue.put awaits notFull on a full queue: back pressure, no refusal.
    no_queue_capacity = ("its queues are bounded by strategy.params.capacity, and a full "
                         "one makes the producer wait (ArrayBlockingQueue.put awaits "
                         "notFull): it refuses nothing")
    Params = Params

    def start(self) -> None:
        p = self.p
        ctx = self.ctx
        ips = ctx.machine.nominal_ips
        n_prod, shape, n_queues = TOPOLOGIES[p.topology]
        check_sources(ctx, n_prod, p.topology)
        self.queues = [BlockingQueue(f"abq-{i}", p.capacity, ips, p.queue_us, self.kernel)
                       for i in range(n_queues)]
        fed = {q for _ins, outs in shape for q in outs}
        self.entry = [self.queues[i] for i in range(n_queues) if i not in fed]
        self.handlers = [Handler(i, [self.queues[q] for q in ins],
                                 [self.queues[q] for q in outs])
                         for i, (ins, outs) in enumerate(shape)]
        self.n_terminal = sum(h.terminal for h in self.handlers)
        self.left: dict[int, int] = {}      # request id -> terminal handlers still to run
        self.backlogs = [deque() for _ in range(n_prod)]
        self.idle = [False] * n_prod
        self.making: list = [None] * n_prod  # produced, not yet in every entry queue
        self.lines = [self.kernel.spin_line(f"abq-arrivals-{i}") for i in range(n_prod)]
        self.producers = [self.kernel.spawn(ctx.server, f"abq-producer-{i}",
                                            lambda t, i=i: self._producer(t, i))
                          for i in range(n_prod)]
        for h in self.handlers:
            self.kernel.spawn(ctx.server, f"abq-consumer-{h.index}",
                              lambda t, h=h: self._consumer(t, h))

    def on_arrival(self, conn) -> None:
        req = conn.take()
        if req is None:
            return
        i = conn.id % len(self.backlogs)
        self.backlogs[i].append(req)
        if self.idle[i]:
            self.idle[i] = False
            self.kernel.wake(self.producers[i])
        else:
            self.lines[i].written(None)     # a spinning producer sees it at once

    def _producer(self, t, i: int):
        backlog = self.backlogs[i]
        while True:
            if not backlog:
                if self.p.producer_idle == "spin":
                    yield t.spin(self.lines[i], self.p.spin_ipc)
                    continue
                self.idle[i] = True
                t.syscall("futex_wait")
                yield t.park()
                continue
            req = backlog.popleft()
            self.making[i] = req
            self.left[req.id] = self.n_terminal
            self.read(t)
            if req.produce is not None:
                yield t.run(req.produce, req)
            for q in self.entry:
                yield from q.put(t, req, req)
            self.making[i] = None

    def _consumer(self, t, h: Handler):
        while True:
            req = None
            for q in h.inputs:              # the diamond's last step takes one of each
                req = yield from q.take(t)
                h.current = req
            yield t.run(req.consume, req)
            h.handled += 1
            if h.log is not None:
                h.log.append(req.id)
            for q in h.outputs:
                yield from q.put(t, req, req)
            h.current = None
            if h.terminal:
                self.left[req.id] -= 1
                if not self.left[req.id]:
                    del self.left[req.id]
                    self.ctx.done(req, t)

    def outstanding(self) -> list:
        held = {}
        for b in self.backlogs:
            for r in b:
                held[r.id] = r
        for r in self.making:
            if r is not None:
                held[r.id] = r
        for q in self.queues:
            for r in q.items:
                held[r.id] = r
        for h in self.handlers:
            if h.current is not None:
                held[h.current.id] = h.current
        return list(held.values())
