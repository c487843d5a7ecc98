"""Thread pools, the machinery strategies build on (not strategies themselves).

Two real pools, written from their sources, and what they share (``WorkerPool``):
a FIFO job queue; idle workers parked on a futex and signalled longest-waiting
first (a ``Condition``'s wait queue), with a taker that leaves jobs behind passing
the signal on; and kernel threads that pay their start (``thread_start_us``,
~140 us, docs/strategies.md) before their first segment.

* ``QueuedThreadPool`` and ``ReservedThreadExecutor``: Jetty's (jetty-util
  ``org.eclipse.jetty.util.thread``; Jetty 10/11/12 unless said), used by the
  Jetty strategies (pc, pec, epc, adaptive; ``strategies/jetty_pool.py``).
* ``ThreadPoolExecutor``: java.util.concurrent's over a lock-protected
  LinkedBlockingQueue (optionally with Tomcat's TaskQueue rule), used by
  ``thread-pool`` (Tomcat NIO) and the event loop's offload pool.

QueuedThreadPool (``QueuedThreadPool.java``)
    maxThreads 200, minThreads 8, idleTimeout 60 s, an unbounded job queue
    (``BlockingArrayQueue``). ``execute(job)`` does what the ``_counts``
    (threads, idle) CAS loop does: ``idle`` counts idle threads minus queued
    jobs; a thread is started when ``idle <= 0 and threads < maxThreads``.
    The queue (``BlockingArrayQueue`` below) keeps its jobs behind two parking
    ``ReentrantLock``s; it signals its ``notEmpty`` condition only when it goes
    from empty to non-empty, and a poller that leaves jobs behind signals the
    next waiter, so a burst is picked up by a chain of wake-ups, each paid by the
    previous taker. Waiters are woken in FIFO order (a ``Condition`` signals its
    longest waiter), each through a hand-off of the head lock. A thread that finds no
    job exits if threads > minThreads and no thread has exited for
    idleTimeout (``_lastShrink``: at most one exit per idleTimeout, pool-wide);
    otherwise it polls with idleTimeout and re-checks. ``doStart`` starts
    minThreads threads.

ReservedThreadExecutor (``ReservedThreadExecutor.java``)
    capacity max(1, ceilToNextPowerOfTwo(min(cpus, maxThreads/8))) (Jetty 12,
    ``reservedThreads(executor, -1)``) or max(1, min(cpus, maxThreads/10))
    (Jetty 9.4). ``tryExecute(task)`` hands the task to a parked reserved
    thread if there is one (most recently parked first: a SynchronousQueue/
    stack hand-off) and, if that leaves none, starts reserving another; if
    none is parked it starts reserving one (a pool job that parks as a
    reserved thread; at most capacity reserved + starting) and fails. A
    reserved thread that ran its task reserves itself again; one idle for the
    idle timeout leaves (goes back to the pool).
"""

from __future__ import annotations

import contextlib
from collections import deque

from warmcore.simcore.kernel import Semaphore
from warmcore.simcore.work import SHARED, Footprint, Segment


class WorkerPool:
    """What the pools share: a job queue, parked workers signalled in FIFO order, and
    starting kernel threads that pay their start cost."""

    def __init__(self, kernel, process, name: str, thread_start_us: float):
        self.kernel = kernel
        self.process = process
        self.name = name
        self.thread_start_s = thread_start_us * 1e-6
        self.jobs: deque = deque()
        self.waiters: deque = deque()   # parked idle workers, longest waiting first
        self.n_started = 0

    def start_worker(self, body, name: str | None = None):
        """A new kernel thread running ``body(thread)``; it pays the thread start
        before its first segment."""
        self.n_started += 1
        th = self.kernel.spawn(self.process, name or f"{self.name}-{self.n_started}", body)
        th.charge_kernel(self.thread_start_s)
        return th

    def signal_one(self, waker) -> None:
        """Condition.signal(): wake the longest-waiting parked worker, if any (the
        waker pays the futex syscall)."""
        if self.waiters:
            self.kernel.wake(self.waiters.popleft(), waker)


