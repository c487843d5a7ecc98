"""Streaming measurement of a run: arrivals, completions, latency, counters.

The recorder keeps O(1) state per request: a latency histogram, sums for the
breakdown, and the time-integral of the number of requests in the system (for
Little's law). Warm-up is excluded by snapshotting every counter at the moment
it ends and reporting differences, as `perf stat` attached to a warmed-up
server would.
"""

from __future__ import annotations

from simpy.events import Event

from simcore.histogram import LatencyHistogram
from simcore.work import CAUSES

B_QUEUE = 0


class Recorder:
    def __init__(self, env, warmup_requests: int = 0, measure_requests: int | None = None,
                 warmup_s: float | None = None, measure_s: float | None = None,
                 max_in_flight: int = 2_000_000):
        self.env = env
        self.hist = LatencyHistogram()
        self.wait_sum = 0.0
        self.bd_sum = [0.0] * len(CAUSES)
        self.arrived = 0
        self.completed = 0          # all completions, warm-up included
        self.measured = 0
        self.in_system = 0
        self.area = 0.0             # integral of in_system over time
        self.t_last = 0.0
        self.warmup_requests = warmup_requests
        self.measure_requests = measure_requests
        self.measure_s = measure_s
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
        self.first_arrival = None
        self.last_done = 0.0
        if warmup_s is not None:
            env.timeout(warmup_s).callbacks.append(lambda _e: self._start_measuring())
        elif warmup_requests == 0:
            self.measuring = True
            self._begin_window()
        self.source_exhausted = False   # a finite workload (trace, batch) has sent everything

    # -- hooks the workload calls -------------------------------------------------------

    def arrive(self, req) -> None:
        now = self.env.now
        self.area += self.in_system * (now - self.t_last)
        self.t_last = now
        self.in_system += 1
        self.arrived += 1
        if self.first_arrival is None:
            self.first_arrival = now
        if self.in_system > self.max_in_flight and not self.stop.triggered:
            self._stop(f"in-flight requests passed run.max_in_flight={self.max_in_flight}")

    def complete(self, req) -> None:
        now = self.env.now
        self.area += self.in_system * (now - self.t_last)
        self.t_last = now
        self.in_system -= 1
        self.completed += 1
        self.last_done = now
        req.t_done = now
        if self.measuring:
            lat = now - req.t_arrive
            self.hist.record(lat)
            self.wait_sum += req.t_start - req.t_arrive
            bd = req.bd
            s = self.bd_sum
            other = 0.0
            for i in range(1, len(bd)):
                s[i] += bd[i]
                other += bd[i]
            # Queue wait is what is left: time runnable or queued that no cost explains.
            s[B_QUEUE] += lat - other
            self.measured += 1
            if self.measured == self.measure_requests and not self.stop.triggered:
                self._stop("request limit")
        if self.source_exhausted and self.in_system == 0 and not self.stop.triggered:
            self._stop("workload finished")
        elif self.completed == self.warmup_requests:
            self._start_measuring()

    # -- window -------------------------------------------------------------------------

    def _start_measuring(self) -> None:
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
        if self.measure_s is not None:
            self.env.timeout(self.measure_s).callbacks.append(
                lambda _e: self._stop("duration") if not self.stop.triggered else None)

    def _stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.stop.succeed()

    def close(self) -> None:
        """Bring the in-system integral up to now (call once the run has ended)."""
        now = self.env.now
        self.area += self.in_system * (now - self.t_last)
        self.t_last = now
