"""Open loops: requests at a set rate whatever the responses (wrk2, Jetty's load
generator), Poisson, constant, bursty (MMPP, batches: simcore/arrivals.py) or from a
trace of arrival times, over one connection
or many (``open``), and many keep-alive connections with a Poisson stream each
(``connections``). Two workload kinds, one generator."""

from __future__ import annotations

from array import array
from collections import deque
from typing import Annotated, Literal

from pydantic import Field, model_validator

from warmcore.models.workloads.base import Connection, Workload, notify_after_append
from warmcore.simcore.config import (
    MAX_HORIZON_S,
    MAX_RATE,
    MAX_TRACE_ARRIVALS,
    MAX_TRACE_BYTES,
    FILE,
    ConfigError,
    KeepAlive,
    ServiceShape,
    WorkloadKind,
    read_text,
    register_workload,
    short_repr,
)
from warmcore.simcore.arrivals import batch_gaps, mmpp_gaps
from warmcore.simcore.config.schema import MAX_COUNT, Count, Micros
from warmcore.simcore.distributions import sampler
from warmcore.simcore.kernel import clock, fast_timeout
from warmcore.simcore.work import Request


# The bursty arrivals' tunables, shared by the open and connections kinds. The MMPP's
# defaults are illustrative, not measured: an on/off source (an interrupted Poisson
# process) with equal 10 ms periods, so that it sends at twice its mean rate while on;
# its index of dispersion is then 1 + rate x 10 ms.
MMPP_ON_FIELD = Field(default=10_000.0, description=(
    "mmpp: mean length of an on (burst) period (exponential)"))
MMPP_OFF_FIELD = Field(default=10_000.0, description=(
    "mmpp: mean length of an off (quiet) period (exponential)"))
MMPP_OFF_FRACTION_FIELD = Field(default=0.0, description=(
    "mmpp: rate while off as a fraction of the rate while on (0: none, on/off)"))
# Illustrative too: a client that sends a page's 4 requests at once on average.
BATCH_SIZE_FIELD = Field(default=4.0, description=(
    "batch: mean number of requests arriving at one instant"))
BATCH_SIZES_FIELD = Field(default="geometric", description=(
    "batch: size distribution (geometric on 1, 2, ... or always batch_size)"))
OffFraction = Annotated[float, Field(ge=0, lt=1)]
BatchSize = Annotated[float, Field(ge=1, le=MAX_COUNT)]


def _whole_constant_batches(cfg) -> None:
    if cfg.batch_sizes == "constant" and cfg.batch_size != round(cfg.batch_size):
        raise ConfigError("batch_size", f"constant batches hold a whole number of "
                          f"requests (got {cfg.batch_size:g})")


class OpenLoopCfg(KeepAlive):
    """Requests at a set rate, whatever the responses (wrk2, Jetty Load Generator)."""

    kind: Literal["open"]
    arrival: Literal["poisson", "constant", "trace", "mmpp", "batch"] = Field(
        default="poisson", description=(
            "poisson, constant, trace (times from trace_file), mmpp (two-state "
            "Markov-modulated Poisson: on/off bursts), batch (Poisson batches, M^X)"))
    rate_per_s: Annotated[float, Field(gt=0, le=MAX_RATE)] | None = Field(
        default=None, description="long-run mean rate of requests (every arrival but trace)")
    mmpp_on_us: Micros = MMPP_ON_FIELD
    mmpp_off_us: Micros = MMPP_OFF_FIELD
    mmpp_off_fraction: OffFraction = MMPP_OFF_FRACTION_FIELD
    batch_size: BatchSize = BATCH_SIZE_FIELD
    batch_sizes: Literal["geometric", "constant"] = BATCH_SIZES_FIELD
    trace_file: str | None = Field(default=None, json_schema_extra=FILE, description=(
        "arrival times, one per line (docs/formats.md); with arrival = 'trace'"))
    connections: Count = Field(default=1, description='requests spread over this many connections')

    @model_validator(mode="after")
    def _rate_or_trace(self):
        if self.arrival == "trace":
            if not self.trace_file:
                raise ConfigError("trace_file", "arrival 'trace' needs a trace_file")
        elif self.trace_file is not None:       # (it would be ignored)
            raise ConfigError("trace_file", f"read only with arrival = 'trace' (arrival is "
                              f"{self.arrival!r})")
        elif self.rate_per_s is None:
            raise ConfigError("rate_per_s", "an open-loop workload needs a rate")
        _whole_constant_batches(self)
        return self