# Cache lines a lock acquisition touches: the lock word (AQS state) and the
# queue head/tail node it guards.
LOCK_LINES = 2
# Cache lines of an epoll instance a syscall touches (eventpoll struct, ready list).
EPOLL_LINES = 2



# JDK 8 AbstractQueuedSynchronizer: the lines another core wrote that a contender
# touches between NonfairSync.lock's failed CAS and parkAndCheckInterrupt (addWaiter's
# compareAndSetTail, shouldParkAfterFailedAcquire's compareAndSetWaitStatus(pred,
# 0, SIGNAL), acquireQueued's second tryAcquire reading state); ParkingLock.
AQS_TRIPS_BEFORE_PARK = 3


# ``_size``, the AtomicInteger a poller reads under the head lock: BlockingArrayQueue's
# field initialisers (jetty-util, Jetty 9 to 12) allocate ``_indexes``, ``_tailLock``,
# ``_size``, ``_headLock`` and ``_notEmpty`` one after the other, so the 16-byte
# ``_size`` sits on the tail lock's lines (written by ``offer``'s
# ``getAndIncrement``, under the tail lock) and the ``_notEmpty`` ConditionObject
# (``firstWaiter``, ``lastWaiter``) on the head lock's: one line of the tail lock's
# footprint, read; the condition is in the head lock's.
SIZE_LINES = 1


def lock_segment(ips: float, lock_us: float, line: str, label: str = "lock",
                 also: tuple = ()) -> Segment:
    """One lock acquisition (a CAS on the lock word, contended across cores) plus
    the instructions of the queue operation under the lock; ``also``: footprints of
    the other lines that operation writes."""
    return Segment(lock_us * 1e-6 * ips,
                   (Footprint(SHARED, line, LOCK_LINES, True), *also),
                   contended_ops=1, contended_line=line, label=label)


def queue_lock(kernel, name: str, ips: float, lock_us: float, label: str,
               also: tuple = ()):
    """A queue's ReentrantLock (``ParkingLock``): ``lock_us`` of work under it on its
    own line ``name`` (none if 0), writing the lines ``also`` too, and that line
    watched by contenders before they park (JDK 8 AQS acquire)."""
    seg = lock_segment(ips, lock_us, name, label, also) if lock_us > 0 else None
    return ParkingLock(name, seg, line=kernel.spin_line(name))


def syscall_segment(ips: float, us: float, key: str, label: str) -> Segment | None:
    """An epoll syscall on epoll instance ``key``; None when its cost is set to 0."""
    if us <= 0:
        return None
    return Segment(us * 1e-6 * ips, (Footprint(SHARED, key, EPOLL_LINES, True),), label=label)


class PoolThread:
    """Per-thread state (Thread.data) of a pool thread: its timed waits and hand-offs."""

    __slots__ = ("expire", "nb", "since", "task", "timed_out", "timeout", "timer_at", "waiting")

    def __init__(self):
        self.waiting = False
        self.since = 0.0
        self.timeout = 0.0
        self.expire = None       # called when the wait times out (leaves the waiter list)
        self.timer_at = None     # fire time of the earliest pending timer
        self.timed_out = False
        self.task = None         # (body, req) handed to a reserved thread
        self.nb = False          # inside a non-blocking invocation (Invocable)


