"""Jetty's thread pool, reserved threads and selectors: what pc, pec, epc and adaptive share.

Every thread of a Jetty server is a QueuedThreadPool thread, the selector
threads included: ``ManagedSelector.doStart`` submits ``strategy::produce`` to
the pool and that job runs the selector's production loop. This module models
the pieces, from the Jetty sources (jetty-util ``org.eclipse.jetty.util.thread``
and jetty-io ``ManagedSelector``/``SelectorManager``; Jetty 10/11/12 unless said):

QueuedThreadPool (``QueuedThreadPool.java``)
    maxThreads 200, minThreads 8, idleTimeout 60 s, an unbounded job queue
    (``BlockingArrayQueue``). ``execute(job)`` does what the ``_counts``
    (threads, idle) CAS loop does: ``idle`` counts idle threads minus queued
    jobs; a thread is started when ``idle <= 0 and threads < maxThreads``.
    The queue signals its ``notEmpty`` condition only when it goes from empty to
    non-empty, and a poller that leaves jobs behind signals the next waiter
    (``BlockingArrayQueue.offer``/``poll``), so a burst is picked up by a chain
    of wake-ups, each paid by the previous taker. Waiters are woken in FIFO
    order (a ``Condition`` signals its longest waiter). A thread that finds no
    job exits if threads > minThreads and no thread has exited for
    idleTimeout (``_lastShrink``: at most one exit per idleTimeout, pool-wide);
    otherwise it polls with idleTimeout and re-checks. ``doStart`` starts
    minThreads threads.

ReservedThreadExecutor (``ReservedThreadExecutor.java``)
    capacity max(1, ceilToNextPowerOfTwo(min(cpus, maxThreads/8))) (Jetty 12,
    ``reservedThreads(executor, -1)``) or max(1, min(cpus, maxThreads/10))
    (Jetty 9.4). ``tryExecute(task)`` hands the task to a parked reserved
    thread if there is one (most recently parked first: a SynchronousQueue/
    stack hand-off) and, if that leaves none, starts reserving another; if
    none is parked it starts reserving one (a pool job that parks as a
    reserved thread; at most capacity reserved + starting) and fails. A
    reserved thread that ran its task reserves itself again; one idle for the
    idle timeout leaves (goes back to the pool).

Selectors (``SelectorManager.defaultSelectors``, ``ManagedSelector.SelectorProducer``)
    max(1, min(cpus/2, maxThreads/16)) selectors; connection i belongs to
    selector i % n; each selector has its own execution strategy. A selector
    produces a task by taking one request from a ready connection and running
    its ``produce`` (parse) segment on the producing thread; with no ready
    connection the producing thread blocks in epoll_wait (it parks, holding
    production) until an arrival on one of its connections wakes it.

Overheads (explicit, zero them for pure queueing checks):
    select_us        one epoll_wait that returns ready keys (a syscall, ~1 us;
                     plausible figure for a Linux syscall plus the copy of the
                     ready list). Paid once per select pass, not per request.
    queue_us         a BlockingArrayQueue offer or poll, or a reserved-thread
                     hand-off: ~0.1 us for an uncontended j.u.c lock and an array
                     store (plausible assumption), plus one contended
                     read-modify-write on the queue's lock line (the hardware
                     model prices it; free on the ideal machine).
    thread_start_us  starting a pool thread: ~140 us for a kernel thread start
                     (STRATEGIES.md, Loom section), charged to the new thread.
The futex wake a hand-off needs is priced by the machine (Kernel.wake).

Simplified: the adaptive strategy's ``synchronized`` state lock is free (an
uncontended monitor, a few ns); a connection gives one request per select pass
(round robin over ready connections) instead of parsing a whole buffer of
pipelined requests after one read; requests of one connection may be handled
concurrently (HTTP/2-like), which is what lets PEC avoid head-of-line blocking
on a single connection; Jetty's ThreadPoolBudget check is a ConfigError when
selectors (plus reserved threads) leave no thread to consume.
"""

from __future__ import annotations

import contextlib
from collections import deque

from pydantic import BaseModel, ConfigDict, Field, model_validator

from warmcore.simcore.config import ConfigError
from warmcore.simcore.work import SHARED, Footprint, Segment
from warmcore.strategies.base import Strategy


