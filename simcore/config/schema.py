"""The scenario's schema: pydantic models with unknown keys forbidden, no coercion,
and the caps of every range (docs/formats.md "Ranges and caps").

A validator that blames one field raises ``ConfigError(field, reason)`` with the
field relative to its own model; ``validate`` turns any failure into one
ConfigError at the path a user writes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    create_model,
    model_validator,
)

from warmcore.simcore.config.errors import ConfigError, config_error, short_repr
from warmcore.simcore.config.kinds import WORKLOADS, kind_of, workload_kinds
from warmcore.simcore.distributions import DISTRIBUTIONS, cv_problem
from warmcore.simcore.machine import EFFECTS

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
# A measured window shorter than a microsecond holds no request: a duration below it
# is a slip (1e-320), refused rather than run to a result of NaN latencies.
MIN_DURATION_S = 1e-6
MAX_HORIZON_S = 1e6     # simulated seconds: float time keeps 0.1 ns resolution up to here
MAX_REPLICATIONS = 1000
MAX_TRACE_EVENTS = 1_000_000
MAX_IN_FLIGHT = 1_000_000   # 0.85 GB of requests in flight
MAX_PROGRAM_STEPS = 1000
MAX_CALLS = 64             # backend calls in a request's call plan
MAX_COMPARED = 64       # strategy.compare: names (a registry holds a few dozen)
MAX_LIST = 1_000_000    # values of an empirical distribution, CPUs in a list

Pos = Annotated[float, Field(gt=0)]
NonNeg = Annotated[float, Field(ge=0)]
PosInt = Annotated[int, Field(gt=0)]
Micros = Annotated[float, Field(ge=MIN_US, le=MAX_US)]       # a positive duration in us
MicrosOrZero = Annotated[float, Field(ge=0, le=MAX_US)]
Kib = Annotated[float, Field(ge=0, le=MAX_KIB)]
Count = Annotated[int, Field(gt=0, le=MAX_COUNT)]
Cv = Annotated[float, Field(gt=0, le=100)]                   # coefficient of variation
# The distributions a scenario may name (simcore/distributions.py, a class each).
DistKind = Literal[tuple(DISTRIBUTIONS)]
# A program step draws from its own mean and shape, or from its own list (empirical).
StepDist = DistKind


# The marker of a field that names a file warmcore reads (Field(json_schema_extra=FILE)):
# the explorer refuses such a path unless the file was uploaded with the scenario
# (warmcore.check's ``uploads``).
FILE = {"file": True}

FLOAT_FLOOR = 1e-3      # a non-zero float knob smaller than this is a typo or an attack


def over_cap(model: BaseModel, caps: dict[type, float]) -> ConfigError | None:
    """The error for the first numeric field of ``model`` above the cap for its type
    (``caps``: {int: ..., float: ...}) that has no upper bound of its own, or a
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
            return ConfigError(name, f"{value!r} is below warmcore's floor of "
                                     f"{FLOAT_FLOOR:g} (0 or at least that)")
        if any(getattr(m, "le", None) is not None or getattr(m, "lt", None) is not None
               for m in info.metadata):
            continue
        cap = caps.get(type(value))
        if cap is not None and abs(value) > cap:
            return ConfigError(name, f"{value!r} is above warmcore's cap of {cap:g}")
    return None


class Strict(BaseModel):
    # strict: no silent coercion ("4" is not 4, "yes" is not true); no NaN or infinity
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True,
                              allow_inf_nan=False)


