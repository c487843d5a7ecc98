"""What every load generator shares: connections, the requests a scenario's work
shape makes (their produce and consume segments), and the ``Workload`` base that
hands requests to the strategy and takes them back when handled.

Requests arrive on *connections*. A workload appends a request to its
connection's inbox and tells the strategy (``strategy.on_arrival(conn)``),
the way a NIC and epoll make a socket readable; the strategy decides which
thread produces (parses) and which consumes (handles) it, and calls
``ctx.done(req, thread)`` when it has been handled.
"""

from __future__ import annotations

from collections import deque

from warmcore.simcore.config import ConfigError, has_sockets, kind_of
from warmcore.simcore.distributions import sampler
from warmcore.simcore.rng import block_sampler
from warmcore.simcore.kernel.fastpath import clock, fast_timeout
from warmcore.simcore.work import (
    CODE,
    CallPlan,
    SHARED,
    STEP_ACQUIRE,
    STEP_CALL,
    STEP_RELEASE,
    STEP_RUN,
    TASK,
    THREAD,
    Footprint,
    Program,
    Request,
    Segment,
)

LINE = 64


class Connection:
    """A client connection: the requests that have arrived on it and not yet been
    taken by the server. A *serial* connection (HTTP/1.1, pipelined or not) hands
    the server one request at a time: the next is readable only once the previous
    has been handled, and the strategy hears of it then (``on_arrival``)."""

    __slots__ = ("busy", "data", "id", "inbox", "owner", "serial", "received")

    def __init__(self, cid: int, serial: bool = False, received=None):
        self.id = cid
        self.inbox: deque[Request] = deque()
        self.owner = None     # the strategy may pin a connection to a loop or thread
        self.data = None
        self.serial = serial
        self.busy = False     # serial: a request of this connection is being handled
        # received(req): a NIC's DMA puts the request's bytes where the server's read
        # finds them (Workload.nic_received); None: nothing to do
        self.received = received

    def take(self) -> Request | None:
        """The next request to produce, or None (nothing arrived, or busy)."""
        if self.busy or not self.inbox:
            return None
        if self.serial:
            self.busy = True
        req = self.inbox.popleft()
        if self.received is not None:
            self.received(req)
        return req


def notify_after_append(conn: Connection, req: Request) -> bool:
    """Queue ``req`` on ``conn``; should the strategy be told? Each notification
    stands for exactly one request that ``take`` will return: every arrival on an
    ordinary connection; on a serial one, only an arrival that makes an idle,
    empty connection readable (the rest are announced one by one as the
    connection is released)."""
    inbox = conn.inbox
    inbox.append(req)
    if conn.serial:
        return not conn.busy and len(inbox) == 1
    return True


def work_ips(ctx) -> float:
    """Instructions per microsecond-of-work second: the reference preset's if the
    scenario names one (work.reference_preset), else the simulated machine's."""
    ref = ctx.cfg.work.reference_preset
    if ref is None:
        return ctx.machine.nominal_ips
    from warmcore.models.presets import get_preset, nominal_ips

    try:
        return nominal_ips(get_preset(ref))
    except KeyError as e:
        raise ConfigError("work.reference_preset", e.args[0]) from None


def sent_lines(work) -> float:
    """Cache lines of a request's own data (``task_kib``) that its client writes: the
    bytes on the wire (``request_kib``), at most the task's. Over loopback TCP the
    client's ``write`` copies them into the socket buffer on the client's CPU
    (tcp_sendmsg -> skb_add_data_nocache / skb_copy_to_page_nocache, net/ipv4/tcp.c: a
    cached copy_from_user, since register_netdevice never gives the loopback device
    NETIF_F_NOCACHE_COPY, net/core/dev.c) and loopback queues that very skb on the
    server's socket (loopback_xmit -> netif_rx, drivers/net/loopback.c): the server's
    ``read`` (tcp_recvmsg -> skb_copy_datagram_iovec) reads lines another core wrote, a
    core-to-core transfer or an LLC hit, not DRAM (docs/model.md "Where a request's
    bytes come from")."""
    return min(work.request_kib, work.task_kib) * 1024 / LINE


def nic_lines(ctx, client_on_machine: bool) -> float:
    """Lines of each request's bytes a NIC's DMA writes (models.hardware dma_write): the
    bytes of a request read from a socket whose client is not on the machine (the load
    tool elsewhere); 0 for a client the scenario runs on the machine (its thread writes
    them) and for workloads without sockets (the requests are made in memory)."""
    if client_on_machine or not has_sockets(ctx.cfg.workload):
        return 0.0
    return sent_lines(ctx.cfg.work)


