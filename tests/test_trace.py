"""The Chrome trace-event export (warmcore/trace.py, ``warmcore run --trace``)."""

from __future__ import annotations

import json
from collections import defaultdict, deque

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
        assert e["ph"] in ("X", "M", "i", "s", "f", "C")
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
    assert doc["otherData"]["kernel_events"] == sum(1 for e in r.trace if e[3] != "clock")
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert any(n.startswith("CPU ") for n in names) and any(n.startswith("thread ") for n in names)


def test_a_dispatching_strategy_hands_requests_over_with_flow_arrows():
    doc = chrome_trace(traced("jetty9-milestone", 800, 3000))
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
    assert main(["run", "pipeline", "--requests", "800", "--strategy", "jetty9-milestone",
                 "--trace", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "trace" not in printed                        # the rows go to the file only
    doc = json.loads(out.read_text())
    check_format(doc)
    assert doc["otherData"]["kernel_events"] == DEFAULT_EVENTS
    assert doc["otherData"]["strategy"] == "jetty9-milestone"


@pytest.mark.parametrize("path, reason", [
    ("nowhere/x.json", "--trace: nowhere/x.json: the folder nowhere does not exist"),
    ("x.txt", "--trace: 'x.txt' should name a .json file"),
])
def test_cli_trace_bad_path_is_one_line(tmp_path, monkeypatch, capsys, path, reason):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "pipeline", "--requests", "200", "--trace", path]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"warmcore: {reason}") and "\n" not in err


def traced_with_clock_log(events: int, requests: int, sets: dict | None = None):
    """A traced run built by hand, so that the DVFS controller's own log of clock
    changes (``clock.changes``: time, domain, GHz) can be checked against the trace."""
    from warmcore.build import build, finish, run_built

    sc = warmcore.Scenario.load("pipeline").with_(
        {"run.trace_events": events, "run.warmup": 0.0, **(sets or {})},
        strategy="jetty9-milestone",
        requests=requests)
    ctx = build(sc, sc.seed)
    ctl = ctx.machine.clock
    # the whole log: with per-CPU policies (the i7-3770's) the package clock follows
    # which cores run, more changes than the controller's bounded log keeps
    ctl.changes = deque(ctl.changes, maxlen=None)
    res = finish(ctx, run_built(ctx))
    per_cpu = {c: [] for c in range(ctx.machine.n_cpus)}
    for t, d, ghz in ctl.changes:            # the first entry of each domain: its start
        for c in ctl.domains[d]:
            per_cpu[c].append((t * 1e6, ghz))
    return warmcore.Result.from_dict(res), per_cpu


def counters(doc: dict) -> dict[int, list]:
    out = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            assert e["pid"] == 1 and set(e["args"]) == {"GHz"}
            out[int(e["name"].split()[1])].append((e["ts"], e["args"]["GHz"]))
    return out


def clock_at(log: list, ts: float) -> float:
    return [g for t, g in log if t <= ts][-1]


@pytest.mark.parametrize("domain", ["package", "core"])
def test_each_cpus_clock_is_a_counter_track_matching_the_governors_changes(domain):
    """The whole run kept: every CPU's counter track is its clock at the start and
    then exactly the changes the DVFS controller applied (per core or per package)."""
    r, log = traced_with_clock_log(1_000_000, 6000,
                                   {"machine.overrides": {"freq_domain": domain}})
    doc = chrome_trace(r)
    check_format(doc)
    tracks = counters(doc)
    assert set(tracks) == set(log)               # one track per CPU
    changes = sum(len(v) - 1 for v in log.values())
    assert changes > 0 and doc["otherData"]["clock_changes"] == changes
    for cpu, track in tracks.items():
        assert track == sorted(track)
        assert track == log[cpu], cpu
    assert {g for v in tracks.values() for _, g in v} - {3.4} != set()   # it did slow down


def test_a_window_starts_each_counter_at_the_clock_then():
    """Only the run's last 400 events kept: each CPU's counter starts at the window's
    first instant with the clock the CPU had then, and follows the changes after."""
    r, log = traced_with_clock_log(400, 6000, {"machine.overrides": {"freq_domain": "core"}})
    doc = chrome_trace(r)
    lo, hi = doc["otherData"]["window_us"]
    assert lo > 0 and doc["otherData"]["kernel_events"] == 400
    # changes fell off the window's front: the start value is theirs, not the boot clock
    assert any(clock_at(log[c], lo) != log[c][0][1] for c in log)
    for cpu, track in counters(doc).items():
        assert track[0] == (lo, clock_at(log[cpu], lo)), cpu
        assert track[1:] == [(t, g) for t, g in log[cpu] if lo < t <= hi], cpu


def test_tracing_leaves_the_untraced_json_alone():
    """Trace off: no clock rows and no listener; the JSON is what it was (the CLI
    runs of pipeline, web and contended were compared by sha256 before and after)."""
    sc = warmcore.Scenario.load("pipeline").with_(strategy="jetty9-milestone", requests=1500)
    plain = warmcore.simulate(sc).to_dict()
    assert "trace" not in plain
    traced_ = warmcore.simulate(sc.with_({"run.trace_events": 100})).to_dict()
    kinds = {row[3] for row in traced_.pop("trace")}
    assert {"clock", "run", "dispatch"} <= kinds
    assert traced_ == plain