# [machine.effects]: one optional switch per hardware effect (simcore.machine.EFFECTS);
# None means the preset's default (off on ideal, on elsewhere).
Effects = create_model(
    "Effects", __base__=Strict,
    __doc__="Hardware effects; None means the preset's default (off on ideal, on elsewhere).",
    **{name: (bool | None, Field(default=None, description=what))
       for name, what in EFFECTS.items()})


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
    idle_governor: Literal["menu", "hindsight"] | None = Field(default=None, description=(
        "which idle state a CPU enters: menu, Linux's default cpuidle governor, chooses "
        "at idle entry from a prediction (models.cpuidle); hindsight: C6 once a core "
        "has been idle the preset's cstate_deep_after_us. None: hindsight (docs/model.md "
        "says why menu is not yet the default)"))
    idle_next_timer_us: Annotated[int, Field(ge=1, le=10_000_000)] | None = Field(
        default=None, description=(
            "menu's next timer event T at every idle entry (us); the model has no "
            "timers. None: one tick at CONFIG_HZ=250, 4000 us"))
    overrides: dict[str, Any] = Field(
        default={}, description='any Preset field (models.presets.Preset, validated there)')
    effects: Effects = Effects()


class ServiceShape(Strict):
    """Service demand of one request: the consume (handle) step."""

    service: DistKind = "exponential"
    service_us: Micros = 100.0
    service_cv: Cv = Field(default=1.0, description=(
        'lognormal, hyperexponential (at least 1), coxian (at least 0.7071)'))
    service_values_us: Annotated[list[Micros], Field(max_length=MAX_LIST)] | None = Field(
        default=None, description='empirical only')
    # A connection hands the server one request at a time (HTTP/1.1): the next is
    # readable once the previous has been handled. Default: on for saturating
    # (pipelined) connections, off for the others.
    serial: bool | None = None

    @model_validator(mode="after")
    def _empirical_needs_values(self):
        if self.service == "empirical" and not self.service_values_us:
            raise ConfigError("service_values_us", "the empirical distribution needs values")
        return self

    @model_validator(mode="after")
    def _cv_in_the_shapes_domain(self):
        problem = cv_problem(self.service, self.service_cv)
        if problem:
            raise ConfigError("service_cv", problem)
        return self


# A client's timeout (workload.timeout_us): "for many applications a late response is
# a wrong response" (Jetty's Loom report). None: the client waits forever, as wrk2 and
# Jetty's load generator do by default.
TIMEOUT_FIELD = Field(default=None, description=(
    "a client stops waiting for its response after this long and counts the request "
    "timed out (the server still finishes it); None: it waits forever"))


class KeepAlive(ServiceShape):
    """Open-loop requests over keep-alive connections (the ``open`` and ``connections``
    kinds): pipelined, or one request in flight per connection as wrk sends."""

    timeout_us: Micros | None = TIMEOUT_FIELD

    pipelined: bool = Field(default=True, description=(
        "a request due while its connection's previous one is unanswered is sent at "
        "once (HTTP/1.1 pipelining). False: the client holds it and sends it "
        "client_turnaround_us after that response arrives, one request in flight per "
        "connection as wrk and wrk2 do; its latency still counts from when it was due"))
    client_turnaround_us: MicrosOrZero = Field(default=0.0, description=(
        "not pipelined: from a response to the next request on that connection reaching "
        "the server (network round trip plus the load tool's own handling)"))

    timeout_closes: bool = Field(default=False, description=(
        "not pipelined, with a timeout_us: a client whose request times out closes its "
        "connection and sends its next request on a new one (client_turnaround_us "
        "later), and drops a request whose timeout passes before it is sent, as "
        "Jetty's and the JDK's HttpClient do; the server still finishes what it has. "
        "False: the client waits for the late response on the same connection before "
        "sending its next request, counting the timeout, as wrk and wrk2 do"))

    @model_validator(mode="after")
    def _unpipelined_needs_serial(self):
        if not self.pipelined and not self.serial:
            raise ConfigError("pipelined", "one request in flight per connection needs "
                                           "serial connections (serial = true)")
        if self.timeout_closes and (self.pipelined or self.timeout_us is None):
            raise ConfigError("timeout_closes", "closes a connection whose one request "
                              "in flight timed out: it needs pipelined = false and a "
                              "timeout_us")
        return self


