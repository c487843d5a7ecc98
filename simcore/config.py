"""Scenario configuration: pydantic models with unknown keys forbidden.

A scenario is a TOML document (or a built-in one) plus ``--set PATH=VALUE``
overrides. Every error becomes one line naming the field and the reason
(``ConfigError``), which the CLI prints with exit code 2.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# Caps (docs/formats.md "Ranges and caps"). Past them a run's cost or memory is
# unbounded in practice, or float time loses its resolution; every one is a
# documented range of the typed parameter space, so the explorer and sweeps show
# and enforce the same limits.
MAX_US = 1e7            # one step of work, a call, a think time: 10 simulated seconds
MIN_US = 1e-3           # 1 ns: below this a duration is lost in float rounding
MAX_KIB = 1 << 20       # a footprint of 1 GiB per request
MAX_COUNT = 100_000     # threads, connections, clients, jobs, producers, permits
MAX_OPS = 1e6           # contended read-modify-writes per request
MAX_RATE = 1e9          # offered load, requests per simulated second (one per ns)
MAX_REQUESTS = 100_000_000
MAX_HORIZON_S = 1e6     # simulated seconds: float time keeps 0.1 ns resolution up to here
MAX_REPLICATIONS = 1000
MAX_TRACE_EVENTS = 1_000_000
MAX_IN_FLIGHT = 1_000_000   # 0.85 GB of requests in flight
MAX_PROGRAM_STEPS = 1000
MAX_LIST = 1_000_000    # values of an empirical distribution, CPUs in a list
MAX_FILE_BYTES = 1 << 20   # a scenario or sweep file (TOML): 1 MiB
MAX_TRACE_BYTES = 1 << 28  # an arrival-trace file: 256 MiB
MAX_TRACE_ARRIVALS = 10_000_000   # held as 8-byte floats: 80 MB

Pos = Annotated[float, Field(gt=0)]
NonNeg = Annotated[float, Field(ge=0)]
PosInt = Annotated[int, Field(gt=0)]
Micros = Annotated[float, Field(ge=MIN_US, le=MAX_US)]       # a positive duration in us
MicrosOrZero = Annotated[float, Field(ge=0, le=MAX_US)]
Kib = Annotated[float, Field(ge=0, le=MAX_KIB)]
Count = Annotated[int, Field(gt=0, le=MAX_COUNT)]
Cv = Annotated[float, Field(gt=0, le=100)]                   # coefficient of variation
DistKind = Literal["deterministic", "exponential", "lognormal", "empirical"]


class ConfigError(ValueError):
    """A bad scenario: ``field`` is the dotted path, ``reason`` says what is wrong."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")

    def __reduce__(self):               # picklable: errors cross process pools and Dask
        return (ConfigError, (self.field, self.reason))


FLOAT_FLOOR = 1e-3      # a non-zero float knob smaller than this is a typo or an attack


def over_cap(model: BaseModel, caps: dict[type, float]) -> str | None:
    """"field: reason" for the first numeric field of ``model`` above the cap for its
    type (``caps``: {int: ..., float: ...}) that has no upper bound of its own, or a
    non-zero float below FLOAT_FLOOR (a divisor that small overflows a cost to
    infinity, a period that small stops simulated time); None if all are within.
    Models whose many tunables share one documented cap (a strategy's
    Params, a preset) declare it once this way; warmcore.parameters shows it as
    their range."""
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and 0 < abs(value) < FLOAT_FLOOR:
            return (f"{name}: {value!r} is below warmcore's floor of {FLOAT_FLOOR:g} "
                    "(0 or at least that)")
        if any(getattr(m, "le", None) is not None or getattr(m, "lt", None) is not None
               for m in info.metadata):
            continue
        cap = caps.get(type(value))
        if cap is not None and abs(value) > cap:
            return f"{name}: {value!r} is above warmcore's cap of {cap:g}"
    return None


class Strict(BaseModel):
    # strict: no silent coercion ("4" is not 4, "yes" is not true); no NaN or infinity
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True,
                              allow_inf_nan=False)


