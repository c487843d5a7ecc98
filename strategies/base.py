"""The strategy interface: who consumes each task that arrives.

A strategy is a small object (Jetty's ExecutionStrategy in spirit). It owns the
server's threads, which it spawns in ``start`` through the simulated OS, and it
is told when a connection becomes readable (``on_arrival``). It reports each
handled request with ``ctx.done(req, thread)``; the workload then charges that
thread the ``write`` of the response (every workload but a batch, which has no
sockets). A strategy charges the other system calls its real counterpart makes
(``thread.syscall``; reads with ``self.read(t, n)``): docs/strategies.md lists them.

It reaches the machine only through these documented calls (simcore/kernel/threads.py):

* ``ctx.kernel.spawn(process, name, body, cpus=None)``: a new thread running the
  generator ``body(thread)``; ``ctx.kernel.wake(thread, waker)``: futex wake;
* on a thread: ``run(segment, req)`` (a segment of work on its CPU), ``park(timeout)``
  (futex wait), ``block(seconds)`` (blocking I/O), ``yield_cpu()`` (sched_yield),
  ``charge_kernel(seconds)`` (kernel work such as starting a thread, paid before
  its next segment), ``syscall(name, n=0, kib=0)`` (one system call's kernel work
  as system time, priced by the machine: read/write on a loopback TCP socket of
  ``kib`` KiB, epoll_wait returning ``n`` events, poll of ``n`` descriptors,
  epoll_ctl, futex_wait, futex_wake, sched_yield; models/syscalls.py),
  ``charge_io(seconds)`` (system time of the server's own I/O, priced with
  ``machine.syscall_cost``: the request's compute, not its dispatch),
  ``cpu_has_waiters()`` (does anyone wait for this CPU?), ``spin(line, ipc,
  yielding)`` (a spin wait on ``ctx.kernel.spin_line(name)`` that a writer ends with
  ``line.written(thread)``: simcore/kernel/spin.py);
* ``ctx.kernel.charge_blocked_io(req, seconds)``: time a request spent blocked in
  I/O on a thread the strategy unmounted it from (virtual threads);
* ``ctx.kernel.backend``: the backend on this machine (``work.backend_mock_us``) or
  None. A kernel thread's blocking call (a segment's ``block_s``) goes through it
  by itself; a strategy that waits for a backend call without blocking a thread
  calls ``backend.call(thread, seconds, on_answer)`` (the call's loopback write
  from ``thread``; ``on_answer()`` runs in the answer's receive softirq, so its
  wake-ups are sync ones) and charges ``backend.answer_read_s`` to the thread
  that reads the answer (event-loop); one that times its calls itself declares
  ``own_backend_calls = True`` and is refused with a backend on the machine.

Everything the engine and the tests rely on is declared below.

Each strategy declares its tunables as a pydantic model ``Params`` (unknown or
impossible values are rejected with the field's name) and registers itself by
name with ``@register``.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from warmcore.simcore.config import (
    MAX_COUNT,
    MAX_US,
    has_sockets,
    ConfigError,
    config_error,
    over_cap,
)

REGISTRY: dict[str, type[Strategy]] = {}


class StrategyParams(BaseModel):
    """Base of every strategy's ``Params``: unknown keys, coercion ("4" for 4), NaN
    and infinity rejected; a count without its own bound is capped at MAX_COUNT and
    a time (us or s) at MAX_US, warmcore's documented caps (docs/formats.md)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    GENERIC_CAPS: ClassVar[dict] = {int: MAX_COUNT, float: MAX_US}

    @model_validator(mode="after")
    def _capped(self):
        if (err := over_cap(self, self.GENERIC_CAPS)) is not None:
            raise err
        return self


NoParams = StrategyParams


