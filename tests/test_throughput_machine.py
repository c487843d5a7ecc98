"""docs/design/MODEL.md phenomenon 4, every part: a many-thread chip loses on one job, slows down
as its hardware threads fill, and wins widely on many jobs (with fluid SMT rates:
a job's pace follows how many siblings share its core while it runs)."""

from __future__ import annotations

import pytest

from tests.helpers import run


def makespan(jobs, preset="t1000", **sets):
    return run("throughput-machine", {"machine.preset": preset, "workload.jobs": jobs,
                                      **sets})["makespan_s"]


@pytest.fixture(scope="module")
def t1000():
    return {n: makespan(n) for n in (1, 8, 16, 24, 32, 64)}


def test_t1000_slows_down_as_its_hardware_threads_fill(t1000):
    # one job per core (8 cores) runs alone on its core, as fast as a single job
    assert t1000[8] == pytest.approx(t1000[1], rel=1e-9)
    # 2, 3, 4 jobs per core share its pipeline: each step is slower
    assert t1000[8] < t1000[16] < t1000[24] < t1000[32]
    assert t1000[32] > 1.08 * t1000[8]
    # beyond 32 hardware threads the jobs run in waves
    assert t1000[64] > 1.8 * t1000[32]


def test_t1000_loses_on_one_job_and_wins_widely_on_many(t1000):
    assert t1000[1] > 2 * makespan(1, "core2-quad")
    assert makespan(64, "core2-quad") > 2.5 * t1000[64]


def test_without_the_memory_bus_the_time_still_rises_with_the_jobs():
    off = {"machine.effects.membus": False}
    assert makespan(8, **off) < makespan(16, **off) < makespan(24, **off)
