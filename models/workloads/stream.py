"""Message streams: producer -> server -> consumer, producer and consumer processes
of their own with a CPU cost per message and their own affinity; over loopback TCP
with ``tcp``."""

from __future__ import annotations

from collections import deque
from typing import Annotated, Literal

from pydantic import Field

from warmcore.models.workloads.base import LINE, Workload, notify_after_append, work_ips
from warmcore.simcore.config import ServiceShape, WorkloadKind, register_workload
from warmcore.simcore.config.schema import MAX_RATE, Count, MicrosOrZero
from warmcore.simcore.distributions import sampler
from warmcore.simcore.work import TASK, Footprint, Request, Segment


class StreamCfg(ServiceShape):
    """producer -> server -> consumer messages; producer and consumer are co-located
    processes with their own CPU cost per message and affinity."""

    kind: Literal["stream"]
    rate_per_s: Annotated[float, Field(gt=0, le=MAX_RATE)] | None = Field(
        default=None, description='None: the producer sends as fast as it can')
    window: Count = Field(default=64, description='messages in flight when saturating')
    producer_us: MicrosOrZero = 2.0
    consumer_us: MicrosOrZero = 2.0
    producers: Annotated[int, Field(gt=0, le=1024)] = 1
    consumers: Annotated[int, Field(gt=0, le=1024)] = 1
    tcp: bool = Field(default=False, description=(
        'producer, server and consumer talk over loopback TCP: the producer pays its '
        'write (with the server side\'s receive softirq), the server its read and write, '
        'the consumer one read per wake-up for all it finds; socket wake-ups are sync '
        'wake-ups. Off unless the scenario sets it (`contended` does): docs/model.md, '
        'Known departures'))


class Stream(Workload):
    """producer -> server -> consumer. Producer threads (their own process, with
    ``producer.cpus`` affinity) spend ``producer_us`` writing each message, at a
    set rate or as fast as a window of ``window`` messages in flight allows; the
    server's strategy handles it; consumer threads (``consumer.cpus``) spend
    ``consumer_us`` reading it. Latency runs from the start of production to
    the end of consumption."""

    client_on_machine = True      # the producer threads write the messages

    def __init__(self, ctx):
        super().__init__(ctx, ctx.cfg.workload.producers)
        wl = ctx.cfg.workload
        self.wl = wl
        k = ctx.kernel
        self.prod_proc = k.process("producer", ctx.cpu_list(ctx.cfg.producer.cpus, "producer.cpus"))
        self.cons_proc = k.process("consumer", ctx.cpu_list(ctx.cfg.consumer.cpus, "consumer.cpus"))
        self.ips = work_ips(ctx)
        lines = ctx.cfg.work.task_kib * 1024 / LINE
        self.msg_lines = lines
        self.cons_ins = wl.consumer_us * 1e-6 * self.ips
        self.prod_ins = wl.producer_us * 1e-6 * self.ips
        self.gap = (sampler("exponential", wl.producers / wl.rate_per_s,
                            ctx.streams.generator("arrivals")) if wl.rate_per_s else None)
        # With `tcp`, the stream's own ends of its loopback connections
        # (models/syscalls.py): the producer's write (its transmit and the server
        # side's receive softirq, which loopback runs on the writer's CPU) and the
        # consumer's read; the server's read and write are its strategy's and
        # finished()'s, as for every socket workload.
        self.tcp = wl.tcp
        self.prod_write_s = (ctx.machine.syscall_cost("write", kib=ctx.cfg.work.request_kib)
                             if wl.tcp else 0.0)
        self.consumer_reads = 0     # read calls of tcp consumers (each for all they find)
        self.in_flight = 0
        self.blocked_producers: list = []
        self.cons_queue: deque = deque()
        self.cons_idle: list = []

    def start(self) -> None:
        k = self.ctx.kernel
        for i, conn in enumerate(self.connections):
            k.spawn(self.prod_proc, f"producer-{i}", lambda t, c=conn: self._producer(t, c))
        for i in range(self.wl.consumers):
            k.spawn(self.cons_proc, f"consumer-{i}", self._consumer)

    def _producer(self, t, conn):
        env = self.env
        make = self.factory.make
        next_send = env.now
        while True:
            if self.gap is not None:
                next_send += self.gap()
                if next_send > env.now:
                    yield t.block(next_send - env.now)
            else:
                while self.in_flight >= self.wl.window:
                    self.blocked_producers.append(t)
                    yield t.park()
            req = make(env.now, conn.id)
            self.ctx.recorder.arrive(req)   # in the system from the start of production
            self.in_flight += 1
            fp = (Footprint(TASK, req.id, self.msg_lines, True),) if self.msg_lines else ()
            if self.tcp:
                t.charge_io(self.prod_write_s)
            yield t.run(Segment(self.prod_ins, fp, label="publish"), req)
            if notify_after_append(conn, req):
                if self.tcp:     # the server side's receive runs in the producer's write
                    self.ctx.kernel.deliver_from(t, lambda c=conn: self.ctx.strategy.on_arrival(c))
                else:
                    self.ctx.strategy.on_arrival(conn)

    def finished(self, req: Request, thread) -> None:
        """The server handled the message: send it on to a consumer (a write)."""
        if self.write_s:
            thread.charge_io(self.write_s)
        self.release(req)
        self.cons_queue.append(req)
        if self.cons_idle:
            k = self.ctx.kernel
            if self.tcp:     # the socket's wake-up, paid in the write (write_s)
                k.deliver_from(thread, lambda: k.wake(self.cons_idle.pop()))
            else:
                k.wake(self.cons_idle.pop(), thread)

    def _consumer(self, t):
        """Takes the messages one at a time; over TCP one read returns every message
        waiting on its socket."""
        q = self.cons_queue
        kib = self.ctx.cfg.work.response_kib
        syscall_cost = self.ctx.machine.syscall_cost
        while True:
            if not q:
                self.cons_idle.append(t)
                yield t.park()
                continue
            if not self.tcp:
                yield from self._consume(t, q.popleft())
                continue
            batch = list(q)
            q.clear()
            self.consumer_reads += 1
            t.charge_io(syscall_cost("read", kib=len(batch) * kib))
            for req in batch:
                yield from self._consume(t, req)

    def _consume(self, t, req):
        fp = (Footprint(TASK, req.id, self.msg_lines, False),) if self.msg_lines else ()
        yield t.run(Segment(self.cons_ins, fp, label="consume-msg"), req)
        self.in_flight -= 1
        self.ctx.recorder.complete(req)
        if self.blocked_producers:
            self.ctx.kernel.wake(self.blocked_producers.pop(), t)


def _rate(workload) -> float | None:
    return workload.rate_per_s


register_workload(WorkloadKind(
    "stream", StreamCfg, Stream, load_field="rate_per_s", offered_rate=_rate,
    sockets=lambda wl: wl.tcp,
    description="producer -> server -> consumer messages, co-located processes"))
