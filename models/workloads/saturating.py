"""Saturating connections: each keeps ``depth`` pipelined requests in flight (a load
tool feeding as many as the server takes), or sends batches of independent requests
and waits for a whole batch (the EWYK benchmark's client)."""

from __future__ import annotations

from collections import deque
from typing import Annotated, Literal

from pydantic import Field, model_validator

from warmcore.models.workloads.base import Connection, LoadToolCosts, Workload
from warmcore.models.workloads.closed_loop import ClosedLoop
from warmcore.simcore.config import ConfigError, ServiceShape, WorkloadKind, register_workload
from warmcore.simcore.config.schema import MAX_LIST, Count, MicrosOrZero
from warmcore.simcore.work import Request


class SaturatingCfg(ServiceShape):
    """K pipelined connections, each always with its next request ready."""

    kind: Literal["saturating"]
    connections: Count = 1
    depth: Annotated[int, Field(gt=0, le=1024)] = Field(default=8, description=(
        "requests each connection keeps in flight (a load tool's pipelining depth; "
        "the EWYK benchmark submits 1, 2 or 4 per call, mean 1.75: "
        "jetty-util EWYKBenchmark.testStrategy)"))
    batches: Annotated[list[Count], Field(min_length=1, max_length=MAX_LIST)] | None = Field(
        default=None, description=(
            "None: each connection keeps `depth` requests in flight. A list: each "
            "connection sends a batch of independent requests whose size is drawn "
            "uniformly from the list, and the next batch only once all are answered "
            "(a client that submits r futures and waits for all of them; "
            "jetty-util EWYKBenchmark.testStrategy: [4, 2, 2, 1, 1, 1, 1, 1])"))


    in_memory: bool = Field(default=False, description=(
        "true: the connections' requests are made in memory, no sockets (no read, write "
        "or epoll_wait system calls): a benchmark's connection object, as the EWYK "
        "benchmark's TestConnection, whose AtomicInteger and Random stand for the I/O"))
    client_us: MicrosOrZero | None = Field(default=None, description=(
        "None: the load tool keeps every connection's requests ready, from elsewhere. "
        "A number: the load generator runs on this machine, one thread per connection "
        "(process `producer`: pin it with producer.cpus), and spends this much CPU per "
        "request, half writing it and half reading and parsing its response, plus the "
        "loopback write and read; a server faster than its client then finds no request, "
        "parks and is woken (the Jetty 8 run's client used one CPU: issue 28)"))
    client_host: Literal["server", "remote"] = Field(default="server", description=(
        "where the client of `client_us` runs: 'server', this machine (above); "
        "'remote', another machine: its turnaround of `client_us` a request paces the "
        "connection, but its CPU is not this machine's, and the requests arrive by the "
        "NIC (a load generator on its own box, as most benchmark setups have it)"))

    @model_validator(mode="after")
    def _in_memory_has_no_client(self):
        if self.in_memory and self.client_us is not None:
            raise ConfigError("in_memory", "a load generator with a turnaround "
                                           "(client_us) talks over sockets")
        return self

    @model_validator(mode="after")
    def _client_not_with_batches(self):
        if self.client_us is not None and self.batches:
            raise ConfigError("client_us", "a client with a turnaround is for pipelined "
                                           "connections; batches wait for their own answers")
        return self

    @model_validator(mode="after")
    def _remote_client_needs_its_turnaround(self):
        if self.client_host == "remote" and self.client_us is None:
            raise ConfigError("client_host", "a remote client needs client_us, its "
                                             "turnaround per request")
        return self


class ClientWindow(Workload):
    """What a pipelining client on either machine keeps per connection: up to
    ``depth`` requests in flight, the responses that have arrived (``answers``) and,
    while its window is full and none has, what wakes it (``waiting``)."""

    def __init__(self, ctx):
        super().__init__(ctx, ctx.cfg.workload.connections)
        self.depth = ctx.cfg.workload.depth
        self.answers = [deque() for _ in self.connections]
        self.waiting: list = [None] * len(self.connections)

    def answer(self, req: Request, thread):
        """The server wrote ``req``'s response (``thread`` pays the write): it joins its
        connection's answers. Returns what waits for it (taken), or None."""
        if self.write_s:
            thread.charge_io(self.write_s)
        self.release(req)
        self.answers[req.conn].append(req)
        waiting = self.waiting[req.conn]
        self.waiting[req.conn] = None
        return waiting


