"""A backend mock on the server's machine (``work.backend_mock_us``), as the
RxNetty-vs-Tomcat study ran it: WSPerfLab's ``ws-backend-mock`` on 127.0.0.1, the
servers calling it over loopback (Netflix-Skunkworks/WSPerfLab at f4b1cad:
``ws-impls/*/StartServer.java`` and ``TestCaseAServlet.java`` default the backend
to 127.0.0.1:8989; ``test-results/vs-tomcat-Apr-2015/howto.txt`` starts it on the
server with ``wsbackend-start`` and reads its CPU with ``wsbackend-cputime``).

What one backend call costs on the machine, as the mock's code does it
(``ws-backend-mock/.../StartMockService.java``, ``MockResponse.java``):

1. The caller writes the call (a loopback ``write``: the mock's receive softirq runs
   on the caller's CPU, models/syscalls.py) and waits: an event loop's channel
   becomes readable later; a blocking worker blocks in its read.
2. One of the mock's event loops (RxNetty 0.4.7, ``RxNetty.java``:
   ``new SingleNioLoopProvider(1, Runtime.getRuntime().availableProcessors())``:
   ``loops``, one per CPU by default) is woken by that softirq (a sync wake-up),
   returns from ``epoll_wait``, reads the call and parses it (half of the call's
   ``backend_mock_us``), and schedules its answer ``backend_us`` later on a
   computation thread (``MockResponse.generateJson``:
   ``Schedulers.computation().createWorker().schedule(..., delay, MILLISECONDS)``;
   RxJava 1.x's ``EventLoopsScheduler`` has ``availableProcessors()`` threads and
   hands workers out round-robin). Queuing a task that becomes its thread's first
   deadline wakes that thread (``ScheduledThreadPoolExecutor``'s delayed queue
   signals its waiting taker: a futex wake-up the loop pays).
3. The computation thread sleeps in a timed wait until its first deadline, then
   generates the answer's JSON (the other half of ``backend_mock_us``) and writes it
   from outside the channel's loop: Netty queues the write on that loop and wakes it
   (``SingleThreadEventExecutor.execute`` -> ``wakeup``).
4. The loop writes the answer (a loopback ``write``: the caller's receive softirq on
   the loop's CPU, a sync wake-up of the caller), and the caller reads it.

The mock's threads are process ``backend`` (their counters are the result's
``processes.backend``); its work touches its own code (``work.code_kib`` under its
own key: the same framework as the server's) and each thread's stack
(``work.thread_kib``). The call is ``work.request_kib`` on the wire and the answer
``work.response_kib`` (the study's calls and answers differ in size; one size each
here). The caller's loopback write of the call is charged to it as I/O when it
calls (a blocking worker pays it on its next segment, after the answer), the
answer's read when it takes the answer. The time from the call to the answer
beyond ``backend_us`` (the mock's work and wake-ups) is not in the request's
``blocked_io`` but in what the breakdown leaves to queueing.
"""

from __future__ import annotations

import heapq
from collections import deque

from warmcore.models.workloads.base import work_ips
from warmcore.simcore.work import CODE, THREAD, Footprint, Segment

LINE = 64


class _Loop:
    """One of the mock's event loops: calls to read, answers to write."""

    __slots__ = ("answers", "calls", "sleeping", "thread")

    def __init__(self):
        self.calls: deque = deque()      # (delay_s, on_answer) read from its sockets
        self.answers: deque = deque()    # on_answer of each answer to write
        self.sleeping = False
        self.thread = None


class _Timers:
    """One computation thread: its delayed tasks, earliest first."""

    __slots__ = ("heap", "thread", "waiting")

    def __init__(self):
        self.heap: list = []             # (due, seq, loop, on_answer)
        self.waiting = False
        self.thread = None


