"""The one result schema: what every run returns, what ``run --json`` prints, what
``compare --json`` prints per run, what sweeps store as a row and what calibration
compares against measurements.

``Result`` is a pydantic model; ``Result.to_dict()`` is the JSON object
(non-finite numbers as ``null``), key for key in the order of the fields below.
``docs/result.schema.json`` is generated from it (``write_schema``) and every run's
JSON is validated against it in the tests.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A float that JSON carries as null when it is not finite (no requests measured, no
# cycles counted): NaN/inf are kept in Python and written as null.
# Numbers keep the type the run gave them (int stays int, float stays float), so
# that the JSON is the same text as the run's own dict: pydantic's smart unions
# take the exact type first.
Real = int | float
Num = Real | None
Count = Real            # integer counters; a mean over replications is a float


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Latency(_Part):
    """End-to-end latency of a request (us): arrival to response written."""

    min: Num
    mean: Num
    p50: Num
    p90: Num
    p99: Num
    p999: Num
    max: Num


class Service(_Part):
    """Server-side processing time of a request (us): from the first instant a server
    thread worked on it (first byte read) to its response written; latency less the
    wait before a thread took it up."""

    min: Num
    mean: Num
    p50: Num
    p90: Num
    p99: Num
    p999: Num
    max: Num


class Wait(_Part):
    mean: Num = Field(description="mean time from arrival until a server thread took the "
                                  "request (us)")


class Breakdown(_Part):
    """Where a request's time went (mean us per request); see simcore.work.CAUSES."""

    queue_wait: Num
    dispatch: Num
    compute: Num
    cache_reload: Num
    coherence: Num
    contention: Num
    blocked_io: Num


class ProcessCounters(_Part):
    """perf stat counters of one simulated process over the measured window."""

    model_config = ConfigDict(extra="allow")    # counters a model adds appear as they are

    cycles: Real
    instructions: Real
    l1d_loads: Real
    l1d_misses: Real
    llc_loads: Real
    llc_misses: Real
    context_switches: Count
    cpu_migrations: Count
    futex_wakes: Count
    task_clock_ms: Real


