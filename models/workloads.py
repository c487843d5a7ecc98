"""Load generators: where requests come from and what each one asks of the CPU.

Requests arrive on *connections*. A workload appends a request to its
connection's inbox and tells the strategy (``strategy.on_arrival(conn)``),
the way a NIC and epoll make a socket readable; the strategy decides which
thread produces (parses) and which consumes (handles) it, and calls
``ctx.done(req, thread)`` when it has been handled.

Kinds (simcore.config): open loop (Poisson, constant or a trace of arrival
times, over one or many connections), closed loop (clients with think time),
saturating pipelined connections (each keeps ``depth`` requests in flight,
like a load tool feeding as many pipelined requests as the server takes), a
batch released at once, and producer -> server -> consumer message streams
whose producer and consumer are processes of their own, with CPU cost and
affinity.
"""

from __future__ import annotations

from array import array
from collections import deque

from warmcore.models.distributions import sampler
from warmcore.simcore.config import (
    MAX_HORIZON_S,
    MAX_TRACE_ARRIVALS,
    MAX_TRACE_BYTES,
    has_sockets,
    ConfigError,
    read_text,
)
from warmcore.simcore.kernel import clock, fast_timeout
from warmcore.simcore.work import (
    CODE,
    SHARED,
    STEP_ACQUIRE,
    STEP_CALL,
    STEP_RELEASE,
    STEP_RUN,
    TASK,
    THREAD,
    Footprint,
    Program,
    Request,
    Segment,
)

LINE = 64


class Connection:
    """A client connection: the requests that have arrived on it and not yet been
    taken by the server. A *serial* connection (HTTP/1.1, pipelined or not) hands
    the server one request at a time: the next is readable only once the previous
    has been handled, and the strategy hears of it then (``on_arrival``)."""

    __slots__ = ("busy", "data", "id", "inbox", "owner", "serial")

    def __init__(self, cid: int, serial: bool = False):
        self.id = cid
        self.inbox: deque[Request] = deque()
        self.owner = None     # the strategy may pin a connection to a loop or thread
        self.data = None
        self.serial = serial
        self.busy = False     # serial: a request of this connection is being handled

    def take(self) -> Request | None:
        """The next request to produce, or None (nothing arrived, or busy)."""
        if self.busy or not self.inbox:
            return None
        if self.serial:
            self.busy = True
        return self.inbox.popleft()


def notify_after_append(conn: Connection, req: Request) -> bool:
    """Queue ``req`` on ``conn``; should the strategy be told? Each notification
    stands for exactly one request that ``take`` will return: every arrival on an
    ordinary connection; on a serial one, only an arrival that makes an idle,
    empty connection readable (the rest are announced one by one as the
    connection is released)."""
    inbox = conn.inbox
    inbox.append(req)
    if conn.serial:
        return not conn.busy and len(inbox) == 1
    return True


def work_ips(ctx) -> float:
    """Instructions per microsecond-of-work second: the reference preset's if the
    scenario names one (work.reference_preset), else the simulated machine's."""
    ref = ctx.cfg.work.reference_preset
    if ref is None:
        return ctx.machine.nominal_ips
    from warmcore.models.presets import get_preset, nominal_ips

    try:
        return nominal_ips(get_preset(ref))
    except KeyError as e:
        raise ConfigError("work.reference_preset", e.args[0]) from None


_new_tuple = tuple.__new__


