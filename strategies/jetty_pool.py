"""Jetty's server: selectors and the base of pc, pec, epc and adaptive.

Every thread of a Jetty server is a QueuedThreadPool thread, the selector
threads included: ``ManagedSelector.doStart`` submits ``strategy::produce`` to
the pool and that job runs the selector's production loop. This module models
the pieces, from the Jetty sources (jetty-util ``org.eclipse.jetty.util.thread``
and jetty-io ``ManagedSelector``/``SelectorManager``; Jetty 10/11/12 unless said):

QueuedThreadPool and ReservedThreadExecutor live in ``strategies/pools.py``
    (with the j.u.c ThreadPoolExecutor they share their machinery with).

Selectors (``SelectorManager.defaultSelectors``, ``ManagedSelector.SelectorProducer``)
    max(1, min(cpus/2, maxThreads/16)) selectors; connection i belongs to
    selector i % n; each selector has its own execution strategy. With no ready
    connection the producing thread blocks in epoll_wait (it parks, holding
    production) until an arrival on one of its connections wakes it. What a
    selector produces depends on the connection (docs/strategies.md, "What a
    selector produces"):

    * an HTTP/1.1 connection (serial: one request at a time): the endpoint's
      fillable task, as Jetty 9.3+ ``ManagedSelector`` does
      (``SocketChannelEndPoint.onSelected`` returns ``_runFillable``). The
      selector only selects; whoever runs the task runs
      ``HttpConnection.onFillable``: read, parse and handle, again while the
      connection has requests, then a read that finds nothing (EAGAIN) and
      ``fillInterested()``. ``onSelected`` removed OP_READ from the key's
      desired interest; if the selector's ``updateKeys`` applied that (an
      epoll_ctl) before the task asked again, ``changeInterests`` submits the
      key update (``ManagedSelector.submit``), waking a selector blocked in
      select, which applies it (another epoll_ctl) and selects again. A task
      the selector's own thread runs inline (pc) asks again before
      ``updateKeys``, and pays neither.
    * any other connection (independent requests, as the EWYK benchmark's
      ``TestConnection`` or an HTTP/2 session, whose parser produces one task
      per stream): one parsed request: the producing thread reads it and runs
      its ``produce`` (parse) segment, and the task is its handling.

Overheads (explicit, zero them for pure queueing checks):
    select_us        the JDK's side of one select pass that returns ready keys
                     (~1 us, plausible figure); paid once per select pass, not per
                     request. The system calls are the machine's (models/syscalls.py):
                     an epoll_wait per select pass (base + per ready key), a read per
                     produced request, a futex_wait per pool-thread park.
    queue_us         the work under one of the BlockingArrayQueue's locks, or a
                     reserved-thread hand-off: ~0.1 us for an uncontended j.u.c
                     lock and an array store (plausible assumption), plus one
                     contended read-modify-write on the lock's line (the hardware
                     model prices it; free on the ideal machine). Contenders park
                     (strategies/pools.py ``ParkingLock``).
    thread_start_us  starting a pool thread: ~140 us for a kernel thread start
                     (docs/design/STRATEGIES.md, Loom section), charged to the new thread.
The futex wake a hand-off needs is priced by the machine (Kernel.wake).

Simplified: the adaptive strategy's ``synchronized`` state lock is free (an
uncontended monitor, a few ns); one read per request, where Jetty's fill reads
whatever the socket holds (up to the 8 KiB request buffer); a connection of
independent requests gives one request per select pass (round robin over ready
connections), and its requests may be handled concurrently (HTTP/2-like), which
is what lets PEC avoid head-of-line blocking on a single connection; the key
update's wake-up of a selector is priced as the futex wake the waker pays; Jetty's
ThreadPoolBudget check is a ConfigError when selectors (plus reserved threads)
leave no thread to consume.
"""

from __future__ import annotations

from collections import deque

from pydantic import Field, model_validator

from warmcore.simcore.config import ConfigError
from warmcore.simcore.work import SHARED, Footprint, Segment
from warmcore.strategies.base import StrategyParams, Strategy
from warmcore.strategies.pools import QueuedThreadPool, ReservedThreadExecutor, TimedWaits