class JettyParams(BaseModel):
    """Tunables shared by the Jetty strategies (defaults from the Jetty sources)."""

    model_config = ConfigDict(extra="forbid")
    max_threads: int = Field(default=200, gt=0, description='QueuedThreadPool._maxThreads')
    min_threads: int = Field(default=8, ge=0, description='QueuedThreadPool._minThreads')
    idle_timeout_s: float = Field(default=60.0, ge=0,
                                  description='QueuedThreadPool._idleTimeout (60000 ms)')
    selectors: int | None = Field(default=None, gt=0,
                                  description='None: SelectorManager.defaultSelectors')
    select_us: float = Field(default=1.0, ge=0, description='one epoll_wait returning ready keys')
    queue_us: float = Field(default=0.1, ge=0, description='one queue offer/poll or hand-off')
    thread_start_us: float = Field(default=140.0, ge=0,
                                   description='kernel thread start (STRATEGIES.md)')

    @model_validator(mode="after")
    def _min_le_max(self):
        if self.min_threads > self.max_threads:
            raise ValueError(f"min_threads: {self.min_threads} is above max_threads "
                             f"{self.max_threads}")
        return self


def ceil_pow2(v: int) -> int:
    """TypeUtil.ceilToNextPowerOfTwo (values <= 1 give 1)."""
    return 1 if v <= 1 else 1 << (v - 1).bit_length()