class RequestFactory:
    """Builds requests and their produce/consume segments from the scenario's
    service distribution and work shape."""

    def __init__(self, ctx):
        wl = ctx.cfg.workload
        work = ctx.cfg.work
        self.ips = work_ips(ctx)
        streams = ctx.streams
        self.service = sampler(wl.service, wl.service_us * 1e-6, streams.generator("service"),
                               cv=wl.service_cv,
                               values_s=[v * 1e-6 for v in wl.service_values_us or ()])
        self.backend = (sampler("exponential", work.backend_us * 1e-6,
                                streams.generator("backend")) if work.backend_us else None)
        self.produce_ins = work.produce_us * 1e-6 * self.ips
        self.task_lines = work.task_kib * 1024 / LINE
        thread_lines = work.thread_kib * 1024 / LINE
        code_lines = work.code_kib * 1024 / LINE
        shared_lines = work.shared_kib * 1024 / LINE
        common = []
        if thread_lines:
            common.append(Footprint(THREAD, None, thread_lines, True))
        if code_lines:
            common.append(Footprint(CODE, "handler", code_lines, False))
        if shared_lines:
            common.append(Footprint(SHARED, "shared", shared_lines, True))
        self.common = tuple(common)
        self.parse_common = tuple(f for f in common if f.kind != SHARED)
        # Per-connection state (parser, channel, buffers): reused by every request of
        # the connection and written by whoever produces or consumes it.
        self.conn_lines = work.conn_kib * 1024 / LINE
        self.conn_rest: dict[int, tuple] = {}     # conn -> _conn_parts(conn)
        self.contended_ops = round(work.contended_ops)
        self.invocation = work.invocation
        self.next_id = 0
        self.program = self._program_plan(work.program, streams) if work.program else None
        self.pure = not (self.produce_ins or self.task_lines or self.common or self.conn_lines
                         or self.contended_ops or self.backend
                         or self.invocation != "BLOCKING" or self.program)

    def _program_plan(self, steps, streams):
        """(kind, how to make its argument) per step; each compute or call step with a
        distribution of its own draws from a stream of its own ("program-<i>")."""
        plan = []
        for i, st in enumerate(steps):
            if st.compute_us is not None or st.call_us is not None:
                mean = (st.compute_us if st.compute_us is not None else st.call_us) * 1e-6
                draw = sampler(st.distribution, mean, streams.generator(f"program-{i}"),
                               cv=st.cv)
                plan.append((STEP_RUN if st.compute_us is not None else STEP_CALL, draw))
            elif st.service_share is not None:
                plan.append((STEP_RUN, st.service_share))
            elif st.acquire is not None:
                plan.append((STEP_ACQUIRE, st.acquire))
            else:
                plan.append((STEP_RELEASE, st.release))
        return plan

    def _make_program(self, s: float, footprint: tuple) -> Program:
        """The consume step as a program: ``s`` is the request's service demand (s);
        the request's footprint and contended ops go with its first compute step."""
        steps = []
        fp = footprint
        ops = self.contended_ops
        for kind, arg in self.program:
            if kind == STEP_RUN:
                secs = s * arg if type(arg) is float else arg()
                seg = Segment(secs * self.ips, fp, ops, "contended" if ops else None, 0.0,
                              "consume")
                fp, ops = (), 0
                steps.append((STEP_RUN, seg))
            elif kind == STEP_CALL:
                steps.append((STEP_CALL, arg()))
            else:
                steps.append((kind, arg))
        return Program(tuple(steps))

    def make(self, now: float, conn: int = 0) -> Request:
        rid = self.next_id
        self.next_id = rid + 1
        req = Request(rid, now, conn)
        if self.pure:
            # Pure compute (the queueing-theory case): one bare segment.
            req.consume = Segment(self.service() * self.ips, (), 0, None, 0.0, "consume")
            return req
        s = self.service()
        req.invocation = self.invocation
        lines = self.task_lines
        # Footprints built with tuple.__new__ (a NamedTuple's own __new__ is a Python
        # function), and the connection's part joined with the common ones once per
        # connection: the same tuples, fewer calls per request.
        task = (_new_tuple(Footprint, (TASK, rid, lines, True)),) if lines else ()
        rest = self.conn_rest.get(conn)
        if rest is None:
            rest = self.conn_rest[conn] = self._conn_parts(conn)
        parse_rest, consume_rest = rest
        if self.produce_ins:
            req.produce = Segment(self.produce_ins, task + parse_rest, label="produce")
            task = (_new_tuple(Footprint, (TASK, rid, lines, False)),) if lines else ()
        if self.program is not None:
            req.consume = self._make_program(s, task + consume_rest)
            return req
        req.consume = Segment(s * self.ips, task + consume_rest, self.contended_ops,
                              "contended" if self.contended_ops else None,
                              self.backend() if self.backend else 0.0, "consume")
        return req

    def _conn_parts(self, conn: int) -> tuple:
        """(produce's, consume's) footprints after the task's: the connection's state
        (if any) and the common ones."""
        cstate = ((Footprint(SHARED, ("conn", conn), self.conn_lines, True),)
                  if self.conn_lines else ())
        return cstate + self.parse_common, cstate + self.common