class JettyParams(StrategyParams):
    """Tunables shared by the Jetty strategies (defaults from the Jetty sources)."""

    max_threads: int = Field(default=200, gt=0, description='QueuedThreadPool._maxThreads')
    min_threads: int = Field(default=8, ge=0, description='QueuedThreadPool._minThreads')
    idle_timeout_s: float = Field(default=60.0, ge=0,
                                  description='QueuedThreadPool._idleTimeout (60000 ms)')
    selectors: int | None = Field(default=None, gt=0,
                                  description='None: SelectorManager.defaultSelectors')
    select_us: float = Field(default=1.0, ge=0, description=(
        "the JDK's side of one select pass returning ready keys (the epoll_wait system "
        "call itself: models/syscalls.py)"))
    queue_us: float = Field(default=0.1, ge=0, description='one queue offer/poll or hand-off')
    thread_start_us: float = Field(default=140.0, ge=0,
                                   description='kernel thread start (docs/design/STRATEGIES.md)')
    thread_pool_executor: bool = Field(default=False, description=(
        "True: the strategies execute on an Executor that is not a Jetty ThreadPool (the "
        "2015 EWYK benchmark's TestServer wraps a java.util.concurrent ThreadPoolExecutor), "
        "so ExecuteProduceConsume has no pool to ask isLowOnThreads() and never falls "
        "back to produce-execute-consume (jetty-util 9.3 ExecuteProduceConsume: "
        "_threadpool is null unless the executor is a ThreadPool)"))
    queue_capacity: int | None = Field(default=None, ge=0, description=(
        "jobs the QueuedThreadPool's queue holds (a bounded BlockingArrayQueue's "
        "maxCapacity); a request dispatched to a full queue is refused "
        "(RejectedExecutionException, its connection closed). None: unbounded, Jetty's "
        "default (its BlockingArrayQueue grows without limit)"))

    @model_validator(mode="after")
    def _min_le_max(self):
        if self.min_threads > self.max_threads:
            raise ConfigError("min_threads", f"{self.min_threads} is above max_threads "
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


# What ``conn.data`` holds for a connection of a Jetty selector: falsy, its read
# interest is registered and it is not readable; READY, readable and waiting for
# a select pass; for an endpoint task (an HTTP/1.1 connection) produced and not
# finished, TASK while the key's update is pending (SocketChannelEndPoint
# ._updatePending) and OFF once the selector's updateKeys removed OP_READ.
READY, TASK, OFF = True, 2, 3


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
        self.selected_endpoints: list = []  # endpoint tasks produced since updateKeys
        self.updates = 0                 # key updates submitted, applied by the next pass
        self.woken_by_update = False
        self.key_updates = 0             # epoll_ctl calls of updateKeys and key updates
        self.update_wakeups = 0          # selects a key update woke
        self.strategy = None             # this selector's execution strategy
        m = server.ctx.machine
        # epoll_wait's kernel work: base + per ready key (models/syscalls.py), priced once;
        # none for connections made in memory (no sockets: nothing to select on)
        sockets = server.sockets
        self.epoll_s = m.syscall_cost("epoll_wait") if sockets else 0.0
        self.epoll_key_s = (m.syscall_cost("epoll_wait", 1) - self.epoll_s) if sockets else 0.0
        self.epoll_ctl_s = m.syscall_cost("epoll_ctl") if sockets else 0.0
        ips = m.nominal_ips
        self.select_seg = (Segment(select_us * 1e-6 * ips,
                                   (Footprint(SHARED, f"selector-{index}", 2, True),),
                                   label="select")
                           if select_us > 0 else None)

    def on_arrival(self, conn) -> None:
        if not conn.data:
            conn.data = READY
            self.ready.append(conn)
            w = self.waiter
            if w is not None:
                self.waiter = None
                self.kernel.wake(w)      # the NIC's interrupt ends epoll_wait: no waker thread

    def produce(self, t):
        """Generator: the next task, blocking in epoll_wait while none of this
        selector's connections is readable. The task is a request; for an endpoint
        task (``conn.data`` TASK) it is the connection's first request, not yet read."""
        while True:
            sel = self.selected
            if sel:
                conn = sel.popleft()
                req = conn.take()
                if conn.serial and req is not None:
                    conn.data = TASK            # onSelected: _runFillable, update pending
                    self.selected_endpoints.append(conn)
                elif conn.inbox and not conn.busy:
                    self.ready.append(conn)     # still readable: the next select sees it
                else:
                    conn.data = False           # the workload notifies when it is again
                if req is None:
                    continue
                self.produced += 1
                self.server.holding += 1
                if not conn.serial:
                    self.server.read(t)         # HttpConnection.fill: the request's read
                    if req.produce is not None:
                        yield t.run(req.produce, req)
                return req
            self._update_keys(t)
            if self.ready:
                self.selected, self.ready = self.ready, sel
                self.selects += 1
                if self.epoll_s:
                    t.charge_io(self.epoll_s + len(self.selected) * self.epoll_key_s)
                if self.select_seg is not None:
                    yield t.run(self.select_seg, None)
                continue
            self.waiter = t
            yield t.park()
            if self.waiter is t:
                self.waiter = None
            if self.woken_by_update:            # select returned no key: select again
                self.woken_by_update = False
                self.update_wakeups += 1
                t.charge_io(self.epoll_s)

    def _update_keys(self, t) -> None:
        """SelectorProducer's processUpdates and updateKeys, before a select: apply the
        submitted key updates, and drop OP_READ from the keys of endpoint tasks still
        running (SocketChannelEndPoint.updateKey): one epoll_ctl each."""
        n = self.updates
        self.updates = 0
        for conn in self.selected_endpoints:
            if conn.data == TASK:
                conn.data = OFF
                n += 1
        self.selected_endpoints.clear()
        if n:
            self.key_updates += n
            t.charge_io(n * self.epoll_ctl_s)

    def fill_interested(self, t, conn) -> None:
        """HttpConnection.fillInterested from thread ``t`` at the end of an endpoint
        task (SocketChannelEndPoint.changeInterests): if updateKeys has removed the
        key's OP_READ, submit its update (ManagedSelector.submit), waking a selector
        blocked in select (``_selecting``); else updateKeys will find nothing to do."""
        state = conn.data
        conn.data = False
        if state == OFF:
            self.updates += 1
            w = self.waiter
            if w is not None:
                self.waiter = None
                self.woken_by_update = True
                self.kernel.wake(w, t)
        if conn.inbox and not conn.busy:
            self.on_arrival(conn)


class JettyServer(Strategy):
    """Base of the Jetty strategies: a QueuedThreadPool, selectors, one execution
    strategy per selector (``make_strategy``), each started as a pool job."""

    Params = JettyParams
    needs_consumers = True      # the strategy hands tasks to pool threads
    reserved_version: str | None = None
    park_on_cpu = False         # QueuedThreadPool's park_on_cpu (pools.py)

    def start(self) -> None:
        p = self.p
        ctx = self.ctx
        cpus = len(ctx.server_cpus)
        self.waits = TimedWaits(self.env, self.kernel)
        self.holding = 0        # requests taken from a connection and not yet done
        self.refills = 0        # requests an endpoint task took after its first
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
                                     p.queue_us, p.thread_start_us,
                                     park_on_cpu=self.park_on_cpu,
                                     capacity=p.queue_capacity)
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
        """Run the task ``req`` on thread ``t``: handle the request; for an endpoint
        task (an HTTP/1.1 connection) ``HttpConnection.onFillable``: read, parse and
        handle each request the connection has, then a read that finds nothing
        (EAGAIN) and ``fillInterested()``."""
        conn = self.ctx.workload.connections[req.conn]
        if not conn.serial:
            yield t.run(req.consume, req)
            self.done(req, t)
            return
        read = self.read
        while True:
            read(t)
            if req.produce is not None:
                yield t.run(req.produce, req)
            yield t.run(req.consume, req)
            self.done(req, t)
            req = conn.take()
            if req is None:
                break
            self.holding += 1
            self.refills += 1
        read(t, 0)
        conn.owner.fill_interested(t, conn)

    def execute(self, t, body, req, for_req=None):
        """Executor.execute(job) from thread ``t``: queue (body, req), then pay the queue
        operation, accounted to ``for_req`` (default ``req``: the request it is for).
        A full bounded queue refuses the request: AdaptiveExecutionStrategy.execute (and
        EatWhatYouKill's before it) catches the RejectedExecutionException and closes the
        task, a Closeable, so the request is never answered (ctx.reject)."""
        accepted = yield from self.pool.offer(t, body, req, for_req)
        if not accepted:
            self.holding -= 1
            if req is not None:
                conn = self.ctx.workload.connections[req.conn]
                if conn.data in (TASK, OFF):
                    conn.data = False   # the refused endpoint task never runs
            self.ctx.reject(req)

    def in_flight_here(self) -> int:
        """Requests the server holds: waiting in connections plus taken and not done."""
        return self.holding + sum(len(c.inbox) for c in self.ctx.workload.connections)
