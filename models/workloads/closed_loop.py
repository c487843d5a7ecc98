"""Closed loops: clients that each wait for their response, think, and send again."""

from __future__ import annotations

from collections import deque

from typing import Annotated, Literal

from pydantic import Field

from warmcore.models.workloads.base import Connection, LoadToolCosts, Workload
from warmcore.simcore.config import ServiceShape, WorkloadKind, register_workload
from warmcore.simcore.config.schema import TIMEOUT_FIELD, Count, DistKind, Micros, MicrosOrZero
from warmcore.simcore.distributions import sampler
from warmcore.simcore.kernel.fastpath import clock
from warmcore.simcore.rng import block_sampler
from warmcore.simcore.work import Request

MAX_RETRIES = 10        # back-off doubles per retry: 2^9 x the base at most


class ClosedLoopCfg(ServiceShape):
    """N clients, each sending its next request a think time after the last response."""

    kind: Literal["closed"]
    clients: Count = 10
    think: DistKind = "exponential"
    think_us: MicrosOrZero = 1000.0
    timeout_us: Micros | None = TIMEOUT_FIELD
    # Retries as gRPC's retry design specifies them (proposal A6, "gRPC Retry Design"):
    # attempt n + 1 is sent random(0, min(initial x multiplier^(n-1), max)) after attempt
    # n failed, "full jitter" (also AWS's "Exponential Backoff And Jitter", Brooker
    # 2015). None by default, as gRPC without a retry policy; the base is A6's example
    # initialBackoff of 0.1 s, the multiplier its 2.
    retries: Annotated[int, Field(ge=0, le=MAX_RETRIES)] = Field(default=0, description=(
        "times a client re-sends a request that timed out or was refused, before it "
        "gives up on it and thinks"))
    retry_backoff_us: Micros = Field(default=100_000.0, description=(
        "retry n waits uniform(0, retry_backoff_us x 2^(n-1)) (full jitter)"))
    client_us: MicrosOrZero | None = Field(default=None, description=(
        "None: the clients run elsewhere and their requests come by the NIC. A number: "
        "the load tool runs on this machine as wrk does, `client_threads` threads "
        "(process `producer`: pin it with producer.cpus) each serving its share of the "
        "clients' connections from one epoll loop, spending this much CPU per request, "
        "half writing it and half reading and parsing its response, plus the loopback "
        "write and read and an epoll_wait per sleep (wrk's event loop, ae.c)"))
    client_threads: Annotated[int, Field(gt=0, le=1024)] = Field(default=4, description=(
        "wrk's -t, with client_us: its threads, each owning the connections i, i + n, "
        "... (wrk.c gives each thread connections / threads of them)"))


