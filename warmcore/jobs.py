"""Simulations in the background: runs done one after another in a worker thread that
a page polls (their progress, a stop flag each run checks, the results so far).

The explorer (app.py) keeps its jobs in its session and draws their progress bars and
Stop buttons; everything else is here, without Streamlit, so that it can be tested on
its own (tests/test_jobs.py). A run's result travels as its ``run --json`` object (a
dict), which the explorer's cache stores; a run stopped part-way is raised as
``Stopped``, so that no cache keeps it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, MutableMapping

import warmcore

# Any one run stops after this many wall seconds and shows its partial result marked
# (docs/formats.md, "Ranges and caps"), so no setting can hold the page.
MAX_WALL_S = 120.0

# Runs in progress at once in one server process, over all its pages and sessions
# (WARMCORE_EXPLORER_RUNS, default one per CPU): an explorer served to many people
# queues their runs instead of oversubscribing the machine (docs/explorer.md, Security).
MAX_CONCURRENT_RUNS = max(1, int(os.environ.get("WARMCORE_EXPLORER_RUNS") or
                                 os.cpu_count() or 1))
RUN_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_RUNS)

# should_stop(fraction done) -> stop now? (``warmcore.simulate``'s progress and stop hook)
ShouldStop = Callable[[float], bool]


class Stopped(Exception):
    """A run stopped from the page, carrying its partial result (raised, so that a cache
    around the run function does not keep it)."""

    def __init__(self, result: dict):
        super().__init__("stopped")
        self.result = result


def run_one(scenario_toml: str, strategy: str, should_stop: ShouldStop | None = None) -> dict:
    """One strategy on the scenario: the ``run --json`` object."""
    return _run(warmcore.Scenario.from_toml(scenario_toml), strategy, should_stop)


def run_at_load(scenario_toml: str, strategy: str, load: float,
                should_stop: ShouldStop | None = None) -> dict:
    """One strategy at one offered load (``warmcore.compare`` with ``loads``)."""
    return _run(warmcore.Scenario.from_toml(scenario_toml), strategy, should_stop,
                loads=[load])


def run_traced(scenario_toml: str, strategy: str, events: int,
               should_stop: ShouldStop | None = None) -> dict:
    """One strategy with its last ``events`` kernel events kept (``run.trace_events``)."""
    sc = warmcore.Scenario.from_toml(scenario_toml).with_({"run.trace_events": events})
    return _run(sc, strategy, should_stop)


def _run(sc: warmcore.Scenario, strategy: str, should_stop, loads=None) -> dict:
    # through warmcore.compare, looked up at call time: the explorer's tests count and
    # hold the runs by replacing it
    r = warmcore.compare(sc, [strategy], loads=loads, max_wall=MAX_WALL_S,
                         should_stop=should_stop)[0]
    return finished(r)


# The explorer's answer across loads: seeds per point, and the share of the stop
# hook's fraction one run stands for (the probe and bisections vary; about 120 runs).
ADVICE_REPLICATIONS = 2
ADVICE_RUNS = 120


def advise(scenario_toml: str, strategies: tuple[str, ...], objective: str,
           replications: int = ADVICE_REPLICATIONS,
           should_stop: ShouldStop | None = None) -> dict:
    """``warmcore.advise`` on the setup: which strategy is best, up to what load. A stop
    from the page raises Stopped (nothing of a stopped answer is kept)."""
    def progress(runs: int) -> None:
        if should_stop is not None and should_stop(min(0.99, runs / ADVICE_RUNS)):
            raise Stopped({"stop_reason": "stopped", "runs": runs})

    return warmcore.advise(warmcore.Scenario.from_toml(scenario_toml), list(strategies),
                           objective, replications=replications, progress=progress,
                           max_wall=MAX_WALL_S)


def finished(r: warmcore.Result) -> dict:
    """The run's JSON object; a run stopped from the page is raised as ``Stopped``."""
    if r.stop_reason == "stopped":
        raise Stopped(r.to_dict())
    return r.to_dict()


def one_line(e: Exception) -> str:
    """An error as the page shows it: ``FIELD: REASON`` for a bad setting, else the
    exception's type and its first line."""
    if isinstance(e, warmcore.ConfigError):
        return f"{e.field}: {e.reason}"
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")


