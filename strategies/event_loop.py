"""event-loop: Netty's NioEventLoopGroup, N loops each owning its connections for life.

What Netty 4.1's ``NioEventLoop.run`` does, and what this module models:

* **Group and chooser**: ``loops`` threads (``MultithreadEventLoopGroup``:
  ``DEFAULT_EVENT_LOOP_THREADS = 2 x availableProcessors``, here 2 x the server's
  CPUs). A connection is registered with ``next()`` of the group's chooser
  (``PowerOfTwoEventExecutorChooser`` / ``GenericEventExecutorChooser``: round
  robin in registration order), i.e. loop ``conn.id % loops``, for its lifetime.
* **One pass of the loop**: ``select`` (blocking ``epoll_wait`` when there is no
  task, ``selectNow`` otherwise): one syscall segment of ``epoll_us`` per pass;
  when nothing is ready the thread sleeps in it (park) and the network wakes it
  (``kernel.wake(loop, None)``) when any of its connections gets input. Then
  ``processSelectedKeys``: for each ready channel read what the socket holds
  (``NioByteUnsafe.read``) and fire the pipeline inline: the request is parsed
  (``req.produce``) and handled (``req.consume``) on the loop thread, so every
  loop is a ProduceConsume over its connections. Input that arrives during the
  pass is picked up by the next ``epoll_wait``.
* **ioRatio** (default 50): after the I/O part, ``runAllTasks(ioTime * (100 -
  ioRatio) / ioRatio)`` runs queued tasks until that time budget is spent,
  checking the clock every 64 tasks as Netty does (``ioRatio`` 100: all tasks;
  a pass with no I/O: ``runAllTasks(0)``, at most 64 tasks). The only tasks
  here are responses coming back from the offload pool.
* **Blocking handlers**: a handler that blocks (``req.consume.block_s > 0``)
  blocks the loop thread, and with it every other connection of that loop.
  With ``offload = n`` such requests are handed to a pool of ``n`` threads (a
  java.util.concurrent fixed ThreadPoolExecutor over a locked
  LinkedBlockingQueue, as in ``thread-pool``; Netty's own advice is a separate
  executor for blocking handlers); the worker handles the request and submits
  the response back to the loop (``execute`` on the loop: an MPSC queue offer,
  one CAS, and a ``selector.wakeup()`` if the loop sleeps: a second wake).
  The loop then runs that task (writes the response) and reports the request.
  Non-blocking requests stay inline.
  ``queue_capacity`` bounds the pool's queue (``new ThreadPoolExecutor(n, n, 0,
  ms, new LinkedBlockingQueue<>(capacity))``; 0: a SynchronousQueue): a blocking
  request that finds every pool thread busy and the queue full is refused, as
  ``ThreadPoolExecutor.execute`` does when ``offer`` fails at the maximum pool size
  (``reject(command)``, the default AbortPolicy throws RejectedExecutionException;
  the handler's exceptionCaught answers with an error): ``ctx.reject``.

Simplified: no boss group (connections exist before the run), no scheduled
tasks, one read per ready channel per pass; requests offloaded to the shared
pool may complete out of order within a connection (an ``EventExecutorGroup``
would pin each channel to one executor to keep its order). A serial (HTTP/1.1)
connection's next request is readable only once the previous one is handled;
the loop reads it at its next ``epoll_wait``.
"""

from __future__ import annotations

import math
from collections import deque

from pydantic import Field, model_validator

from warmcore.simcore.config import ConfigError
from warmcore.simcore.work import SHARED, Footprint, Segment, compute_part
from warmcore.strategies.base import StrategyParams, Strategy, register
from warmcore.strategies.pools import ThreadPoolExecutor, syscall_segment

RUN_ALL_TASKS_CHECK = 64   # SingleThreadEventExecutor.runAllTasks: nanoTime() every 64 tasks