class Workload:
    """Base: a set of connections feeding a strategy."""

    def __init__(self, ctx, n_connections: int):
        self.ctx = ctx
        self.env = ctx.env
        self.factory = RequestFactory(ctx)
        wl = ctx.cfg.workload
        self.serial = wl.serial if wl.serial is not None else wl.kind == "saturating"
        self.connections = [Connection(i, self.serial) for i in range(n_connections)]
        # The thread that reports a request done writes its response to the socket
        # (models/syscalls.py: loopback TCP, the peer's receive softirq included); only
        # workloads with sockets (simcore.config.has_sockets).
        self.write_s = (ctx.machine.syscall_cost("write", kib=ctx.cfg.work.response_kib)
                        if has_sockets(wl) else 0.0)
        if type(self).finished is Workload.finished and not self.serial and not self.write_s:
            self.finished = ctx.recorder.complete   # one call fewer per request

    def start(self) -> None:
        raise NotImplementedError

    def deliver(self, req: Request, conn: Connection) -> None:
        """A request reaches the server: it is in the system from now on."""
        ctx = self.ctx
        ctx.recorder.arrive(req)
        if notify_after_append(conn, req):
            ctx.strategy.on_arrival(conn)

    def finished(self, req: Request, thread) -> None:
        """The server handled ``req`` (called through ctx.done): ``thread`` writes the
        response."""
        if self.write_s:
            thread.charge_io(self.write_s)
        self.ctx.recorder.complete(req)
        self.release(req)

    def release(self, req: Request) -> None:
        """A serial connection may hand over its next request."""
        if self.serial:
            conn = self.connections[req.conn]
            conn.busy = False
            if conn.inbox:
                self.ctx.strategy.on_arrival(conn)


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
        elif wl.arrival == "poisson":
            self.gap = sampler("exponential", 1.0 / wl.rate_per_s, g)
        else:
            self.gap = sampler("deterministic", 1.0 / wl.rate_per_s, g)
        n = wl.connections
        self.pick = sampler("empirical", 0, ctx.streams.generator("connections"),
                            values_s=list(range(n))) if n > 1 else None
        # One request in flight per connection (wrk, wrk2): the ones due meanwhile wait
        # at the client; ``unanswered[c]`` from a send until its response.
        self.held = None
        if self.serial and not wl.pipelined:      # the open and connections kinds
            self.held = [deque() for _ in range(n)]
            self.unanswered = [False] * n
            self.turnaround_s = wl.client_turnaround_us * 1e-6

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
        self.ctx.recorder.catch_up = self.catch_up
        self.ctx.arrivals_may_wake = self.poke
        self._schedule()

    def _schedule(self) -> None:
        if not self.pending and self.wakes():
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
        t = self.t_next
        self.t_next = self.rec.next_due = t + self.gap()
        c = self.connections[int(self.pick())] if self.pick else self.connections[0]
        req = self.make(t, c.id)
        self.arrive(req)
        if not c.serial:            # notify_after_append, inlined for the common case
            c.inbox.append(req)
            self.on_arrival(c)
        else:
            self._hand_over(c, req)

    def deliver(self, req: Request, conn: Connection) -> None:
        self.ctx.recorder.arrive(req)
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
        if notify_after_append(conn, req):
            self.ctx.strategy.on_arrival(conn)

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
        conns = self.connections
        pick = self.pick
        rec = self.ctx.recorder
        for t in self.times:
            if t > env.now:
                yield env.timeout(t - env.now)
            if rec.overflowed:          # arrivals at one instant never advance time
                return
            c = conns[int(pick())] if pick else conns[0]
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
            raise ConfigError(field, f"{path}:{n}: {line!r} is not a time in seconds") from None
        if not 0 <= t <= MAX_HORIZON_S:
            raise ConfigError(field, f"{path}:{n}: {line!r} is not a time in seconds from 0 to "
                                     f"{MAX_HORIZON_S:g}")
        if times and t < times[-1]:
            raise ConfigError(field, f"{path}:{n}: times must be non-decreasing")
        if len(times) == MAX_TRACE_ARRIVALS:
            raise ConfigError(field, f"{path}:{n}: more than {MAX_TRACE_ARRIVALS:,} arrivals")
        times.append(t)
    if not times:
        raise ConfigError(field, f"{path} holds no arrival times")
    return times


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
        self.ctx.recorder.complete(req)
        conn = self.connections[req.conn]
        self.release(req)
        self._later(self.think() if self.think else 0.0, conn)


