"""thread-pool: Tomcat NIO connector, poller thread(s) feeding a ThreadPoolExecutor.

What Tomcat 9's ``NioEndpoint`` does for a kept-alive connection, and what this
module models, step by step:

1. **Poller** (``NioEndpoint.Poller.run``): drain the ``events`` queue (a
   ``SynchronizedQueue``: one lock acquisition per ``poll``) and re-arm each
   socket's read interest; ``selector.select()`` (``selectNow()`` when events
   were added meanwhile): one ``epoll_wait`` syscall per pass, sleeping in it
   when nothing is ready; for each ready key ``processKey`` clears the read
   interest (``unreg``: an ``epoll_ctl`` at the next select) and calls
   ``processSocket`` -> ``executor.execute(SocketProcessor)``.
2. **Executor** (``org.apache.tomcat.util.threads.ThreadPoolExecutor`` with a
   ``TaskQueue extends LinkedBlockingQueue``): ``minSpareThreads`` core threads
   prestarted; ``TaskQueue.offer`` queues the task when
   ``submittedCount <= poolSize`` (an idle thread exists) or the pool is at
   ``maxThreads``, else makes the executor start a new thread with the task.
   The queue is lock-protected: each ``offer`` and each ``take`` is a lock
   acquisition, i.e. a read-modify-write of the lock word that serialises
   across cores (a ``Segment`` with ``contended_ops=1`` on ``tpe-queue-lock``)
   plus ``lock_us`` of instructions. Idle workers wait on the queue's
   ``notEmpty`` condition (an AQS condition queue: FIFO, the longest-waiting
   worker is signalled first) and park on a futex; an offer into an empty queue
   signals one (``kernel.wake(worker, poller)``: the poller pays the futex
   syscall), and a taker that leaves items behind signals the next waiter
   (``LinkedBlockingQueue.take``: ``if (c > 1) notEmpty.signal()``).
3. **Worker** (``SocketProcessor`` -> ``Http11Processor.service``): parses and
   handles the request (``req.produce`` then ``req.consume`` on the worker),
   and keeps going while the socket has more input (the keep-alive loop reads
   non-blocking); when it has none, ``registerReadInterest`` ->
   ``Poller.add``: offer an event into the poller's ``SynchronizedQueue`` (a
   lock acquisition on ``poller-events-lock``) and ``selector.wakeup()`` if the
   poller sleeps in ``select`` (``wakeupCounter``): a second futex-class wake
   per request, paid by the worker.

Overheads are explicit parameters, all settable to 0 for queueing checks:
``epoll_us`` per ``epoll_wait`` pass, ``epoll_ctl_us`` per interest change
(two per request: unreg and re-register), ``lock_us`` per lock acquisition,
``thread_start_us`` per worker thread started. On a hardware preset the
contended lock line, the futex syscalls (``machine.futex_wake_cost``), wake-up
latencies, migrations and cold caches come from the machine model.

The executor is ``strategies.pools.ThreadPoolExecutor`` (java.util.concurrent's
over a LinkedBlockingQueue, with Tomcat's TaskQueue rule here); the event
loop's offload pool uses it too.
"""

from __future__ import annotations

from collections import deque

from pydantic import Field

from warmcore.simcore.work import Segment
from warmcore.strategies.base import StrategyParams, Strategy, register
from warmcore.strategies.pools import ThreadPoolExecutor, lock_segment, syscall_segment

# Connection states (conn.data) as the poller sees them.
REGISTERED, READY, PROCESSING = "registered", "ready", "processing"

MAX_THREADS = 200           # AbstractEndpoint maxThreads