class PipelinedClient(ClientWindow):
    """A load generator on the simulated machine: per connection one client thread
    (process ``producer``) that keeps up to ``depth`` requests in flight on a pipelined
    connection, paying ``client_us`` of CPU per request: half to write it (then its
    loopback write, whose receive softirq delivers it to the server on the client's
    CPU), half to read and parse its response (after its read call). It reads every
    response that has arrived before writing more, and sleeps in its read when the
    window is full and no response is there; the server's response write wakes it (a
    sync socket wake-up). A request is measured from its write to the client's read of
    its response, as the load tool measures it.

    Throughput is the slower of the two loops: 1 / max(server CPU, client CPU) per
    request, and a server faster than its client is busy only that ratio of the time
    (the Jetty 8 run: 0.867 CPUs; tests/test_workloads.py computes it by hand)."""

    client_on_machine = True      # its thread writes each request's bytes

    def __init__(self, ctx):
        super().__init__(ctx)
        self.tool = LoadToolCosts(ctx)
        self.proc = ctx.kernel.process(
            "producer", ctx.cpu_list(ctx.cfg.producer.cpus, "producer.cpus"))
        self.in_flight = [0] * len(self.connections)

    def start(self) -> None:
        for conn in self.connections:
            self.ctx.kernel.spawn(self.proc, f"client-{conn.id}",
                                  lambda t, c=conn: self._client(t, c))

    def _client(self, t, conn):
        ctx, tool = self.ctx, self.tool
        answers = self.answers[conn.id]
        while True:
            if answers:                      # read what has arrived first
                req = answers.popleft()
                if tool.read_s:
                    t.charge_io(tool.read_s)
                yield t.run(tool.read_seg, req)
                self.in_flight[conn.id] -= 1
                ctx.recorder.complete(req)
            elif self.in_flight[conn.id] < self.depth:
                req = self.factory.make(self.env.now, conn.id)
                if tool.write_s:
                    t.charge_io(tool.write_s)
                yield t.run(tool.write_segment(req), req)
                self.in_flight[conn.id] += 1
                if tool.sockets:             # the server side's receive, on this CPU
                    ctx.kernel.deliver_from(t, lambda r=req, c=conn: self.deliver(r, c))
                else:
                    self.deliver(req, conn)
            else:
                self.waiting[conn.id] = t
                yield t.park()

    def finished(self, req: Request, thread) -> None:
        """The server wrote ``req``'s response: the client reads it next."""
        client = self.answer(req, thread)
        if client is not None:
            k = self.ctx.kernel
            if self.tool.sockets:   # the socket's wake-up, paid in the write (write_s)
                k.deliver_from(thread, lambda: k.wake(client))
            else:
                k.wake(client, thread)


class RemoteClient(ClientWindow):
    """A load generator on another machine: per connection one client thread that
    keeps up to ``depth`` requests in flight, spending ``client_us`` of its own
    machine's time per request (half writing it, half reading its response), in the
    order ``PipelinedClient`` follows: read every response that has arrived, else
    write while the window has room, else wait for a response. Its CPU, cache and
    clock are not this machine's: the requests arrive through the NIC (DMA into DRAM,
    or the LLC with DDIO) and the server's writes leave through it. A server faster
    than its client is busy server / client of the time and finds no request in
    between, as with a co-located client, but no core of this package is kept busy
    by the client (its governor does not see it)."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self.half_s = ctx.cfg.workload.client_us * 0.5e-6

    def start(self) -> None:
        for conn in self.connections:
            self.env.process(self._client(conn))

    def _client(self, conn: Connection):
        env, recorder = self.env, self.ctx.recorder
        answers = self.answers[conn.id]
        in_flight = 0
        while True:
            if answers:
                req = answers.popleft()
                yield env.timeout(self.half_s)
                in_flight -= 1
                recorder.complete(req)
            elif in_flight < self.depth:
                req = self.factory.make(env.now, conn.id)
                yield env.timeout(self.half_s)
                in_flight += 1
                self.deliver(req, conn)
            else:
                self.waiting[conn.id] = env.event()
                yield self.waiting[conn.id]

    def finished(self, req: Request, thread) -> None:
        """The server wrote ``req``'s response: it reaches the client's socket."""
        waiting = self.answer(req, thread)
        if waiting is not None:
            waiting.succeed()


class Batches(Workload):
    """Saturating connections that send requests in batches and wait for a whole
    batch's responses before the next (jetty-util ``EWYKBenchmark.testStrategy``:
    submit r futures to the connection, run the strategy, get every result). The
    requests of a batch are independent (each has its own future)."""

    def __init__(self, ctx):
        wl = ctx.cfg.workload
        super().__init__(ctx, wl.connections)
        sizes = wl.batches
        gen = ctx.streams.generator("batch")
        self.batch_size = lambda: sizes[int(gen.integers(len(sizes)))]
        self.outstanding = [0] * wl.connections

    def start(self) -> None:
        for conn in self.connections:
            self._send_batch(conn)

    def _send_batch(self, conn: Connection) -> None:
        n = self.batch_size()
        self.outstanding[conn.id] = n
        now = self.env.now
        for _ in range(n):
            self.deliver(self.factory.make(now, conn.id), conn)

    def finished(self, req: Request, thread) -> None:
        if self.write_s:
            thread.charge_io(self.write_s)
        self.ctx.recorder.complete(req)
        self.release(req)
        left = self.outstanding[req.conn] - 1
        self.outstanding[req.conn] = left
        if left == 0:
            self._send_batch(self.connections[req.conn])


def saturating(ctx) -> Workload:
    wl = ctx.cfg.workload
    if wl.batches:
        return Batches(ctx)
    if wl.client_us is not None:
        return RemoteClient(ctx) if wl.client_host == "remote" else PipelinedClient(ctx)
    return ClosedLoop(ctx, clients=wl.connections * wl.depth, think=None, per_conn=wl.depth)


register_workload(WorkloadKind(
    "saturating", SaturatingCfg, saturating, load_field="connections", serial=True,
    sockets=lambda wl: not wl.in_memory,
    description="pipelined connections that always have their next request ready"))