_new_tuple = tuple.__new__


class LoadToolCosts:
    """What a load tool on this machine spends per request (``workload.client_us``):
    half writing it, its bytes written on the tool's core where the server's read finds
    them, and half reading and parsing the response, plus its write and read calls
    (with sockets). Shared by the pipelining client and the closed clients' wrk."""

    def __init__(self, ctx):
        wl, work = ctx.cfg.workload, ctx.cfg.work
        half_ins = wl.client_us * 0.5e-6 * work_ips(ctx)
        self.write_ins = half_ins
        self.sent_lines = sent_lines(work)
        self.read_seg = Segment(half_ins, label="client-read")
        cost = ctx.machine.syscall_cost
        self.sockets = has_sockets(wl)
        self.write_s = cost("write", kib=work.request_kib) if self.sockets else 0.0
        self.read_s = cost("read", kib=work.response_kib) if self.sockets else 0.0

    def write_segment(self, req: Request) -> Segment:
        """The half that writes ``req``: its bytes are written on the tool's core
        (``sent_lines``), where the server's read finds them."""
        fp = ((Footprint(TASK, req.id, self.sent_lines, True),) if self.sent_lines
              else ())
        return Segment(self.write_ins, fp, label="client-write")


class RequestFactory:
    """Builds requests and their produce/consume segments from the scenario's
    service distribution and work shape."""

    def __init__(self, ctx):
        wl = ctx.cfg.workload
        work = ctx.cfg.work
        self.ips = work_ips(ctx)
        streams = ctx.streams
        self.service = sampler(wl.service, wl.service_us * 1e-6, streams.generator("service"),
                               cv=wl.service_cv,
                               values_s=[v * 1e-6 for v in wl.service_values_us or ()])
        self.backend = (sampler("exponential", work.backend_us * 1e-6,
                                streams.generator("backend")) if work.backend_us else None)
        self.produce_ins = work.produce_us * 1e-6 * self.ips
        self.task_lines = work.task_kib * 1024 / LINE
        # Of the task's lines, the request's bytes (sent_lines) are read; the rest, the
        # parsed request, is allocated and filled by whoever parses: written before it
        # is read, so its misses are demand RFOs, perf's LLC-stores (Footprint.fresh).
        self.parsed_lines = self.task_lines - sent_lines(work)
        thread_lines = work.thread_kib * 1024 / LINE
        code_lines = work.code_kib * 1024 / LINE
        shared_lines = work.shared_kib * 1024 / LINE
        data_lines = work.data_kib * 1024 / LINE
        common = []
        if thread_lines:
            common.append(Footprint(THREAD, None, thread_lines, True))
        if code_lines:
            common.append(Footprint(CODE, "handler", code_lines, False))
        if shared_lines:
            common.append(Footprint(SHARED, "shared", shared_lines, True))
        read = work.data_read_kib
        self.data_part = None
        if data_lines and read is not None and read < work.data_kib:
            # a random one of data_kib / data_read_kib parts per request, each an owner
            # of its own: how warm it is depends on what ran since its last reader
            parts = max(1, round(work.data_kib / read))
            self.data_part = block_sampler(streams.generator("data-part"),
                                           lambda g, n: g.integers(parts, size=n))
            self.data_part_lines = read * 1024 / LINE
        elif data_lines:
            # read-mostly data: one owner for all threads, never written (no
            # invalidations), data loads unlike code's fetches; the handler reads it
            common.append(Footprint(SHARED, "read-mostly", data_lines, False))
        self.common = tuple(common)
        self.parse_common = tuple(f for f in common if f.kind != SHARED)
        # Per-connection state (parser, channel, buffers): reused by every request of
        # the connection and written by whoever produces or consumes it.
        self.conn_lines = work.conn_kib * 1024 / LINE
        self.conn_rest: dict[int, tuple] = {}     # conn -> _conn_parts(conn)
        self.contended_ops = round(work.contended_ops)
        self.invocation = work.invocation
        self.next_id = 0
        self.program = self._program_plan(work.program, streams) if work.program else None
        if work.backend_calls is not None:      # the strategy makes them (event-loop)
            ctx.call_plan = CallPlan(
                [c.delay_us * 1e-6 for c in work.backend_calls],
                [c.after for c in work.backend_calls],
                [Segment(c.answer_us * 1e-6 * self.ips, label="backend-answer")
                 if c.answer_us else None for c in work.backend_calls])
        self.pure = not (self.produce_ins or self.task_lines or self.common or self.conn_lines
                         or self.data_part
                         or self.contended_ops or self.backend
                         or work.backend_calls is not None
                         or self.invocation != "BLOCKING" or self.program)

    def _program_plan(self, steps, streams):
        """(kind, how to make its argument) per step; each compute or call step with a
        distribution of its own draws from a stream of its own ("program-<i>")."""
        plan = []
        for i, st in enumerate(steps):
            if st.compute_us is not None or st.call_us is not None:
                mean = (st.compute_us if st.compute_us is not None else st.call_us) * 1e-6
                values = ([v * 1e-6 for v in st.values_us] if st.values_us is not None
                          else None)
                draw = sampler(st.distribution, mean, streams.generator(f"program-{i}"),
                               cv=st.cv, values_s=values)
                plan.append((STEP_RUN if st.compute_us is not None else STEP_CALL, draw))
            elif st.service_share is not None:
                plan.append((STEP_RUN, st.service_share))
            elif st.acquire is not None:
                plan.append((STEP_ACQUIRE, st.acquire))
            else:
                plan.append((STEP_RELEASE, st.release))
        return plan

    def _make_program(self, s: float, footprint: tuple) -> Program:
        """The consume step as a program: ``s`` is the request's service demand (s);
        the request's footprint and contended ops go with its first compute step."""
        steps = []
        fp = footprint
        ops = self.contended_ops
        for kind, arg in self.program:
            if kind == STEP_RUN:
                secs = s * arg if type(arg) is float else arg()
                seg = Segment(secs * self.ips, fp, ops, "contended" if ops else None, 0.0,
                              "consume")
                fp, ops = (), 0
                steps.append((STEP_RUN, seg))
            elif kind == STEP_CALL:
                secs = arg()
                if secs > 0.0:          # a draw of 0 is no call (sleep only if delay > 0)
                    steps.append((STEP_CALL, secs))
            else:
                steps.append((kind, arg))
        return Program(tuple(steps))

    def make(self, now: float, conn: int = 0) -> Request:
        rid = self.next_id
        self.next_id = rid + 1
        req = Request(rid, now, conn)
        service = self.service     # a local: see OpenLoop._deliver_next
        if self.pure:
            # Pure compute (the queueing-theory case): one bare segment.
            req.consume = Segment(service() * self.ips, (), 0, None, 0.0, "consume")
            return req
        s = service()
        req.invocation = self.invocation
        lines = self.task_lines
        # Footprints built with tuple.__new__ (a NamedTuple's own __new__ is a Python
        # function), and the connection's part joined with the common ones once per
        # connection: the same tuples, fewer calls per request.
        task = (_new_tuple(Footprint, (TASK, rid, lines, True, self.parsed_lines)),
                ) if lines else ()
        rest = self.conn_rest.get(conn)
        if rest is None:
            rest = self.conn_rest[conn] = self._conn_parts(conn)
        parse_rest, consume_rest = rest
        if self.data_part is not None:
            part = Footprint(SHARED, ("read-mostly", self.data_part()),
                             self.data_part_lines, False)
            consume_rest = (*consume_rest, part)
        if self.produce_ins:
            req.produce = Segment(self.produce_ins, task + parse_rest, label="produce")
            task = (_new_tuple(Footprint, (TASK, rid, lines, False, 0.0)),) if lines else ()
        if self.program is not None:
            req.consume = self._make_program(s, task + consume_rest)
            return req
        req.consume = Segment(s * self.ips, task + consume_rest, self.contended_ops,
                              "contended" if self.contended_ops else None,
                              self.backend() if self.backend else 0.0, "consume")
        return req

    def _conn_parts(self, conn: int) -> tuple:
        """(produce's, consume's) footprints after the task's: the connection's state
        (if any) and the common ones."""
        cstate = ((Footprint(SHARED, ("conn", conn), self.conn_lines, True),)
                  if self.conn_lines else ())
        return cstate + self.parse_common, cstate + self.common