class BackendMock:
    """The backend mock's threads and the path of one call (module docstring)."""

    def __init__(self, ctx):
        work = ctx.cfg.work
        self.kernel = ctx.kernel
        self.env = ctx.env
        n_cpus = ctx.machine.n_cpus
        half_ins = work.backend_mock_us * 0.5e-6 * work_ips(ctx)
        fp = []
        if work.code_kib:
            fp.append(Footprint(CODE, "backend-mock", work.code_kib * 1024 / LINE, False))
        if work.thread_kib:
            fp.append(Footprint(THREAD, None, work.thread_kib * 1024 / LINE, True))
        self.parse_seg = Segment(half_ins, tuple(fp), label="backend-read")
        self.answer_seg = Segment(half_ins, tuple(fp), label="backend-answer")
        cost = ctx.machine.syscall_cost
        self.call_write_s = cost("write", kib=work.request_kib)
        self.call_read_s = cost("read", kib=work.request_kib)
        self.answer_write_s = cost("write", kib=work.response_kib)
        self.answer_read_s = cost("read", kib=work.response_kib)
        self.loops = [_Loop() for _ in range(work.backend_mock_loops or n_cpus)]
        self.timers = [_Timers() for _ in range(work.backend_mock_timers or n_cpus)]
        self.calls = 0           # round-robin over the loops (pooled connections)
        self.scheduled = 0       # round-robin over the computation threads
        self.proc = self.kernel.process("backend")

    def start(self) -> None:
        k = self.kernel
        for i, L in enumerate(self.loops):
            L.thread = k.spawn(self.proc, f"mock-loop-{i}", lambda t, L=L: self._loop(t, L))
        for i, T in enumerate(self.timers):
            T.thread = k.spawn(self.proc, f"mock-timer-{i}", lambda t, T=T: self._timer(t, T))

    # -- the caller's side ---------------------------------------------------------

    def call(self, caller, delay_s: float, on_answer) -> None:
        """``caller`` (on its CPU) writes a call to be answered ``delay_s`` later;
        ``on_answer()`` runs in the answer's receive softirq (``deliver_from`` the
        mock loop that writes it: a wake-up from there is a sync one). The caller
        pays the call's write now and the answer's read (``answer_read_s``) when it
        takes the answer."""
        caller.charge_io(self.call_write_s)
        L = self.loops[self.calls % len(self.loops)]
        self.calls += 1
        k = self.kernel
        k.deliver_from(caller, lambda: self._readable(L, (delay_s, on_answer)))

    def _readable(self, L: _Loop, call) -> None:
        L.calls.append(call)
        if L.sleeping:
            L.sleeping = False
            self.kernel.wake(L.thread)     # in the softirq: a sync wake-up

    # -- the mock's threads --------------------------------------------------------

    def _loop(self, t, L: _Loop):
        k = self.kernel
        while True:
            if not L.calls and not L.answers:
                L.sleeping = True
                yield t.park()                 # epoll_wait with nothing ready
                continue
            t.syscall("epoll_wait", n=len(L.calls) + (1 if L.answers else 0))
            calls, L.calls = L.calls, deque()
            for delay_s, on_answer in calls:
                t.charge_io(self.call_read_s)
                yield t.run(self.parse_seg)
                self._schedule(t, L, delay_s, on_answer)
            while L.answers:                   # the writes the timers queued
                on_answer = L.answers.popleft()
                t.charge_io(self.answer_write_s)
                k.deliver_from(t, on_answer)

    def _schedule(self, waker, L: _Loop, delay_s: float, on_answer) -> None:
        """The answer's task, ``delay_s`` from now, on the next computation thread;
        wake it if the task is its first deadline and it waits."""
        T = self.timers[self.scheduled % len(self.timers)]
        self.scheduled += 1
        heapq.heappush(T.heap, (self.env.now + delay_s, self.scheduled, L, on_answer))
        if T.waiting and T.heap[0][3] is on_answer:
            T.waiting = False
            self.kernel.wake(T.thread, waker)

    def _timer(self, t, T: _Timers):
        env = self.env
        while True:
            if not T.heap:
                T.waiting = True
                yield t.park()
                continue
            due = T.heap[0][0]
            if due > env.now:
                T.waiting = True
                yield t.park(timeout=due - env.now)
                T.waiting = False
                continue
            _, _, L, on_answer = heapq.heappop(T.heap)
            yield t.run(self.answer_seg)
            L.answers.append(on_answer)        # Netty: the write queued on the loop
            if L.sleeping:
                L.sleeping = False
                self.kernel.wake(L.thread, t)