class TimedWaits:
    """park() with a timeout: one lazy timer per thread, re-armed only when it fires
    before the current wait's deadline (so a 60 s timeout costs no event per park)."""

    def __init__(self, env, kernel):
        self.env = env
        self.kernel = kernel

    def wait(self, t, timeout: float, expire, settle: Segment | None = None):
        """Park ``t`` (already registered by the caller in its waiter list) until woken
        or until ``timeout`` s pass; on timeout ``expire(t)`` unregisters it and
        ``t.data.timed_out`` is True when the generator returns. With ``settle`` (a
        segment of no instructions) the futex_wait's kernel work runs on ``t``'s CPU
        before it sleeps, as in Linux (futex_wait_setup, queue, schedule() on the
        waiter's CPU), instead of at its next segment after the wake-up."""
        st = t.data
        now = self.env.now
        st.waiting = True
        st.since = now
        st.timeout = timeout
        st.expire = expire
        st.timed_out = False
        if timeout > 0:
            self._arm(t, st, now + timeout)
        t.syscall("futex_wait")     # Condition.awaitNanos -> LockSupport.parkNanos -> FUTEX_WAIT
        if settle is not None:
            t.prepare_park()        # queued on the futex while the kernel work runs
            yield t.run(settle)
            if timeout > 0 and self.env.now >= st.since + timeout - 1e-12 \
                    and t.cancel_park():
                st.expire(t)        # the timeout passed before it slept: ETIMEDOUT
                st.timed_out = True
                st.waiting = False
                return
        yield t.park()
        st.waiting = False

    def _arm(self, t, st, deadline: float) -> None:
        if st.timer_at is not None and st.timer_at <= deadline:
            return
        st.timer_at = deadline
        self.env.timeout(max(0.0, deadline - self.env.now)).callbacks.append(
            lambda _e: self._fire(t, st, deadline))

    def _fire(self, t, st, at: float) -> None:
        if st.timer_at == at:
            st.timer_at = None
        if not st.waiting:
            return
        deadline = st.since + st.timeout
        if self.env.now < deadline - 1e-12:
            self._arm(t, st, deadline)
        elif t.is_parked:
            st.expire(t)
            st.timed_out = True
            self.kernel.wake(t)
        # else: still settling (wait() checks the deadline before it parks) or already
        # woken: nothing to do. Re-arming at now would spin at this instant forever.


