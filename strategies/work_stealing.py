"""work-stealing: per-worker run queues with stealing, after Tokio's multi-thread
scheduler and Go's runtime (with ForkJoinPool's LIFO owner order as an option).

Model (sources: tokio/src/runtime/scheduler/multi_thread/{worker,queue,idle}.rs,
go/src/runtime/proc.go, java.util.concurrent.ForkJoinPool):

* N workers (default one per server CPU), each with a bounded local queue
  (``capacity`` 256 = Tokio LOCAL_QUEUE_CAPACITY, Go len(p.runq)). A push to a
  full queue moves its oldest half (128) plus the new task to the global
  inject queue (Tokio ``push_overflow``, Go ``runqputslow``).
* Arrivals go to the inject queue (a task scheduled from outside the runtime:
  Tokio ``push_remote_task``); with ``arrivals="connection"`` they go to the
  local queue of the worker owning the connection (``conn.id % N``), as if
  that worker's I/O driver had woken them.
* Tasks. With ``split`` (default) a request is two tasks: its produce (parse)
  segment runs as one task, which at its end wakes a second task, the consume
  (handle) segment: "a task that wakes another task". Without ``split`` (or
  with no produce segment) one task runs both.
* A worker's next task (Tokio ``Core::next_task``, Go ``schedule``): every
  ``global_queue_interval`` ticks (61) the inject queue first; else the LIFO
  slot / runnext, then the local queue (``mode`` "fifo": oldest first, Tokio
  and Go and ForkJoinPool asyncMode; "lifo": newest first, ForkJoinPool's
  default owner order); then a batch from the inject queue of
  min(len/N + 1, capacity/2) tasks (Tokio; Go ``globrunqget``), the first run
  at once and the rest put in the local queue.
* Stealing (Tokio ``steal_work``/``steal_into``, Go ``runqsteal``): a worker
  with nothing becomes a *searcher* unless half the workers already search
  (Tokio ``transition_worker_to_searching``: refuse if 2*searching >= N; Go
  the same against busy Ps), picks a random start (stream "steal") and takes
  from the first non-empty victim ceil(k/2) of its k queued tasks from the
  head (``n - n/2`` in both Tokio and Go; ``steal="one"`` takes one, as a
  ForkJoinPool thief does), runs the last of them and queues the rest; then
  falls back on the inject queue. A steal costs ``steal_us`` of CPU plus
  ``steal_ops`` contended read-modify-writes on the victim's queue line (Tokio
  claims the batch with one CAS on the victim's head and releases it with a
  second).
* Parking and notification (Tokio ``idle.rs``): a worker that finds nothing
  parks. New work in a queue notifies one parked worker (most recently parked
  first) only when nobody is searching; the woken worker starts as a searcher.
  A searcher that finds work and was the last searcher notifies another
  parked worker (the wake-up chain that spreads work); the last searcher to
  park re-checks every queue first.
* Locality (``locality``):
  - "lifo-slot" (Tokio, default on): a task scheduled by a worker (the woken
    continuation) goes to that worker's LIFO slot, displacing the previous
    occupant to the back of the local queue; it runs next on that worker,
    cannot be stolen, and at most ``max_lifo_polls`` (3,
    MAX_LIFO_POLLS_PER_TICK) LIFO tasks run in a row, after which the slot is
    disabled until it empties. A worker that fills an empty slot does not
    notify anyone (Tokio ``schedule_local``).
  - "runnext" (Go): the same slot, but the runtime wakes an idle P on every
    ready (``ready`` -> ``wakep``), a runnext task inherits its waker's time
    slice (no tick), and a thief that finds every queue empty may take a
    running victim's runnext after backing off ``runnext_backoff_us`` (3 us,
    ``usleep(3)`` in ``runqgrab``).
  - "none": the continuation goes to the back of the local queue.

Simplified: the search is instantaneous (all victims are probed at one instant,
no CPU charged for a failed probe); Tokio's coop budget (128 polls), the I/O
driver and timers are not modelled; Go's four steal rounds are one pass;
Go's runnext chains are not capped (Go bounds them by the 10 ms time slice
they inherit). The inject queue's mutex is not charged.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from pydantic import Field

from warmcore.simcore.rng import block_sampler
from warmcore.simcore.work import SHARED, Footprint, Segment
from warmcore.strategies.base import StrategyParams, Strategy, register

PRODUCE, CONSUME, WHOLE = 0, 1, 2


class Params(StrategyParams):
    workers: int | None = Field(default=None, gt=0, description='default: one per server CPU')
    mode: Literal["fifo", "lifo"] = Field(default="fifo",
                                          description='owner pop order (Tokio/Go: fifo)')
    locality: Literal["none", "lifo-slot", "runnext"] = Field(default="lifo-slot",
                                                              description='Tokio default: on')
    arrivals: Literal["inject", "connection"] = "inject"
    split: bool = Field(default=True, description='parse and handle as two tasks (continuation)')
    capacity: int = Field(default=256, ge=2, description='LOCAL_QUEUE_CAPACITY')
    global_queue_interval: int = Field(default=61, gt=0, description='Tokio/Go: 61')
    max_lifo_polls: int = Field(default=3, gt=0, description='MAX_LIFO_POLLS_PER_TICK')
    steal: Literal["half", "one"] = "half"
    steal_us: float = Field(default=0.1, ge=0,
                            description='CPU of one steal: 2 CAS + copying pointers')
    steal_ops: int = Field(default=2, ge=0, description="contended RMWs on the victim's queue head")
    runnext_backoff_us: float = Field(default=3.0, ge=0, description='Go runqgrab usleep(3)')


class Task:
    """One schedulable unit: a request's produce, consume or both."""

    __slots__ = ("kind", "req", "stolen", "waker")

    def __init__(self, req, kind: int, waker: int = -1):
        self.req = req
        self.kind = kind
        self.waker = waker        # worker index that woke this continuation
        self.stolen = False