def reserved_capacity(cpus: int, max_threads: int, version: str = "12") -> int:
    """ReservedThreadExecutor.reservedThreads(executor, -1) for a sized pool."""
    if version == "9.4":
        return max(1, min(cpus, max_threads // 10))
    return max(1, ceil_pow2(min(cpus, max_threads // 8)))


def default_selectors(cpus: int, max_threads: int) -> int:
    """SelectorManager.defaultSelectors for a sized pool."""
    return max(1, min(cpus // 2, max_threads // 16))


class PoolThread:
    """Per-thread state (Thread.data) of a pool thread: its timed waits and hand-offs."""

    __slots__ = ("expire", "nb", "since", "task", "timed_out", "timeout", "timer_at", "waiting")

    def __init__(self):
        self.waiting = False
        self.since = 0.0
        self.timeout = 0.0
        self.expire = None       # called when the wait times out (leaves the waiter list)
        self.timer_at = None     # fire time of the earliest pending timer
        self.timed_out = False
        self.task = None         # (body, req) handed to a reserved thread
        self.nb = False          # inside a non-blocking invocation (Invocable)


class TimedWaits:
    """park() with a timeout: one lazy timer per thread, re-armed only when it fires
    before the current wait's deadline (so a 60 s timeout costs no event per park)."""

    def __init__(self, env, kernel):
        self.env = env
        self.kernel = kernel

    def wait(self, t, timeout: float, expire):
        """Park ``t`` (already registered by the caller in its waiter list) until woken
        or until ``timeout`` s pass; on timeout ``expire(t)`` unregisters it and
        ``t.data.timed_out`` is True when the generator returns."""
        st = t.data
        now = self.env.now
        st.waiting = True
        st.since = now
        st.timeout = timeout
        st.expire = expire
        st.timed_out = False
        if timeout > 0:
            self._arm(t, st, now + timeout)
        yield t.park()
        st.waiting = False

    def _arm(self, t, st, deadline: float) -> None:
        if st.timer_at is not None and st.timer_at <= deadline:
            return
        st.timer_at = deadline
        self.env.timeout(max(0.0, deadline - self.env.now)).callbacks.append(
            lambda _e: self._fire(t, st, deadline))

    def _fire(self, t, st, at: float) -> None:
        if st.timer_at == at:
            st.timer_at = None
        if not st.waiting:
            return
        deadline = st.since + st.timeout
        if self.env.now >= deadline - 1e-12 and t.is_parked:
            st.expire(t)
            st.timed_out = True
            self.kernel.wake(t)
        else:
            self._arm(t, st, max(deadline, self.env.now))


class QueuedThreadPool:
    """Jetty's QueuedThreadPool (see the module docstring). Jobs are (body, req)
    pairs; ``body(thread, req)`` is a generator the pool thread runs to completion."""

    def __init__(self, server: JettyServer, max_threads: int, min_threads: int,
                 idle_timeout_s: float, queue_us: float, thread_start_us: float,
                 name: str = "qtp"):
        self.server = server
        self.env = server.env
        self.kernel = server.kernel
        self.process = server.ctx.server
        self.max_threads = max_threads
        self.min_threads = min_threads
        self.idle_timeout = idle_timeout_s
        self.thread_start_s = thread_start_us * 1e-6
        self.name = name
        self.jobs: deque = deque()
        self.waiters: deque = deque()   # parked idle threads, longest waiting first
        self.threads = 0                # _counts hi: live threads (started included)
        self.idle = 0                   # _counts lo: idle threads minus queued jobs
        self.last_shrink = self.env.now
        self.n_started = 0
        self.n_exited = 0
        self.max_queue = 0
        self.executed = 0
        self.waits = server.waits
        ips = server.ctx.machine.nominal_ips
        self.seg = (Segment(queue_us * 1e-6 * ips,
                            (Footprint(SHARED, f"{name}-jobs", 2, True),),
                            contended_ops=1, contended_line=f"{name}-jobs", label="qtp-queue")
                    if queue_us > 0 else None)

    def start(self) -> None:
        """doStart: ensureThreads() starts minThreads threads."""
        while self.threads < self.min_threads:
            self.threads += 1
            self.idle += 1
            self._start_thread()

    def execute(self, body, req=None, waker=None) -> None:
        """Queue a job; wake a waiting thread if the queue was empty; start a thread
        if none is idle and the pool is below max. The caller, if a thread, then
        pays ``self.seg`` (see JettyServer.execute)."""
        start = 1 if (self.idle <= 0 and self.threads < self.max_threads) else 0
        self.threads += start
        self.idle += start - 1
        jobs = self.jobs
        was_empty = not jobs
        jobs.append((body, req))
        self.executed += 1
        if len(jobs) > self.max_queue:
            self.max_queue = len(jobs)
        if was_empty and self.waiters:
            self.kernel.wake(self.waiters.popleft(), waker)
        if start:
            self._start_thread()

    def _start_thread(self) -> None:
        self.n_started += 1
        self.kernel.spawn(self.process, f"{self.name}-{self.n_started}", self._runner)

    def _expire(self, t) -> None:
        with contextlib.suppress(ValueError):
            self.waiters.remove(t)

    def _runner(self, t):
        t.data = PoolThread()
        t.charge_kernel(self.thread_start_s)
        jobs = self.jobs
        waiters = self.waiters
        kernel = self.kernel
        env = self.env
        seg = self.seg
        while True:
            if jobs:
                body, req = jobs.popleft()
                if jobs and waiters:        # BlockingArrayQueue.poll: signal the next waiter
                    kernel.wake(waiters.popleft(), t)
                if seg is not None:
                    yield t.run(seg, req)
                yield from body(t, req)
                self.idle += 1              # addCounts(0, 1): idle again
                continue
            # No job at once: shrink (at most one thread per idleTimeout, pool-wide)?
            if (self.idle_timeout > 0 and self.threads > self.min_threads
                    and env.now - self.last_shrink > self.idle_timeout):
                self.last_shrink = env.now
                self.threads -= 1
                self.idle -= 1
                self.n_exited += 1
                return
            waiters.append(t)
            yield from self.waits.wait(t, self.idle_timeout, self._expire)


class ReservedThreadExecutor:
    """Jetty's ReservedThreadExecutor on a QueuedThreadPool (see the module docstring)."""

    def __init__(self, server: JettyServer, pool: QueuedThreadPool, capacity: int,
                 idle_timeout_s: float, queue_us: float):
        self.server = server
        self.env = server.env
        self.kernel = server.kernel
        self.pool = pool
        self.capacity = capacity
        self.idle_timeout = idle_timeout_s
        self.stack: list = []     # parked reserved threads; the last one parked is handed first
        self.size = 0             # reserved threads (parked, waiting for a task)
        self.pending = 0          # reserved threads being started (pool jobs not yet reserved)
        self.offered = 0
        self.failed = 0
        self.shrunk = 0
        ips = server.ctx.machine.nominal_ips
        self.seg = (Segment(queue_us * 1e-6 * ips, (Footprint(SHARED, "rte", 1, True),),
                            contended_ops=1, contended_line="rte", label="rte-handoff")
                    if queue_us > 0 else None)

    def available(self) -> int:
        return len(self.stack)

    def try_execute(self, body, req=None, waker=None) -> bool:
        """Hand (body, req) to a parked reserved thread, or start reserving one and fail."""
        if self.stack:
            th = self.stack.pop()
            self.size -= 1
            th.data.task = (body, req)
            self.kernel.wake(th, waker)
            self.offered += 1
            if self.size == 0:
                self._start_reserved(waker)
            return True
        self.failed += 1
        self._start_reserved(waker)
        return False

    def _start_reserved(self, waker) -> None:
        if self.pending + self.size >= self.capacity:
            return
        self.pending += 1
        self.server.pool.execute(self._reserved, None, waker)

    def _expire(self, t) -> None:
        with contextlib.suppress(ValueError):
            self.stack.remove(t)

    def _reserved(self, t, _req):
        """ReservedThread.run: reserve, wait for a task, run it, reserve again."""
        self.pending -= 1
        st = t.data
        waits = self.server.waits
        while True:
            if self.size >= self.capacity:
                return
            self.size += 1
            st.task = None
            self.stack.append(t)
            while st.task is None:
                yield from waits.wait(t, self.idle_timeout, self._expire)
                if st.task is None and st.timed_out:
                    self.size -= 1
                    self.shrunk += 1
                    return
                if st.task is None and t not in self.stack:   # spurious wake: wait again
                    self.stack.append(t)
            body, req = st.task
            st.task = None
            if self.seg is not None:
                yield t.run(self.seg, req)
            yield from body(t, req)


class Selector:
    """One ManagedSelector: its connections' readiness and the production of tasks."""

    def __init__(self, server: JettyServer, index: int, select_us: float):
        self.server = server
        self.index = index
        self.kernel = server.kernel
        self.ready: deque = deque()      # readable connections not yet selected
        self.selected: deque = deque()   # keys returned by the last select
        self.waiter = None               # the producing thread parked in epoll_wait
        self.produced = 0
        self.selects = 0
        self.strategy = None             # this selector's execution strategy
        ips = server.ctx.machine.nominal_ips
        self.select_seg = (Segment(select_us * 1e-6 * ips,
                                   (Footprint(SHARED, f"selector-{index}", 2, True),),
                                   label="select")
                           if select_us > 0 else None)

    def on_arrival(self, conn) -> None:
        if not conn.data:
            conn.data = True
            self.ready.append(conn)
            w = self.waiter
            if w is not None:
                self.waiter = None
                self.kernel.wake(w)      # the NIC's interrupt ends epoll_wait: no waker thread

    def produce(self, t):
        """Generator: the next task (a parsed request), blocking in epoll_wait while
        none of this selector's connections is readable."""
        while True:
            sel = self.selected
            if sel:
                conn = sel.popleft()
                req = conn.take()
                if conn.inbox and not conn.busy:
                    self.ready.append(conn)     # still readable: the next select sees it
                else:
                    conn.data = False           # the workload notifies when it is again
                if req is None:
                    continue
                self.produced += 1
                self.server.holding += 1
                if req.produce is not None:
                    yield t.run(req.produce, req)
                return req
            if self.ready:
                self.selected, self.ready = self.ready, sel
                self.selects += 1
                if self.select_seg is not None:
                    yield t.run(self.select_seg, None)
                continue
            self.waiter = t
            yield t.park()
            if self.waiter is t:
                self.waiter = None


class JettyServer(Strategy):
    """Base of the Jetty strategies: a QueuedThreadPool, selectors, one execution
    strategy per selector (``make_strategy``), each started as a pool job."""

    Params = JettyParams
    needs_consumers = True      # the strategy hands tasks to pool threads
    reserved_version: str | None = None

    def start(self) -> None:
        p = self.p
        ctx = self.ctx
        cpus = len(ctx.server_cpus)
        self.waits = TimedWaits(self.env, self.kernel)
        self.holding = 0        # requests taken from a connection and not yet done
        n_sel = p.selectors or default_selectors(cpus, p.max_threads)
        self.rte = None
        required = n_sel
        if self.reserved_version is not None:
            cap = p.reserved_threads
            if cap is None:
                cap = reserved_capacity(cpus, p.max_threads, self.reserved_version)
            required += cap
        left = p.max_threads - required
        if left < (1 if self.needs_consumers else 0):
            raise ConfigError("strategy.params.max_threads",
                              f"insufficient threads: {n_sel} selectors"
                              + (f" and {required - n_sel} reserved threads"
                                 if required > n_sel else "")
                              + f" leave {left} of max_threads={p.max_threads} "
                              f"(Jetty's ThreadPoolBudget) (strategy {self.name})")
        self.pool = QueuedThreadPool(self, p.max_threads, p.min_threads, p.idle_timeout_s,
                                     p.queue_us, p.thread_start_us)
        if self.reserved_version is not None and cap > 0:
            self.rte = ReservedThreadExecutor(self, self.pool, cap, p.idle_timeout_s,
                                              p.queue_us)
        self.selectors = [Selector(self, i, p.select_us) for i in range(n_sel)]
        self.pool.start()
        for sel in self.selectors:
            sel.strategy = self.make_strategy(sel)
            self.pool.execute(sel.strategy.produce_job)

    def make_strategy(self, selector):
        raise NotImplementedError

    def on_arrival(self, conn) -> None:
        sel = conn.owner
        if sel is None:
            sel = conn.owner = self.selectors[conn.id % len(self.selectors)]
        sel.on_arrival(conn)

    # -- helpers for the execution strategies ---------------------------------------------

    def done(self, req, t) -> None:
        self.holding -= 1
        self.ctx.done(req, t)

    def consume(self, t, req):
        """A task's body: handle the request on thread ``t``."""
        yield t.run(req.consume, req)
        self.done(req, t)

    def execute(self, t, body, req, for_req=None):
        """Executor.execute(job) from thread ``t``: queue (body, req), then pay the queue
        operation, accounted to ``for_req`` (default ``req``: the request it is for)."""
        pool = self.pool
        pool.execute(body, req, t)
        if pool.seg is not None:
            yield t.run(pool.seg, req if for_req is None else for_req)

    def in_flight_here(self) -> int:
        """Requests the server holds: waiting in connections plus taken and not done."""
        return self.holding + sum(len(c.inbox) for c in self.ctx.workload.connections)
