"""A batch: N jobs released together at time 0, one per connection; the run
measures every one of them and reports its makespan."""

from __future__ import annotations

from typing import Literal

from warmcore.models.workloads.base import Workload
from warmcore.simcore.config import ServiceShape, WorkloadKind, register_workload
from warmcore.simcore.config.schema import Count


class BatchCfg(ServiceShape):
    """N jobs released together at time 0; the run reports its makespan."""

    kind: Literal["batch"]
    jobs: Count = 8


class Batch(Workload):
    """N jobs released together at time 0, one per connection."""

    def __init__(self, ctx):
        super().__init__(ctx, ctx.cfg.workload.jobs)

    def start(self) -> None:
        make = self.factory.make
        for c in self.connections:
            self.deliver(make(0.0, c.id), c)
        self.ctx.recorder.source_exhausted = True


register_workload(WorkloadKind(
    "batch", BatchCfg, Batch, load_field="jobs", sockets=lambda _wl: False, makespan=True,
    description="jobs released together; the run reports its makespan"))