class ParkingLock:
    """A java.util.concurrent ``ReentrantLock`` as constructed by default (nonfair,
    AQS in JDK 8): ``lock`` takes it at once when it is free, barging past queued
    threads; otherwise the thread queues and parks (``futex_wait``); ``unlock`` frees
    it and wakes the first queued thread unless a woken one has not retried yet
    (AQS clears the head's SIGNAL when it unparks it); the woken thread retries and,
    if a barger took the lock meanwhile, parks again at the head
    (``simcore.kernel.Semaphore`` with ``fair=False``). The CAS on the lock's state
    word and the work under the lock are ``seg`` (a contended read-modify-write on
    the lock's line, priced by the hardware model), run while the lock is held.

    With ``line`` (a ``SpinLine`` for the lock's state word), a contender does what
    JDK 8's AQS does between its failed CAS and its park, and sees an unlock in the
    meantime (``acquire_window``). Every lock of the strategies has one (the
    BlockingArrayQueue's two, ArrayBlockingQueue's); without it a contender parks at
    once, which the step-by-step tests of tests/test_pool_queue.py compute by hand.
    Either way the kernel work a thread owes is done before it takes the lock
    (``Thread.settle_owed``)."""

    __slots__ = ("holder_cpu", "line", "sem", "seg")

    def __init__(self, name: str, seg: Segment | None, line=None):
        self.sem = Semaphore(name, 1, fair=False)
        self.seg = seg
        self.line = line
        self.holder_cpu = -1          # the CPU that last took it (wrote its state word)

    def lock(self, t, req=None):
        """Generator: acquire on thread ``t``, then run the work under the lock."""
        yield from self.acquire(t)
        if self.seg is not None:
            yield t.run(self.seg, req)

    def acquire(self, t):
        """Generator: acquire on thread ``t`` (the caller runs the work under it); a
        contender parks as AQS's parkAndCheckInterrupt does (FUTEX_WAIT)."""
        return self._take(t, woken=False)

    def _take(self, t, woken: bool):
        """Generator: ``acquire`` (``woken`` False) or ``relock`` (True); the taker's
        CPU is the one that last wrote the state word."""
        if self.line is None:
            yield from t.take_permit(self.sem, woken)
        else:
            yield from self._acquire_as_aqs(t, woken)
        self.holder_cpu = t.cpu.id if t.cpu is not None else -1

    def _acquire_as_aqs(self, t, woken: bool):
        """Generator: JDK 8 AQS ``acquire`` / ``acquireQueued`` with a ``line``: the
        retries before each park (``_retry_before_park``), and the kernel work where
        Linux runs it: FUTEX_WAIT's on the contender's CPU before it sleeps (queued
        on the futex meanwhile, so an unlock then makes the park return at once), the
        return from schedule() after its wake-up before its ``tryAcquire``, so a woken
        thread does not hold the lock through its own switch back."""
        sem = self.sem
        yield from t.settle_owed()          # kernel work before the CAS (Thread.settle_owed)
        if woken or not sem.free:
            yield from self._retry_before_park(t)
        got = sem.retry(t) if woken else sem.acquire(t)
        while not got:
            t.syscall("futex_wait")
            t.prepare_park()
            yield from t.settle_owed()      # FUTEX_WAIT's work, queued, before it sleeps
            yield t.park()
            yield from t.settle_owed()      # the return from schedule()
            yield from self._retry_before_park(t)
            got = sem.retry(t)

    def _retry_before_park(self, t):
        """Generator: JDK 8 ``AbstractQueuedSynchronizer.acquire`` after
        ``NonfairSync.lock``'s failed CAS: ``tryAcquire``, ``addWaiter`` (a CAS on
        the queue's tail), then ``acquireQueued``'s first turn (``tryAcquire``;
        ``shouldParkAfterFailedAcquire`` CASes the predecessor's waitStatus to SIGNAL
        and returns false) and its second (``tryAcquire``), and only then
        ``parkAndCheckInterrupt``. An unlock meanwhile (the holder's store to the
        state word) is seen when that line reaches the contender, and its next
        ``tryAcquire`` takes the lock without parking (``Thread.spin`` with the
        window as its bound)."""
        env = t.kernel.env
        end = env.now + self.acquire_window(t)
        while not self.sem.free and env.now < end:
            yield t.spin(self.line, timeout=end - env.now)

    def acquire_window(self, t) -> float:
        """Seconds from a failed CAS to the park: AQS_TRIPS_BEFORE_PARK trips of a
        line between the holder's core and the contender's (the tail CAS, the
        predecessor's SIGNAL CAS and the last ``tryAcquire``'s read of the state
        word, each a line another core wrote; the instructions between them, a
        Node allocation in the TLAB and a few compares, are not counted)."""
        if t.cpu is None or self.holder_cpu < 0:
            return 0.0
        return AQS_TRIPS_BEFORE_PARK * t.kernel.machine.line_transfer_s(
            self.holder_cpu, t.cpu.id)

    def relock(self, t):
        """Generator: ``t`` was queued on the lock while parked (a Condition waiter
        transferred by ``signal``) and woken by an unlock: retry, parking again at the
        head if a barger holds it."""
        return self._take(t, woken=True)

    def unlock(self, t) -> None:
        t.give_permit(self.sem)               # AQS unparkSuccessor: a futex wake
        if self.line is not None:
            self.line.written(t)              # tryRelease's store of state = 0


