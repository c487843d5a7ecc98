"""thread-per-connection: Tomcat's blocking-I/O connector (BIO, ``JIoEndpoint``).

The acceptor hands each accepted socket to the executor; one thread then owns
the connection for as long as it is kept alive: it blocks in ``read`` (the
thread sleeps in the kernel), and every request that arrives wakes it (the
network's wake-up of a thread blocked in a socket read: ``kernel.wake(t,
None)``, no thread pays the syscall). The thread parses (``req.produce``) and
handles (``req.consume``) the request, writes the response and blocks in
``read`` again. Requests of one connection are served in order, by its thread.

* ``max_threads`` (Tomcat ``maxThreads``, default 200): a connection's thread
  is started when the connection first has a request; once ``max_threads``
  threads exist, further connections wait (the executor's queue) for a thread.
* ``keep_alive_timeout_s`` (Tomcat ``keepAliveTimeout``, which defaults to
  ``connectionTimeout``, 20 000 ms in the shipped server.xml): a thread that
  has waited that long in ``read`` closes its connection and goes back to the
  pool; the next waiting connection gets it. Only checked while connections
  wait for a thread (an idle thread that nobody needs would be closed and the
  next request of its client accepted onto a free pool thread, which this model
  shortcuts to the same thread). A request on a closed connection is a new
  connection: it needs a thread like any other.
* ``thread_start_us``: CPU time to start a kernel thread (docs/design/STRATEGIES.md, Loom
  section: ~140 us), charged to the thread's first segment.

Simplified: the acceptor thread and connection set-up are not modelled (the
connections exist before the run); ``maxKeepAliveRequests`` (100 in Tomcat)
is not modelled: connections stay open, as with ``maxKeepAliveRequests=-1``;
BIO's switch-off of keep-alive above 75% thread use is not modelled either.
"""

from __future__ import annotations

from collections import deque

from pydantic import Field

from warmcore.simcore.config import ConfigError
from warmcore.strategies.base import StrategyParams, Strategy, register


class Params(StrategyParams):
    max_threads: int = Field(default=200, gt=0, description='Tomcat maxThreads')
    keep_alive_timeout_s: float = Field(default=20.0, gt=0, description='keepAliveTimeout')
    thread_start_us: float = Field(default=140.0, ge=0, description='kernel thread start')


class _ConnThread:
    __slots__ = ("conn", "idle_since", "parked", "thread")

    def __init__(self):
        self.conn = None
        self.parked = False          # blocked in read
        self.idle_since = 0.0
        self.thread = None


@register
class ThreadPerConnection(Strategy):
    name = "thread-per-connection"
    summary = "Tomcat BIO: one thread per connection blocks in read; each request wakes it"
    # Connections wait for a thread in the executor's TaskQueue, unbounded by default
    # (StandardThreadExecutor maxQueueSize = Integer.MAX_VALUE); its bound is not modelled.
    no_queue_capacity = ("connections waiting for one of max_threads threads wait in the "
                         "executor's TaskQueue, unbounded by default (maxQueueSize "
                         "Integer.MAX_VALUE), and this model does not bound it")
    Params = Params

    def start(self) -> None:
        if getattr(self.ctx.cfg.workload, "timeout_closes", False):
            # A closed connection's thread would stay blocked in read until its
            # keep-alive timeout: the EOF that frees it is not modelled.
            raise ConfigError("workload.timeout_closes", "not modelled for "
                              "thread-per-connection (a closed connection's thread is not "
                              "freed by its EOF); leave it false")
        self.threads: list[_ConnThread] = []
        self.reading: dict[_ConnThread, None] = {}   # blocked in read, longest first
        self.waiting: deque = deque()                # connections waiting for a thread
        self.reaper_armed = False

    # -- the network ------------------------------------------------------------------

    def on_arrival(self, conn) -> None:
        st = conn.owner
        if st is None:
            if not conn.data:                       # not yet waiting for a thread
                self._assign(conn)
        elif st.parked:
            st.parked = False
            del self.reading[st]
            self.kernel.wake(st.thread, None)       # the read returns

    def _assign(self, conn) -> None:
        if len(self.threads) < self.p.max_threads:
            st = _ConnThread()
            self._bind(st, conn)
            st.thread = self.kernel.spawn(self.ctx.server, f"http-bio-exec-{len(self.threads)}",
                                          lambda t, st=st: self._serve(t, st))
            st.thread.charge_kernel(self.p.thread_start_us * 1e-6)
            self.threads.append(st)
        else:
            conn.data = True
            self.waiting.append(conn)
            self._arm_reaper()

    @staticmethod
    def _bind(st, conn) -> None:
        st.conn = conn
        conn.owner = st
        conn.data = False

    # -- keep-alive timeout, while connections wait for a thread ------------------------

    def _arm_reaper(self) -> None:
        if self.reaper_armed or not self.reading:
            return
        self.reaper_armed = True
        oldest = next(iter(self.reading))
        due = oldest.idle_since + self.p.keep_alive_timeout_s - self.env.now
        self.env.timeout(max(0.0, due)).callbacks.append(self._reap)

    def _reap(self, _ev) -> None:
        self.reaper_armed = False
        now = self.env.now
        timeout = self.p.keep_alive_timeout_s
        while self.waiting and self.reading:
            st = next(iter(self.reading))
            if now - st.idle_since < timeout * (1 - 1e-9):
                break
            del self.reading[st]
            st.conn.owner = None                    # read timed out: connection closed
            conn = self.waiting.popleft()
            self._bind(st, conn)
            st.parked = False
            self.kernel.wake(st.thread, None)
        if self.waiting:
            self._arm_reaper()

    # -- the connection's thread ------------------------------------------------------

    def _serve(self, t, st):
        ctx = self.ctx
        env = self.env
        while True:
            conn = st.conn
            # SocketInputStream.read with soTimeout (JDK 8 NET_Timeout): poll(2) on the one
            # socket, blocking until it is readable (the park below), then the read (a
            # batch has no socket)
            if self.sockets:
                t.syscall("poll", n=1)
            req = conn.take()
            if req is not None:
                self.read(t)
                if req.produce is not None:
                    yield t.run(req.produce, req)
                yield t.run(req.consume, req)
                ctx.done(req, t)
                continue
            st.idle_since = env.now                 # block in read
            self.reading[st] = None
            if self.waiting:
                self._arm_reaper()
            st.parked = True
            yield t.park()