class Effects(Strict):
    """Hardware effects; None means the preset's default (off on ideal, on elsewhere)."""

    caches: bool | None = None
    coherence: bool | None = None
    contention: bool | None = None
    membus: bool | None = None
    smt: bool | None = None
    dvfs: bool | None = None
    switch_costs: bool | None = None
    energy: bool | None = None


class MachineCfg(Strict):
    preset: str = "ideal"
    cores: Annotated[int, Field(gt=0, le=1024)] | None = Field(
        default=None, description='cores per socket (CPUs, on the ideal machine)')
    threads_per_core: Annotated[int, Field(gt=0, le=8)] | None = None
    sockets: Annotated[int, Field(gt=0, le=64)] | None = None
    governor: str | None = None
    frequency_ghz: Annotated[float, Field(gt=0, le=10)] | None = Field(
        default=None, description="the userspace governor's fixed clock")
    turbo: bool | None = None
    governor_params: dict[str, float] = {}
    overrides: dict[str, Any] = Field(
        default={}, description='any Preset field (models.presets.Preset, validated there)')
    effects: Effects = Effects()


class ServiceShape(Strict):
    """Service demand of one request: the consume (handle) step."""

    service: DistKind = "exponential"
    service_us: Micros = 100.0
    service_cv: Cv = Field(default=1.0, description='lognormal only')
    service_values_us: Annotated[list[Micros], Field(max_length=MAX_LIST)] | None = Field(
        default=None, description='empirical only')
    # A connection hands the server one request at a time (HTTP/1.1): the next is
    # readable once the previous has been handled. Default: on for saturating
    # (pipelined) connections, off for the others.
    serial: bool | None = None

    @model_validator(mode="after")
    def _empirical_needs_values(self):
        if self.service == "empirical" and not self.service_values_us:
            raise ValueError("service_values_us: the empirical distribution needs values")
        return self


class KeepAlive(ServiceShape):
    """Open-loop requests over keep-alive connections (the ``open`` and ``connections``
    kinds): pipelined, or one request in flight per connection as wrk sends."""

    pipelined: bool = Field(default=True, description=(
        "a request due while its connection's previous one is unanswered is sent at "
        "once (HTTP/1.1 pipelining). False: the client holds it and sends it "
        "client_turnaround_us after that response arrives, one request in flight per "
        "connection as wrk and wrk2 do; its latency still counts from when it was due"))
    client_turnaround_us: MicrosOrZero = Field(default=0.0, description=(
        "not pipelined: from a response to the next request on that connection reaching "
        "the server (network round trip plus the load tool's own handling)"))

    @model_validator(mode="after")
    def _unpipelined_needs_serial(self):
        if not self.pipelined and not self.serial:
            raise ValueError("pipelined: one request in flight per connection needs serial "
                             "connections (serial = true)")
        return self


class OpenLoop(KeepAlive):
    """Requests at a set rate, whatever the responses (wrk2, Jetty Load Generator)."""

    kind: Literal["open"]
    arrival: Literal["poisson", "constant", "trace"] = "poisson"
    rate_per_s: Annotated[float, Field(gt=0, le=MAX_RATE)] | None = None
    trace_file: str | None = None
    connections: Count = Field(default=1, description='requests spread over this many connections')

    @model_validator(mode="after")
    def _rate_or_trace(self):
        if self.arrival == "trace":
            if not self.trace_file:
                raise ValueError("trace_file: arrival 'trace' needs a trace_file")
        elif self.rate_per_s is None:
            raise ValueError("rate_per_s: an open-loop workload needs a rate")
        return self


class ClosedLoop(ServiceShape):
    """N clients, each sending its next request a think time after the last response."""

    kind: Literal["closed"]
    clients: Count = 10
    think: DistKind = "exponential"
    think_us: MicrosOrZero = 1000.0


class Saturating(ServiceShape):
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


class Batch(ServiceShape):
    """N jobs released together at time 0; the run reports its makespan."""

    kind: Literal["batch"]
    jobs: Count = 8


