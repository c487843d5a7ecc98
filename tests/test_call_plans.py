"""A request's backend calls as a plan (work.backend_calls: calls written when the
calls they come after are answered, the response once all are), made by event-loop's
non-blocking client, checked by hand on ideal CPUs (free system calls and switches)."""

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


@pytest.mark.parametrize("bad, field", [
    ({"work.backend_us": 100.0}, "backend_calls"),
    ({"work.backend_calls": [{"delay_us": 5.0, "after": [0]}]}, r"backend_calls\.0\.after"),
    ({"work.backend_async": False}, "backend_calls.*non-blocking"),
    ({"strategy.name": "shared-queue"}, "backend_calls.*event-loop"),
])
def test_a_plan_that_cannot_be_made_is_refused_naming_its_field(bad, field):
    with pytest.raises(ConfigError, match=field):
        _plan(**bad)