class Worker:
    __slots__ = ("current", "index", "lifo", "lifo_enabled", "local", "parked", "queue_line",
                 "searching", "thread", "tick")

    def __init__(self, index: int):
        self.index = index
        self.local: deque[Task] = deque()
        self.lifo: Task | None = None      # LIFO slot (Tokio) or runnext (Go)
        self.lifo_enabled = True
        self.tick = 0
        self.searching = False
        self.parked = False
        self.current: Task | None = None
        self.thread = None
        self.queue_line = f"ws-queue-{index}"


@register
class WorkStealing(Strategy):
    name = "work-stealing"
    summary = "per-worker deques with steal-half, global inject queue, LIFO slot (Tokio/Go)"
    # The real run queues refuse nothing: Tokio's inject queue is an unbounded linked
    # list that a full local queue spills into (scheduler/multi_thread/queue.rs
    # push_overflow), Go's global run queue too (runtime/proc.go globrunqput), and
    # ForkJoinPool's queues double (WorkQueue.growArray) up to MAXIMUM_QUEUE_CAPACITY =
    # 1 << 26, a guard against runaway programs, not a tunable (JDK 8+).
    no_queue_capacity = ("Tokio's and Go's global queues are unbounded "
                         "lists a full local queue spills into, ForkJoinPool's double "
                         "(growArray) up to a fixed runaway guard of 1 << 26 tasks")
    Params = Params

    def start(self) -> None:
        p = self.p
        n = p.workers or self.default_threads()
        self.workers = [Worker(i) for i in range(n)]
        self.inject: deque[Task] = deque()
        self.parked: list[Worker] = []     # Tokio's sleepers: a stack
        self.n_searching = 0
        self.ips = self.ctx.machine.nominal_ips
        self.victim_start = block_sampler(self.ctx.streams.generator("steal"),
                                          lambda g, k: g.integers(0, n, k))
        self.stats = {"steals": 0, "stolen_tasks": 0, "stolen_continuations": 0,
                      "stolen_lifo": 0, "runnext_steals": 0, "overflows": 0,
                      "global_polls": 0, "global_batches": 0, "lifo_polls": 0,
                      "notifies": 0, "parks": 0}
        self.log: list | None = None       # tests: set to [] to record (worker, source, rid, kind)
        self.split = p.split
        self.uses_slot = p.locality != "none"
        for w in self.workers:
            w.thread = self.kernel.spawn(self.ctx.server, f"ws-worker-{w.index}",
                                         lambda t, w=w: self._run(t, w))

    # -- arrivals ----------------------------------------------------------------------

    def on_arrival(self, conn) -> None:
        req = conn.take()
        if req is None:           # nothing readable (a serial connection still busy)
            return
        task = Task(req, PRODUCE if self.split and req.produce is not None else WHOLE)
        if self.p.arrivals == "inject":
            self.inject.append(task)
            self._notify(None)
            return
        w = self.workers[conn.id % len(self.workers)]
        self._push_back(w, task)
        if w.parked:               # its own driver saw the readiness: it wakes up
            self.parked.remove(w)
            w.parked = False
            self.kernel.wake(w.thread)
        else:
            self._notify(None)

    # -- queues ------------------------------------------------------------------------

    def _push_back(self, w: Worker, task: Task) -> None:
        """Tokio push_back_or_overflow: a full queue spills its oldest half and the
        new task into the inject queue."""
        q = w.local
        cap = self.p.capacity
        if len(q) >= cap:
            moved = [q.popleft() for _ in range(cap // 2)]
            self.inject.extend(moved)
            self.inject.append(task)
            self.stats["overflows"] += 1
        else:
            q.append(task)

    def _pop_local(self, w: Worker) -> Task | None:
        q = w.local
        if not q:
            return None
        return q.popleft() if self.p.mode == "fifo" else q.pop()

    def _schedule_local(self, w: Worker, task: Task, t) -> None:
        """A worker wakes a task (Tokio schedule_local, Go runqput(next=true))."""
        loc = self.p.locality
        if loc == "lifo-slot" and w.lifo_enabled:
            prev = w.lifo
            w.lifo = task
            if prev is not None:
                self._push_back(w, prev)
                self._notify(t)
        elif loc == "runnext":
            prev = w.lifo
            w.lifo = task
            if prev is not None:
                self._push_back(w, prev)
            self._notify(t)          # Go: ready() always calls wakep()
        else:
            self._push_back(w, task)
            self._notify(t)

    def _next_task(self, w: Worker) -> tuple[Task | None, str]:
        """Tokio Core::next_task / Go schedule: (task, source)."""
        inject = self.inject
        if w.tick % self.p.global_queue_interval == 0 and inject:
            self.stats["global_polls"] += 1
            w.tick += 1
            return inject.popleft(), "global"
        if w.lifo is not None:
            task = w.lifo
            w.lifo = None
            if self.p.locality == "runnext":
                return task, "runnext"          # inherits the time slice: no tick
            w.tick += 1
            return task, "lifo"
        task = self._pop_local(w)
        if task is not None:
            w.tick += 1
            return task, "local"
        if inject:
            n_w = len(self.workers)
            cap = min(self.p.capacity - len(w.local), self.p.capacity // 2)
            n = max(1, min(len(inject) // n_w + 1, cap))
            task = inject.popleft()
            for _ in range(min(n - 1, len(inject))):
                w.local.append(inject.popleft())
            self.stats["global_batches"] += 1
            w.tick += 1
            return task, "global-batch"
        return None, ""

    def steal_from(self, thief: Worker, victim: Worker) -> tuple[Task, int]:
        """Take ceil(k/2) of the victim's k queued tasks (``n - n/2`` in Tokio
        steal_into2 and Go runqgrab), oldest first; the last one taken is returned to
        run now and the others go to the thief's queue. The LIFO slot is never
        touched."""
        q = victim.local
        k = len(q)
        m = k - k // 2 if self.p.steal == "half" else 1
        batch = [q.popleft() for _ in range(m)]
        ret = batch.pop()
        thief.local.extend(batch)
        st = self.stats
        st["steals"] += 1
        st["stolen_tasks"] += m
        for task in (*batch, ret):
            task.stolen = True
            if task.kind == CONSUME:
                st["stolen_continuations"] += 1
        return ret, m

    # -- searching, parking, notifying ----------------------------------------------------

    def _notify(self, waker) -> None:
        """Tokio notify_parked: wake one parked worker if nobody is searching."""
        if self.n_searching == 0 and self.parked:
            w = self.parked.pop()
            w.parked = False
            w.searching = True
            self.n_searching += 1
            self.stats["notifies"] += 1
            self.kernel.wake(w.thread, waker)

    def _end_search(self, w: Worker, t) -> None:
        """Tokio transition_from_searching: the last searcher to find work wakes
        another worker to keep the search going."""
        w.searching = False
        self.n_searching -= 1
        if self.n_searching == 0:
            self._notify(t)

    def _work_pending(self) -> bool:
        return bool(self.inject) or any(v.local for v in self.workers)

    def _steal_work(self, w: Worker):
        """(task, victim, n) from a random victim, else (task, None, 0) from the
        inject queue, else None. Marks ``w`` searching (if allowed)."""
        n = len(self.workers)
        if not w.searching:
            if 2 * self.n_searching >= n:
                return None
            w.searching = True
            self.n_searching += 1
        start = self.victim_start()
        workers = self.workers
        for i in range(n):
            v = workers[(start + i) % n]
            if v is not w and v.local:
                task, m = self.steal_from(w, v)
                return task, v, m
        if self.inject:
            w.tick += 1
            return self.inject.popleft(), None, 0
        return None

    def _runnext_victim(self, w: Worker) -> Worker | None:
        for v in self.workers:
            if v is not w and v.lifo is not None and v.current is not None:
                return v
        return None

    # -- the worker ------------------------------------------------------------------------

    def _run(self, t, w: Worker):
        ips = self.ips
        steal_ins = self.p.steal_us * 1e-6 * ips
        backoff = self.p.runnext_backoff_us * 1e-6
        st = self.stats
        while True:
            task, source = self._next_task(w)
            if task is None:
                got = self._steal_work(w)
                if got is not None:
                    task, victim, m = got
                    source = "steal" if victim is not None else "global"
                    if victim is not None and (steal_ins or self.p.steal_ops):
                        yield t.run(Segment(
                            steal_ins,
                            (Footprint(SHARED, victim.queue_line, 1 + m / 8, True),),
                            self.p.steal_ops, victim.queue_line, label="steal"))
                elif self.p.locality == "runnext" and w.searching:
                    v = self._runnext_victim(w)
                    if v is not None:
                        if backoff:
                            yield t.block(backoff)
                        if v.lifo is not None:
                            task = v.lifo
                            v.lifo = None
                            task.stolen = True
                            st["runnext_steals"] += 1
                            st["stolen_lifo"] += 1
                            if task.kind == CONSUME:
                                st["stolen_continuations"] += 1
                            source = "steal-runnext"
                        else:
                            continue
            if task is None:
                if w.lifo is not None or w.local:     # Tokio transition_to_parked: has_tasks
                    continue
                last = False
                if w.searching:
                    w.searching = False
                    self.n_searching -= 1
                    last = self.n_searching == 0
                if last and self._work_pending():
                    # notify_if_work_pending would wake a parked worker: this one searches on
                    w.searching = True
                    self.n_searching += 1
                    continue
                w.parked = True
                self.parked.append(w)
                st["parks"] += 1
                t.syscall("futex_wait")    # Parker::park: a condvar wait (FUTEX_WAIT)
                yield t.park()
                continue
            if w.searching:
                self._end_search(w, t)
            yield from self._poll(t, w, task, source)
            if self.p.locality == "lifo-slot":
                # Tokio run_task: poll the LIFO slot, at most max_lifo_polls in a row.
                polls = 0
                while True:
                    nxt = w.lifo
                    if nxt is None:
                        w.lifo_enabled = True
                        break
                    w.lifo = None
                    polls += 1
                    st["lifo_polls"] += 1
                    if polls >= self.p.max_lifo_polls:
                        w.lifo_enabled = False
                    yield from self._poll(t, w, nxt, "lifo")

    def _poll(self, t, w: Worker, task: Task, source: str):
        req = task.req
        w.current = task
        if self.log is not None:
            self.log.append((w.index, source, req.id, task.kind))
        kind = task.kind
        if kind != CONSUME:
            self.read(t)                   # the task's first poll reads the request
        if kind == PRODUCE:
            yield t.run(req.produce, req)
            w.current = None
            self._schedule_local(w, Task(req, CONSUME, w.index), t)
            return
        if kind == WHOLE and req.produce is not None:
            yield t.run(req.produce, req)
        yield t.run(req.consume, req)
        w.current = None
        self.ctx.done(req, t)

    # -- inspection ----------------------------------------------------------------------

    def outstanding(self) -> list:
        """Every request the strategy holds (queued, in a slot or running)."""
        reqs = [task.req for task in self.inject]
        for w in self.workers:
            reqs.extend(task.req for task in w.local)
            if w.lifo is not None:
                reqs.append(w.lifo.req)
            if w.current is not None:
                reqs.append(w.current.req)
        return reqs