class Params(StrategyParams):
    loops: int | None = Field(default=None, gt=0, description=(
        'MultithreadEventLoopGroup.DEFAULT_EVENT_LOOP_THREADS: 2 x cores (None = that).'
    ))
    epoll_us: float = Field(default=1.0, ge=0, description=(
        "The JDK's side of one select pass (SelectorImpl.lockAndDoSelect, processReadyEvents "
        "into the selected-key set), an estimate; the epoll_wait system call itself is the "
        "machine's (models/syscalls.py: base + per ready event)."
    ))
    io_ratio: int = Field(default=50, gt=0, le=100, description=(
        'NioEventLoop ioRatio (percent of loop time for I/O versus tasks), 1..100.'
    ))
    offload: int = Field(default=0, ge=0, description=(
        'Threads of the pool blocking handlers are offloaded to; 0 = run them inline.'
    ))
    lock_us: float = Field(default=0.05, ge=0, description=(
        "Offload pool queue and task-queue CAS instructions (see thread-pool's lock_us)."
    ))
    thread_start_us: float = Field(default=140.0, ge=0, description=(
        'Starting an offload pool thread (docs/design/STRATEGIES.md, Loom section: ~140 us).'
    ))
    queue_capacity: int | None = Field(default=None, ge=0, description=(
        "Requests the offload pool's queue holds (a LinkedBlockingQueue(capacity); None: "
        "unbounded, Executors.newFixedThreadPool's default); one more with every pool "
        "thread busy is refused (AbortPolicy: RejectedExecutionException, the request "
        "answered with an error). Needs offload; the loops themselves queue nothing."
    ))

    @model_validator(mode="after")
    def _capacity_needs_pool(self):
        if self.queue_capacity is not None and not self.offload:
            raise ConfigError("queue_capacity", "bounds the offload pool's queue; with "
                              "offload = 0 there is none (the loops run every handler "
                              "inline): set strategy.params.offload")
        return self
    async_backend: bool | None = Field(default=None, description=(
        "The handler's backend call (work.backend_us) is a non-blocking client request "
        "on the channel's own loop, as RxNetty's HttpClient on the server's event loops: "
        "the loop handles the request up to the call, serves other channels meanwhile, "
        "and writes the response when the answer is readable. Off: the call blocks the "
        "loop (a blocking handler) unless offload is set. None: as work.backend_async."
    ))


class _Loop:
    __slots__ = ("answers", "epoll", "idx", "offer", "parked", "plan_answers", "poll",
                 "ready", "tasks", "thread")

    def __init__(self, idx: int):
        self.idx = idx
        self.ready: deque = deque()    # channels with input since the last epoll_wait
        self.tasks: deque = deque()    # taskQueue: responses from the offload pool
        self.answers: deque = deque()  # backend answers readable (async_backend)
        self.plan_answers: deque = deque()   # (PlanRun, call) answered, readable
        self.parked = False            # sleeping in epoll_wait
        self.thread = None


