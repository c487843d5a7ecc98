"""Workload kinds: one descriptor each, registered by the module that defines it
(models/workloads/, one file per kind) and looked up by the ``kind`` a scenario's
``[workload]`` table names.

A ``WorkloadKind`` says everything the rest of warmcore needs to know of a kind:
its ``[workload]`` table's model (a ``ServiceShape``), the factory that builds its
load generator, the field an offered load sets (``compare --load``, load curves,
sweeps' load axes), the rate it offers, whether the server reads its requests
from sockets, and whether a run is one batch measured by its makespan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from warmcore.simcore.plugins import Registry


def _none(_workload) -> float | None:
    return None


def _always(_workload) -> bool:
    return True


@dataclass(frozen=True)
class WorkloadKind:
    """A workload kind.

    name          what ``workload.kind`` says
    config        the [workload] table's pydantic model (a ServiceShape subclass whose
                  ``kind`` is Literal[name])
    factory       ``factory(ctx) -> Workload``: the load generator (models.workloads)
    load_field    the [workload] field an offered load sets (``rate_per_s``,
                  ``clients``...), or None: the kind has no load to vary
    offered_rate  ``offered_rate(workload) -> requests/s`` it offers whatever the
                  server does (open loops), or None (closed loops, saturating)
    sockets       ``sockets(workload) -> bool``: the server reads its requests from
                  loopback TCP sockets and answers on them (models/syscalls.py)
    makespan      a batch released at once: every job is measured, the run reports
                  its makespan
    serial        its connections hand the server one request at a time unless the
                  scenario says otherwise (``workload.serial``): pipelined HTTP/1.1
    needs_rate    its ``rate_per_s`` has no default: an edit that switches a scenario
                  to this kind gives it one (simcore/config/edit.py)
    """

    name: str
    config: type
    factory: Callable[[Any], Any]
    load_field: str | None = None
    offered_rate: Callable[[Any], float | None] = _none
    sockets: Callable[[Any], bool] = _always
    makespan: bool = False
    serial: bool = False
    needs_rate: bool = False
    description: str = ""


WORKLOADS: Registry[WorkloadKind] = Registry("workload kind")


def register_workload(kind: WorkloadKind) -> WorkloadKind:
    """Register ``kind`` under its name (the module defining it calls this on import)."""
    return WORKLOADS.register(kind.name, kind)


def workload_kinds() -> tuple[str, ...]:
    """The names of every registered workload kind, sorted."""
    return WORKLOADS.names()


def kind_of(workload) -> WorkloadKind:
    """The descriptor of a validated [workload] table."""
    return WORKLOADS.get(workload.kind)


def has_sockets(workload) -> bool:
    """Does the server read its requests from, and answer on, loopback TCP sockets?"""
    return kind_of(workload).sockets(workload)