class BlockingArrayQueue:
    """jetty-util ``BlockingArrayQueue`` (the QueuedThreadPool's job queue, Jetty 9 to
    12): an array of jobs behind two ``ReentrantLock``s, ``_tailLock`` for ``offer``
    and ``_headLock`` for the polls, with the ``_notEmpty`` condition of the head lock
    (on separate cache lines since Jetty 9.0, "Jetty-9 goes fast with mechanical
    sympathy", Webtide 2012). From the source (9.3 to 12, unchanged in these parts):

    * ``offer``: lock the tail, store, unlock; if the queue was empty, lock the head,
      ``signal`` the condition, unlock the head.
    * ``poll()``: nothing if ``_size`` is 0 (no lock); else lock the head, take, and if
      jobs are left ``signal`` the next waiter; unlock.
    * ``poll(time, unit)``: lock the head; while empty ``awaitNanos`` (joins the
      condition's queue, releases the lock, parks); take; signal if jobs are left;
      unlock.

    ``signal`` moves the condition's longest waiter to the head lock's queue without
    waking it; the unlock that follows wakes it (AQS ``transferForSignal`` and
    ``unparkSuccessor``) and it then takes the lock again before it looks at the
    queue. So a wake-up always costs a lock hand-off, contenders park, and under load
    the head lock can convoy: each hand-off to a parked thread waits for its wake-up.
    """

    def __init__(self, kernel, name: str, ips: float, queue_us: float, waits, settle):
        self.kernel = kernel
        self.jobs: deque = deque()
        self.cond: deque = deque()        # _notEmpty's waiters, longest waiting first
        self.waits = waits
        self.settle = settle
        self.head = queue_lock(kernel, f"{name}-head", ips, queue_us, "qtp-head")
        self.tail = queue_lock(kernel, f"{name}-tail", ips, queue_us, "qtp-tail")
        # A poller woken by the signal, under the head lock: its CAS on the lock word,
        # the lock's and the condition's lines, and a read of _size (on the tail
        # lock's lines). None with queue_us 0, as the locks' own work.
        size = Footprint(SHARED, f"{name}-tail", SIZE_LINES, False)
        self.recheck = (lock_segment(ips, queue_us, f"{name}-head", "qtp-recheck", (size,))
                        if queue_us > 0 else None)
        self.signals = 0

    def _signal(self) -> None:
        """Condition.signal() (the head lock held): the longest waiter moves to the lock's
        queue; the holder's unlock wakes it."""
        if self.cond:
            self.signals += 1
            self.head.sem.waiters.append(self.cond.popleft())

    def offer(self, t, job, req=None):
        """Generator: ``offer(job)`` on thread ``t`` (``req``: the request it is for)."""
        yield from self.tail.lock(t, req)
        was_empty = not self.jobs
        self.jobs.append(job)
        self.tail.unlock(t)
        if was_empty:
            yield from self.head.lock(t, req)
            self._signal()
            self.head.unlock(t)

    def offer_now(self, job, waker=None) -> None:
        """``offer`` outside a thread's segments (a pool's start, a reserved thread's
        hand-off): the job is queued and a waiter signalled at once, the locks' costs
        left out."""
        was_empty = not self.jobs
        self.jobs.append(job)
        if was_empty:
            self._signal()
            w = self.head.sem.wake_if_free()
            if w is not None:
                self.kernel.wake(w, waker)

    def poll(self, t):
        """Generator: ``poll()``: a job or None, without waiting."""
        if not self.jobs:
            return None
        yield from self.head.acquire(t)
        return (yield from self._take_and_unlock(t))

    def poll_wait(self, t, timeout: float):
        """Generator: ``poll(timeout)``: a job, or None when ``timeout`` s pass with the
        queue empty."""
        head = self.head
        yield from head.acquire(t)
        while not self.jobs:
            self.cond.append(t)
            head.unlock(t)                       # awaitNanos releases the lock
            yield from self.waits.wait(t, timeout, self._leave, self.settle)
            if t.data.timed_out and head.sem.waking is not t:
                yield from head.acquire(t)       # acquireQueued after the timeout
                if not self.jobs:
                    head.unlock(t)
                    return None
                break
            yield from head.relock(t)            # signalled, woken by an unlock
            if not self.jobs and self.recheck is not None:
                # A futile wake-up: the job was taken before this thread got the lock
                # back. Under the lock it still reads _size (poll(time, unit)'s
                # ``while (_size.get() == 0)``) and waits again (awaitNanos:
                # addConditionWaiter, fullyRelease): the lock's and the condition's
                # lines and _size's, last written by the core that offered and took.
                yield t.run(self.recheck)
        return (yield from self._take_and_unlock(t))

    def _take_and_unlock(self, t):
        """Generator, the head lock held by ``t``: take the oldest job (None if a
        barger emptied the queue), run the work under the lock, signal the next waiter
        if jobs are left, unlock; returns the job."""
        job = self.jobs.popleft() if self.jobs else None
        head = self.head
        if head.seg is not None:
            yield t.run(head.seg, job[1] if job is not None else None)
        if self.jobs:
            self._signal()
        head.unlock(t)
        return job

    def _leave(self, t) -> None:
        """A timed-out waiter leaves the condition's queue (or the lock's, if a signal
        had moved it there and no unlock has woken it yet)."""
        with contextlib.suppress(ValueError):
            self.cond.remove(t)
            return
        with contextlib.suppress(ValueError):
            self.head.sem.waiters.remove(t)