class Connections(KeepAlive):
    """Many connections, each with its own Poisson stream of requests."""

    kind: Literal["connections"]
    connections: Count = 100
    rate_per_s: Annotated[float, Field(gt=0, le=MAX_RATE)] = Field(
        default=1000.0, description='total over all connections')
    arrival: Literal["poisson", "constant"] = "poisson"


class Stream(ServiceShape):
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


Workload = Annotated[OpenLoop | ClosedLoop | Saturating | Batch | Connections | Stream,
                     Field(discriminator="kind")]
WORKLOAD_KINDS = ("open", "closed", "saturating", "batch", "connections", "stream")
# Workloads whose requests reach the server over a socket it reads and answers on
# (loopback TCP, models/syscalls.py). Not a batch (no sockets), and the
# producer -> server -> consumer stream only with `workload.tcp` (has_sockets; on in
# `contended`, docs/model.md "The contended scenario's defaults").
SOCKET_KINDS = ("open", "closed", "saturating", "connections")


def has_sockets(workload) -> bool:
    """Does the server read its requests from, and answer on, loopback TCP sockets?"""
    return workload.kind in SOCKET_KINDS or bool(getattr(workload, "tcp", False))


StepDist = Literal["deterministic", "exponential", "lognormal"]


class Step(Strict):
    """One step of a request program (docs/formats.md "Request programs"): exactly one
    of ``compute_us`` (compute with its own distribution), ``service_share`` (that
    fraction of the request's service demand, drawn from the workload's service
    distribution), ``call_us`` (a blocking call, its own distribution), ``acquire``
    or ``release`` (a permit of a named resource)."""

    compute_us: Micros | None = None
    service_share: Annotated[float, Field(gt=0, le=1)] | None = None
    call_us: Micros | None = None
    acquire: str | None = None
    release: str | None = None
    distribution: StepDist = Field(default="deterministic",
                                   description='of compute_us or call_us')
    cv: Cv = Field(default=1.0, description='lognormal only')

    @model_validator(mode="after")
    def _one_kind(self):
        given = [k for k in ("compute_us", "service_share", "call_us", "acquire", "release")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a program step is exactly one of compute_us, service_share, "
                             f"call_us, acquire, release (got {', '.join(given) or 'none'})")
        return self


class ResourceCfg(Strict):
    """A named semaphore, connection pool or lock: ``permits`` held at once, a FIFO wait
    queue; fair (FIFO hand-off) or not (barging: simcore.kernel.Semaphore)."""

    permits: Count = Field(description="held at once: the semaphore's permits or the "
                                       "pool's connections (the scenario's own)")
    op_us: MicrosOrZero = Field(default=0.05, description='CPU per acquire or release (a CAS on '
                                                    'the contended state word + queue work)')
    fair: bool = Field(default=True, description=(
        'FIFO hand-off (a fair Semaphore, a connection pool) or, false, barging with '
        'waiters woken to retry (a nonfair ReentrantLock or Semaphore, glibc\'s mutex)'))