def _workload_of_its_kind(value):
    """The [workload] table validated by its kind's own model (simcore/config/kinds.py:
    every kind registers one); a model already validated passes as it is."""
    if isinstance(value, ServiceShape):
        return value
    if not isinstance(value, dict):
        raise ConfigError("", f"should be a table (got {short_repr(value)})")
    known = ", ".join(workload_kinds())
    if "kind" not in value:
        raise ConfigError("kind", f"missing; one of {known}")
    kind = WORKLOADS.get(value["kind"]) if isinstance(value["kind"], str) else None
    if kind is None:
        raise ConfigError("", f"unknown workload kind; known: {known}")
    return kind.config.model_validate(value)


# The [workload] table: a model of the kind it names, dumped with all its fields.
Workload = SerializeAsAny[Annotated[ServiceShape, BeforeValidator(_workload_of_its_kind)]]


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
    cv: Cv = Field(default=1.0, description=(
        'lognormal, hyperexponential (at least 1), coxian (at least 0.7071)'))
    values_us: Annotated[list[MicrosOrZero], Field(min_length=1, max_length=MAX_LIST)] | None = (
        Field(default=None, description=(
            'empirical only: the draws (with replacement); compute_us or call_us states '
            'their mean. A call of 0 does not block (a handler that sleeps only when its '
            'delay is above 0, as the EWYK benchmark\'s Thread.sleep(delay))')))

    @model_validator(mode="after")
    def _empirical_values(self):
        if self.distribution != "empirical":
            if self.values_us is not None:
                raise ConfigError("values_us", "only for distribution = \"empirical\"")
            return self
        if not self.values_us:
            raise ConfigError("values_us", "the empirical distribution needs values")
        stated = self.compute_us if self.compute_us is not None else self.call_us
        if stated is None:
            raise ConfigError("distribution", "empirical is for a compute_us or call_us step")
        mean = sum(self.values_us) / len(self.values_us)
        if not math.isclose(stated, mean, rel_tol=1e-6):
            field = "compute_us" if self.compute_us is not None else "call_us"
            raise ConfigError(field, f"{stated:g} is not the mean of values_us ({mean:.9g})")
        if self.compute_us is not None and min(self.values_us) <= 0:
            raise ConfigError("values_us", "a compute step's values must be above 0")
        return self

    @model_validator(mode="after")
    def _cv_in_the_shapes_domain(self):
        problem = cv_problem(self.distribution, self.cv)
        if problem:
            raise ConfigError("cv", problem)
        return self

    @model_validator(mode="after")
    def _one_kind(self):
        given = [k for k in ("compute_us", "service_share", "call_us", "acquire", "release")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a program step is exactly one of compute_us, service_share, "
                             f"call_us, acquire, release (got {', '.join(given) or 'none'})")
        return self


class BackendCall(Strict):
    """One backend call of a request's call plan (``work.backend_calls``): it is
    written once the calls it comes ``after`` are answered (indices of earlier calls
    of the plan), waits ``delay_us`` (the backend's own delay: the WSPerfLab mock's
    ``delay`` parameter, a timer), and its answer costs the thread that reads it
    ``answer_us`` of CPU (parsing it)."""

    delay_us: Micros
    after: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_CALLS)] = []
    answer_us: MicrosOrZero = 0.0


