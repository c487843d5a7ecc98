"""Scenario configuration: pydantic models with unknown keys forbidden.

A scenario is a TOML document (or a built-in one) plus ``--set PATH=VALUE``
overrides. Every error becomes one line naming the field and the reason
(``ConfigError``), which the CLI prints with exit code 2.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Pos = Annotated[float, Field(gt=0)]
NonNeg = Annotated[float, Field(ge=0)]
PosInt = Annotated[int, Field(gt=0)]
DistKind = Literal["deterministic", "exponential", "lognormal", "empirical"]


class ConfigError(ValueError):
    """A bad scenario: ``field`` is the dotted path, ``reason`` says what is wrong."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


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
    cores: PosInt | None = Field(default=None,
                                 description='cores per socket (CPUs, on the ideal machine)')
    threads_per_core: PosInt | None = None
    sockets: PosInt | None = None
    governor: str | None = None
    frequency_ghz: Pos | None = Field(default=None,
                                      description="the userspace governor's fixed clock")
    turbo: bool | None = None
    governor_params: dict[str, float] = {}
    overrides: dict[str, Any] = Field(
        default={}, description='any Preset field (models.presets.Preset, validated there)')
    effects: Effects = Effects()


class ServiceShape(Strict):
    """Service demand of one request: the consume (handle) step."""

    service: DistKind = "exponential"
    service_us: Pos = 100.0
    service_cv: Pos = Field(default=1.0, description='lognormal only')
    service_values_us: list[Pos] | None = Field(default=None, description='empirical only')
    # A connection hands the server one request at a time (HTTP/1.1): the next is
    # readable once the previous has been handled. Default: on for saturating
    # (pipelined) connections, off for the others.
    serial: bool | None = None

    @model_validator(mode="after")
    def _empirical_needs_values(self):
        if self.service == "empirical" and not self.service_values_us:
            raise ValueError("service_values_us: the empirical distribution needs values")
        return self


class OpenLoop(ServiceShape):
    """Requests at a set rate, whatever the responses (wrk2, Jetty Load Generator)."""

    kind: Literal["open"]
    arrival: Literal["poisson", "constant", "trace"] = "poisson"
    rate_per_s: Pos | None = None
    trace_file: str | None = None
    connections: PosInt = Field(default=1, description='requests spread over this many connections')

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
    clients: PosInt = 10
    think: DistKind = "exponential"
    think_us: NonNeg = 1000.0


class Saturating(ServiceShape):
    """K pipelined connections, each always with its next request ready."""

    kind: Literal["saturating"]
    connections: PosInt = 1


class Batch(ServiceShape):
    """N jobs released together at time 0; the run reports its makespan."""

    kind: Literal["batch"]
    jobs: PosInt = 8


class Connections(ServiceShape):
    """Many connections, each with its own Poisson stream of requests."""

    kind: Literal["connections"]
    connections: PosInt = 100
    rate_per_s: Pos = Field(default=1000.0, description='total over all connections')
    arrival: Literal["poisson", "constant"] = "poisson"


class Stream(ServiceShape):
    """producer -> server -> consumer messages; producer and consumer are co-located
    processes with their own CPU cost per message and affinity."""

    kind: Literal["stream"]
    rate_per_s: Pos | None = Field(default=None,
                                   description='None: the producer sends as fast as it can')
    window: PosInt = Field(default=64, description='messages in flight when saturating')
    producer_us: NonNeg = 2.0
    consumer_us: NonNeg = 2.0
    producers: PosInt = 1
    consumers: PosInt = 1


Workload = Annotated[OpenLoop | ClosedLoop | Saturating | Batch | Connections | Stream,
                     Field(discriminator="kind")]
WORKLOAD_KINDS = ("open", "closed", "saturating", "batch", "connections", "stream")


StepDist = Literal["deterministic", "exponential", "lognormal"]


class Step(Strict):
    """One step of a request program (docs/formats.md "Request programs"): exactly one
    of ``compute_us`` (compute with its own distribution), ``service_share`` (that
    fraction of the request's service demand, drawn from the workload's service
    distribution), ``call_us`` (a blocking call, its own distribution), ``acquire``
    or ``release`` (a permit of a named resource)."""

    compute_us: Pos | None = None
    service_share: Annotated[float, Field(gt=0, le=1)] | None = None
    call_us: Pos | None = None
    acquire: str | None = None
    release: str | None = None
    distribution: StepDist = Field(default="deterministic",
                                   description='of compute_us or call_us')
    cv: Pos = Field(default=1.0, description='lognormal only')

    @model_validator(mode="after")
    def _one_kind(self):
        given = [k for k in ("compute_us", "service_share", "call_us", "acquire", "release")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a program step is exactly one of compute_us, service_share, "
                             f"call_us, acquire, release (got {', '.join(given) or 'none'})")
        return self


class ResourceCfg(Strict):
    """A named semaphore or connection pool: ``permits`` held at once, a FIFO wait queue."""

    permits: PosInt
    op_us: NonNeg = Field(default=0.05, description='CPU per acquire or release (a CAS on '
                                                    'the contended state word + queue work)')