class WorkCfg(Strict):
    """Shape of the work per request, for the hardware model (all zero: pure compute)."""

    produce_us: MicrosOrZero = Field(default=0.0,
                               description='parse/produce step on the producing thread')
    task_kib: Kib = Field(default=0.0,
                             description='request data written by producer, read by consumer')
    thread_kib: Kib = Field(default=0.0, description='private state the handling thread touches')
    code_kib: Kib = Field(default=0.0, description='code and read-mostly data per request')
    shared_kib: Kib = Field(default=0.0, description='shared structures every request touches')
    conn_kib: Kib = Field(default=0.0,
                             description='per-connection state (parser, buffers) every request')
                                   # of the connection reads and writes
    contended_ops: Annotated[float, Field(ge=0, le=MAX_OPS)] = Field(
        default=0.0, description='read-modify-writes on one contended line per request')
    backend_us: MicrosOrZero = Field(default=0.0,
                               description='blocking call inside the handler (exponential mean)')
    backend_async: bool = Field(default=False, description=(
        "the handler makes its backend call with a non-blocking client where the server "
        "has an event loop to wait on (RxNetty's HttpClient: event-loop's async_backend); "
        "servers whose threads run a request to completion block their thread, as the "
        "Tomcat version of the RxNetty-vs-Tomcat benchmark did"))
    invocation: Literal["BLOCKING", "NON_BLOCKING", "EITHER"] = "BLOCKING"
    # What crosses the socket per request (every workload but a batch reads its requests
    # from sockets and writes its responses to them): the copies of the read and write
    # system calls (models/syscalls.py).
    request_kib: Kib = Field(default=0.2, description=(
        'request on the wire: a GET with a few headers, ~200 bytes (wrk sends the request '
        'line, Host and the headers it is given)'))
    response_kib: Kib = Field(default=0.2, description=(
        'response on the wire: a small "hello" body with its status line and headers, '
        '~200 bytes'))
    # Where the microseconds above were measured: None means on the simulated machine
    # itself; a preset name fixes the instruction counts (service_us x that preset's
    # instructions per us), so that changing machine.preset compares machines on the
    # same work.
    reference_preset: str | None = None
    # A request program: the handling as a sequence of steps (None: one consume step of
    # service_us, then backend_us if set).
    program: Annotated[list[Step], Field(max_length=MAX_PROGRAM_STEPS)] | None = None

    @model_validator(mode="after")
    def _program(self):
        if self.program is not None:
            if not self.program:
                raise ValueError("program: an empty program (leave it out for one step)")
            if self.backend_us:
                raise ValueError("backend_us: with a program, write the blocking call as a "
                                 "call_us step")
        return self


class ProcessCfg(Strict):
    threads: Count | None = None
    cpus: (Annotated[int, Field(gt=0, le=1024)]
           | Annotated[list[Annotated[int, Field(ge=0, lt=1024)]], Field(max_length=1024)]
           | None) = None   # N -> CPUs 0..N-1


class StrategyCfg(Strict):
    name: str = "shared-queue"
    params: dict[str, float | int | str | bool] = {}


class RunCfg(Strict):
    requests: Annotated[int, Field(gt=0, le=MAX_REQUESTS)] | None = None
    duration_s: Annotated[float, Field(gt=0, le=MAX_HORIZON_S)] | None = None
    warmup: Annotated[float, Field(ge=0, lt=1)] = 0.1   # fraction of requests or duration
    replications: Annotated[int, Field(gt=0, le=MAX_REPLICATIONS)] = 1
    trace_events: Annotated[int, Field(ge=0, le=MAX_TRACE_EVENTS)] = 0
    # An overloaded open loop queues requests without bound; this cap ends the run
    # (partial) first. Measured: 0.85 KB of memory per request in flight (1.77 GB RSS
    # at 2,000,000, tests/test_fuzz.py), so the default holds a run near 0.3 GB.
    max_in_flight: Annotated[int, Field(gt=0, le=MAX_IN_FLIGHT)] = Field(
        default=250_000, description='stop an overloaded run before memory runs out '
                                     '(0.85 KB per request in flight)')

    @model_validator(mode="after")
    def _needs_a_limit(self):
        if self.requests is None and self.duration_s is None:
            raise ValueError("requests: a run needs a request limit or a duration "
                             "(run.requests or run.duration_s)")
        return self


class KernelCfg(Strict):
    """The simulated OS scheduler's optional behaviours (simcore.kernel)."""

    wakeup_preemption: bool = Field(default=False, description=(
        "CFS wake-up preemption: a woken thread more than sched_wakeup_granularity behind "
        "the running one in virtual runtime runs next, at the running thread's next "
        "segment boundary. Off by default: docs/engine.md, departures"))


