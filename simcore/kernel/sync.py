"""Synchronisation: semaphores and locks with their futex waits, and the interpreter
of request programs (compute steps, blocking calls, acquire and release).

``take_permit``, ``give_permit`` and ``run_program`` are ``Thread`` methods
(simcore.kernel.threads); they are written here, beside the ``Semaphore`` they
work on."""

from __future__ import annotations

from collections import deque

from simpy.events import Event

from warmcore.simcore.kernel.accounting import B_IO
from warmcore.simcore.kernel.fastpath import segment_done
from warmcore.simcore.work import STEP_ACQUIRE, STEP_CALL, STEP_RUN


class Semaphore:
    """A named counting semaphore, connection pool or mutex (``[resources]``):
    ``permits`` held at once and a FIFO wait queue.

    Fair (``fair=True``: a fair java.util.concurrent.Semaphore, a connection pool
    handing connections out in request order): ``acquire(waiter)`` takes a permit
    if one is free and nobody queues, else queues ``waiter`` (returns False: the
    caller parks); ``release()`` hands the permit to the first waiter (returned:
    the caller wakes it, paying the futex wake), which owns it when it wakes.

    Nonfair (``fair=False``: a ReentrantLock or nonfair Semaphore, AQS in JDK 8,
    and glibc's default pthread mutex, a 1-permit one): ``acquire`` takes a free
    permit even when others queue (barging) and queues otherwise, with no
    spinning (AQS parks after its enqueue's retry, glibc after one CAS);
    ``release()`` frees the permit and returns the first waiter to wake unless a
    woken one (``waking``) has not retried yet (AQS clears the head's SIGNAL
    status when it unparks it); the woken waiter ``retry``-s and, if a barger took
    the permit, queues again at the head. On one CPU a holder is rarely preempted inside its
    critical section, so nobody waits; on several, contenders meet and each
    meeting costs a futex wait, a wake and two switches.
    ``op`` is the CPU work of each acquire or release (a CAS on the contended
    state word and the queue bookkeeping; None when free).
    """

    __slots__ = ("acquires", "fair", "free", "max_waiting", "name", "op", "permits",
                 "waiters", "waits", "waking")

    def __init__(self, name: str, permits: int, op=None, fair: bool = True):
        self.name = name
        self.permits = permits
        self.free = permits
        self.fair = fair
        self.waiters: deque = deque()
        self.waking = None       # nonfair: the waiter woken to retry, until it does
        self.op = op
        self.acquires = 0
        self.waits = 0
        self.max_waiting = 0

    def acquire(self, waiter) -> bool:
        self.acquires += 1
        if self.free and (not self.waiters or not self.fair):
            self.free -= 1
            return True
        self.waits += 1
        self._enqueue(waiter, self.waiters.append)
        return False

    def retry(self, waiter) -> bool:
        """A nonfair waiter woken by ``release``: take a free permit, or queue again at
        the head (a barger took it)."""
        self.waking = None
        if self.free:
            self.free -= 1
            return True
        self._enqueue(waiter, self.waiters.appendleft)
        return False

    def _enqueue(self, waiter, put) -> None:
        put(waiter)
        if len(self.waiters) > self.max_waiting:
            self.max_waiting = len(self.waiters)

    def wake_if_free(self):
        """The nonfair waiter to wake now that nobody holds a permit, if none is being
        woken already (what an unlock after a Condition.signal does when the lock was
        taken and released outside any thread's segments); None otherwise."""
        if self.free and self.waiters and self.waking is None and not self.fair:
            self.waking = self.waiters.popleft()
            return self.waking
        return None

    def release(self):
        if self.fair:
            if self.waiters:
                return self.waiters.popleft()
            self.free += 1
            return None
        self.free += 1
        if self.waiters and self.waking is None:
            self.waking = self.waiters.popleft()
            return self.waking
        return None



# -- Thread methods ----------------------------------------------------------------------

def take_permit(self, sem, woken: bool = False):
    """Generator: a permit of ``sem`` (a ``Semaphore``) for this thread, parking on a
    futex (``futex_wait``, system time) while there is none. Fair: woken holding the
    permit; nonfair: try again at each wake-up (a barger may have taken it) and park
    again at the head of the queue. ``woken``: the thread was queued on ``sem``
    while it slept (a Condition waiter moved there by a signal) and a release has
    just woken it, so it starts by trying again."""
    yield from self.settle_owed()
    got = sem.retry(self) if woken else sem.acquire(self)
    while not got:
        self.syscall("futex_wait")
        yield self.park()
        if sem.fair:
            break
        yield from self.settle_owed()
        got = sem.retry(self)


def settle_owed(self):
    """Generator: run the kernel work this thread owes (its switch-in, the futex
    syscall's return, the wake's line transfers) now, booked inline (``book_owed``).

    A nonfair waiter woken by an unlock retries its CAS only after the kernel has
    switched it in and futex_wait has returned (AQS ``acquireQueued`` ->
    ``parkAndCheckInterrupt`` returns, then ``tryAcquire``; kernel/futex.c
    ``futex_wait`` -> ``futex_wait_queue_me`` -> ``schedule``), so that work runs
    before it takes the lock, not inside the critical section that follows."""
    if self.pending_busy or self.pending_stall:
        now = self.kernel.env.now
        yield segment_done(self.kernel.env, self.book_owed(now))


def give_permit(self, sem) -> None:
    """Release a permit of ``sem``; the waiter it hands to or wakes is woken with a
    futex wake this thread pays."""
    waiter = sem.release()
    if waiter is not None:
        self.kernel.wake(waiter, self)


def run_program(self, prog, req) -> Event:
    """Run a request program's steps on this thread; the event fires after the last."""
    done = Event(self.kernel.env)
    gen = _program_steps(self, prog, req, done)

    def step(ev=None):
        try:
            nxt = gen.send(None)
            while nxt.callbacks is None:          # already processed (run-ahead)
                nxt = gen.send(None)
        except StopIteration:
            return
        nxt.callbacks.append(step)

    step()
    return done


def _program_steps(self, prog, req, done):
    k = self.kernel
    for kind, arg in prog.steps:
        if kind == STEP_RUN:
            yield self.run(arg, req)
            if req is not None:
                req.consumed_by = self.tid
        elif kind == STEP_CALL:                   # a blocking call (a database query)
            if req is not None:
                if req.t_start < 0.0:             # no compute before it: served from here
                    req.t_start = k.env.now
                req.bd[B_IO] += arg
                req.t_acc = k.env.now + arg
            yield self.block(arg)
        elif kind == STEP_ACQUIRE:
            sem = k.resources[arg]
            if sem.op is not None:
                yield self.run(sem.op, req)
            yield from self.take_permit(sem)
        else:
            sem = k.resources[arg]
            if sem.op is not None:
                yield self.run(sem.op, req)
            self.give_permit(sem)
    done.succeed()