class WorkCfg(Strict):
    """Shape of the work per request, for the hardware model (all zero: pure compute)."""

    produce_us: NonNeg = Field(default=0.0,
                               description='parse/produce step on the producing thread')
    task_kib: NonNeg = Field(default=0.0,
                             description='request data written by producer, read by consumer')
    thread_kib: NonNeg = Field(default=0.0, description='private state the handling thread touches')
    code_kib: NonNeg = Field(default=0.0, description='code and read-mostly data per request')
    shared_kib: NonNeg = Field(default=0.0, description='shared structures every request touches')
    conn_kib: NonNeg = Field(default=0.0,
                             description='per-connection state (parser, buffers) every request')
                                   # of the connection reads and writes
    contended_ops: NonNeg = Field(
        default=0.0, description='read-modify-writes on one contended line per request')
    backend_us: NonNeg = Field(default=0.0,
                               description='blocking call inside the handler (exponential mean)')
    invocation: Literal["BLOCKING", "NON_BLOCKING", "EITHER"] = "BLOCKING"
    # Where the microseconds above were measured: None means on the simulated machine
    # itself; a preset name fixes the instruction counts (service_us x that preset's
    # instructions per us), so that changing machine.preset compares machines on the
    # same work.
    reference_preset: str | None = None
    # A request program: the handling as a sequence of steps (None: one consume step of
    # service_us, then backend_us if set).
    program: list[Step] | None = None

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
    threads: PosInt | None = None
    cpus: PosInt | list[Annotated[int, Field(ge=0)]] | None = None   # N -> CPUs 0..N-1


class StrategyCfg(Strict):
    name: str = "shared-queue"
    params: dict[str, float | int | str | bool] = {}


class RunCfg(Strict):
    requests: PosInt | None = None
    duration_s: Pos | None = None
    warmup: Annotated[float, Field(ge=0, lt=1)] = 0.1   # fraction of requests or duration
    replications: PosInt = 1
    trace_events: Annotated[int, Field(ge=0)] = 0
    max_in_flight: PosInt = Field(default=2_000_000,
                                  description='stop an overloaded run before memory runs out')

    @model_validator(mode="after")
    def _needs_a_limit(self):
        if self.requests is None and self.duration_s is None:
            raise ValueError("requests: a run needs a request limit or a duration "
                             "(run.requests or run.duration_s)")
        return self


class Scenario(Strict):
    """A validated scenario. Immutable in use: ``set`` and ``with_`` return new ones.

        sc = Scenario.load("pipeline")                 # built-in name, TOML path or dict
        sc2 = sc.set("machine.governor", "performance")
        sc3 = sc.with_({"machine.cores": 2}, strategy="pec", requests=5000)
        Scenario.from_toml(sc3.to_toml()) == sc3       # True
    """

    name: str = "scenario"
    description: str = ""
    seed: Annotated[int, Field(ge=0)] = 1
    machine: MachineCfg = MachineCfg()
    workload: Workload
    work: WorkCfg = WorkCfg()
    server: ProcessCfg = ProcessCfg()
    producer: ProcessCfg = ProcessCfg()
    consumer: ProcessCfg = ProcessCfg()
    strategy: StrategyCfg = StrategyCfg()
    resources: dict[str, ResourceCfg] = {}
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
    def from_toml(cls, text: str) -> Scenario:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError("scenario", f"not valid TOML ({e})") from None
        return validate(data)

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
              duration_s: float | None = None) -> Scenario:
        """A new scenario with ``{dotted.path: value}`` changes, and optionally another
        strategy (its tunables reset, as ``--strategy`` does), seed or run length."""
        data = self.to_data()
        for path, value in (changes or {}).items():
            set_path(data, path.split("."), copy.deepcopy(value))
        if strategy is not None:
            switch_strategy(data, strategy, keep=[p.split(".")[2] for p in changes or {}
                                                  if p.startswith("strategy.params.")])
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
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ConfigError("scenario", f"{p}: not valid TOML ({e})") from None
    except OSError as e:
        raise ConfigError("scenario", f"{p}: cannot read ({e.strerror})") from None


def parse_set(assignment: str) -> tuple[list[str], object]:
    """``a.b.c=VALUE`` -> (['a','b','c'], value); VALUE is read as TOML, else as a string."""
    if "=" not in assignment:
        raise ConfigError("--set", f"{assignment!r} is not PATH=VALUE")
    path, raw = assignment.split("=", 1)
    keys = path.strip().split(".")
    if not all(keys):
        raise ConfigError("--set", f"{path!r} is not a dotted path")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
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
    st = data.setdefault("strategy", {})
    if st.get("name", "shared-queue") != name:
        st["params"] = {k: v for k, v in st.get("params", {}).items() if k in keep}
    st["name"] = name


def set_run_limit(data: dict, requests: int | None = None,
                  duration_s: float | None = None) -> None:
    """A request limit replaces the scenario's duration and the other way round."""
    run = data.setdefault("run", {})
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
        raise _first_error(e) from None


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
            data.setdefault("run", {})[key] = value
    set_run_limit(data, requests=run_overrides.get("requests"),
                  duration_s=run_overrides.get("duration_s"))
    return validate(data)


def _first_error(e: ValidationError) -> ConfigError:
    err = e.errors()[0]
    loc = [str(x) for x in err["loc"]]
    # Drop the discriminator tag pydantic puts in the path of a tagged union.
    loc = [x for i, x in enumerate(loc) if not (i > 0 and loc[i - 1] == "workload"
                                                  and x in WORKLOAD_KINDS)]
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
        # model validators name their own field as "field: reason"
        head, sep, tail = msg.partition(": ")
        if sep and " " not in head:
            loc.append(head)
            msg = tail
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "union_tag_invalid":
        msg = f"unknown workload kind; known: {', '.join(WORKLOAD_KINDS)}"
    elif err["type"] == "union_tag_not_found":
        loc.append("kind")
        msg = f"missing; one of {', '.join(WORKLOAD_KINDS)}"
    elif "input" in err and err["type"] not in ("missing",) and not (
            err["type"] == "value_error" and isinstance(err["input"], dict)):
        # (a whole table's validator names its field itself: no dump of the table)
        msg = f"{msg} (got {err['input']!r})"
    return ConfigError(".".join(loc) or "scenario", msg)
