"""epc: Jetty's ExecuteProduceConsume ("eat what you kill", Jetty 9.3) on each selector.

A thread only produces a task that it will consume itself. Having produced
one, it releases production and, unless a dispatch is already pending, executes
one pool job (``this``, the strategy's run()) that will take production over;
then it runs the task with hot caches. After the task it takes production back
if nobody holds it, else its job ends and the thread returns to the pool.
The pending thread, when it runs, produces only if production is free. At most
one dispatch is pending per selector. On a busy machine the recruited thread
waits in a run queue while the producer finishes its task and produces again,
so it behaves like ProduceConsume on each CPU; on an idle machine every task
starts on a fresh thread and is still consumed by the thread that parsed it.

Modelled from jetty-util 9.3 ``org.eclipse.jetty.util.thread.strategy.ExecuteProduceConsume``
(flags _idle, _execute, _producing, _pending under one lock; the low-on-threads
fallback to produce-and-execute, ``QueuedThreadPool.isLowOnThreads``: max -
threads + idle - queued <= lowThreadsThreshold, 1). Dispatches go through the
QueuedThreadPool (9.3 has no reserved threads; see ``adaptive`` for 9.4+).
"""

from __future__ import annotations

from warmcore.strategies.base import register
from warmcore.strategies.jetty_pool import JettyParams, JettyServer

LOW_THREADS_THRESHOLD = 1   # QueuedThreadPool._lowThreadsThreshold


class ExecuteProduceConsume:
    def __init__(self, server, selector):
        self.server = server
        self.selector = selector
        self.idle = True
        self.execute_flag = False
        self.producing = False
        self.pending = False
        self.outstanding = 0        # dispatched pending producers not yet running
        self.max_outstanding = 0    # the invariant the tests check (<= 1)
        self.dispatches = 0
        self.tasks = 0
        self.low_threads_tasks = 0

    # ExecutionStrategy.execute(): the selector starts producing
    def produce_job(self, t, _req=None):
        if self.idle:
            self.producing = True
            self.idle = False
            yield from self._produce_consume(t)
        else:
            self.execute_flag = True

    # Runnable.run(): the pending thread
    def run_pending(self, t, _req=None):
        self.pending = False
        self.outstanding -= 1
        if not self.idle and not self.producing:
            self.producing = True
            yield from self._produce_consume(t)

    def _low_on_threads(self) -> bool:
        if self.server.p.thread_pool_executor:
            return False        # not a Jetty ThreadPool: nothing to ask
        pool = self.server.pool
        return (pool.max_threads - pool.threads + len(pool.waiters) - len(pool.jobs)
                <= LOW_THREADS_THRESHOLD)

    def _produce_consume(self, t):
        server = self.server
        sel = self.selector
        if self._low_on_threads():
            # produce and execute while the pool is low on threads
            while self._low_on_threads():
                req = yield from sel.produce(t)
                self.low_threads_tasks += 1
                yield from server.execute(t, server.consume, req)
        while True:
            req = yield from sel.produce(t)
            self.producing = False
            if req is None:      # a blocking selector never gets here; kept for fidelity
                if self.execute_flag:
                    self.idle = False
                    self.producing = True
                    self.execute_flag = False
                    continue
                self.idle = True
                return
            dispatch = False
            if not self.pending:
                dispatch = self.pending = True
            self.execute_flag = False
            if dispatch:
                self.dispatches += 1
                self.outstanding += 1
                if self.outstanding > self.max_outstanding:
                    self.max_outstanding = self.outstanding
                yield from server.execute(t, self.run_pending, None, req)
            self.tasks += 1
            yield from server.consume(t, req)
            if self.producing or self.idle:
                return
            self.producing = True


@register
class EPC(JettyServer):
    name = "epc"
    summary = ("Jetty ExecuteProduceConsume (eat what you kill): the producer consumes its "
               "task after dispatching one thread to take over production")
    Params = JettyParams

    def make_strategy(self, selector):
        return ExecuteProduceConsume(self, selector)