CallList = Annotated[list[BackendCall], Field(min_length=1, max_length=MAX_CALLS)]


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
    code_kib: Kib = Field(default=0.0, description=(
        'code per request (instruction fetches: L1i, not counted by the data counters)'))
    data_kib: Kib = Field(default=0.0, description=(
        'read-mostly data every request reads, one copy shared by all threads and never '
        'written (the JVM\'s class metadata and constant pools, a server\'s header '
        'tables and configuration): data loads that a working set beyond L2 makes LLC '
        'hits (docs/model.md "A reused working set beyond L2"); 0: none'))
    data_read_kib: Kib | None = Field(default=None, description=(
        'of data_kib, the part one request reads: one of data_kib / data_read_kib '
        'equal parts, chosen at random per request (a request reads a few of the '
        'many objects a server keeps, not all of them); None: every request reads '
        'all of data_kib'))
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
    backend_mock_us: MicrosOrZero | None = Field(default=None, description=(
        "None: the backend answers from another machine (backend_us of waiting, no CPU "
        "here). A number: the backend mock runs on this machine, as in the "
        "RxNetty-vs-Tomcat study (WSPerfLab's ws-backend-mock on 127.0.0.1), spending "
        "this much CPU per call, half reading it on one of its event loops and half "
        "writing the answer on a computation thread backend_us later, with its loopback "
        "reads and writes, epoll_wait and wake-ups (process `backend`; "
        "models/workloads/backend_mock.py)"))
    backend_mock_loops: Annotated[int, Field(gt=0, le=1024)] | None = Field(
        default=None, description=(
            "the mock's event loops; None: one per CPU (RxNetty 0.4.7's "
            "SingleNioLoopProvider(1, availableProcessors()))"))
    backend_mock_timers: Annotated[int, Field(gt=0, le=1024)] | None = Field(
        default=None, description=(
            "the mock's computation threads that answer after the delay; None: one per "
            "CPU (RxJava 1.x's computation scheduler, availableProcessors() threads)"))
    backend_calls: CallList | None = (
        Field(default=None, description=(
            "a call plan instead of one backend_us call: calls written when the calls "
            "they come after are answered, the response written when all are (the "
            "RxNetty server of the WSPerfLab study: A then C and D, B then E); made by "
            "event-loop's non-blocking client (backend_async) and by thread-pool on an "
            "executor, as the study's Tomcat servlet")))
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
                raise ConfigError("program", "an empty program (leave it out for one step)")
            if self.backend_us:
                raise ConfigError("backend_us", "with a program, write the blocking call as "
                                                "a call_us step")
        return self

    @model_validator(mode="after")
    def _call_plan(self):
        if self.backend_calls is None:
            return self
        if self.backend_us:
            raise ConfigError("backend_calls", "a call plan replaces backend_us: set one "
                                               "of them")
        if self.program is not None:
            raise ConfigError("backend_calls", "not with a program (its call_us steps)")
        for i, call in enumerate(self.backend_calls):
            late = [j for j in call.after if j >= i]
            if late:
                earlier = f"0 to {i - 1}" if i else "none: it is the first call"
                raise ConfigError(f"backend_calls.{i}.after", f"a call comes after earlier "
                                  f"calls only ({earlier}), not {late}")
        return self

    @model_validator(mode="after")
    def _backend_mock_answers_calls(self):
        if self.backend_mock_us is not None:
            # a program's calls are its call_us steps (backend_us and backend_calls are
            # refused with one), so ask about the program first
            if self.program is not None:
                raise ConfigError("backend_mock_us", "not with a program (its call_us "
                                                     "steps wait off the machine)")
            if not self.backend_us and self.backend_calls is None:
                raise ConfigError("backend_mock_us", "the mock answers backend calls: "
                                                     "set backend_us, its delay, above 0, "
                                                     "or backend_calls")
        return self

    @model_validator(mode="after")
    def _data_read_within_data(self):
        if self.data_read_kib is not None and not 0 < self.data_read_kib <= self.data_kib:
            raise ConfigError("data_read_kib", f"the part of data_kib ({self.data_kib:g}) "
                                               "a request reads: above 0 and at most it")
        return self


class ProcessCfg(Strict):
    threads: Count | None = None
    cpus: (Annotated[int, Field(gt=0, le=1024)]
           | Annotated[list[Annotated[int, Field(ge=0, lt=1024)]], Field(max_length=1024)]
           | None) = None   # N -> CPUs 0..N-1


