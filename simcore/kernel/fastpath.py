"""SimPy fast paths: the one module of warmcore that touches SimPy's internals.

SimPy's cost is per event, and the engine's hot path (a segment of work, a
dispatch, a park) runs hundreds of thousands of times a run. Where no public call
does the same thing at the same cost, the functions here reach into SimPy:

* ``fast_timeout``: ``env.timeout(delay)`` without ``Timeout.__init__``'s argument
  checks: the same Timeout in the same queue slot (``env._queue``, ``env._eid``);
  about 0.4 us saved per segment.
* ``segment_done``: run-ahead; it moves the clock (``env._now``) straight to a
  segment's end when nothing else is due before it (SimPy moves the clock only by
  popping an event).
* ``new_event`` and ``trigger_after``: a park event built without
  ``Event.__init__``, and a dispatch that triggers a thread's event with a delay
  (``_ok``/``_value`` set, then the public ``env.schedule``; ``Event.succeed``
  schedules without delay).
* ``drive``: a thread's generator resumed by a bare callback instead of a
  ``simpy.Process`` (it reads ``Event._value`` instead of the ``value`` property),
  started and ended by the callback too (no wrapping generator).
* ``clock``: ``env.now`` as one C-level attribute read (``env._now``) instead of
  the property's Python call, for the hot path's clock reads (the kernel, the
  recorder's completion, the open loop's arrival).

Together about 7% of an M/M/c run (bench/engine.py). SimPy is pinned below 5
(pyproject); its ``_queue``, ``_eid``, ``_now``, ``_value`` and ``_ok`` have been
stable across SimPy 3 and 4, and the kernel tests and the theory checks would
catch a change. ``tests/test_layers.py`` fails on a SimPy private attribute used
in any other module.
"""

from __future__ import annotations

from heapq import heappush
from operator import attrgetter

from simpy.events import NORMAL, PENDING, Event, Timeout

_new = object.__new__

clock = attrgetter("_now")
"""``clock(env)`` is ``env.now``: one C-level attribute read, no Python frame."""


def fast_timeout(env, delay: float) -> Timeout:
    """``env.timeout(delay)`` for the hot path (``delay`` is never negative here)."""
    ev = _new(Timeout)
    ev.env = env
    ev.callbacks = []
    ev._value = None
    ev._ok = True
    ev._delay = delay
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), ev))
    return ev


# What ``segment_done`` returns when it has already advanced the clock: an event
# that reads as processed, so the thread driver (and SimPy's Process) go straight on.
ALREADY_DONE = _new(Event)
ALREADY_DONE.env = None
ALREADY_DONE.callbacks = None
ALREADY_DONE._value = None
ALREADY_DONE._ok = True


def segment_done(env, delay: float) -> Event:
    """The event that fires when a segment started now ends, ``delay`` from now.

    Run-ahead: when no event is due until strictly after then, that timeout
    would be the next event SimPy pops, so nothing can happen in between.
    Then the clock moves straight to the end of the segment and the thread goes
    on inside the current callback, without a trip through the event queue.
    Exact: the same events at the same times in the same order (a later event
    at the same instant still comes after, as it would behind the timeout; the
    skipped sequence number only ever stood for this timeout). It pays off when
    one thread does most of the work, as in the saturated ``pipeline`` (about
    a tenth of the full model's time per segment).
    """
    t = env._now + delay
    queue = env._queue
    if not queue or queue[0][0] > t:      # env.peek() > t, inlined
        env._now = t          # no public call moves the clock without an event
        return ALREADY_DONE
    # INLINE COPY of fast_timeout(env, delay), one call fewer per segment that
    # waits in the queue (every M/M/c service); t is env._now + delay, as there
    ev = _new(Timeout)
    ev.env = env
    ev.callbacks = []
    ev._value = None
    ev._ok = True
    ev._delay = delay
    heappush(queue, (t, NORMAL, next(env._eid), ev))
    return ev


def new_event(env) -> Event:
    """``Event(env)`` without its ``__init__`` call (a park, once per sleep)."""
    ev = _new(Event)
    ev.env = env
    ev.callbacks = []
    ev._value = PENDING
    return ev


def trigger_after(env, ev: Event, delay: float, deferred: list | None) -> None:
    """Trigger ``ev`` (a thread's wait) with value None, ``delay`` from now; with no
    delay and a ``deferred`` list (Kernel.collect_wakes), append it there instead so
    that the caller resumes it at the end of its callback."""
    ev._ok = True
    ev._value = None
    if delay == 0.0 and deferred is not None:
        deferred.append(ev)
    else:
        env.schedule(ev, NORMAL, delay)


def drive(start: Event, body, exit_):
    """Run a thread's generator on SimPy events without a simpy.Process.

    A Process resumption does interrupt and failure bookkeeping that simulated
    threads never need; a bare callback that sends the event's value into the
    generator and hooks itself onto the next event costs about half as much. A
    thread body raising an exception stops the whole run, as it should (it is a
    bug in a strategy), with the exception's own traceback.

    ``body()`` makes the thread's generator once ``start`` (its first dispatch)
    has fired; ``exit_()`` runs when the generator returns. Both are called here
    rather than from a wrapping generator (``yield start; yield from body();
    exit_()``), which every resumption would have passed through: one generator
    frame less per event a thread waits for (issue 33). Returns the callback that
    resumes it."""
    gen = None

    def resume(ev):
        try:
            nxt = gen.send(ev._value)        # Event.value without its property call
            while nxt.callbacks is None:      # already processed: go straight on
                nxt = gen.send(nxt._value)
        except StopIteration:
            exit_()
            return
        nxt.callbacks.append(resume)

    def begin(_ev):
        nonlocal gen
        gen = body()
        try:
            nxt = gen.send(None)
            while nxt.callbacks is None:
                nxt = gen.send(nxt._value)
        except StopIteration:
            exit_()
            return
        nxt.callbacks.append(resume)

    start.callbacks.append(begin)
    return resume