class InjectCfg(ServiceShape):
    """Events handed to the server in memory at a set rate, no sockets: the LMAX
    latency test's publisher injecting an event every microsecond
    (``ThrottledOnePublisherToThreeProcessorPipelineLatencyTest``, PAUSE_NANOS = 1000;
    LMAX-Exchange/disruptor src/docs/asciidoc/en/disruptor.adoc "Latency Performance
    Testing")."""

    kind: Literal["inject"]
    arrival: Literal["poisson", "constant"] = "constant"
    rate_per_s: Annotated[float, Field(gt=0, le=MAX_RATE)] = Field(
        default=1e6, description="events per second (1e6: one every microsecond)")
    connections: Count = Field(default=1, description='events spread over this many sources')


class ConnectionsCfg(KeepAlive):
    """Many connections, each with its own Poisson stream of requests. Bursty arrivals
    (mmpp, batch) modulate the streams together: one on/off environment (a flash
    crowd) switches every connection's stream at once, and the superposed stream is
    the MMPP or batch process at the total rate, each request on a connection chosen
    at random (as the open kind spreads its own), so each connection sees that MMPP
    thinned (an MMPP with the same periods) and a batch may span connections."""

    kind: Literal["connections"]
    connections: Count = 100
    rate_per_s: Annotated[float, Field(gt=0, le=MAX_RATE)] = Field(
        default=1000.0, description='total over all connections')
    arrival: Literal["poisson", "constant", "mmpp", "batch"] = Field(
        default="poisson", description=(
            "poisson, constant, mmpp (every connection's stream switched on and off "
            "together), batch (Poisson batches over the connections, M^X)"))
    mmpp_on_us: Micros = MMPP_ON_FIELD
    mmpp_off_us: Micros = MMPP_OFF_FIELD
    mmpp_off_fraction: OffFraction = MMPP_OFF_FRACTION_FIELD
    batch_size: BatchSize = BATCH_SIZE_FIELD
    batch_sizes: Literal["geometric", "constant"] = BATCH_SIZES_FIELD

    @model_validator(mode="after")
    def _whole_batches(self):
        _whole_constant_batches(self)
        return self