class Scenario(Strict):
    """A validated scenario. Immutable in use: ``set`` and ``with_`` return new ones.

        sc = Scenario.load("pipeline")                 # built-in name, TOML path or dict
        sc2 = sc.set("machine.governor", "performance")
        sc3 = sc.with_({"machine.cores": 2}, strategy="pec", requests=5000)
        Scenario.from_toml(sc3.to_toml()) == sc3       # True
    """

    name: str = "scenario"
    description: str = ""
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 1
    machine: MachineCfg = MachineCfg()
    workload: Workload
    work: WorkCfg = WorkCfg()
    server: ProcessCfg = ProcessCfg()
    producer: ProcessCfg = ProcessCfg()
    consumer: ProcessCfg = ProcessCfg()
    strategy: StrategyCfg = StrategyCfg()
    resources: dict[str, ResourceCfg] = {}
    kernel: KernelCfg = KernelCfg()
    run: RunCfg

    @model_validator(mode="after")
    def _program_resources(self):
        prog = self.work.program
        if not prog:
            return self
        held: list[str] = []
        for i, st in enumerate(prog):
            where = f"work.program[{i}]"
            name = st.acquire or st.release
            if name is not None and name not in self.resources:
                declared = ", ".join(self.resources) or "none"
                raise ConfigError(where, f"names resource {name!r}, which [resources] does not "
                                         f"declare (declared: {declared})")
            if st.acquire is not None:
                if name in held:
                    raise ConfigError(where, f"acquires {name!r} again while holding it")
                held.append(name)
            elif st.release is not None:
                if name not in held:
                    raise ConfigError(where, f"releases {name!r}, which it does not hold")
                held.remove(name)
        if held:
            raise ConfigError("work.program", f"ends holding {', '.join(held)}: release it")
        return self

    @model_validator(mode="after")
    def _bounded_horizon(self):
        """Reject a run whose simulated horizon would pass MAX_HORIZON_S: past it float
        time loses resolution and the periodic events (governor samples, ticks) grow
        without bound. An estimate from the run length, the offered load and the work
        per request, before anything runs."""
        wl, run = self.workload, self.run
        if run.requests is None:        # a duration: checked by its own range, with warm-up
            total = run.duration_s / (1 - run.warmup)
            if total > MAX_HORIZON_S:
                raise ConfigError("run.warmup", f"a warm-up of {run.warmup:g} stretches "
                                  f"{run.duration_s:g} s to {total:.3g} simulated s; at most "
                                  f"{MAX_HORIZON_S:g}")
            return self
        n = run.requests / (1 - run.warmup)
        rate = getattr(wl, "rate_per_s", None)
        if rate is not None and getattr(wl, "arrival", None) != "trace":
            span, field = n / rate, "workload.rate_per_s"
            why = f"at {rate:g} req/s, {n:.3g} requests (with warm-up) span"
        else:
            span = n * self._request_s() / self._concurrency()
            field, why = "run.requests", f"{n:.3g} requests (with warm-up) take about"
        if span > MAX_HORIZON_S:
            raise ConfigError(field, f"{why} {span:.3g} simulated s; at most {MAX_HORIZON_S:g} "
                              "(docs/formats.md, ranges and caps)")
        return self

    def _request_s(self) -> float:
        """Seconds of work and waiting per request (before any hardware effect)."""
        wl, work = self.workload, self.work
        us = wl.service_us + work.produce_us + work.backend_us
        us += getattr(wl, "think_us", 0.0) + getattr(wl, "producer_us", 0.0)
        for st in work.program or ():
            us += (st.compute_us or 0.0) + (st.call_us or 0.0)
        return us * 1e-6

    def _concurrency(self) -> int:
        wl = self.workload
        return max(getattr(wl, "clients", 0), getattr(wl, "jobs", 0),
                   getattr(wl, "window", 0), getattr(wl, "connections", 0) * 64, 1)

    @classmethod
    def load(cls, source: str | Path | dict | Scenario, sets: Sequence[str] = ()) -> Scenario:
        """A built-in scenario name, a TOML file, a dict or a Scenario, then ``--set``
        style overrides (``"machine.cores=4"``), validated."""
        if isinstance(source, Scenario):
            data = source.to_data()
        elif isinstance(source, dict):
            data = copy.deepcopy(source)
        else:
            data = read_scenario_dict(str(source))
        return validate(apply_sets(data, list(sets)))

    @classmethod
    def from_toml(cls, text: str | bytes) -> Scenario:
        """A scenario from TOML text (or the bytes of an uploaded file: UTF-8, at most
        MAX_FILE_BYTES)."""
        if isinstance(text, bytes):
            if len(text) > MAX_FILE_BYTES:
                raise ConfigError("scenario", f"larger than {MAX_FILE_BYTES:,} bytes")
            text = decode_utf8(text, "scenario")
        return validate(parse_toml(text, "scenario"))

    def to_data(self) -> dict:
        """The scenario as plain data (what a TOML file holds; unset options left out)."""
        return self.model_dump(exclude_none=True)

    def to_toml(self) -> str:
        """TOML that ``Scenario.from_toml`` and ``warmcore run FILE`` read back to the
        same scenario."""
        import tomli_w

        return tomli_w.dumps(self.to_data())

    def set(self, path: str, value) -> Scenario:
        """A new scenario with the value at the dotted ``path`` replaced (validated)."""
        return self.with_({path: value})

    def with_(self, changes: dict | None = None, /, *, strategy: str | None = None,
              seed: int | None = None, requests: int | None = None,
              duration_s: float | None = None, keep: Sequence[str] = ()) -> Scenario:
        """A new scenario with ``{dotted.path: value}`` changes, and optionally another
        strategy (its tunables reset, as ``--strategy`` does, except those changed
        here and the tunable names in ``keep``), seed or run length."""
        data = self.to_data()
        for path, value in (changes or {}).items():
            set_path(data, path.split("."), copy.deepcopy(value))
        if strategy is not None:
            switch_strategy(data, strategy, keep=[*keep, *(p.split(".")[2] for p in changes or {}
                                                          if p.startswith("strategy.params."))])
        if seed is not None:
            data["seed"] = seed
        set_run_limit(data, requests=requests, duration_s=duration_s)
        return validate(data)