class QueuedThreadPool(WorkerPool):
    """Jetty's QueuedThreadPool (see the module docstring). Jobs are (body, req)
    pairs; ``body(thread, req)`` is a generator the pool thread runs to completion."""

    def __init__(self, server, max_threads: int, min_threads: int,
                 idle_timeout_s: float, queue_us: float, thread_start_us: float,
                 name: str = "qtp", park_on_cpu: bool = False, capacity: int | None = None):
        super().__init__(server.kernel, server.ctx.server, name, thread_start_us)
        self.server = server
        self.env = server.env
        self.max_threads = max_threads
        self.min_threads = min_threads
        self.idle_timeout = idle_timeout_s
        self.threads = 0                # _counts hi: live threads (started included)
        self.idle = 0                   # _counts lo: idle threads minus queued jobs
        self.last_shrink = self.env.now
        self.n_exited = 0
        self.max_queue = 0
        self.executed = 0
        # A bounded job queue (a BlockingArrayQueue with a maxCapacity, or any bounded
        # BlockingQueue given to the constructor): None, unbounded as Jetty's default.
        self.capacity = capacity
        self.rejected = 0
        self.waits = server.waits
        # park_on_cpu: an idle thread's futex_wait runs on its CPU before it sleeps
        # (TimedWaits.wait's ``settle``); off, it is paid after its next wake-up.
        self.settle = Segment(0.0, label="futex-wait") if park_on_cpu else None
        self.queue = BlockingArrayQueue(self.kernel, name, server.ctx.machine.nominal_ips,
                                        queue_us, self.waits, self.settle)
        self.jobs = self.queue.jobs
        self.waiters = self.queue.cond      # idle threads waiting in poll(timeout)

    def start(self) -> None:
        """doStart: ensureThreads() starts minThreads threads."""
        while self.threads < self.min_threads:
            self.threads += 1
            self.idle += 1
            self._start_thread()

    def _count(self) -> int:
        """execute's ``_counts`` CAS loop: ``idle`` counts idle threads minus queued jobs;
        a thread is started when ``idle <= 0 and threads < maxThreads`` (returns 1 then)."""
        start = 1 if (self.idle <= 0 and self.threads < self.max_threads) else 0
        self.threads += start
        self.idle += start - 1
        self.executed += 1
        return start

    def offer(self, t, body, req=None, for_req=None):
        """Generator: ``execute(job)`` on thread ``t``: count, ``_jobs.offer`` (the
        queue's locks, paid by ``t`` and accounted to ``for_req``), start a thread if
        none is idle. Returns False when a bounded queue is full and the request's job
        is refused: ``execute`` throws RejectedExecutionException when ``_jobs.offer``
        fails (QueuedThreadPool.java, 9.4 to 12; Jetty 10+ first undoes its ``_counts``
        change, here not yet made). Every job passes through the queue, even to an idle
        thread, so a capacity of 0 refuses every request dispatched. Only jobs that carry
        a request are bounded here: a selector's production job or a reserved thread's
        start is never refused."""
        if req is not None and self.capacity is not None and len(self.jobs) >= self.capacity:
            self.rejected += 1
            return False
        start = self._count()
        yield from self.queue.offer(t, (body, req), req if for_req is None else for_req)
        self._queued()
        if start:
            self._start_thread()
        return True

    def execute(self, body, req=None, waker=None) -> None:
        """``execute(job)`` outside a thread's segments (the pool's start, a reserved
        thread's start): as ``offer``, the locks' costs left out."""
        start = self._count()
        self.queue.offer_now((body, req), waker)
        self._queued()
        if start:
            self._start_thread()

    def _queued(self) -> None:
        if len(self.jobs) > self.max_queue:
            self.max_queue = len(self.jobs)

    def _start_thread(self) -> None:
        self.start_worker(self._runner)

    def _runner(self, t):
        """QueuedThreadPool.Runner: ``_jobs.poll()`` after each job, then, when there is
        none, the shrink check and ``idleJobPoll`` (``_jobs.poll(idleTimeout)``)."""
        t.data = PoolThread()
        queue = self.queue
        env = self.env
        while True:
            job = yield from queue.poll(t)
            if job is None:
                # No job at once: shrink (at most one thread per idleTimeout, pool-wide)?
                if (self.idle_timeout > 0 and self.threads > self.min_threads
                        and env.now - self.last_shrink > self.idle_timeout):
                    self.last_shrink = env.now
                    self.threads -= 1
                    self.idle -= 1
                    self.n_exited += 1
                    return
                job = yield from queue.poll_wait(t, self.idle_timeout)
                if job is None:
                    continue
            body, req = job
            yield from body(t, req)
            self.idle += 1              # addCounts(0, 1): idle again


