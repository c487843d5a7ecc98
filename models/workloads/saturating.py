"""Saturating connections: each keeps ``depth`` pipelined requests in flight (a load
tool feeding as many as the server takes), or sends batches of independent requests
and waits for a whole batch (the EWYK benchmark's client)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from warmcore.models.workloads.base import Connection, Workload
from warmcore.models.workloads.closed_loop import ClosedLoop
from warmcore.simcore.config import ServiceShape, WorkloadKind, register_workload
from warmcore.simcore.config.schema import MAX_LIST, Count
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
    return ClosedLoop(ctx, clients=wl.connections * wl.depth, think=None, per_conn=wl.depth)


register_workload(WorkloadKind(
    "saturating", SaturatingCfg, saturating, load_field="connections", serial=True,
    description="pipelined connections that always have their next request ready"))
