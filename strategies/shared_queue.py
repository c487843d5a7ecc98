"""shared-queue: N worker threads blocking on one FIFO of arrived requests.

The textbook multi-server queue: requests reach a shared queue at no CPU cost
(the kernel's accept queue, or SO_REUSEPORT listeners sharing one socket) and
each worker takes the oldest, parses and handles it, and sleeps on a futex
when the queue is empty. On the ideal machine with one worker per CPU this is
exactly an M/M/c (or G/G/c) queue, which is what the engine's theory tests use.
Idle workers are woken longest-parked first (FIFO), as every wait queue this
models does: a blocking accept() on a shared socket (inet_csk_wait_for_connect
queues exclusive waiters at the tail, prepare_to_wait_exclusive, and a wake-up
takes the first: __wake_up_common; Cloudflare, "Why does one NGINX worker take
all the load?", 2017: blocking accept round-robins, only epoll is LIFO),
FUTEX_WAKE (kernel/futex/waitwake.c futex_wake walks the bucket's plist, FIFO
among equal priorities) and AQS's Condition.signal (ConditionObject.doSignal:
the first waiter). LIFO wake-ups that keep the warmest thread busy belong to
the pools whose real class is a stack: Jetty's ReservedThreadExecutor,
ForkJoinPool's idle workers, Tokio's and Go's parked workers.

``queue_capacity`` bounds the waiting room: an arrival that finds every worker busy
and that many requests waiting is refused (``ctx.reject``), as a
``ThreadPoolExecutor`` over a bounded ``ArrayBlockingQueue`` does when ``offer``
fails with the pool at its maximum (``execute`` calls ``reject(command)``, the
default ``AbortPolicy`` throws ``RejectedExecutionException``; 0 is a
``SynchronousQueue``, which accepts only a hand-off to a waiting worker). With c
workers on c ideal CPUs that is M/M/c/(c + capacity): Erlang B at 0.
"""

from __future__ import annotations

from collections import deque

from pydantic import Field

from warmcore.strategies.base import StrategyParams, Strategy, register


class Params(StrategyParams):
    threads: int | None = Field(default=None, gt=0, description='default: one per server CPU')
    queue_capacity: int | None = Field(default=None, ge=0, description=(
        "requests that may wait for a worker; one more is refused (None: unbounded, as "
        "a LinkedBlockingQueue; 0: no waiting room, a SynchronousQueue hand-off)"))


@register
class SharedQueue(Strategy):
    name = "shared-queue"
    summary = "workers take requests from one shared FIFO (an M/M/c server)"
    Params = Params

    def start(self) -> None:
        self.queue: deque = deque()
        self.idle: deque = deque()      # parked workers, longest waiting first
        self.capacity = self.p.queue_capacity
        self.woken = 0          # workers woken for a queued request, not yet running
        if self.capacity is not None:
            self.on_arrival = self._on_arrival_bounded
            # An arrival may now be refused, an action at its instant: each gets an
            # event of its own (no elision), so it is refused at its own time.
            self.arrival_wakes = lambda: True
        n = self.p.threads or self.default_threads()
        for i in range(n):
            self.kernel.spawn(self.ctx.server, f"worker-{i}", self._worker)

    def on_arrival(self, conn) -> None:
        self.queue.append(conn.take())
        if self.idle:
            self.kernel.wake(self.idle.popleft())

    def _on_arrival_bounded(self, conn) -> None:
        """on_arrival with a bounded waiting room: the queue holds the requests handed
        to woken workers (not waiting) and the waiting ones."""
        req = conn.take()
        if not self.idle and len(self.queue) - self.woken >= self.capacity:
            self.ctx.reject(req)
            return
        self.queue.append(req)
        if self.idle:
            self.woken += 1
            self.kernel.wake(self.idle.popleft())

    def arrival_wakes(self) -> bool:
        return bool(self.idle)

    def _worker(self, t):
        q = self.queue
        idle = self.idle
        ctx = self.ctx
        done = ctx.done
        # system calls, bound once: free on the ideal machine (the M/M/c hot path)
        read = self.read if self._read_s[1] else None
        futex_wait_s = ctx.machine.syscall_cost("futex_wait")
        while True:
            if q:
                req = q.popleft()
                if read is not None:
                    read(t)
                if req.produce is not None:
                    yield t.run(req.produce, req)
                yield t.run(req.consume, req)
                done(req, t)      # the recorder catches up deferred arrivals here
            else:
                idle.append(t)
                may_wake = ctx.arrivals_may_wake   # a local: a method lookup CPython 3.11
                may_wake()                         # does not specialise on an attribute
                if futex_wait_s:
                    t.charge_kernel(futex_wait_s)      # FUTEX_WAIT (a hand-off call)
                yield t.park()
                if self.woken:
                    self.woken -= 1
