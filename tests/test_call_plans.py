"""A request's backend calls as a plan (work.backend_calls: calls written when the
calls they come after are answered, the response once all are), made by event-loop's
non-blocking client and by thread-pool's servlet on an executor, checked by hand on
ideal CPUs (free system calls and switches)."""

from __future__ import annotations

import pytest

from tests.helpers import run
from warmcore.simcore.config import ConfigError

# The WSPerfLab study's testA (TestRouteBasic.java), in microseconds here:
# A then C and D, B then E.
TEST_A = [{"delay_us": 50.0}, {"delay_us": 150.0}, {"delay_us": 80.0, "after": [0]},
          {"delay_us": 1.0, "after": [0]}, {"delay_us": 4.0, "after": [1]}]


def _plan(calls=TEST_A, strategy="event-loop", answer_us=0.0, **sets):
    """One closed client elsewhere, a deterministic 10 us handler, the plan's calls on
    the mmc machine's 8 ideal CPUs. The loop's selector work (``epoll_us``, 1 us) opens
    each of its passes: the request's and each answer's."""
    calls = [dict(c, answer_us=answer_us) for c in calls]
    base = {"machine.cores": 8, "strategy.name": strategy, "work.backend_async": True,
            "work.backend_calls": calls}
    return run("mmc", {**base, **sets}, workload={
        "kind": "closed", "clients": 1, "think": "deterministic", "think_us": 0.0,
        "service": "deterministic", "service_us": 10.0}, requests=500, warmup=0.1)


def test_a_request_waits_for_the_plans_longest_chain_of_calls():
    """By hand: the loop's pass (1 us) and the handler's 10 us, then A (50) and B (150)
    at once, C (80) and D (1) once A is answered, E (4) once B is: the longest chain is
    B then E, 154 us, with the passes that read B's and E's answers (1 us each), so
    every request takes 1 + 10 + 150 + 1 + 4 + 1 = 167 us; its blocked_io is 154."""
    r = _plan()
    assert r["latency_us"]["min"] == pytest.approx(167.0, rel=1e-9)
    assert r["latency_us"]["max"] == pytest.approx(167.0, rel=1e-9)
    assert r["breakdown_us"]["blocked_io"] == pytest.approx(154.0, rel=1e-9)


def test_each_answer_costs_its_reader_and_the_calls_after_it_wait_for_that():
    """By hand, 2 us to parse each answer on the loop: the request's pass and handler
    end at 11, when A and B are written; A answered at 61, its pass and parse end at
    64, then C and D are written; B answered at 161, done by 164, then E, answered at
    168, done by 171; D (answered at 65) and C (at 144) are done by then. So 171 us a
    request, and the loop's CPU is 6 passes + 10 + 5 x 2 = 26 us of it."""
    r = _plan(answer_us=2.0)
    assert r["latency_us"]["mean"] == pytest.approx(171.0, rel=1e-9)
    cpu_us = r["task_clock_ms"] * 1e3 / r["requests"]
    assert cpu_us == pytest.approx(26.0, rel=1e-3)


def test_a_plan_through_the_backend_on_the_machine_pays_its_cpu_on_each_call():
    """By hand, the mock on the machine spending 6 us a call (3 reading it on one of
    its loops, 3 answering after the delay on one of its timer threads, each call on
    its own: one per CPU, handed out in turn) and 2 us to parse each answer: A and B
    written at 11; B read by 14, answered at 14 + 150 + 3 = 167, its pass and parse
    done by 170, then E read by 173, answered at 173 + 4 + 3 = 180, done by 183 (A's
    branch ends at 159): 183 us a request; the mock busy 5 x 6 = 30 us of it."""
    r = _plan(answer_us=2.0, **{"work.backend_mock_us": 6.0})
    assert r["latency_us"]["mean"] == pytest.approx(183.0, rel=1e-9)
    mock_us = r["processes"]["backend"]["task_clock_ms"] * 1e3 / r["requests"]
    assert mock_us == pytest.approx(30.0, rel=1e-3)


# the thread pool's own overheads set to 0 (its poller's passes, interest changes,
# queue locks and thread starts), so that only the plan's calls are left to count
NO_POOL_OVERHEADS = {"strategy.params.epoll_us": 0.0, "strategy.params.epoll_ctl_us": 0.0,
                     "strategy.params.lock_us": 0.0, "strategy.params.thread_start_us": 0.0}


@pytest.mark.parametrize("mock_us, latency_us", [(None, 168.0), (6.0, 180.0)])
def test_a_blocking_server_makes_its_plan_on_an_executor_and_waits_for_all(mock_us,
                                                                          latency_us):
    """By hand, Tomcat's testA servlet (TestCaseAServlet: the calls on its own
    executor, the worker waiting on their futures), 2 us to parse each answer, no pool
    overheads: the handler ends at 10; A answered at 60 and parsed by 62 on an executor
    thread, which submits C and D; B answered at 160, parsed by 162, then E answered at
    166, parsed by 168, which wakes the worker: 168 us, and 10 + 5 x 2 = 20 us of CPU
    in the server. With the mock on the machine (6 us a call, 3 before and 3 after its
    delay) each call's chain gains 6: B 10 + 3 + 150 + 3 = 166, parsed by 168, E 168 +
    3 + 4 + 3 = 178, parsed by 180."""
    sets = dict(NO_POOL_OVERHEADS, **{"strategy.params.backend_threads": 8})
    if mock_us is not None:
        sets["work.backend_mock_us"] = mock_us
    r = _plan(strategy="thread-pool", answer_us=2.0, **sets)
    assert r["latency_us"]["min"] == pytest.approx(latency_us, rel=1e-9)
    assert r["latency_us"]["max"] == pytest.approx(latency_us, rel=1e-9)
    assert r["task_clock_ms"] * 1e3 / r["requests"] == pytest.approx(20.0, rel=1e-3)


@pytest.mark.parametrize("bad, field", [
    ({"work.backend_us": 100.0}, "backend_calls"),
    ({"work.backend_calls": [{"delay_us": 5.0, "after": [0]}]}, r"backend_calls\.0\.after"),
    ({"work.backend_async": False}, "backend_calls.*non-blocking"),
    ({"strategy.name": "shared-queue"}, "backend_calls.*event-loop"),
])
def test_a_plan_that_cannot_be_made_is_refused_naming_its_field(bad, field):
    with pytest.raises(ConfigError, match=field):
        _plan(**bad)