# -- loading ----------------------------------------------------------------------------

BUILTIN_DIR = Path(__file__).parent / "scenarios"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))


def read_scenario_dict(name_or_path: str) -> dict:
    """The raw dict of a built-in scenario name or a TOML file."""
    p = Path(name_or_path)
    if not p.suffix and (BUILTIN_DIR / f"{name_or_path}.toml").exists():
        p = BUILTIN_DIR / f"{name_or_path}.toml"
    elif not p.exists():
        raise ConfigError("scenario", f"{name_or_path!r} is neither a built-in scenario "
                          f"({', '.join(builtin_names())}) nor a file")
    return parse_toml(read_text(p, "scenario"), f"scenario: {p}")


def read_text(path: str | Path, field: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A file's text: at most ``max_bytes``, UTF-8 (the byte offset of the first bad
    byte otherwise); every failure a ConfigError naming ``field`` and the file."""
    try:
        with open(path, "rb") as f:
            data = read_capped(f, max_bytes)
    except OSError as e:
        raise ConfigError(field, f"{path}: cannot read ({e.strerror})") from None
    if data is None:
        raise ConfigError(field, f"{path}: larger than {max_bytes:,} bytes")
    return decode_utf8(data, f"{field}: {path}")


def read_capped(f, max_bytes: int) -> bytes | None:
    """The bytes of the open binary file ``f``, or None if there are more than
    ``max_bytes``. The size first, then chunks: ``f.read(max_bytes + 1)`` would
    reserve the whole limit at once (256 MiB for a trace file) however small the
    file; a pipe has no size."""
    if os.fstat(f.fileno()).st_size > max_bytes:
        return None
    chunks, size = [], 0
    while size <= max_bytes and (chunk := f.read(1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks) if size <= max_bytes else None


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as text; a ConfigError with the offset of the first byte that is not
    UTF-8 (a latin-1 file, UTF-16, a binary)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        field, _, name = where.partition(": ")
        raise ConfigError(field, f"{name + ': ' if name else ''}not UTF-8 text (byte "
                                 f"{e.start}: 0x{data[e.start]:02x})") from None


# Arrays and inline tables nested deeper than this are refused before parsing: tomllib
# recurses once per level, and a recursion overflow inside its C calls can surface as
# SystemError ("error return without exception set", seen once on CPython 3.11.7 under
# load) instead of RecursionError. No scenario, sweep or calibration file nests more
# than a few levels.
MAX_TOML_NESTING = 100
# What can hold a bracket that is not nesting: strings (multi-line first) and comments.
_TOML_BRACKETS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\''
    r"|#[^\n]*|[\[{]|[\]}]", re.S)


def toml_nesting(text: str) -> int:
    """The deepest nesting of brackets and braces in ``text``, outside strings and
    comments (a table header ``[[a]]`` counts 2)."""
    depth = deepest = 0
    for m in _TOML_BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def parse_toml(text: str, where: str) -> dict:
    """TOML text as a dict; ``where`` is "field: file" for the error line."""
    field, _, name = where.partition(": ")
    prefix = f"{name}: " if name else ""
    if toml_nesting(text) > MAX_TOML_NESTING:
        raise ConfigError(field, f"{prefix}not valid TOML (nested too deeply: more than "
                                 f"{MAX_TOML_NESTING} levels)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(field, f"{prefix}not valid TOML ({e})") from None


def parse_set(assignment: str) -> tuple[list[str], object]:
    """``a.b.c=VALUE`` -> (['a','b','c'], value); VALUE is read as TOML, else as a string."""
    if "=" not in assignment:
        raise ConfigError("--set", f"{assignment!r} is not PATH=VALUE")
    path, raw = assignment.split("=", 1)
    if any(c in assignment for c in "\n\r\x00"):
        raise ConfigError("--set", f"{path.strip()!r}: the value holds a line break or NUL")
    keys = path.strip().split(".")
    if not all(keys):
        raise ConfigError("--set", f"{path!r} is not a dotted path")
    value = raw.strip()
    if toml_nesting(value) <= MAX_TOML_NESTING:       # deeper: text (see parse_toml)
        with contextlib.suppress(tomllib.TOMLDecodeError):
            value = tomllib.loads(f"v = {value}")["v"]
    return keys, value


def apply_sets(data: dict, sets: list[str]) -> dict:
    for s in sets:
        keys, value = parse_set(s)
        set_path(data, keys, value)
    return data


def set_path(data: dict, keys: list[str], value) -> None:
    """data[k1][k2]...[kn] = value, making the tables on the way."""
    if not all(keys):
        raise ConfigError(".".join(keys), "not a dotted path")
    node = data
    for k in keys[:-1]:
        nxt = node.get(k)
        if nxt is None:
            nxt = node[k] = {}
        elif not isinstance(nxt, dict):
            raise ConfigError(".".join(keys), f"{k} is a value, not a table")
        node = nxt
    node[keys[-1]] = value


def switch_strategy(data: dict, name: str, keep: Sequence[str] = ()) -> None:
    """Run ``name`` instead: the scenario's tunables belong to its own strategy, so
    only those named in ``keep`` (given alongside, e.g. on the command line) stay."""
    st = _table(data, "strategy")
    if st.get("name", "shared-queue") != name:
        st["params"] = {k: v for k, v in st.get("params", {}).items() if k in keep}
    st["name"] = name


def _table(data: dict, key: str) -> dict:
    """data[key], a table (made if missing); a ConfigError if it holds a value."""
    node = data.setdefault(key, {})
    if not isinstance(node, dict):
        raise ConfigError(key, f"should be a table (got {_short(node)})")
    return node


def _short(value, limit: int = 60) -> str:
    """repr of a value, cut to ``limit`` characters (errors never echo whole tables)."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def set_run_limit(data: dict, requests: int | None = None,
                  duration_s: float | None = None) -> None:
    """A request limit replaces the scenario's duration and the other way round."""
    run = _table(data, "run")
    if requests is not None:
        run["requests"] = requests
        if duration_s is None:
            run.pop("duration_s", None)
    if duration_s is not None:
        run["duration_s"] = duration_s
        if requests is None:
            run.pop("requests", None)