@register
class EventLoop(Strategy):
    name = "event-loop"
    summary = ("Netty NioEventLoopGroup: 2 x cores loops, each owns its connections and "
               "parses+handles their requests inline")
    Params = Params
    makes_call_plans = True

    def start(self) -> None:
        p = self.p
        ips = self.ctx.machine.nominal_ips
        n = p.loops or 2 * len(self.ctx.server_cpus)
        self.loops = []
        for i in range(n):
            L = _Loop(i)
            L.epoll = syscall_segment(ips, p.epoll_us, f"epoll-loop-{i}", "epoll_wait")
            line = f"loop-taskq-{i}"
            fp = (Footprint(SHARED, line, 1, True),)
            # MPSC offer: a CAS on the producer index, contended between pool threads.
            L.offer = Segment(p.lock_us * 1e-6 * ips, fp, 1, line, label="task-offer")
            # The loop's poll of its own task queue (single consumer: no CAS).
            L.poll = Segment(p.lock_us * 1e-6 * ips, fp, label="task-poll")
            L.thread = self.kernel.spawn(self.ctx.server, f"nioEventLoopGroup-{i}",
                                         lambda t, L=L: self._loop(t, L))
            self.loops.append(L)
        self.plan = self.ctx.call_plan
        if self.plan is not None and not self._async_backend():
            raise ConfigError("work.backend_calls", "a call plan is made with the "
                              "non-blocking client: set work.backend_async (or "
                              "strategy.params.async_backend)")
        self.pool = None
        if p.offload:
            self.pool = ThreadPoolExecutor(
                self, "offload", core=p.offload, maximum=p.offload, run_task=self._offloaded,
                lock_us=p.lock_us, lock_line="offload-queue-lock", tomcat_queue=False,
                thread_start_us=p.thread_start_us, capacity=p.queue_capacity)

    # -- the network: a channel becomes readable ----------------------------------------

    def on_arrival(self, conn) -> None:
        L = conn.owner
        if L is None:
            L = conn.owner = self.loops[conn.id % len(self.loops)]
        if not conn.data:              # not yet in its loop's ready set
            conn.data = True
            L.ready.append(conn)
            if L.parked:
                L.parked = False
                self.kernel.wake(L.thread, None)

    # -- threads ----------------------------------------------------------------------

    def _async_backend(self) -> bool:
        """Does the handler call its backend with the non-blocking client?"""
        a = self.p.async_backend
        return self.ctx.cfg.work.backend_async if a is None else a

    def _loop(self, t, L):
        env = self.env
        ctx = self.ctx
        pool = self.pool
        ratio = self.p.io_ratio
        async_backend = self._async_backend()
        backend = self.kernel.backend
        plan = self.plan
        while True:
            if not L.ready and not L.tasks and not L.answers and not L.plan_answers:
                L.parked = True
                yield t.park()                 # epoll_wait with nothing ready
            # select() / selectNow(): one epoll_wait returning the ready channels (the
            # kernel's part, models/syscalls.py), then the JDK's selector work
            t.syscall("epoll_wait", n=len(L.ready) + len(L.answers) + len(L.plan_answers))
            if L.epoll is not None:
                yield t.run(L.epoll)
            ready = L.ready
            L.ready = deque()
            io_start = env.now
            while L.answers:                   # backend channels readable: respond
                if backend is not None:        # (a backend on this machine: read it)
                    t.charge_io(backend.answer_read_s)
                ctx.done(L.answers.popleft(), t)
            while L.plan_answers:              # a call plan's answers: the next calls
                yield from self._plan_answer(t, L, *L.plan_answers.popleft())
            for conn in ready:                 # processSelectedKeys
                conn.data = False              # new input from now on re-arms the channel
                # NioByteUnsafe.read: one read brings what the socket holds (a serial
                # connection: the one request it may send)
                self.read(t, 0 if conn.busy else (1 if conn.serial else len(conn.inbox)))
                take = conn.take
                for _ in range(len(conn.inbox)):   # what the socket holds now
                    req = take()
                    if req is None:                # serial connection: next one after done
                        break
                    if req.produce is not None:
                        yield t.run(req.produce, req)
                    blk = req.consume.block_s
                    if pool is not None and blk > 0:
                        if not (yield from pool.execute(t, (req, L))):
                            ctx.reject(req)    # RejectedExecutionException: an error reply
                    elif async_backend and blk > 0 and not req.consume.program:
                        yield t.run(compute_part(req.consume), req)
                        req.consumed_by = t.tid    # (run() knows req.consume only)
                        self._call_backend(t, L, req, blk)
                    elif plan is not None:
                        yield t.run(req.consume, req)
                        self._start_plan(t, L, req)
                    else:
                        yield t.run(req.consume, req)
                        ctx.done(req, t)
            tasks = L.tasks
            if tasks:                          # runAllTasks(budget)
                if ratio == 100:
                    budget = math.inf
                elif ready:
                    budget = (env.now - io_start) * (100 - ratio) / ratio
                else:
                    budget = 0.0
                t0 = env.now
                ran = 0
                while tasks:
                    req = tasks.popleft()
                    yield t.run(L.poll, req)   # poll the task, write the response
                    ctx.done(req, t)
                    ran += 1
                    if ran % RUN_ALL_TASKS_CHECK == 0 and env.now - t0 >= budget:
                        break

    def _call_backend(self, t, L, req, blk: float) -> None:
        """A non-blocking client request from loop thread ``t``: its answer becomes
        readable on the loop's selector ``blk`` seconds later (the request's
        blocked_io), or, with a backend on this machine (work.backend_mock_us), when
        the backend's answer arrives by loopback."""
        self.kernel.charge_blocked_io(req, blk)
        self._write_call(t, blk, lambda: self._answered(L, req))

    def _write_call(self, t, delay: float, on_answer) -> None:
        """Loop thread ``t`` writes a backend call answered ``delay`` later: through
        the backend on this machine if there is one (``on_answer`` then runs in the
        answer's receive softirq), else by the backend elsewhere (a timer)."""
        backend = self.kernel.backend
        if backend is None:
            self.env.timeout(delay).callbacks.append(lambda _e: on_answer())
        else:
            backend.call(t, delay, on_answer)

    def _start_plan(self, t, L, req) -> None:
        """The handler wrote its first calls (the plan's roots); the request waits for
        the plan's longest chain of delays (its blocked_io)."""
        plan = self.plan
        run = plan.begin(req)
        self.kernel.charge_blocked_io(req, plan.critical_s)
        for i in plan.roots:
            self._plan_call(t, L, run, i)

    def _plan_call(self, t, L, run, i: int) -> None:
        """Call ``i`` of the plan, written by loop thread ``t``: its answer becomes
        readable on the loop after its delay (through the backend on this machine if
        there is one)."""
        self._write_call(t, self.plan.delays_s[i], lambda: self._plan_answered(L, run, i))

    def _plan_answered(self, L, run, i: int) -> None:
        L.plan_answers.append((run, i))
        if L.parked:
            L.parked = False
            self.kernel.wake(L.thread, None)

    def _plan_answer(self, t, L, run, i: int):
        """Read and parse call ``i``'s answer, write the calls that waited only for it,
        and respond once every call is answered."""
        backend = self.kernel.backend
        if backend is not None:
            t.charge_io(backend.answer_read_s)
        seg = self.plan.answer_segs[i]
        if seg is not None:
            yield t.run(seg, run.req)
        for j in self.plan.answered(run, i):
            self._plan_call(t, L, run, j)
        if not run.left:
            self.ctx.done(run.req, t)

    def _answered(self, L, req) -> None:
        L.answers.append(req)
        if L.parked:
            L.parked = False
            self.kernel.wake(L.thread, None)

    def _offloaded(self, t, task):
        """A pool thread: handle the request (blocking), then hand the response back to
        the channel's loop (SingleThreadEventExecutor.execute + wakeup)."""
        req, L = task
        yield t.run(req.consume, req)
        yield t.run(L.offer)
        L.tasks.append(req)
        if L.parked:
            L.parked = False
            self.kernel.wake(L.thread, t)
