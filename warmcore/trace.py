"""A run's kernel trace as a Chrome trace-event file (the JSON that Perfetto UI and
chrome://tracing open): one track per CPU and one per thread, flow arrows where a
request passes from one thread to another (the wake-up of the thread that takes it
over), an instant mark where a thread migrates, and a counter track per CPU of its
clock (GHz): its value at the window's start and each change the governor made.

The trace is the run's last ``run.trace_events`` kernel events (a bounded deque in
the kernel), so the file's size is bounded whatever the run length; the window it
covers and the cap are stated in the file (``otherData``). Event rows are as
docs/formats.md describes ``trace``: ``[t, cpu, thread, kind, label, duration, request]``
(kinds ``dispatch``, ``run``; ``freq``, a CPU's clock change, and ``clock``, its clock
at the window's start, carry the GHz in the label's place).

    warmcore run pipeline --trace pipeline.json     # the CLI writes the same file
"""

from __future__ import annotations

import json
from pathlib import Path

from warmcore.result import Result
from warmcore.simcore.config import write_atomic

DEFAULT_EVENTS = 5000       # kernel events kept when a scenario asks for none
CPU_PID, THREAD_PID = 1, 2


def chrome_trace(result: Result) -> dict:
    """The trace-event JSON object of ``result`` (its ``trace`` rows)."""
    rows = result.trace or []
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": CPU_PID, "args": {"name": "CPUs"}},
        {"ph": "M", "name": "process_sort_index", "pid": CPU_PID, "args": {"sort_index": 0}},
        {"ph": "M", "name": "process_name", "pid": THREAD_PID, "args": {"name": "threads"}},
        {"ph": "M", "name": "process_sort_index", "pid": THREAD_PID,
         "args": {"sort_index": 1}},
    ]
    cpus, threads = set(), set()
    last_cpu: dict[int, int] = {}          # thread -> CPU of its previous slice
    last_slice: dict[int, tuple] = {}      # request -> (thread, ts) of its previous slice
    flow = 0
    clock: dict[int, list] = {}            # CPU -> its counter events, in time order
    for t, cpu, tid, kind, label, dur, rid in sorted(rows, key=lambda r: r[0]):
        ts, d = t * 1e6, dur * 1e6          # microseconds
        cpus.add(cpu)
        if kind in ("clock", "freq"):       # the CPU's clock then / its change: a counter
            track = clock.setdefault(cpu, [])
            if track and track[-1]["ts"] == ts:
                track[-1]["args"]["GHz"] = label     # changed again at the same instant
            else:
                track.append({"ph": "C", "cat": "clock", "name": f"CPU {cpu} clock",
                              "pid": CPU_PID, "ts": ts, "args": {"GHz": label}})
            continue
        threads.add(tid)
        if kind == "dispatch":
            if d > 0:                       # the thread waits for its CPU to wake up
                events.append({"ph": "X", "cat": "wake-up", "name": "wake-up latency",
                               "pid": THREAD_PID, "tid": tid, "ts": ts, "dur": d,
                               "args": {"cpu": cpu}})
            continue
        name = label or "run"
        args = {"thread": tid, "request": rid} if rid >= 0 else {"thread": tid}
        events.append({"ph": "X", "cat": "cpu", "name": name, "pid": CPU_PID, "tid": cpu,
                       "ts": ts, "dur": d, "args": args})
        events.append({"ph": "X", "cat": "thread", "name": name, "pid": THREAD_PID,
                       "tid": tid, "ts": ts, "dur": d, "args": {"cpu": cpu, "request": rid}})
        prev = last_cpu.get(tid)
        if prev is not None and prev != cpu:
            events.append({"ph": "i", "s": "t", "cat": "migration",
                           "name": f"migrated CPU {prev} -> {cpu}", "pid": THREAD_PID,
                           "tid": tid, "ts": ts})
        last_cpu[tid] = cpu
        if rid >= 0:
            before = last_slice.get(rid)
            if before is not None and before[0] != tid:      # handed to another thread
                flow += 1
                events.append({"ph": "s", "cat": "wake", "name": "hand-off", "id": flow,
                               "pid": THREAD_PID, "tid": before[0], "ts": before[1]})
                events.append({"ph": "f", "bp": "e", "cat": "wake", "name": "hand-off",
                               "id": flow, "pid": THREAD_PID, "tid": tid, "ts": ts})
            last_slice[rid] = (tid, ts)
    clipped = _clip(events)
    for cpu in sorted(clock):
        events.extend(clock[cpu])
    ghz = result.cpu_ghz or []
    for cpu in sorted(cpus):
        clock = f" ({ghz[cpu]:.2f} GHz mean)" if cpu < len(ghz) else ""
        events.append({"ph": "M", "name": "thread_name", "pid": CPU_PID, "tid": cpu,
                       "args": {"name": f"CPU {cpu}{clock}"}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": CPU_PID, "tid": cpu,
                       "args": {"sort_index": cpu}})
    for tid in sorted(threads):
        events.append({"ph": "M", "name": "thread_name", "pid": THREAD_PID, "tid": tid,
                       "args": {"name": f"thread {tid}"}})
    starts = [r[0] for r in rows]
    ends = [r[0] + r[5] for r in rows]
    events_kept = sum(1 for r in rows if r[3] != "clock")
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "warmcore",
            "scenario": result.scenario, "strategy": result.strategy,
            "machine": result.machine, "seed": result.seed,
            "kernel_events": events_kept,
            "clock_changes": sum(1 for r in rows if r[3] == "freq"),
            "note": "the run's last kernel events (run.trace_events caps them), not the "
                    "whole run; times in simulated microseconds from the start of the run; "
                    "a counter track per CPU ('CPU n clock', GHz) from the window's start, "
                    "with each change of its clock (governor decisions)",
            "window_us": [min(starts) * 1e6, max(ends) * 1e6] if rows else None,
            "clipped_slices": clipped,
            "clipping": "a slice is cut where the next slice of its CPU or thread starts (a "
                        "chunk recorded at its planned length ends earlier when its "
                        "CPU's rate changes under it)",
        },
    }


def _clip(events: list[dict]) -> int:
    """Cut each X slice at the start of the next one on the same track; how many were cut."""
    tracks: dict[tuple, list[dict]] = {}
    for e in events:
        if e["ph"] == "X" and e["cat"] in ("cpu", "thread"):
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    n = 0
    for slices in tracks.values():
        slices.sort(key=lambda e: e["ts"])
        for a, b in zip(slices, slices[1:], strict=False):
            if a["ts"] + a["dur"] > b["ts"]:
                a["dur"] = b["ts"] - a["ts"]
                n += 1
    return n


def write_chrome_trace(result: Result, path: str | Path) -> None:
    write_atomic(path, json.dumps(chrome_trace(result)), "--trace")
