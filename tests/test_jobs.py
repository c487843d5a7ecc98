"""The explorer's job manager (warmcore.jobs) without Streamlit: runs done in order in a
worker thread, their progress, Stop and the partial result it leaves, the results so
far, a failure as one line, and a job polled from threads other than its starter's
(each of the explorer's script runs is a thread of its own)."""

from __future__ import annotations

import functools
import sys
import threading
import time

import pytest

import warmcore
from warmcore import jobs

SMALL = warmcore.Scenario.load("mmc").with_(requests=300).to_toml()
# long enough to stop part-way, measured from its start (no warm-up)
LONG = warmcore.Scenario.load("mmc").with_({"run.warmup": 0.0}, requests=3_000_000).to_toml()
STRATEGIES = ["shared-queue", "pc", "thread-pool"]


def runs_of(toml: str, names) -> list:
    return [(n, functools.partial(jobs.run_one, toml, n)) for n in names]


def until(condition, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


class Held:
    """A run that reports ``fraction`` of its progress, then waits for ``release`` (or
    the job's stop) before it returns ``result``: a run the test controls."""

    def __init__(self, result: dict, fraction: float = 0.5):
        self.result, self.fraction = result, fraction
        self.started, self.release = threading.Event(), threading.Event()
        self.thread = None

    def __call__(self, should_stop) -> dict:
        self.thread = threading.current_thread()
        self.started.set()
        while not self.release.is_set() and not should_stop(self.fraction):
            time.sleep(0.005)
        return self.result


def test_runs_are_done_in_order_in_a_worker_thread():
    job = jobs.Job(("k",), runs_of(SMALL, STRATEGIES))
    assert job.wait(60)
    assert job.error is None and not job.running and not job.stopped
    assert [d["strategy"] for d in job.results] == STRATEGIES
    # the same objects the run functions give when called directly (same seed)
    assert job.results == [jobs.run_one(SMALL, n) for n in STRATEGIES]
    assert all(d["stop_reason"] == "request limit" and d["requests"] == 300
               for d in job.results)

    first, second = Held({"strategy": "a"}), Held({"strategy": "b"})
    job = jobs.Job(("k",), [("a", first), ("b", second)])
    first.started.wait(10)
    assert first.thread is job.thread is not threading.current_thread()
    assert not second.started.is_set()              # one run at a time, in order
    first.release.set()
    second.started.wait(10)
    second.release.set()
    assert job.wait(10) and job.results == [{"strategy": "a"}, {"strategy": "b"}]


def test_progress_names_the_run_and_how_far_it_is():
    first, second = Held({"strategy": "a"}, 0.5), Held({"strategy": "b"}, 0.25)
    job = jobs.Job(("k",), [("a at 1", first), ("b at 2", second)])
    first.started.wait(10)
    until(lambda: job.fraction == 0.5)
    done, text = job.status()
    assert done == 0.25                             # half of the first of two runs
    assert text.startswith("simulating a at 1 (1/2): 50% of its run, ")
    assert text.endswith(" s so far")
    first.release.set()
    second.started.wait(10)
    until(lambda: job.fraction == 0.25)
    assert job.status()[0] == pytest.approx(0.625)
    assert job.status()[1].startswith("simulating b at 2 (2/2): 25% of its run")
    second.release.set()
    assert job.wait(10)


def test_wait_reports_progress_while_a_real_run_goes():
    seen = []
    job = jobs.Job(("k",), runs_of(LONG, ["shared-queue"]))
    until(lambda: job.fraction > 0)                 # past the scenario's build
    assert not job.wait(0.3, progress=lambda done, text: seen.append((done, text)))
    job.stop.set()
    assert job.wait(10)
    assert seen and all(0 <= d <= 1 for d, _ in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)      # it only goes forward
    assert seen[-1][0] > 0 and seen[-1][1].startswith("simulating shared-queue (1/1): ")


def test_a_stopped_run_returns_its_partial_result_marked_stopped():
    # the run functions raise it, so that a cache around them never keeps it
    with pytest.raises(jobs.Stopped) as stop:
        jobs.run_one(LONG, "shared-queue", should_stop=lambda f: f > 0.01)
    partial = stop.value.result
    assert partial["stop_reason"] == "stopped" and partial["partial"]
    assert 0 < partial["requests"] < 3_000_000

    # in a job: Stop ends the run within a fraction of a second, its result kept, and
    # the runs after it are not started
    job = jobs.Job(("k",), runs_of(LONG, ["shared-queue", "pc"]))
    until(lambda: job.fraction > 0.01)
    job.stop.set()
    t = time.monotonic()
    assert job.wait(10)
    assert time.monotonic() - t < 2
    assert job.stopped and job.error is None
    (d,) = job.results
    assert d["strategy"] == "shared-queue" and d["stop_reason"] == "stopped" and d["partial"]
    assert 0 < d["requests"] < 3_000_000 and 0.01 < job.fraction < 1


def test_the_results_so_far_and_a_stop_between_runs():
    first, second = Held({"strategy": "a"}), Held({"strategy": "b"})
    job = jobs.Job(("k",), [("a", first), ("b", second), ("c", Held({"strategy": "c"}))])
    first.release.set()
    second.started.wait(10)
    assert job.running and job.results == [{"strategy": "a"}]     # the first, done
    job.stop.set()                                  # the held run sees it and returns
    assert job.wait(10)
    # two complete results, the third run never began: stopped all the same
    assert job.results == [{"strategy": "a"}, {"strategy": "b"}] and job.stopped


def test_a_job_that_ran_to_the_end_is_not_stopped_by_a_late_stop():
    job = jobs.Job(("k",), runs_of(SMALL, ["pc"]))
    assert job.wait(60)
    job.stop.set()
    assert not job.stopped


@pytest.mark.parametrize("error, line", [
    (warmcore.ConfigError("workload.rate_per_s", "must be > 0"),
     "workload.rate_per_s: must be > 0"),
    (ValueError("first line\nsecond line"), "ValueError: first line"),
    (RuntimeError(), "RuntimeError"),
])
def test_an_error_is_one_line(error, line):
    def fails(should_stop):
        raise error

    job = jobs.Job(("k",), [("a", functools.partial(jobs.run_one, SMALL, "pc")),
                            ("b", fails), ("c", Held({}))])
    assert job.wait(60)
    assert job.error is error and job.error_line == line
    assert [d["strategy"] for d in job.results] == ["pc"]          # the runs before it
    assert jobs.one_line(error) == line


def test_a_run_that_fails_is_one_line_naming_the_cause():
    toml = warmcore.Scenario.load({
        "workload": {"kind": "open", "arrival": "trace", "trace_file": "no-such-trace.txt"},
        "strategy": {"name": "pc"}, "run": {"requests": 200}}).to_toml()
    job = jobs.Job(("k",), runs_of(toml, ["pc"]))
    assert job.wait(60)
    assert "no-such-trace.txt" in job.error_line and "\n" not in job.error_line
    assert job.results == [] and not job.stopped


def test_a_job_is_polled_and_stopped_from_other_threads():
    """The explorer starts a job in one script run and finds it in the next, which
    Streamlit runs in another thread: the session (here a dict) holds it."""
    session: dict = {}

    def start():                                    # one script run
        jobs.job_for(session, "job", (LONG, ("shared-queue",)),
                     runs_of(LONG, ["shared-queue"]))

    seen = {}

    def poll():                                     # the next: its progress, then Stop
        job = jobs.job_of_setup(session, "job", LONG)
        seen["first wait"] = job.wait(0.2)
        seen["status"] = job.status()
        job.stop.set()
        seen["second wait"] = job.wait(10)

    for target in (start, poll):
        t = threading.Thread(target=target)
        t.start()
        t.join(30)
    job = session["job"]
    assert seen["first wait"] is False and seen["second wait"] is True
    assert seen["status"][1].startswith("simulating shared-queue (1/1): ")
    assert job.stopped and job.results[0]["stop_reason"] == "stopped"


def test_job_for_keeps_the_job_of_its_key_and_stops_one_of_another():
    session: dict = {}
    held = Held({"strategy": "a"})
    job = jobs.job_for(session, "job", ("setup 1", ("a",)), [("a", held)])
    assert session["job"] is job
    again = jobs.job_for(session, "job", ("setup 1", ("a",)), [("a", Held({}))])
    assert again is job and job.running             # found going, not started over
    other = jobs.job_for(session, "job", ("setup 2", ("a",)), [("a", Held({}))])
    assert other is not job and session["job"] is other
    assert job.stop.is_set() and job.wait(10)       # its runs are not wanted any more
    other.stop.set()
    assert other.wait(10)


def test_job_of_setup_drops_the_job_of_a_replaced_setup():
    session: dict = {"empty": None}
    assert jobs.job_of_setup(session, "none", "setup 1") is None
    assert jobs.job_of_setup(session, "empty", "setup 1") is None
    job = jobs.job_for(session, "job", ("setup 1", 2), [("a", Held({}))])
    assert jobs.job_of_setup(session, "job", "setup 1") is job and job.running
    assert jobs.job_of_setup(session, "job", "setup 2") is None
    assert session["job"] is None and job.stop.is_set() and job.wait(10)


def test_the_job_manager_does_not_need_streamlit():
    import subprocess

    code = ("import sys, warmcore.jobs, warmcore.explorer_data, warmcore.explorer_charts; "
            "assert 'streamlit' not in sys.modules and 'altair' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_runs_of_all_sessions_share_the_servers_run_slots(monkeypatch):
    """At most MAX_CONCURRENT_RUNS runs at once over every job (an explorer served to
    many): a second job waits, says so, and starts when the first one's run ends."""
    monkeypatch.setattr(jobs, "RUN_SLOTS", threading.BoundedSemaphore(1))
    monkeypatch.setattr(jobs, "MAX_CONCURRENT_RUNS", 1)
    first, second = Held({"n": 1}), Held({"n": 2})
    a = jobs.Job("a", [("first", first)])
    until(lambda: a.fraction == 0.5)                 # holding the one slot
    b = jobs.Job("b", [("second", second)])
    until(lambda: b.waiting)
    assert b.fraction == 0.0 and "waiting for a free run slot" in b.status()[1]
    assert "at most 1 at once" in b.status()[1]
    first.release.set()
    until(lambda: not a.running)
    until(lambda: b.fraction == 0.5)                 # it got the slot
    second.release.set()
    until(lambda: not b.running)
    assert (a.results, b.results) == ([{"n": 1}], [{"n": 2}])


def test_a_job_stopped_while_waiting_for_a_slot_ends_without_running(monkeypatch):
    monkeypatch.setattr(jobs, "RUN_SLOTS", threading.BoundedSemaphore(1))
    holder = Held({"n": 1})
    a = jobs.Job("a", [("holder", holder)])
    until(lambda: a.fraction == 0.5)
    never = Held({"n": 2})
    b = jobs.Job("b", [("never", never)])
    until(lambda: b.waiting)
    b.stop.set()
    until(lambda: not b.running)
    assert b.results == [] and b.stopped
    holder.release.set()
    until(lambda: not a.running)
    assert jobs.RUN_SLOTS.acquire(blocking=False)    # every slot given back
