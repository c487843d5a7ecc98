"""The Chrome trace-event export (warmcore/trace.py, ``warmcore run --trace``)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

import warmcore
from warmcore.cli import main
from warmcore.trace import DEFAULT_EVENTS, chrome_trace


def traced(strategy: str, requests: int, events: int, warmup: float = 0.1):
    sc = warmcore.Scenario.load("pipeline").with_(
        {"run.trace_events": events, "run.warmup": warmup}, strategy=strategy,
        requests=requests)
    return warmcore.simulate(sc)


def check_format(doc: dict) -> dict[int, list]:
    """Every X slice complete, CPU tracks without overlap; the CPU slices by CPU."""
    json.dumps(doc)                                      # plain JSON
    by_cpu = defaultdict(list)
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M", "i", "s", "f")
        if e["ph"] == "X":
            for k in ("ts", "dur", "pid", "tid", "name"):
                assert k in e, (k, e)
            assert e["dur"] >= 0
            if e["pid"] == 1:
                by_cpu[e["tid"]].append((e["ts"], e["dur"]))
    for cpu, slices in by_cpu.items():
        slices.sort()
        for (t0, d0), (t1, _) in zip(slices, slices[1:], strict=False):
            assert t0 + d0 <= t1 + 1e-6, (cpu, t0, d0, t1)     # 1e-6 us of float rounding
    return by_cpu


@pytest.mark.parametrize("strategy", ["pc", "pec"])
def test_a_whole_run_trace_is_valid_and_its_cpu_slices_sum_to_task_clock(strategy):
    r = traced(strategy, 1500, 1_000_000, warmup=0.0)    # every event kept, no warm-up
    doc = chrome_trace(r)
    by_cpu = check_format(doc)
    busy_us = sum(d for s in by_cpu.values() for _, d in s)
    assert busy_us == pytest.approx(r.task_clock_ms * 1e3, rel=2e-3)
    assert doc["otherData"]["kernel_events"] == len(r.trace)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert any(n.startswith("CPU ") for n in names) and any(n.startswith("thread ") for n in names)


def test_pec_hands_requests_over_with_flow_arrows():
    doc = chrome_trace(traced("pec", 800, 3000))
    starts = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    ends = [e for e in doc["traceEvents"] if e["ph"] == "f"]
    assert starts and len(starts) == len(ends)
    assert {e["id"] for e in starts} == {e["id"] for e in ends}


def test_the_file_is_bounded_whatever_the_run_length():
    small = chrome_trace(traced("pec", 1000, 2000))
    large = chrome_trace(traced("pec", 8000, 2000))
    assert small["otherData"]["kernel_events"] == large["otherData"]["kernel_events"] == 2000
    lo, hi = large["otherData"]["window_us"]
    assert 0 < lo < hi


def test_cli_run_trace_writes_the_file(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["run", "pipeline", "--requests", "800", "--strategy", "pec",
                 "--trace", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "trace" not in printed                        # the rows go to the file only
    doc = json.loads(out.read_text())
    check_format(doc)
    assert doc["otherData"]["kernel_events"] == DEFAULT_EVENTS
    assert doc["otherData"]["strategy"] == "pec"


@pytest.mark.parametrize("path, reason", [
    ("nowhere/x.json", "--trace: cannot write nowhere/x.json"),
    ("x.txt", "--trace: 'x.txt' should name a .json file"),
])
def test_cli_trace_bad_path_is_one_line(tmp_path, monkeypatch, capsys, path, reason):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "pipeline", "--requests", "200", "--trace", path]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"warmcore: {reason}") and "\n" not in err