class Params(StrategyParams):
    pollers: int = Field(default=1, gt=0, description=(
        'Tomcat 9 NioEndpoint: one poller (pollerThreadCount fixed at 1 since 9.0.x; 8.5 '
        'defaulted to min(2, cpus) until it was aligned with 9.0).'
    ))
    workers: int | None = Field(default=None, gt=0, description=(
        "AbstractEndpoint maxThreads 200, minSpareThreads 10 (the executor's core size); "
        "None: the scenario's server.threads if set (maxThreads as configured), else 200."
    ))
    min_spare: int = Field(default=10, ge=0, description=(
        "AbstractEndpoint minSpareThreads 10 (the executor's core size)."))
    epoll_us: float = Field(default=1.0, ge=0, description=(
        "The JDK's side of one poller select pass (selected-key set), an estimate; the "
        "epoll_wait system call is the machine's (models/syscalls.py)."
    ))
    epoll_ctl_us: float = Field(default=0.5, ge=0, description=(
        "The JDK's side of one interest change (EPollSelectorImpl.processUpdateQueue), an "
        "estimate; the epoll_ctl system call is the machine's. Two per request: processKey "
        "clears OP_READ, the worker's re-registration sets it again."
    ))
    lock_us: float = Field(default=0.05, ge=0, description=(
        'Instructions of one lock acquisition + queue operation (ReentrantLock CAS, AQS '
        "bookkeeping, node link): ~20 cycles for an uncontended LOCK CMPXCHG (Agner Fog's "
        'instruction tables) plus ~100 instructions; the contended part (line transfer) comes '
        'from the machine model through contended_ops.'
    ))
    thread_start_us: float = Field(default=140.0, ge=0, description=(
        'Starting a kernel thread (docs/design/STRATEGIES.md, Loom section: ~140 us).'
    ))
    queue_capacity: int | None = Field(default=None, ge=0, description=(
        "sockets the executor's TaskQueue holds (StandardThreadExecutor maxQueueSize, "
        "default Integer.MAX_VALUE: None here, unbounded); one more with every worker "
        "busy at maxThreads is refused (RejectedExecutionException) and NioEndpoint "
        "closes the socket: the requests it holds are refused"))
    backend_threads: int = Field(default=2000, gt=0, description=(
        "With a call plan (work.backend_calls): the servlet's own executor for its backend "
        "calls, a ThreadPoolExecutor of this many threads over a LinkedBlockingQueue "
        "(WSPerfLab TestCaseAServlet: PropertyNames BackendRequestThreadPoolSize, 2000)"))


class _Poller:
    __slots__ = ("ctl", "epoll", "events", "events_lock", "idx", "parked", "ready", "thread")

    def __init__(self, idx: int):
        self.idx = idx
        self.ready: deque = deque()       # sockets epoll reports readable
        self.events: deque = deque()      # re-registrations (Poller.events)
        self.parked = False               # sleeping in epoll_wait
        self.thread = None