class Batches(Workload):
    """Saturating connections that send requests in batches and wait for a whole
    batch's responses before the next (jetty-util ``EWYKBenchmark.testStrategy``:
    submit r futures to the connection, run the strategy, get every result). The
    requests of a batch are independent (each has its own future)."""

    def __init__(self, ctx):
        wl = ctx.cfg.workload
        super().__init__(ctx, wl.connections)
        sizes = wl.batches
        gen = ctx.streams.generator("batch")
        self.batch_size = lambda: sizes[int(gen.integers(len(sizes)))]
        self.outstanding = [0] * wl.connections

    def start(self) -> None:
        for conn in self.connections:
            self._send_batch(conn)

    def _send_batch(self, conn: Connection) -> None:
        n = self.batch_size()
        self.outstanding[conn.id] = n
        now = self.env.now
        for _ in range(n):
            self.deliver(self.factory.make(now, conn.id), conn)

    def finished(self, req: Request, thread) -> None:
        if self.write_s:
            thread.charge_io(self.write_s)
        self.ctx.recorder.complete(req)
        self.release(req)
        left = self.outstanding[req.conn] - 1
        self.outstanding[req.conn] = left
        if left == 0:
            self._send_batch(self.connections[req.conn])


def saturating(ctx) -> Workload:
    wl = ctx.cfg.workload
    if wl.batches:
        return Batches(ctx)
    return ClosedLoop(ctx, clients=wl.connections * wl.depth, think=None, per_conn=wl.depth)


class Batch(Workload):
    """N jobs released together at time 0, one per connection."""

    def __init__(self, ctx):
        super().__init__(ctx, ctx.cfg.workload.jobs)

    def start(self) -> None:
        make = self.factory.make
        for c in self.connections:
            self.deliver(make(0.0, c.id), c)
        self.ctx.recorder.source_exhausted = True


class Stream(Workload):
    """producer -> server -> consumer. Producer threads (their own process, with
    ``producer.cpus`` affinity) spend ``producer_us`` writing each message, at a
    set rate or as fast as a window of ``window`` messages in flight allows; the
    server's strategy handles it; consumer threads (``consumer.cpus``) spend
    ``consumer_us`` reading it. Latency runs from the start of production to
    the end of consumption."""

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


def build_workload(ctx) -> Workload:
    kind = ctx.cfg.workload.kind
    if kind in ("open", "connections"):
        return OpenLoop(ctx)
    if kind == "closed":
        return ClosedLoop(ctx)
    if kind == "saturating":
        return saturating(ctx)
    if kind == "batch":
        return Batch(ctx)
    if kind == "stream":
        return Stream(ctx)
    raise ConfigError("workload.kind", f"unknown kind {kind!r}")