class ReservedThreadExecutor:
    """Jetty's ReservedThreadExecutor on a QueuedThreadPool (see the module docstring)."""

    def __init__(self, server, pool: QueuedThreadPool, capacity: int,
                 idle_timeout_s: float, queue_us: float):
        self.server = server
        self.env = server.env
        self.kernel = server.kernel
        self.pool = pool
        self.capacity = capacity
        self.idle_timeout = idle_timeout_s
        self.stack: list = []     # parked reserved threads; the last one parked is handed first
        self.size = 0             # reserved threads (parked, waiting for a task)
        self.pending = 0          # reserved threads being started (pool jobs not yet reserved)
        self.offered = 0
        self.failed = 0
        self.shrunk = 0
        ips = server.ctx.machine.nominal_ips
        self.seg = (Segment(queue_us * 1e-6 * ips, (Footprint(SHARED, "rte", 1, True),),
                            contended_ops=1, contended_line="rte", label="rte-handoff")
                    if queue_us > 0 else None)

    def available(self) -> int:
        return len(self.stack)

    def try_execute(self, body, req=None, waker=None) -> bool:
        """Hand (body, req) to a parked reserved thread, or start reserving one and fail."""
        if self.stack:
            th = self.stack.pop()
            self.size -= 1
            th.data.task = (body, req)
            self.kernel.wake(th, waker)
            self.offered += 1
            if self.size == 0:
                self._start_reserved(waker)
            return True
        self.failed += 1
        self._start_reserved(waker)
        return False

    def _start_reserved(self, waker) -> None:
        if self.pending + self.size >= self.capacity:
            return
        self.pending += 1
        self.server.pool.execute(self._reserved, None, waker)

    def _expire(self, t) -> None:
        with contextlib.suppress(ValueError):
            self.stack.remove(t)

    def _reserved(self, t, _req):
        """ReservedThread.run: reserve, wait for a task, run it, reserve again."""
        self.pending -= 1
        st = t.data
        waits = self.server.waits
        while True:
            if self.size >= self.capacity:
                return
            self.size += 1
            st.task = None
            self.stack.append(t)
            while st.task is None:
                yield from waits.wait(t, self.idle_timeout, self._expire)
                if st.task is None and st.timed_out:
                    self.size -= 1
                    self.shrunk += 1
                    return
                if st.task is None and t not in self.stack:   # spurious wake: wait again
                    self.stack.append(t)
            body, req = st.task
            st.task = None
            if self.seg is not None:
                yield t.run(self.seg, req)
            yield from body(t, req)


