"""jetty9-milestone: the threading of Jetty 9.0.0 milestones before December 2012.

The setting of docs/design/MODEL.md phenomenon 1 ("Avoiding Parallel Slowdown in
Jetty-9", Webtide, Greg Wilkins, 2012): the selector parses, the handling is
dispatched to a pool thread, and the next pipelined request is dispatched from
the completion of the previous one. Written from eclipse/jetty.project at tag
``jetty-9.0.0.M3`` (2012-11-20, the same threading up to commit 6bfc19be1b^):

* ``HttpConnection(config, connector, endPoint)`` passes
  ``executeOnFillable=false`` to ``AbstractConnection``: ``onFillable`` runs on
  the selector thread (``SelectChannelEndPoint.onSelected`` ->
  ``FillInterest.fillable`` -> the read callback's ``onCompleted``).
  ``onSelected`` clears the key's OP_READ interest, so the selector hears no
  more of the connection until ``fillInterested()`` asks again.
* ``HttpConnection.onFillable``: fill the request buffer (one read of
  whatever the socket holds, up to ``getInputBufferSize()``, 8192 bytes by
  ``AbstractConnectionFactory``), parse one request, then
  ``getExecutor().execute(_channelRunner)`` and return: the handling goes to a
  QueuedThreadPool thread.
* ``HttpChannel.run`` (the pool thread): handle, complete the response (a
  blocking write that completes at once on a free socket), then
  ``_transport.completed()``.
* ``HttpConnection.completed``: ``reset()`` (releases the request buffer once
  it is empty); if the buffer still holds pipelined bytes,
  ``getExecutor().execute(this)``: *another* pool thread runs ``onFillable``
  to parse the next request (and dispatches its handling in turn); if it is
  empty, ``fillInterested()``: ``SelectChannelEndPoint.updateLocalInterests``
  submits a key update to the selector and wakes it (``ManagedSelector.submit``
  -> ``Selector.wakeup``).

So every request costs two pool dispatches (parse, handle) while its bytes are
buffered, and a selector wake-up when the buffer runs dry; each dispatching
thread goes on after its ``execute``: it returns from ``completed`` or
``onFillable``, polls the pool's queue, finds nothing and parks (futex wait),
while the thread it woke parses or handles on another CPU. That tail overlaps
the next step, so the server uses more than one CPU on one connection.
Commit 6bfc19be1b (2012-12-14, "dispatch before parsing so that handling is
done in same thread") and c87ebcb4a5 (2012-12-17, "avoid additional dispatch
for pipelined requests") replaced it with what ``pc`` models.

Simplified: the selector loop is one pool thread per selector (``SelectorManager``
executes each ``ManagedSelector``); the key update's ``epoll_ctl`` and the
wake-up's pipe write are priced as the futex wake the waker pays (as in
``jetty_pool``); a connection's buffer holds whole requests.
"""

from __future__ import annotations

from collections import deque

from pydantic import Field, model_validator

from warmcore.strategies.base import register
from warmcore.simcore.config import ConfigError
from warmcore.strategies.jetty_pool import JettyParams, JettyServer


class MilestoneParams(JettyParams):
    """JettyParams plus the connection's request buffer."""

    input_buffer_bytes: int = Field(default=8192, gt=0, description=(
        "HttpConnection request buffer: AbstractConnectionFactory._inputbufferSize "
        "(8192 at jetty-9.0.0.M3); one fill reads up to this many bytes"))

    @model_validator(mode="after")
    def _unbounded_queue(self):
        # A refused _channelRunner would leave its connection dispatched for ever: the
        # milestone's refusal path (its connection's close) is not modelled.
        if self.queue_capacity is not None:
            raise ConfigError("queue_capacity", "not modelled for jetty9-milestone (a "
                                                "refused job would leave its connection "
                                                "dispatched); leave it unbounded")
        return self


class ConnState:
    """Per-connection state of HttpConnection: requests already read into the buffer
    (the head of the connection's inbox) and whether it waits on the selector."""

    __slots__ = ("buffered", "interested")

    def __init__(self):
        self.buffered = 0
        self.interested = False