@register
class ThreadPool(Strategy):
    name = "thread-pool"
    summary = ("Tomcat NIO: poller thread(s) hand ready sockets to a 200-thread pool "
               "through a locked queue")
    Params = Params
    makes_call_plans = True

    def start(self) -> None:
        p = self.p
        ips = self.ctx.machine.nominal_ips
        workers = p.workers or self.ctx.cfg.server.threads or MAX_THREADS
        self.executor = ThreadPoolExecutor(
            self, "http-nio-exec", core=min(p.min_spare, workers), maximum=workers,
            run_task=self._process, lock_us=p.lock_us, lock_line="tpe-queue-lock",
            tomcat_queue=True, thread_start_us=p.thread_start_us,
            capacity=p.queue_capacity)
        self.executor.prestart()
        self.plan = self.ctx.call_plan
        if self.plan is not None:         # TestCaseAServlet's executor for its calls
            self.backend_exec = ThreadPoolExecutor(
                self, "backend-exec", core=p.backend_threads, maximum=p.backend_threads,
                run_task=self._call_task, lock_us=p.lock_us, lock_line="backend-exec-lock",
                tomcat_queue=False, thread_start_us=p.thread_start_us)
            self.call_segs = [Segment(0.0, block_s=d, label="backend-call")
                              for d in self.plan.delays_s]
        self.pollers = []
        for i in range(p.pollers):
            P = _Poller(i)
            P.epoll = syscall_segment(ips, p.epoll_us, f"epoll-poller-{i}", "epoll_wait")
            P.ctl = syscall_segment(ips, p.epoll_ctl_us, f"epoll-poller-{i}", "epoll_ctl")
            P.events_lock = lock_segment(ips, p.lock_us, f"poller-events-lock-{i}")
            P.thread = self.kernel.spawn(self.ctx.server, f"http-nio-Poller-{i}",
                                         lambda t, P=P: self._poller(t, P))
            self.pollers.append(P)

    # -- the network: a socket becomes readable ---------------------------------------

    def on_arrival(self, conn) -> None:
        st = conn.data
        if st is None:                    # accepted and registered with a poller
            conn.owner = self.pollers[conn.id % len(self.pollers)]   # getPoller0 round robin
            st = REGISTERED
        if st is REGISTERED:
            conn.data = READY
            P = conn.owner
            P.ready.append(conn)
            if P.parked:
                P.parked = False
                self.kernel.wake(P.thread, None)
        # READY: already reported; PROCESSING: the worker or the re-registration sees it

    # -- threads ----------------------------------------------------------------------

    def _poller(self, t, P):
        execute = self.executor.execute
        ctl = P.ctl
        while True:
            events = P.events
            if events:                    # events(): re-arm read interest
                for _ in range(len(events)):
                    yield t.run(P.events_lock)          # SynchronizedQueue.poll
                    conn = events.popleft()
                    t.syscall("epoll_ctl")              # epoll_ctl(EPOLL_CTL_MOD, EPOLLIN)
                    if ctl is not None:
                        yield t.run(ctl)
                    if conn.inbox:                      # level-triggered: readable at once
                        conn.data = READY
                        P.ready.append(conn)
                    else:
                        conn.data = REGISTERED
            if not P.ready and not P.events:
                P.parked = True
                yield t.park()                          # blocked in epoll_wait
                continue
            t.syscall("epoll_wait", n=len(P.ready))     # select() / selectNow()
            if P.epoll is not None:
                yield t.run(P.epoll)
            ready = P.ready
            P.ready = deque()
            for conn in ready:
                conn.data = PROCESSING
                t.syscall("epoll_ctl")                  # unreg: clear OP_READ
                if ctl is not None:
                    yield t.run(ctl)
                if not (yield from execute(t, conn)):   # processSocket
                    self._close(conn)

    def _close(self, conn) -> None:
        """processSocket caught the executor's RejectedExecutionException and returned
        false: the poller closes the socket (NioEndpoint.Poller.processKey ->
        cancelledKey), so every request it holds is refused; the client's next request
        comes on a new connection, registered afresh."""
        while (req := conn.take()) is not None:
            self.ctx.reject(req)
        conn.data = REGISTERED
        if conn.inbox and not conn.busy:                # arrived while it was closing
            self.on_arrival(conn)

    def _run_plan(self, t, req):
        """TestCaseAServlet.doGet with a call plan: the calls run on the servlet's own
        executor, each submitted once the calls it comes after are answered (by the
        executor thread that read the last of them, where the servlet has a helper task
        wait: Agroup, a simplification), and this worker waits on their futures
        (Future.get: LockSupport.park) until the last answer's thread wakes it
        (FutureTask.set -> unpark). The request waits the plan's longest chain."""
        plan = self.plan
        run = plan.begin(req)
        self.kernel.charge_blocked_io(req, plan.critical_s)
        for i in plan.roots:
            yield from self.backend_exec.execute(t, (run, i))
        while run.left:
            run.waiter = t
            t.syscall("futex_wait")
            yield t.park()
        run.waiter = None

    def _call_task(self, t, task):
        """An executor thread makes call ``i`` (blocking: HttpClient.execute), parses
        its answer, submits the calls that waited only for it, and wakes the worker if
        it was the last."""
        run, i = task
        plan = self.plan
        yield t.run(self.call_segs[i])
        seg = plan.answer_segs[i]
        if seg is not None:
            yield t.run(seg, run.req)
        for j in plan.answered(run, i):
            yield from self.backend_exec.execute(t, (run, j))
        if not run.left and run.waiter is not None:
            self.kernel.wake(run.waiter, t)

    def _process(self, t, conn):
        """SocketProcessor: serve every request the socket holds, then re-register."""
        ctx = self.ctx
        take = conn.take
        while True:
            req = take()
            if req is None:
                break
            self.read(t)                                # Http11InputBuffer.fill: the request
            if req.produce is not None:
                yield t.run(req.produce, req)
            yield t.run(req.consume, req)
            if self.plan is not None:
                yield from self._run_plan(t, req)
            ctx.done(req, t)
        # keep-alive: the next fill(false) finds nothing (a read returning 0, EAGAIN),
        # the processor returns OPEN and the socket goes back to the poller
        self.read(t, 0)
        P = conn.owner
        yield t.run(P.events_lock)                      # Poller.add -> events.offer
        P.events.append(conn)
        if P.parked:                                    # selector.wakeup()
            P.parked = False
            self.kernel.wake(P.thread, t)
