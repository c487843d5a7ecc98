"""MODEL.md's phenomena, on the built-in scenarios with their default parameters."""

from __future__ import annotations

from tests.helpers import run


def test_contended_server_is_faster_on_one_cpu_than_on_four():
    """Phenomenon 3: contended stores make a message server faster on fewer cores."""
    one = run("contended", {"server.cpus": 1}, requests=6000)
    four = run("contended", {"server.cpus": 4}, requests=6000)
    assert one["throughput_rps"] > four["throughput_rps"]
    # ... because on four cores every message stalls on the contended lines.
    assert four["breakdown_us"]["contention"] > 10 * one["breakdown_us"]["contention"]


def test_throughput_machine_loses_on_one_job_and_wins_on_many():
    """Phenomenon 4: many slow hardware threads lose on one task, win by a wide margin
    on many (Sun T1000 against a contemporary Core 2 Quad)."""
    def makespan(preset, jobs):
        return run("throughput-machine", {"machine.preset": preset,
                                          "workload.jobs": jobs})["makespan_s"]

    assert makespan("t1000", 1) > 2 * makespan("core2-quad", 1)
    assert makespan("core2-quad", 64) > 1.5 * makespan("t1000", 64)