class MilestoneSelector:
    """One ManagedSelector: connections whose fill interest is registered and readable;
    its thread runs onFillable for each (read, parse, dispatch the handling)."""

    def __init__(self, server, index: int):
        self.server = server
        self.index = index
        self.ready: deque = deque()
        self.waiter = None
        self.selects = 0

    def readable(self, conn, waker=None) -> None:
        self.ready.append(conn)
        w = self.waiter
        if w is not None:
            self.waiter = None
            self.server.kernel.wake(w, waker)

    def run(self, t, _req=None):
        """ManagedSelector.run: select, then onSelected -> onFillable per ready key."""
        server = self.server
        while True:
            if not self.ready:
                self.waiter = t
                yield t.park()
                if self.waiter is t:
                    self.waiter = None
                continue
            self.selects += 1
            n = len(self.ready)
            server.pay_select(t, n)
            if server.select_seg is not None:
                yield t.run(server.select_seg, None)
            while self.ready:
                conn = self.ready.popleft()
                yield from server.on_fillable(t, conn, fill=True)

    produce_job = run       # the pool job JettyServer.start executes for each selector


@register
class Jetty9Milestone(JettyServer):
    """HttpConnection/HttpChannel of jetty-9.0.0.M3 over a QueuedThreadPool."""

    name = "jetty9-milestone"
    summary = ("Jetty 9.0 milestone (2012): the selector parses, handling goes to a pool "
               "thread, the next pipelined request is dispatched from the completion")
    Params = MilestoneParams
    refuses_queue_capacity = True   # MilestoneParams._unbounded_queue says why
    park_on_cpu = True          # a returning pool thread's futex_wait runs before it sleeps

    def start(self) -> None:
        super().start()
        m = self.ctx.machine
        self.epoll_s = m.syscall_cost("epoll_wait")
        self.epoll_key_s = m.syscall_cost("epoll_wait", 1) - self.epoll_s
        self.select_seg = self.selectors[0].select_seg
        req_bytes = self.ctx.cfg.work.request_kib * 1024
        self.buffer_requests = (max(1, int(self.p.input_buffer_bytes // req_bytes))
                                if req_bytes > 0 else 1 << 30)
        self.conns: dict[int, ConnState] = {}

    def make_strategy(self, selector):
        return MilestoneSelector(self, selector.index)

    def _state(self, conn) -> ConnState:
        st = self.conns.get(conn.id)
        if st is None:
            st = self.conns[conn.id] = ConnState()
            st.interested = True            # onOpen -> fillInterested
        return st

    def pay_select(self, t, n: int) -> None:
        if self.epoll_s:
            t.charge_io(self.epoll_s + n * self.epoll_key_s)

    def on_arrival(self, conn) -> None:
        """Bytes reached the socket: the selector hears of it only while the
        connection's read interest is registered."""
        sel = conn.owner
        if sel is None:
            sel = conn.owner = self.selectors[conn.id % len(self.selectors)].strategy
        st = self._state(conn)
        if st.interested and len(conn.inbox) > st.buffered:
            st.interested = False           # onSelected clears OP_READ
            sel.readable(conn)

    def on_fillable(self, t, conn, fill: bool):
        """HttpConnection.onFillable: fill if the buffer is empty, parse one request,
        dispatch its handling (``execute(_channelRunner)``)."""
        st = self._state(conn)
        if st.buffered == 0:
            if not fill and not conn.inbox:
                self._fill_interested(t, conn, st)
                return
            st.buffered = min(len(conn.inbox), self.buffer_requests)
            self.read(t, st.buffered)       # EndPoint.fill: one read
            if st.buffered == 0:
                self._fill_interested(t, conn, st)
                return
        req = conn.take()
        if req is None:                     # the previous request is still being handled
            return
        st.buffered -= 1
        self.holding += 1
        if req.produce is not None:
            yield t.run(req.produce, req)
        yield from self.execute(t, self.channel_run, req)

    def channel_run(self, t, req):
        """_channelRunner -> HttpChannel.run: handle, write, then completed()."""
        yield t.run(req.consume, req)
        conn = self.ctx.workload.connections[req.conn]
        self.done(req, t)
        st = self._state(conn)
        if st.buffered > 0:                 # pipelined bytes left: execute(this)
            yield from self.execute(t, lambda t2, _r, c=conn: self.fillable_job(t2, c), None)
        else:
            self._fill_interested(t, conn, st)

    def fillable_job(self, t, conn):
        """HttpConnection.run -> onFillable on a pool thread."""
        yield from self.on_fillable(t, conn, fill=False)

    def _fill_interested(self, t, conn, st) -> None:
        """AbstractConnection.fillInterested: register read interest; if the socket
        already holds bytes the selector's next select returns at once (its wake-up
        paid by ``t``, the key update submitted to the selector)."""
        st.interested = True
        if len(conn.inbox) > st.buffered:
            st.interested = False
            conn.owner.readable(conn, t)

    def outstanding(self) -> list:
        held = [r for c in self.ctx.workload.connections for r in c.inbox]
        return held