class StrategyCfg(Strict):
    name: str = "shared-queue"
    params: dict[str, float | int | str | bool] = {}
    # The params describe the setup (a benchmark's thread counts), not one strategy's
    # choice: they stay when another strategy runs the scenario (compare, --strategy)
    # and each strategy takes those it has (simcore/config/edit.py, strategies/base.py).
    shared_params: bool = Field(default=False, description=(
        "true: params carry to every strategy run on this scenario, each taking those "
        "it has (the setup's, as a benchmark's thread counts); false: they belong to "
        "the strategy named here"))
    # The strategies a comparison of this setup runs (the explorer's choice, kept in
    # the TOML it downloads): `warmcore compare FILE` and `warmcore advise FILE` run
    # them when --strategies is not given. Names are checked against the registry
    # by warmcore.check (the core does not know the strategies).
    compare: Annotated[list[str], Field(min_length=1, max_length=MAX_COMPARED)] | None = \
        Field(default=None, description="strategies to compare (compare/advise without "
                                        "--strategies; the explorer's choice)")


class RunCfg(Strict):
    requests: Annotated[int, Field(gt=0, le=MAX_REQUESTS)] | None = None
    duration_s: Annotated[float, Field(ge=MIN_DURATION_S, le=MAX_HORIZON_S)] | None = None
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
            raise ConfigError("requests", "a run needs a request limit or a duration "
                                          "(run.requests or run.duration_s)")
        return self


class KernelCfg(Strict):
    """The simulated OS scheduler's optional behaviours (simcore.kernel)."""

    wakeup_preemption: bool = Field(default=False, description=(
        "CFS wake-up preemption: a woken thread more than sched_wakeup_granularity behind "
        "the running one in virtual runtime runs next, at the running thread's next "
        "segment boundary. Off by default: docs/engine.md, departures"))


class JvmCfg(Strict):
    """The server's JVM heap (models/jvm_heap.py): a young generation collected by
    stop-the-world copying when its eden fills. Off (``young_mib`` unset) for every
    workload that is not a JVM that allocates."""

    young_mib: Annotated[float, Field(gt=0, le=MAX_KIB)] | None = Field(default=None, description=(
        "young generation (eden and survivors), MiB; unset: no heap model. G1 starts it at "
        "G1NewSizePercent = 5% of the initial heap, itself 1/64 of physical memory (Java "
        "SE GC tuning guide, 'Ergonomics' and 'Garbage-First Garbage Collector Tuning')"))
    survivor_ratio: Annotated[int, Field(gt=1, le=1000)] = Field(default=8, description=(
        "young / survivor space: SurvivorRatio = 8 (G1: at most young / SurvivorRatio "
        "of survivor regions)"))
    tenuring_threshold: Annotated[int, Field(ge=0, le=15)] = Field(default=15, description=(
        "collections an object survives in the survivor space before promotion "
        "(MaxTenuringThreshold = 15)"))
    gc_threads: Count | None = Field(default=None, description=(
        "stop-the-world GC threads; default one per server CPU (ParallelGCThreads for up "
        "to 8 CPUs)"))
    object_ins: Annotated[float, Field(ge=0, le=1e6)] = Field(default=100.0, description=(
        "instructions to evacuate one object besides copying its words: its region's "
        "attribute, the PLAB bump, the forwarding CAS, the age table, scanning its "
        "references (G1ParScanThreadState::do_copy_to_survivor_space): an estimate from "
        "the code path, not measured"))
    chunk_frame_ins: Annotated[float, Field(ge=0, le=1e6)] = Field(default=100.0, description=(
        "instructions per frame of a stack chunk the collection scans (its oop map found "
        "and applied: InstanceStackChunkKlass::oop_oop_iterate_stack): an estimate"))


# The workload kinds whose clients hear a refusal (models/workloads: Workload.rejected
# and gave_up): the open loops and the closed one.
REFUSABLE_KINDS = ("open", "connections", "closed")