class OpenLoop(Workload):
    """Poisson or constant-rate arrivals, or a trace of arrival times; requests go to
    connections at random (Poisson superposition: one stream at the total rate with
    uniformly chosen connections is the same as one Poisson stream per connection)."""

    def __init__(self, ctx):
        wl = ctx.cfg.workload
        super().__init__(ctx, wl.connections)
        g = ctx.streams.generator("arrivals")
        self.times = None
        if wl.arrival == "trace":
            self.times = read_trace(wl.trace_file)
            _longer_than_warmup(self.times, wl.trace_file, ctx.recorder)
        elif wl.arrival == "poisson":
            self.gap = sampler("exponential", 1.0 / wl.rate_per_s, g)
        elif wl.arrival == "mmpp":
            self.gap = mmpp_gaps(g, wl.rate_per_s, wl.mmpp_on_us * 1e-6,
                                 wl.mmpp_off_us * 1e-6, wl.mmpp_off_fraction)
        elif wl.arrival == "batch":
            self.gap = batch_gaps(g, wl.rate_per_s, wl.batch_size, wl.batch_sizes)
        else:
            self.gap = sampler("deterministic", 1.0 / wl.rate_per_s, g)
        n = wl.connections
        self.pick = sampler("empirical", 0, ctx.streams.generator("connections"),
                            values_s=list(range(n))) if n > 1 else None
        # One request in flight per connection (wrk, wrk2): the ones due meanwhile wait
        # at the client; ``unanswered[c]`` from a send until its response.
        self.held = None
        # The client slot each pick names: its connection (a list of its own once a
        # client may close its connection and open another, timeout_closes).
        self.slots = self.connections
        self.closes = False
        # (the open and connections kinds; injected events are never held at a client)
        if self.serial and not getattr(wl, "pipelined", True):
            self.held = [deque() for _ in range(n)]
            self.unanswered = [False] * n
            self.turnaround_s = wl.client_turnaround_us * 1e-6
            if wl.timeout_closes:
                self.closes = True
                self.slots = list(self.connections)
                self.slot_of = list(range(n))       # by connection id
                self.sent: list = [None] * n        # by connection id: the request in flight

    # Event elision. An arrival needs an event of its own only if something reacts
    # to it at that instant: an idle thread to wake. A strategy that can tell says so
    # with ``arrival_wakes()``; while it answers False, arrivals are materialised
    # later, in time order and with their own timestamps, by ``catch_up(now)``, which
    # the recorder calls before each of its events and the strategy calls (through
    # ``ctx.arrivals_may_wake``) when a thread goes idle. The arrival times, service
    # demands and every result are the same as with one event per arrival; only
    # events that change nothing are left out.

    def start(self) -> None:
        if self.times is not None:
            self.env.process(self._trace_arrivals())
            return
        self.t_next = self.gap()
        self.rec = self.ctx.recorder
        self.rec.next_due = self.t_next
        self.pending = False
        # Bound once: _deliver_next runs once per request.
        self.make = self.factory.make
        self.arrive = self.ctx.recorder.arrive
        self.on_arrival = self.ctx.strategy.on_arrival
        self.wakes = self.ctx.strategy.arrival_wakes
        if self.closes:
            # A client that closes on a timeout acts at its requests' instants (it
            # sends a held request on a new connection): each arrival is delivered at
            # its own time, never deferred until a server thread goes idle.
            self.wakes = lambda: True
        self.ctx.recorder.catch_up = self.catch_up
        self.ctx.arrivals_may_wake = self.poke
        self._schedule()

    def _schedule(self) -> None:
        wakes = self.wakes        # (a local: see _deliver_next)
        if not self.pending and wakes():
            self.pending = True
            env = self.env
            # An arrival already due (deferred) gets an event now, so it is delivered
            # after the caller has finished parking, never in the middle of it.
            delay = self.t_next - clock(env)
            fast_timeout(env, delay if delay > 0.0 else 0.0).callbacks.append(
                self._arrival_event)

    def _arrival_event(self, _ev) -> None:
        self.pending = False
        k = self.ctx.kernel
        k.collect_wakes()
        self._deliver_next()
        now = clock(self.env)
        if self.t_next <= now:
            self.catch_up(now)
        self._schedule()
        k.run_collected()

    def _deliver_next(self) -> None:
        # The callables bound once in start() are read into locals before each call:
        # ``self.gap()`` on an instance attribute is a method lookup that CPython 3.11
        # does not specialise (its attribute read is), about 75 instructions a call.
        t = self.t_next
        gap = self.gap
        self.t_next = self.rec.next_due = t + gap()
        pick = self.pick
        c = self.slots[int(pick())] if pick else self.slots[0]
        make = self.make
        req = make(t, c.id)
        arrive = self.arrive
        arrive(req)
        if self.timeout_s:
            self.watch(req)
        if not c.serial:            # notify_after_append, inlined for the common case
            c.inbox.append(req)
            on_arrival = self.on_arrival
            on_arrival(c)
        else:
            self._hand_over(c, req)

    def deliver(self, req: Request, conn: Connection) -> None:
        self.ctx.recorder.arrive(req)
        if self.timeout_s:
            self.watch(req)
        self._hand_over(conn, req)

    def _hand_over(self, c: Connection, req: Request) -> None:
        """Send an arrived request on ``c``, or, one request in flight per connection,
        hold it at the client while ``c`` awaits a response."""
        if self.held is not None:
            if self.unanswered[c.id]:
                self.held[c.id].append(req)     # waits for the previous response
                return
            self.unanswered[c.id] = True
        self._send_held(c, req)

    def release(self, req: Request) -> None:
        if self.held is None:
            super().release(req)
            return
        conn = self.connections[req.conn]
        conn.busy = False
        if self.closes:
            self.sent[conn.id] = None
        self._send_next_held(conn)

    def _send_next_held(self, conn: Connection) -> None:
        """``conn`` has no request in flight: its client sends the next it holds,
        client_turnaround_us from now."""
        held = self.held[conn.id]
        if not held:
            self.unanswered[conn.id] = False
            return
        nxt = held.popleft()
        if self.turnaround_s > 0.0:
            self.env.timeout(self.turnaround_s).callbacks.append(
                lambda _e: self._send_held_later(conn, nxt))
        else:
            self._send_held(conn, nxt)

    def _send_held(self, conn: Connection, req: Request) -> None:
        """The request reaches the server's socket."""
        if self.closes:
            if req.id not in self.waiting:  # timed out on its way out: not sent
                self.ctx.recorder.abandon(req)
                self._send_next_held(conn)
                return
            req.conn = conn.id              # (it may have been due on a closed one)
            self.sent[conn.id] = req
        if notify_after_append(conn, req):
            self.ctx.strategy.on_arrival(conn)

    # -- a client that gives up closes its connection (workload.timeout_closes) -------
    #
    # wrk and wrk2 do not: a response later than --timeout is counted as a timeout
    # when it arrives (wrk.c response_complete: stats_record fails) or, in wrk2, by
    # check_timeouts every 2 s, and the connection keeps waiting for it; they
    # reconnect only on a socket error or a response without keep-alive
    # (reconnect_socket). An HTTP client with a request timeout gives up instead:
    # Jetty's HttpClient aborts the exchange and closes its HTTP/1.1 connection (a
    # response may still come on it), and aborts the requests still queued for a
    # connection (HttpDestination); the JDK's java.net.http.HttpClient likewise
    # opens a new connection after an HttpTimeoutException.

    def gave_up(self, req: Request) -> None:
        if not self.closes or req.id in self.waiting:
            return
        cid = req.conn
        if self.sent[cid] is req:           # in flight: close and reconnect
            self.sent[cid] = None
            self._reconnect(self.connections[cid])
            return
        held = self.held[cid]
        if req in held:                     # still at the client: never sent
            held.remove(req)
            self.ctx.recorder.abandon(req)

    def _reconnect(self, old: Connection) -> None:
        """``old``'s client opens a new connection (the server still holds ``old`` and
        finishes what it has on it); its waiting requests move over, the first sent
        client_turnaround_us later (the new connection's handshake)."""
        new = Connection(len(self.connections), self.serial, self.received)
        self.connections.append(new)
        slot = self.slot_of[old.id]
        self.slot_of.append(slot)
        self.slots[slot] = new
        self.sent.append(None)
        held = self.held[old.id]
        self.held[old.id] = deque()
        self.held.append(held)
        self.unanswered.append(False)
        for req in held:
            req.conn = new.id
        if held:
            self.unanswered[new.id] = True
            k = self.ctx.kernel             # a timer's callback: as _arrival_event
            k.collect_wakes()
            self._send_next_held(new)
            k.run_collected()

    def _send_held_later(self, conn: Connection, req: Request) -> None:
        k = self.ctx.kernel                     # outside any thread: as _arrival_event
        k.collect_wakes()
        self._send_held(conn, req)
        k.run_collected()

    def catch_up(self, now: float) -> None:
        """Deliver every arrival due by ``now`` that had no event of its own; stop once
        the run has overflowed (run.max_in_flight): an overload of any size then costs
        at most that many requests of memory."""
        rec = self.rec
        while self.t_next <= now and not rec.overflowed:
            self._deliver_next()

    # A thread went idle: the next arrival may now wake it. (No delivery here: the
    # caller is between registering as idle and parking, and must not be woken.)
    poke = _schedule

    def _trace_arrivals(self):
        env = self.env
        make = self.factory.make
        pick = self.pick
        rec = self.ctx.recorder
        for t in self.times:
            if t > env.now:
                yield env.timeout(t - env.now)
            if rec.overflowed:          # arrivals at one instant never advance time
                return
            c = self.slots[int(pick())] if pick else self.slots[0]
            self.deliver(make(env.now, c.id), c)
        self.ctx.recorder.source_exhausted = True