class Result(_Part):
    """One run (or the mean of its replications)."""

    scenario: str
    strategy: str
    machine: str
    seed: int
    requests: Count = Field(description="requests completed in the measured window")
    sim_seconds: Real = Field(description="length of the measured window (simulated s)")
    throughput_rps: Num
    offered_rps: Num = Field(description="the offered open-loop rate, null for closed "
                                         "or saturating workloads")
    latency_us: Latency
    service_us: Service
    wait_us: Wait
    cpus_utilized: Num = Field(description="server task-clock / window, as perf stat's "
                                           "'CPUs utilized'")
    task_clock_ms: Real
    user_s: Real = Field(description="server CPU time in user mode (s): task-clock less sys_s")
    sys_s: Real = Field(description="server CPU time in kernel work (s): context switches, "
                                    "futex calls, wake-ups, syscalls (perf :k, time's sys)")
    cycles: Real
    instructions: Real
    ipc: Num
    ghz: Num
    l1d_loads: Real
    l1d_misses: Real
    llc_loads: Real = Field(description="L2 misses that are demand data reads, as perf's "
                                        "LLC-loads on Intel cores")
    llc_misses: Real = Field(description="those of the LLC loads from DRAM or another LLC "
                                         "(perf's LLC-misses)")
    llc_stores: Real = Field(default=0.0, description=(
        "L2 misses that are demand RFOs (stores to lines first written: allocations), "
        "as perf's LLC-stores"))
    llc_store_misses: Real = Field(default=0.0, description=(
        "those of the LLC stores from DRAM or another LLC (perf's LLC-store-misses)"))
    context_switches: Count
    cpu_migrations: Count
    futex_wakes: Count
    joules: Real
    joules_per_request: Num
    makespan_s: Num = Field(description="batch workloads: time until the last job finished")
    breakdown_us: Breakdown
    mean_in_system: Num
    arrived: Count = Field(description="requests that arrived (were issued) in the window, "
                                       "retries included")
    # The outcomes (issue 31) have defaults so that results stored before them (sweep
    # parts, saved comparisons) still read.
    rejected: Count = Field(default=0, description="arrivals the server refused in the window, its "
                                        "queue full (strategy.params.queue_capacity)")
    timed_out: Count = Field(default=0, description="requests whose client stopped waiting in the "
                                         "window (workload.timeout_us); the server may "
                                         "still have finished them")
    goodput_rps: Num = Field(default=None, description=(
        "responses that reached a client still waiting, per second of the window "
        "(throughput_rps when no client times out)"))
    rejected_rate: Num = Field(default=None, description="rejected / arrived")
    timed_out_rate: Num = Field(default=None, description="timed_out / arrived")
    in_flight_at_end: Count
    drained: bool
    stop_reason: str
    processes: dict[str, ProcessCounters]
    cpu_utilization: list[Real]
    cpu_ghz: list[Real] | None
    runqueue_max: Count
    warnings: list[str]
    partial: bool | None = Field(
        default=None, description="true when a safety cap (run.max_in_flight) or the "
                                  "wall-clock budget (max_wall) ended the run before its "
                                  "limit; stop_reason says which")
    trace: list[list[Any]] | None = Field(
        default=None, description="run.trace_events > 0: (time, event, thread, cpu, ...) rows")
    replications: int | None = None
    seeds: list[int] | None = None
    ci95: dict[str, list[Num]] | None = Field(
        default=None, description="replications > 1: Student-t 95% interval of each figure")
    load: Real | str | None = Field(
        default=None, description="compare with --load: the offered load of this run")

    @classmethod
    def from_dict(cls, d: dict) -> Result:
        return cls.model_validate(d)

    def to_dict(self) -> dict:
        """The ``run --json`` object: the keys the run set, in schema order, non-finite
        numbers as None (JSON null)."""
        return _finite(self.model_dump(exclude_unset=True))

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def to_series(self, sep: str = "."):
        """A flat pandas Series (nested keys joined by ``sep``), for a DataFrame row."""
        import pandas as pd

        flat = {k: v for k, v in _flatten(self.to_dict(), sep).items()
                if not isinstance(v, list)}
        return pd.Series(flat, name=self.strategy)

    # Figures per request that the comparison table and the explorer show.
    def per_request(self) -> dict:
        n = max(self.requests, 1)
        cpus = self.cpus_utilized or 0.0
        lat = self.latency_us
        return {
            "strategy": self.strategy,
            "load": self.load if self.load is not None else "-",
            "throughput_rps": self.throughput_rps,
            "p50_us": lat.p50, "p99_us": lat.p99, "max_us": lat.max,
            "cpus": cpus,
            "cpu_us_per_req": self.task_clock_ms * 1e3 / n,
            "ipc": self.ipc, "ghz": self.ghz,
            "llc_loads_per_req": self.llc_loads / n,
            "migrations_per_req": self.cpu_migrations / n,
            "switches_per_req": self.context_switches / n,
            "uj_per_req": (self.joules_per_request if self.joules_per_request is not None
                           else math.nan) * 1e6,
            "rps_per_cpu": self.throughput_rps / cpus if cpus > 0 else math.nan,
            "drained": self.drained,
            # what the clients got (issue 31): what arrived and what was answered in
            # time per second, and the share of arrivals refused or given up on
            "arrived_rps": (self.arrived / self.sim_seconds if self.sim_seconds > 0
                            else math.nan),
            "goodput_rps": _or_nan(self.goodput_rps),
            "rejected_pct": _or_nan(self.rejected_rate) * 100,
            "timed_out_pct": _or_nan(self.timed_out_rate) * 100,
        }


def has_outcomes(rows: list[dict]) -> bool:
    """Did any client of these per_request() rows get a refusal or time out? (The
    tables show the outcome columns only then: without them nothing changes.)"""
    return any((row.get("rejected_pct") or 0) > 0 or (row.get("timed_out_pct") or 0) > 0
               for row in rows)


def _or_nan(x) -> float:
    return math.nan if x is None else x


def _finite(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _flatten(d: dict, sep: str, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, sep, key + sep))
        else:
            out[key] = v
    return out


def json_schema() -> dict:
    schema = Result.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "warmcore run result"
    return schema


def write_schema(path: str | Path) -> None:
    Path(path).write_text(json.dumps(json_schema(), indent=2) + "\n")