class Job:
    """Runs done one after another in a worker thread that the page polls: their
    progress, a stop flag each run checks (``should_stop``), and the results so far.
    The explorer keeps it in the session, so a rerun of its script (any click) finds
    it going instead of starting over. ``key``: what the runs are of (the explorer's
    start with the setup's TOML); ``tasks``: (label, run) pairs, ``run(should_stop)``
    returning a run's JSON object (or raising Stopped with its partial one)."""

    def __init__(self, key, tasks: list[tuple[str, Callable[[ShouldStop], dict]]]):
        self.key = key
        self.names = [label for label, _ in tasks]
        self._runs = [run for _, run in tasks]
        self.results: list[dict] = []
        self.error: Exception | None = None
        self.stop = threading.Event()
        self.current, self.fraction = 0, 0.0
        self.waiting = False            # for a run slot (RUN_SLOTS)
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._work, name="warmcore-runs", daemon=True)
        self.thread.start()

    def _ask(self, fraction: float) -> bool:
        self.fraction = fraction
        return self.stop.is_set()

    def _work(self) -> None:
        try:
            for i, run in enumerate(self._runs):
                self.current, self.fraction = i, 0.0
                if self.stop.is_set() or not self._take_slot():
                    break
                try:
                    self.results.append(run(self._ask))
                except Stopped as s:
                    self.results.append(s.result)
                    break
                finally:
                    RUN_SLOTS.release()
        except Exception as e:           # the page shows it as one line (error_line)
            self.error = e

    def _take_slot(self) -> bool:
        """Wait for one of the server's run slots (False if stopped meanwhile)."""
        self.waiting = True
        try:
            while not RUN_SLOTS.acquire(timeout=0.05):
                if self.stop.is_set():
                    return False
            return True
        finally:
            self.waiting = False

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    @property
    def stopped(self) -> bool:
        """Ended by its stop flag before every run was complete."""
        return self.stop.is_set() and not self.running and (
            len(self.results) < len(self.names) or
            any(d.get("stop_reason") == "stopped" for d in self.results))

    @property
    def error_line(self) -> str | None:
        return None if self.error is None else one_line(self.error)

    def status(self) -> tuple[float, str]:
        """(fraction of all runs done, a line saying which run, how far, how long)."""
        n, i = len(self.names), min(self.current, len(self.names) - 1)
        done = (i + self.fraction) / n
        if self.waiting:
            return min(1.0, done), (f"waiting for a free run slot for {self.names[i]} "
                                    f"({i + 1}/{n}): this server runs at most "
                                    f"{MAX_CONCURRENT_RUNS} at once")
        return min(1.0, done), (f"simulating {self.names[i]} ({i + 1}/{n}): "
                                f"{self.fraction:.0%} of its run, "
                                f"{time.monotonic() - self.started:.0f} s so far")

    def wait(self, seconds: float, progress: Callable[[float, str], object] | None = None,
             every: float = 0.1) -> bool:
        """Wait up to ``seconds`` for the runs to end, calling ``progress(*status())``
        every ``every`` seconds meanwhile; True once they have ended."""
        end = time.monotonic() + seconds
        while self.running and time.monotonic() < end:
            self.thread.join(min(every, seconds))
            if progress is not None:
                progress(*self.status())
        return not self.running


def job_for(jobs: MutableMapping, slot: str, key, tasks) -> Job:
    """The job in ``jobs[slot]`` for ``key``, started with ``tasks`` if there is none;
    a job for another key is stopped (its runs are not wanted any more)."""
    job = jobs.get(slot)
    if job is None or job.key != key:
        if job is not None:
            job.stop.set()
        job = jobs[slot] = Job(key, tasks)
    return job


def job_of_setup(jobs: MutableMapping, slot: str, setup: str) -> Job | None:
    """The job in ``jobs[slot]`` if it ran ``setup`` (the first item of its key); a job
    of a setup since replaced is stopped and taken out (its runs are not wanted)."""
    job = jobs.get(slot)
    if job is not None and job.key[0] != setup:
        job.stop.set()
        jobs[slot] = job = None
    return job