class Strategy:
    name = ""
    summary = ""
    Params: type[BaseModel] = NoParams
    # Why the strategy has no strategy.params.queue_capacity (issue 31): what its real
    # class does instead of refusing work when its queue is long. Only strategies whose
    # Params lack the field need it; the refusal names the strategies that have one.
    no_queue_capacity = "its model has no queue that refuses work"
    # True for a strategy that times its backend calls itself (not through a blocked
    # kernel thread nor ctx.kernel.backend): refused with a backend on the machine.
    own_backend_calls = False
    # True for a strategy that makes a call plan's calls (work.backend_calls); the
    # others are refused with one.
    makes_call_plans = False

    def __init__(self, ctx, params: dict):
        self.ctx = ctx
        self.env = ctx.env
        self.kernel = ctx.kernel
        # The read system call that brings requests in from a socket (loopback TCP,
        # models/syscalls.py); only workloads with sockets (has_sockets). read_s[n]: a
        # read returning n requests (n = 0: EAGAIN), for the n a strategy uses.
        m = ctx.machine
        self.sockets = has_sockets(ctx.cfg.workload)
        self._req_kib = ctx.cfg.work.request_kib
        self._read_s = [m.syscall_cost("read", kib=n * self._req_kib) if self.sockets else 0.0
                        for n in range(2)]
        self.p = self.validate_params(params, ctx.cfg.strategy.shared_params)

    @classmethod
    def validate_params(cls, params: dict, shared: bool = False):
        """The strategy's tunables validated (its ``Params``), or a ConfigError naming
        the field where a scenario holds it (``strategy.params.NAME``), the reason and
        the strategy. ``shared``: the params are the scenario's setup
        (``strategy.shared_params``), and this strategy takes only those it has."""
        if shared:
            params = {k: v for k, v in params.items() if k in cls.Params.model_fields}
        if "queue_capacity" in params and "queue_capacity" not in cls.Params.model_fields:
            raise ConfigError("strategy.params.queue_capacity",
                              f"strategy {cls.name} cannot bound its queue: "
                              f"{cls.no_queue_capacity}; a bounded queue is modelled by "
                              f"{', '.join(bounded_strategies())}")
        try:
            return cls.Params.model_validate(params)
        except ValidationError as e:
            err = config_error(e, prefix="strategy.params")
            raise ConfigError(err.field, f"{err.reason} (strategy {cls.name})") from None

    def read(self, t, requests: int = 1) -> None:
        """Thread ``t`` reads ``requests`` requests from a socket with one read system
        call (0: a read that finds nothing, EAGAIN), charged as system time; free for a
        batch. The response's write is charged by the workload (``ctx.done``)."""
        if requests < 2:
            t.charge_io(self._read_s[requests])
        elif self.sockets:
            t.syscall("read", kib=requests * self._req_kib)

    def start(self) -> None:
        """Spawn the server's threads (the run has not started yet)."""
        raise NotImplementedError

    def on_arrival(self, conn) -> None:
        """Connection ``conn`` became readable: ``conn.take()`` gives its request."""
        raise NotImplementedError

    def arrival_wakes(self) -> bool:
        """Would an arrival now make a thread act at once? Strategies that can answer
        False (all their threads busy) let the workload skip the arrival's event;
        they must then call ``ctx.arrivals_may_wake()`` whenever a thread goes idle."""
        return True

    def outstanding(self) -> list:
        """The requests this strategy holds and has not finished (queued, or taken
        by a thread but not done), for the conservation checks of the tests.
        Strategies that keep requests outside their connections implement it."""
        raise NotImplementedError(f"{self.name} does not list its outstanding requests")

    def default_threads(self) -> int:
        """Server threads when the scenario does not say: one per server CPU."""
        return self.ctx.cfg.server.threads or len(self.ctx.server_cpus)


def bounded_strategies() -> list[str]:
    """The registered strategies whose tunables include queue_capacity, by name."""
    return sorted(name for name, cls in REGISTRY.items()
                  if "queue_capacity" in cls.Params.model_fields
                  and not getattr(cls, "refuses_queue_capacity", False))


def register(cls: type[Strategy]) -> type[Strategy]:
    REGISTRY[cls.name] = cls
    return cls


def get_strategy(name: str) -> type[Strategy]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError("strategy.name", f"unknown strategy {name!r}; known: "
                          f"{', '.join(sorted(REGISTRY))}") from None
