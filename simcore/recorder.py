"""Streaming measurement of a run: arrivals, completions, latency, counters.

The recorder keeps O(1) state per request: a latency histogram, sums for the
breakdown, and the time-integral of the number of requests in the system (for
Little's law). Warm-up is excluded by snapshotting every counter at the moment
it ends and reporting differences, as `perf stat` attached to a warmed-up
server would.
"""

from __future__ import annotations

import time

import numpy as np
from simpy.events import Event

from warmcore.simcore.histogram import LatencyHistogram
from warmcore.simcore.kernel.fastpath import clock
from warmcore.simcore.work import CAUSES

B_QUEUE = 0
LAT_BATCH = 4096
assert len(CAUSES) == 7, "Recorder.complete unrolls the breakdown over 7 causes"


def _no_deferred_arrivals(now: float) -> None:
    """Recorder.catch_up of a workload that defers no arrival."""


class Recorder:
    def __init__(self, env, warmup_requests: int = 0, measure_requests: int | None = None,
                 warmup_s: float | None = None, measure_s: float | None = None,
                 max_in_flight: int = 250_000):
        self.env = env
        self.hist = LatencyHistogram()
        self.service = LatencyHistogram()   # server-side: first work on it to response
        self.wait_sum = 0.0
        # Breakdown sums over the measured requests, by cause (CAUSES[1:]; queue wait
        # is what is left, bd_sums): fields, C doubles when compiled, so that complete
        # adds six a request without making a float object
        self.sum_dispatch = self.sum_compute = self.sum_reload = 0.0
        self.sum_coherence = self.sum_contention = self.sum_io = 0.0
        self.arrived = 0
        # The client's view of each request (issued = arrived): answered in time,
        # timed out (its client gave up: workload.timeout_us), or rejected by a full
        # queue (strategy.params.queue_capacity). Whole-run counts; the window's are
        # differences from the snapshot at its start (outcomes_at_measure).
        self.answered = 0
        self.timed_out = 0
        self.rejected = 0
        self.abandoned = 0          # withdrawn by their client before being sent
        self.refused_unheard = 0    # refused after their client had timed out
        self.outcomes_at_measure = (0, 0, 0)
        self.completed_warmup = 0   # completions before the window
        self.measured = 0           # completions in the window
        # Latencies and service times not yet binned (flush). Lists, not array("d"):
        # compiled, a typed list's append is a C call, an array's a method call by
        # name (issue 33: about 800 instructions a request, two appends)
        self.lat_buf = []
        self.srv_buf = []
        self.stopped = False
        self.deadline = float("inf")   # time.monotonic() past which the run stops (max_wall)
        # should_stop(fraction_done) -> bool: asked at every wall-clock check; True ends
        # the run there (a caller's stop button); None: never asked
        self.should_stop = None
        self.partial = False        # ended before its limit by a cap or the wall budget
        self.overflowed = False     # in-flight requests passed max_in_flight
        self.in_system = 0
        self.area = 0.0             # integral of in_system over time
        self.t_last = 0.0
        self.warmup_requests = warmup_requests
        self.measure_requests = measure_requests
        self.measure_s = measure_s
        self.warmup_s = warmup_s
        self.max_in_flight = max_in_flight
        self.measuring = False
        self.t_measure = 0.0
        self.area_at_measure = 0.0
        self.arrived_at_measure = 0
        self.in_system_at_measure = 0
        self.on_measure_start = []   # callbacks (snapshot counters)
        self.stop = Event(env)
        self.stop_reason = ""
        self.makespan_s = None
        self.last_done = 0.0
        self.source_exhausted = False   # a finite workload (trace, batch) has sent everything
        self.next_due = float("inf")    # earliest deferred arrival (set by the workload)
        # catch_up(now): delivers the arrivals deferred until now; a workload that
        # defers arrivals (models/workloads/open_loop.py) sets its own. A field, not a
        # method, so that the compiled Recorder (recorder.pxd) can take it.
        self.catch_up = _no_deferred_arrivals
        if warmup_s is not None:
            env.timeout(warmup_s).callbacks.append(lambda _e: self._start_measuring())
        elif warmup_requests == 0:
            self.measuring = True
            self._begin_window()

    # -- hooks the workload calls -------------------------------------------------------

    def arrive(self, req) -> None:
        now = req.t_arrive      # may lie before env.now when delivered late (catch_up)
        n = self.in_system
        self.area += n * (now - self.t_last)
        self.t_last = now
        self.in_system = n + 1
        self.arrived += 1
        if n >= self.max_in_flight and not self.overflowed:
            self.overflowed = True
            if not self.stopped:
                self.partial = True
                self._stop(f"in-flight requests passed run.max_in_flight="
                           f"{self.max_in_flight}")

    def complete(self, req, thread=None) -> None:
        """``req`` has been served (``thread`` is who finished it, unused here)."""
        now = clock(self.env)
        if now >= self.next_due:        # a deferred arrival is due: deliver it first
            self.catch_up(now)
        n = self.in_system
        self.area += n * (now - self.t_last)
        self.t_last = now
        self.in_system = n - 1
        self.last_done = now
        if self.measuring:
            t_arrive = req.t_arrive
            t_start = req.t_start
            if t_start < 0.0:       # no thread ran anything for it (a program of only
                t_start = now       # permits and no op cost): served in no time, now
            # Latencies are binned in batches (LatencyHistogram.record_many): an append
            # here costs a tenth of binning one value in Python.
            buf = self.lat_buf
            buf.append(now - t_arrive)
            self.srv_buf.append(now - t_start)
            if len(buf) >= LAT_BATCH:
                self.flush()
            self.wait_sum += t_start - t_arrive
            # Breakdown sums, unrolled over CAUSES[1:]; queue wait (index 0) is the
            # remainder, computed once at the end (bd_sums).
            bd = req.bd
            self.sum_dispatch += bd[1]
            self.sum_compute += bd[2]
            self.sum_reload += bd[3]
            self.sum_coherence += bd[4]
            self.sum_contention += bd[5]
            self.sum_io += bd[6]
            self.measured += 1
            if self.measured == self.measure_requests and not self.stopped:
                self._stop("request limit")
        else:
            self.completed_warmup += 1
            if not self.completed_warmup & 4095:
                self.check_wall()
            if self.completed_warmup == self.warmup_requests:
                self._start_measuring()
        if self.source_exhausted and n == 1 and not self.stopped:
            self._stop("workload finished")

    def answer(self, req) -> None:
        """``req``'s client got its response in time (called by workloads whose
        clients may give up; otherwise every completion is one: answered_window)."""
        self.answered += 1

    def time_out(self, req) -> None:
        """``req``'s client stopped waiting (the server may still finish it)."""
        self.timed_out += 1

    def reject(self, req, heard: bool = True) -> None:
        """The server refused ``req`` (a full queue): it leaves the system now. Counted
        rejected if its client ``heard`` it; one that had timed out already is counted
        there only (each request has one outcome)."""
        n = self._leave()
        if heard:
            self.rejected += 1
        else:
            self.refused_unheard += 1
        self._ended(n)

    def abandon(self, req) -> None:
        """``req``'s client withdrew it before sending it (its timeout passed while it
        waited at the client, workload.timeout_closes): it leaves the system now, never
        having reached the server."""
        n = self._leave()
        self.abandoned += 1
        self._ended(n)

    def _leave(self) -> int:
        """A request leaves the system without a completion: the time-average of the
        requests in it is brought up to now. Returns how many were in it."""
        now = clock(self.env)
        if now >= self.next_due:
            self.catch_up(now)
        n = self.in_system
        self.area += n * (now - self.t_last)
        self.t_last = now
        self.in_system = n - 1
        return n

    def _ended(self, n: int) -> None:
        """A request that left without a completion (``n`` were in the system)."""
        # A refusal (or a withdrawal) ends its request as a completion does:
        # run.requests (and the warm-up's share of it) counts both, so a run that
        # refuses everything still ends. (The limit is lowered, not the completions'
        # count raised: complete()'s test stays as it was.)
        if self.measuring:
            if self.measure_requests:
                self.measure_requests -= 1
                if self.measured >= self.measure_requests and not self.stopped:
                    self._stop("request limit")
        elif self.warmup_s is None:
            self.warmup_requests -= 1
            if self.completed_warmup >= self.warmup_requests:
                self._start_measuring()
        if self.source_exhausted and n == 1 and not self.stopped:
            self._stop("workload finished")

    def outcomes_window(self, every_completion_answers: bool) -> tuple[int, int, int]:
        """(answered, timed out, rejected) in the measured window; answered is the
        window's completions when no client gives up."""
        a0, t0, r0 = self.outcomes_at_measure
        answered = self.measured if every_completion_answers else self.answered - a0
        return answered, self.timed_out - t0, self.rejected - r0

    @property
    def completed(self) -> int:
        return self.completed_warmup + self.measured

    def check_wall(self) -> None:
        """Stop the run if its wall-clock budget has run out, or if ``should_stop`` says
        so (called every few thousand requests here, and by the watchdog of
        warmcore.build as simulated time passes)."""
        if self.stopped:
            return
        if time.monotonic() > self.deadline:
            self.partial = True
            self._stop("wall-clock budget")
        elif self.should_stop is not None and self.should_stop(self.progress()):
            self.partial = True
            self._stop("stopped")

    def progress(self) -> float:
        """How much of the run is done, 0..1: requests completed (warm-up included) of
        those it runs for, or simulated time of its duration."""
        if self.measure_requests:
            total = self.warmup_requests + self.measure_requests
            done = self.completed_warmup + self.measured
        elif self.measure_s is not None:
            total = self.measure_s + (self.warmup_s or 0.0)
            done = self.env.now
        else:
            return 0.0
        return min(1.0, done / total) if total > 0 else 0.0

    def flush(self) -> None:
        """Bin the buffered latencies into the histogram."""
        self.check_wall()
        if self.lat_buf:
            self.hist.record_many(np.array(self.lat_buf, dtype=float))
            self.lat_buf = []
            self.service.record_many(np.array(self.srv_buf, dtype=float))
            self.srv_buf = []

    def bd_sums(self) -> list[float]:
        """Total seconds by cause over measured requests; queue wait is what is left of
        the latency once every cost is counted (time runnable or queued)."""
        self.flush()
        s = [0.0, self.sum_dispatch, self.sum_compute, self.sum_reload,
             self.sum_coherence, self.sum_contention, self.sum_io]   # CAUSES order
        q = self.hist.total - sum(s[1:])
        # A remainder of sums: when no request waited, rounding leaves a few ulps either
        # side of zero (-1.3e-13 us found by tests/test_fuzz.py); that is zero.
        if q < 0.0 and -q <= 1e-9 * self.hist.total:
            q = 0.0
        s[B_QUEUE] = q
        return s

    # -- window -------------------------------------------------------------------------

    def _start_measuring(self) -> None:
        self.catch_up(self.env.now)
        self.measuring = True
        self._begin_window()
        for cb in self.on_measure_start:
            cb()

    def _begin_window(self) -> None:
        now = self.env.now
        self.area += self.in_system * (now - self.t_last)
        self.t_last = now
        self.t_measure = now
        self.area_at_measure = self.area
        self.arrived_at_measure = self.arrived
        self.in_system_at_measure = self.in_system
        self.outcomes_at_measure = (self.answered, self.timed_out, self.rejected)
        if self.measure_s is not None:
            self.env.timeout(self.measure_s).callbacks.append(self._duration_over)

    def _duration_over(self, _ev) -> None:
        self.catch_up(self.env.now)
        if not self.stopped:
            self._stop("duration")

    def _stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.stopped = True
        self.stop.succeed()

    def close(self) -> None:
        """Bring the in-system integral up to now and bin the last latencies (call once
        the run has ended)."""
        self.flush()
        now = self.env.now
        self.catch_up(now)
        self.area += self.in_system * (now - self.t_last)
        self.t_last = now