class ThreadPoolExecutor(WorkerPool):
    """java.util.concurrent.ThreadPoolExecutor over a LinkedBlockingQueue.

    ``execute(t, task)`` is a generator the submitting thread runs with
    ``yield from``. Below ``core`` threads, execute starts a new worker with the
    task (ThreadPoolExecutor.addWorker); with ``tomcat_queue`` the TaskQueue rule
    starts one whenever no thread is idle and the pool is below ``maximum``;
    otherwise the task is offered to the queue (one lock acquisition) and, if
    the queue was empty, one waiting worker is signalled (FIFO).

    Workers loop on ``take``: one lock acquisition, then a task or a wait on the
    condition (park). ``run_task(t, task)`` is a generator; ``after_task`` is
    called with the task when it returns (keep-alive timeouts are not modelled:
    runs are far shorter than ThreadPoolExecutor's 60 s keepAliveTime).
    """

    def __init__(self, strategy, name: str, core: int, maximum: int, run_task,
                 lock_us: float, lock_line: str, tomcat_queue: bool, thread_start_us: float,
                 capacity: int | None = None):
        super().__init__(strategy.kernel, strategy.ctx.server, name, thread_start_us)
        self.core = core
        self.maximum = maximum
        self.run_task = run_task
        self.lock = lock_segment(strategy.ctx.machine.nominal_ips, lock_us, lock_line)
        self.tomcat_queue = tomcat_queue
        self.pool_size = 0
        self.submitted = 0              # Tomcat's submittedCount: queued + running tasks
        self.workers: list = []
        # A bounded LinkedBlockingQueue (capacity; None: Integer.MAX_VALUE, the default)
        self.capacity = capacity
        self.rejected = 0

    def prestart(self) -> None:
        """ThreadPoolExecutor.prestartAllCoreThreads (Tomcat's executor calls it)."""
        while self.pool_size < self.core:
            self._add_worker(None)

    def execute(self, t, task):
        """Generator; returns False if ``task`` is refused. A full bounded queue makes
        ``offer`` fail; the pool then adds a worker if below its maximum
        (``addWorker(command, false)``), else ``reject(command)``: the default
        AbortPolicy throws RejectedExecutionException (ThreadPoolExecutor.execute;
        Tomcat's executor first retries ``TaskQueue.force``, the same full queue)."""
        self.submitted += 1
        if self.pool_size < self.core or (
                self.tomcat_queue and self.pool_size < self.maximum
                and self.submitted > self.pool_size):
            self._add_worker(task)
            return True
        yield t.run(self.lock)             # offer: lock, enqueue, unlock
        q = self.jobs
        if self.capacity is not None and self._full(q):
            self.submitted -= 1
            if self.pool_size < self.maximum:
                self.submitted += 1
                self._add_worker(task)
                return True
            self.rejected += 1
            return False
        was_empty = not q
        q.append(task)
        if was_empty:                      # signalNotEmpty
            self.signal_one(t)
        return True

    def _full(self, q) -> bool:
        """Would ``offer`` fail? A LinkedBlockingQueue(capacity) holds ``capacity`` tasks;
        at 0, a SynchronousQueue, it takes one only as a hand-off to a waiting worker."""
        if self.capacity == 0:
            return len(self.waiters) <= len(q)
        return len(q) >= self.capacity

    def _add_worker(self, first) -> None:
        self.pool_size += 1
        th = self.start_worker(lambda t, f=first: self._worker(t, f),
                               name=f"{self.name}-{len(self.workers)}")
        self.workers.append(th)

    def _worker(self, t, task):
        q = self.jobs
        waiters = self.waiters
        lock = self.lock
        wake = self.kernel.wake
        run_task = self.run_task
        while True:
            if task is not None:
                yield from run_task(t, task)
                self.submitted -= 1
                task = None
            yield t.run(lock)              # take: lock (or re-acquire after a signal)
            if q:
                task = q.popleft()
                if q and waiters:          # c > 1: pass the signal on
                    wake(waiters.popleft(), t)
            else:
                waiters.append(t)          # await on notEmpty: registered before parking
                t.syscall("futex_wait")    # LockSupport.park -> FUTEX_WAIT
                yield t.park()