def validate(data: dict) -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise config_error(e) from None


def load(name_or_path: str, sets: list[str] = (), **run_overrides) -> Scenario:
    """Built-in name or TOML path, then --set overrides, then run overrides
    (requests, duration_s, seed, strategy), validated."""
    data = apply_sets(read_scenario_dict(name_or_path), list(sets))
    if run_overrides.get("seed") is not None:
        data["seed"] = run_overrides["seed"]
    if run_overrides.get("strategy") is not None:
        given = [parse_set(a)[0][2] for a in sets
                 if parse_set(a)[0][:2] == ["strategy", "params"] and len(parse_set(a)[0]) == 3]
        switch_strategy(data, run_overrides["strategy"], keep=given)
    for key, value in run_overrides.items():
        if value is not None and key not in ("seed", "strategy", "requests", "duration_s"):
            _table(data, "run")[key] = value
    set_run_limit(data, requests=run_overrides.get("requests"),
                  duration_s=run_overrides.get("duration_s"))
    return validate(data)


# Tags pydantic puts in an error's path for the members of a union or a wrapped
# type ("constrained-int", "list[constrained-int]", "function-after[...]"): not
# fields a user writes.
_TYPE_TAG = re.compile(r"^(constrained-\w+|int|float|str|bool|none|[\w-]+\[.*\])$")


