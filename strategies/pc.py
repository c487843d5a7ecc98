"""pc: Jetty's ProduceConsume on each selector.

The thread that produces a task (a parsed request) runs it inline, then
produces the next, until its selector has nothing ready (then it blocks in
epoll_wait). Hot caches and no dispatch, but a slow or blocking task holds up
every later task of its selector (head-of-line blocking). As in Jetty, the
production loop is a QueuedThreadPool job (``ManagedSelector.doStart``), so the
selector threads are pool threads; nothing else is dispatched.
Source: jetty-util ``org.eclipse.jetty.util.thread.strategy.ProduceConsume``.
"""

from __future__ import annotations

from warmcore.strategies.base import register
from warmcore.strategies.jetty_pool import JettyParams, JettyServer


class ProduceConsume:
    """ProduceConsume.produce(): loop { task = produce(); task.run(); }."""

    def __init__(self, server, selector):
        self.server = server
        self.selector = selector
        self.tasks = 0

    def produce_job(self, t, _req=None):
        sel = self.selector
        server = self.server
        while True:
            req = yield from sel.produce(t)
            self.tasks += 1
            yield from server.consume(t, req)


@register
class PC(JettyServer):
    name = "pc"
    summary = "Jetty ProduceConsume: each selector's thread runs every task it produces inline"
    Params = JettyParams
    needs_consumers = False

    def make_strategy(self, selector):
        return ProduceConsume(self, selector)