class ClosedLoop(Workload):
    """Clients that each wait for their response, think, and send again. A saturating
    pipelined connection is the same loop with no think time and ``depth`` requests
    in flight per connection."""

    def __init__(self, ctx, clients: int | None = None, think=None, per_conn: int = 1):
        wl = ctx.cfg.workload
        if clients is None:
            clients = wl.clients
            think = sampler(wl.think, wl.think_us * 1e-6, ctx.streams.generator("think"))
            n_conn = clients
        else:
            n_conn = max(1, clients // per_conn)
        super().__init__(ctx, n_conn)
        self.clients = clients
        self.think = think
        self.per_conn = per_conn
        self.retries = getattr(wl, "retries", 0)
        self.attempts: dict[int, int] = {}      # connection -> retries sent so far
        if self.retries:
            self.backoff_s = wl.retry_backoff_us * 1e-6
            self.jitter = block_sampler(ctx.streams.generator("retry"),
                                        lambda g, n: g.random(n))

    def start(self) -> None:
        for client in range(self.clients):
            conn = self.connections[client // self.per_conn]
            delay = self.think() if self.think else 0.0
            self._later(delay, conn)

    def _later(self, delay: float, conn: Connection) -> None:
        if delay > 0:
            self.env.timeout(delay).callbacks.append(lambda _e: self._send(conn))
        else:
            self._send(conn)

    def _send(self, conn: Connection) -> None:
        self.deliver(self.factory.make(clock(self.env), conn.id), conn)

    def finished(self, req: Request, thread) -> None:
        if self.write_s:
            thread.charge_io(self.write_s)
        # (with no client timeout every response is answered: no call to ask)
        answered = self.answered(req) if self.timeout_s else True
        self.ctx.recorder.complete(req)
        conn = self.connections[req.conn]
        self.release(req)
        if answered:                    # (a late response finds its client gone)
            self._answered_next(conn)

    def _answered_next(self, conn: Connection) -> None:
        """``conn``'s client has its answer: its retries are over; it thinks, then
        sends its next request."""
        self.attempts.pop(conn.id, None)
        self._later(self.think() if self.think else 0.0, conn)

    def gave_up(self, req: Request) -> None:
        """Timed out or refused: retry after a back-off while retries are left, else
        think and send the next request."""
        conn = self.connections[req.conn]
        n = self.attempts.get(conn.id, 0)
        if n < self.retries:
            self.attempts[conn.id] = n + 1
            delay = self.jitter() * self.backoff_s * 2.0 ** n
        else:
            self.attempts.pop(conn.id, None)
            delay = self.think() if self.think else 0.0
        # Always an event of its own: a refusal is heard inside the strategy's
        # on_arrival, which must not be re-entered by the next request.
        self.env.timeout(delay).callbacks.append(lambda _e: self._send(conn))


class LocalLoadTool(ClosedLoop):
    """wrk on the server's machine (``workload.client_us`` set): ``client_threads``
    threads in process ``producer``, each an epoll loop (wrk's ae.c) over its share of
    the clients' connections (wrk.c: ``connections / threads`` each). A thread sleeps
    in ``epoll_wait`` when nothing is ready; a response written by the server wakes it
    (a sync socket wake-up from the server's CPU, paid in that write). Per response it
    reads (its read call and half of ``client_us``) and records the latency
    (wrk.c ``response_complete``); after the think time it writes the next request
    (half of ``client_us`` and its write call, whose loopback receive softirq delivers
    it to the server on this thread's CPU). A request is timed from its write to the
    read of its response, as wrk times it. Timeouts and retries are the closed loop's:
    a request sent again goes through its client's thread."""

    client_on_machine = True      # its threads write each request's bytes

    def __init__(self, ctx):
        super().__init__(ctx)
        wl = ctx.cfg.workload
        self.tool = LoadToolCosts(ctx)
        self.epoll_s = ctx.machine.syscall_cost("epoll_wait") if self.tool.sockets else 0.0
        self.n_threads = min(wl.client_threads, wl.clients)
        self.proc = ctx.kernel.process(
            "producer", ctx.cpu_list(ctx.cfg.producer.cpus, "producer.cpus"))
        # per thread: what is ready (a response to read: a Request; a connection whose
        # next request is due: a Connection) and the thread if it sleeps in epoll_wait
        self.ready = [deque() for _ in range(self.n_threads)]
        self.sleeping: list = [None] * self.n_threads

    def start(self) -> None:
        super().start()
        for i in range(self.n_threads):
            self.ctx.kernel.spawn(self.proc, f"wrk-{i}", lambda t, i=i: self._loop(t, i))

    def _send(self, conn: Connection) -> None:
        """The client's next request is due: its thread writes it."""
        self._ready(conn, None)

    def _ready(self, item, waker) -> None:
        """``item`` is ready on its thread: wake the thread if it sleeps (``waker``: the
        server thread whose write made it readable; None: wrk's own timer)."""
        i = (item.id if isinstance(item, Connection) else item.conn) % self.n_threads
        self.ready[i].append(item)
        t = self.sleeping[i]
        if t is not None:
            self.sleeping[i] = None
            k = self.ctx.kernel
            if waker is None:
                k.wake(t)
            else:
                k.deliver_from(waker, lambda: k.wake(t))

    def _loop(self, t, i: int):
        ready = self.ready[i]
        while True:
            if not ready:
                if self.epoll_s:
                    t.charge_io(self.epoll_s)
                self.sleeping[i] = t
                yield t.park()
                continue
            item = ready.popleft()
            if isinstance(item, Connection):
                yield from self._write(t, item)
            else:
                yield from self._read(t, item)

    def _write(self, t, conn: Connection):
        req = self.factory.make(self.env.now, conn.id)
        if self.tool.write_s:
            t.charge_io(self.tool.write_s)
        yield t.run(self.tool.write_segment(req), req)
        self.ctx.kernel.deliver_from(t, lambda: self.deliver(req, conn))

    def _read(self, t, req: Request):
        if self.tool.read_s:
            t.charge_io(self.tool.read_s)
        yield t.run(self.tool.read_seg, req)
        self.ctx.recorder.complete(req)
        self._answered_next(self.connections[req.conn])

    def finished(self, req: Request, thread) -> None:
        """The server wrote ``req``'s response (``thread`` pays the write): its client's
        thread reads it next, unless the client stopped waiting (timed out)."""
        if self.write_s:
            thread.charge_io(self.write_s)
        answered = self.answered(req)
        self.release(req)
        if answered:
            self._ready(req, thread)


def closed(ctx) -> Workload:
    """Clients elsewhere (ClosedLoop), or a load tool on this machine (client_us)."""
    wl = ctx.cfg.workload
    return ClosedLoop(ctx) if wl.client_us is None else LocalLoadTool(ctx)


register_workload(WorkloadKind(
    "closed", ClosedLoopCfg, closed, load_field="clients",
    description="clients that wait for each response and think before the next"))