def read_trace(path: str) -> array:
    """Arrival times in seconds, one per line (blank lines and # comments skipped),
    finite, non-decreasing, within MAX_HORIZON_S, at most MAX_TRACE_ARRIVALS of them
    (held as 8-byte floats)."""
    field = "workload.trace_file"
    text = read_text(path, field, MAX_TRACE_BYTES)
    times = array("d")
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip().split(",")[0]
        if not line:
            continue
        try:
            t = float(line)
        except ValueError:
            raise ConfigError(field, f"{path}:{n}: {short_repr(line)} is not a time in "
                                     "seconds") from None
        if not 0 <= t <= MAX_HORIZON_S:
            raise ConfigError(field, f"{path}:{n}: {short_repr(line)} is not a time in "
                                     f"seconds from 0 to {MAX_HORIZON_S:g}")
        if times and t < times[-1]:
            raise ConfigError(field, f"{path}:{n}: times must be non-decreasing")
        if len(times) == MAX_TRACE_ARRIVALS:
            raise ConfigError(field, f"{path}:{n}: more than {MAX_TRACE_ARRIVALS:,} arrivals")
        times.append(t)
    if not times:
        raise ConfigError(field, f"{path} holds no arrival times")
    return times


def _longer_than_warmup(times: array, path: str, rec) -> None:
    """A trace must reach past the warm-up, or the run would measure no request."""
    field = "workload.trace_file"
    if rec.warmup_s is None and len(times) <= rec.warmup_requests:
        raise ConfigError(field, f"{path} holds {len(times):,} arrivals, no more than the "
                          f"{rec.warmup_requests:,} of the warm-up (run.warmup x "
                          "run.requests): no request would be measured")
    if rec.warmup_s is not None and times[-1] < rec.warmup_s:
        raise ConfigError(field, f"{path} ends at {times[-1]:g} s, within the warm-up of "
                          f"{rec.warmup_s:g} s: no request would be measured")


def _rate(workload) -> float | None:
    """What an open loop offers: its rate (None for a trace: set by the file)."""
    return getattr(workload, "rate_per_s", None)


register_workload(WorkloadKind(
    "open", OpenLoopCfg, OpenLoop, load_field="rate_per_s", offered_rate=_rate,
    needs_rate=True, description="requests at a set rate, or from a trace, over connections"))
register_workload(WorkloadKind(
    "inject", InjectCfg, OpenLoop, load_field="rate_per_s", offered_rate=_rate,
    sockets=lambda _wl: False,
    description="events handed over in memory at a set rate, no sockets (LMAX's tests)"))
register_workload(WorkloadKind(
    "connections", ConnectionsCfg, OpenLoop, load_field="rate_per_s", offered_rate=_rate,
    description="many connections, each with its own Poisson stream"))
