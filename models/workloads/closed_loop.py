"""Closed loops: clients that each wait for their response, think, and send again."""

from __future__ import annotations

from warmcore.models.workloads.base import Connection, Workload
from warmcore.simcore.config import ServiceShape, WorkloadKind, register_workload
from warmcore.simcore.config.schema import Count, DistKind, MicrosOrZero
from warmcore.simcore.distributions import sampler
from warmcore.simcore.work import Request

from typing import Literal


class ClosedLoopCfg(ServiceShape):
    """N clients, each sending its next request a think time after the last response."""

    kind: Literal["closed"]
    clients: Count = 10
    think: DistKind = "exponential"
    think_us: MicrosOrZero = 1000.0


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
        self.deliver(self.factory.make(self.env.now, conn.id), conn)

    def finished(self, req: Request, thread) -> None:
        if self.write_s:
            thread.charge_io(self.write_s)
        self.ctx.recorder.complete(req)
        conn = self.connections[req.conn]
        self.release(req)
        self._later(self.think() if self.think else 0.0, conn)


register_workload(WorkloadKind(
    "closed", ClosedLoopCfg, ClosedLoop, load_field="clients",
    description="clients that wait for each response and think before the next"))
