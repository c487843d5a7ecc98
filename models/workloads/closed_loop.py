"""Closed loops: clients that each wait for their response, think, and send again."""

from __future__ import annotations

from warmcore.models.workloads.base import Connection, Workload
from warmcore.simcore.config import ServiceShape, WorkloadKind, register_workload
from typing import Annotated, Literal

from pydantic import Field

from warmcore.simcore.config.schema import TIMEOUT_FIELD, Count, DistKind, Micros, MicrosOrZero
from warmcore.simcore.distributions import sampler
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
        self.deliver(self.factory.make(self.env.now, conn.id), conn)

    def finished(self, req: Request, thread) -> None:
        if self.write_s:
            thread.charge_io(self.write_s)
        answered = self.answered(req)
        self.ctx.recorder.complete(req)
        conn = self.connections[req.conn]
        self.release(req)
        if answered:                    # (a late response finds its client gone)
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


register_workload(WorkloadKind(
    "closed", ClosedLoopCfg, ClosedLoop, load_field="clients",
    description="clients that wait for each response and think before the next"))