# pydantic's range messages, as a user reads them.
PLAIN_MESSAGES = {
    "less_than_equal": "must be at most {le}", "less_than": "must be below {lt}",
    "greater_than_equal": "must be at least {ge}", "greater_than": "must be greater than {gt}",
    "finite_number": "must be a finite number", "too_long": "at most {max_length} items",
    "int_type": "should be a whole number", "int_from_float": "should be a whole number",
    "float_type": "should be a number", "bool_type": "should be true or false",
    "string_type": "should be a string", "list_type": "should be a list"}


def _num(v):
    """A bound as written: 1024, 1e+07, 0.001."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e6:
        return str(int(v))
    return f"{v:g}" if isinstance(v, float) and float(f"{v:g}") == v else str(v)


def plain_message(err: dict) -> str:
    """One pydantic error's reason as a user reads it, with the value given."""
    ctx = {k: _num(v) for k, v in err.get("ctx", {}).items()}
    msg = PLAIN_MESSAGES.get(err["type"], err["msg"]).format(**ctx)
    if "input" in err and not isinstance(err["input"], dict):
        msg = f"{msg} (got {_short(err['input'])})"
    return msg


def config_error(e: ValidationError, prefix: str = "") -> ConfigError:
    """The first error of a validation as one ConfigError: the field as a user writes
    it (``prefix`` + its path), the reason without pydantic's internals."""
    err = e.errors()[0]
    loc = [*filter(None, prefix.split(".")),
           *(str(x) for x in err["loc"] if not _TYPE_TAG.match(str(x)))]
    # Drop the discriminator tag pydantic puts in the path of a tagged union.
    loc = [x for i, x in enumerate(loc) if not (i > 0 and loc[i - 1] == "workload"
                                                  and x in WORKLOAD_KINDS)]
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
        # model validators name their own field as "field: reason"
        head, sep, tail = msg.partition(": ")
        if sep and " " not in head and head:
            loc = head.split(".") if "." in head and not prefix else [*loc, head]
            msg = tail
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "union_tag_invalid":
        msg = f"unknown workload kind; known: {', '.join(WORKLOAD_KINDS)}"
    elif err["type"] == "union_tag_not_found":
        loc.append("kind")
        msg = f"missing; one of {', '.join(WORKLOAD_KINDS)}"
    elif err["type"] in PLAIN_MESSAGES:
        msg = plain_message(err)
    elif err["type"] in ("model_type", "dict_type", "model_attributes_type"):
        msg = f"should be a table (got {_short(err.get('input'))})"
    elif "input" in err and err["type"] not in ("missing",) and not (
            err["type"] == "value_error" and isinstance(err["input"], dict)):
        # (a whole table's validator names its field itself: no dump of the table)
        msg = f"{msg} (got {_short(err['input'])})"
    return ConfigError(".".join(loc) or "scenario", msg)