class Workload:
    """Base: a set of connections feeding a strategy."""

    client_on_machine = False     # a client thread on the machine writes the requests

    def __init__(self, ctx, n_connections: int):
        self.ctx = ctx
        self.env = ctx.env
        self.factory = RequestFactory(ctx)
        wl = ctx.cfg.workload
        self.serial = wl.serial if wl.serial is not None else kind_of(wl).serial
        # Where each request's bytes are when the server reads them: a NIC's DMA wrote
        # them (the LLC with DDIO, else DRAM: nothing to do); machines without a DMA
        # model (the ideal one) have no caches to write into.
        dma = getattr(ctx.machine, "dma_write", None)
        self.nic_lines = nic_lines(ctx, self.client_on_machine) if dma is not None else 0.0
        self._dma = dma
        self.received = (self.nic_received if self.nic_lines and getattr(ctx.machine, "ddio", False)
                         else None)
        self.connections = [Connection(i, self.serial, self.received)
                            for i in range(n_connections)]
        # The thread that reports a request done writes its response to the socket
        # (models/syscalls.py: loopback TCP, the peer's receive softirq included); only
        # workloads with sockets (simcore.config.has_sockets).
        self.write_s = (ctx.machine.syscall_cost("write", kib=ctx.cfg.work.response_kib)
                        if has_sockets(wl) else 0.0)
        # A client that stops waiting after workload.timeout_us (None: waits forever).
        # ``waiting`` holds the requests whose clients still wait, by id.
        self.timeout_s = (getattr(wl, "timeout_us", None) or 0.0) * 1e-6
        self.waiting: dict[int, Request] = {}
        if (type(self).finished is Workload.finished and not self.serial and not self.write_s
                and not self.timeout_s):
            self.finished = ctx.recorder.complete   # one call fewer per request

    def start(self) -> None:
        raise NotImplementedError

    def deliver(self, req: Request, conn: Connection) -> None:
        """A request reaches the server: it is in the system from now on."""
        ctx = self.ctx
        ctx.recorder.arrive(req)
        if self.timeout_s:
            self.watch(req)
        if notify_after_append(conn, req):
            ctx.strategy.on_arrival(conn)

    def nic_received(self, req: Request) -> None:
        """The server reads ``req`` from its socket: with DDIO the NIC wrote its bytes
        into the LLC (models.hardware ``dma_write``). Written as it is read, not when it
        arrived: TCP's receive window keeps what the kernel holds for a socket within
        its receive buffer (tcp_rmem: a few MiB), so the NIC writes at most that far
        ahead of the reader; the model leaves out the ageing in between, and the LLC
        does not fill with the bytes of a backlog the kernel would never have taken
        (docs/model.md "Where a request's bytes come from")."""
        self._dma(TASK, req.id, self.nic_lines)

    def finished(self, req: Request, thread) -> None:
        """The server handled ``req`` (called through ctx.done): ``thread`` writes the
        response."""
        if self.write_s:
            thread.charge_io(self.write_s)
        self.answered(req)
        self.ctx.recorder.complete(req)
        self.release(req)

    # -- the client's side: timeouts and rejections ---------------------------------

    def watch(self, req: Request) -> None:
        """Start ``req``'s client timer: at t_arrive + timeout its client stops waiting
        (a request delivered late by catch_up keeps its own deadline)."""
        self.waiting[req.id] = req
        delay = req.t_arrive + self.timeout_s - clock(self.env)
        fast_timeout(self.env, delay if delay > 0.0 else 0.0).callbacks.append(
            lambda _e: self._deadline(req))

    def _deadline(self, req: Request) -> None:
        if self.waiting.pop(req.id, None) is not None:
            self.ctx.recorder.time_out(req)
            self.gave_up(req)

    def answered(self, req: Request) -> bool:
        """Did ``req``'s response reach a client still waiting for it? (Counted before
        the recorder's completion, which may open the measured window.)"""
        if not self.timeout_s:
            return True
        if self.waiting.pop(req.id, None) is None:
            return False                # late: its client gave up; the server finished it
        self.ctx.recorder.answer(req)
        return True

    def rejected(self, req: Request) -> None:
        """The server refused ``req`` (a full queue, called through ctx.reject): it
        leaves the system, its connection may hand over its next request, and its
        client hears at once (a refused or reset connection, a 503). A client that had
        already stopped waiting (timed out) hears nothing: its request's outcome is the
        timeout, counted once, and it does not give up a second time (a closed client
        would otherwise send twice)."""
        heard = not self.timeout_s or self.waiting.pop(req.id, None) is not None
        self.ctx.recorder.reject(req, heard)
        self.release(req)
        if heard:
            self.gave_up(req)

    def gave_up(self, req: Request) -> None:
        """``req`` timed out or was refused: what its client does next (open loops:
        nothing, the next request is due anyway)."""

    def release(self, req: Request) -> None:
        """A serial connection may hand over its next request."""
        if self.serial:
            conn = self.connections[req.conn]
            conn.busy = False
            if conn.inbox:
                self.ctx.strategy.on_arrival(conn)