class Scenario(Strict):
    """A validated scenario. Immutable in use: ``edit`` (and ``set``, ``with_``)
    return new ones, through the one edit path (simcore/config/edit.py).

        sc = Scenario.load("pipeline")                 # built-in name, TOML path or dict
        sc2 = sc.set("machine.governor", "performance")
        sc3 = sc.edit({"machine.cores": 2}, strategy="pec", requests=5000)
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
    jvm: JvmCfg = JvmCfg()
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
    def _refusals_end(self):
        """A bounded queue (strategy.params.queue_capacity) refuses requests; refuse the
        workloads for which a refusal never ends: a batch's makespan needs every job, and
        a client that re-sends at once (no think time: closed with think_us = 0,
        saturating) would be refused again at the same instant, forever. A load tool on
        this machine (closed with client_us > 0) spends its own time writing again."""
        if self.strategy.params.get("queue_capacity") is None:
            return self
        wl = self.workload
        if kind_of(wl).makespan:
            raise ConfigError("strategy.params.queue_capacity", f"a {wl.kind} workload "
                              "measures every job; a refused one would never finish")
        resends_at_once = (getattr(wl, "think_us", None) == 0
                           and not getattr(wl, "client_us", None))
        if wl.kind == "saturating" or resends_at_once:
            raise ConfigError("strategy.params.queue_capacity", f"{wl.kind} clients re-send "
                              "at once when refused, forever at one instant; give them a "
                              "think time (workload.think_us) or leave the queue unbounded")
        if wl.kind not in REFUSABLE_KINDS:      # a stream's window would never reopen
            raise ConfigError("strategy.params.queue_capacity", f"a {wl.kind} workload does "
                              "not model refused requests; one of "
                              f"{', '.join(REFUSABLE_KINDS)} does")
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
        from warmcore.simcore.config.edit import edit_scenario, parse_set
        from warmcore.simcore.config.files import read_scenario_dict

        if not isinstance(source, Scenario | dict):
            source = read_scenario_dict(str(source))
        return edit_scenario(source, [(".".join(keys), value)
                                      for keys, value in map(parse_set, sets)])

    @classmethod
    def from_toml(cls, text: str | bytes) -> Scenario:
        """A scenario from TOML text (or the bytes of an uploaded file: UTF-8, at most
        MAX_FILE_BYTES)."""
        from warmcore.simcore.config.files import scenario_dict_of_text

        return validate(scenario_dict_of_text(text))

    def to_data(self) -> dict:
        """The scenario as plain data (what a TOML file holds; unset options left out)."""
        return self.model_dump(exclude_none=True)

    def to_toml(self) -> str:
        """TOML that ``Scenario.from_toml`` and ``warmcore run FILE`` read back to the
        same scenario."""
        import tomli_w

        return tomli_w.dumps(self.to_data())

    def edit(self, changes=None, /, *, strategy: str | None = None, seed: int | None = None,
             requests: int | None = None, duration_s: float | None = None,
             keep: Sequence[str] = ()) -> Scenario:
        """A new scenario with ``{dotted.path: value}`` changes (None: back to the
        default), and optionally another strategy, seed or run length. Changing the
        preset, the governor, the strategy or the workload kind resets what belongs to
        it (simcore.config.edit.OWNED; a strategy's tunables named in ``keep`` carry
        over), and what the same edit gives for it stays."""
        from warmcore.simcore.config.edit import edit_scenario

        return edit_scenario(self, changes, strategy=strategy, seed=seed, requests=requests,
                    duration_s=duration_s, keep=keep)

    with_ = edit

    def set(self, path: str, value) -> Scenario:
        """A new scenario with the value at the dotted ``path`` replaced (validated)."""
        return self.edit({path: value})


def files_named(model: BaseModel, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted path, value) of every field of ``model`` (and the tables inside it) that
    names a file to read (marked ``json_schema_extra=FILE``) and is set."""
    out = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        path = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            out += files_named(value, path + ".")
        elif value is not None and (info.json_schema_extra or {}).get("file"):
            out.append((path, value))
    return out


def validate(data: dict) -> Scenario:
    """A scenario's raw data as a Scenario, or one ConfigError at the path a user
    writes."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise config_error(e) from None
