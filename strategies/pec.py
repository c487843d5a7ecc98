"""pec: Jetty's ProduceExecuteConsume on each selector.

The producing thread hands every task that is not NON_BLOCKING to the
QueuedThreadPool (``Executor.execute``) and goes on producing; NON_BLOCKING
tasks run inline. No head-of-line blocking, but every task pays a queue
operation and usually a futex wake of a pool thread. On an HTTP/1.1 connection
the task is the endpoint's (Jetty 9.3+: the pool thread reads, parses and
handles, ``JettyServer.consume``); on independent requests it is a request the
selector parsed, handled on another thread (and often another core). The pool's
queue is unbounded: when consumers are slower than the producer it grows
without limit.
Source: jetty-util ``org.eclipse.jetty.util.thread.strategy.ProduceExecuteConsume``.
"""

from __future__ import annotations

from warmcore.strategies.base import register
from warmcore.strategies.jetty_pool import JettyParams, JettyServer


class ProduceExecuteConsume:
    """ProduceExecuteConsume.produce(): loop { task = produce();
    NON_BLOCKING ? task.run() : executor.execute(task); }."""

    def __init__(self, server, selector):
        self.server = server
        self.selector = selector
        self.executed = 0
        self.inline = 0

    def produce_job(self, t, _req=None):
        sel = self.selector
        server = self.server
        consume = server.consume
        while True:
            req = yield from sel.produce(t)
            if req.invocation == "NON_BLOCKING":
                self.inline += 1
                yield from consume(t, req)
            else:
                self.executed += 1
                yield from server.execute(t, consume, req)


@register
class PEC(JettyServer):
    name = "pec"
    summary = "Jetty ProduceExecuteConsume: selectors hand every task to the thread pool"
    Params = JettyParams

    def make_strategy(self, selector):
        return ProduceExecuteConsume(self, selector)
