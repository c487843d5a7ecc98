"""The memory-bound batch of issue 35 item 1: `throughput-machine` on the i7-3770,
4 MiB streamed per job, over 1..8 jobs, with the L2 streamer and the bus (the
model), the streamer off (before issue 35) and the bus's bandwidth unlimited.
Prints a table and writes docs/membus-stream-sweep.png (Altair + vl-convert).

    python bench/membus_sweep.py [--out docs/membus-stream-sweep.png]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

MIB = 4
VARIANTS = {
    "streamer + bus (model)": [],
    "no streamer (before)": ["--set", "machine.overrides.extra.stream_ahead_lines=0.0"],
    "streamer, bus unlimited": ["--set", "machine.effects.membus=false"],
}


def gbs(jobs: int, extra: list[str]) -> float:
    """Aggregate GB/s of ``jobs`` jobs streaming MIB MiB each: bytes / makespan."""
    out = subprocess.run(
        ["warmcore", "run", "throughput-machine", "--json", "--set", "machine.preset=i7-3770",
         "--set", f"workload.jobs={jobs}", *extra], check=True, capture_output=True, text=True)
    return jobs * MIB * 2**20 / json.loads(out.stdout)["makespan_s"] / 1e9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/membus-stream-sweep.png")
    args = ap.parse_args()
    rows = [{"jobs": n, "variant": v, "GB/s": gbs(n, extra)}
            for v, extra in VARIANTS.items() for n in range(1, 9)]
    print("jobs  " + "  ".join(f"{v:>24}" for v in VARIANTS))
    for n in range(1, 9):
        print(f"{n:>4}  " + "  ".join(f"{r['GB/s']:>24.2f}" for r in rows if r["jobs"] == n))
    import altair as alt
    chart = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=alt.X("jobs:Q", title="jobs (4 MiB each) on the i7-3770"),
        y=alt.Y("GB/s:Q", title="aggregate GB/s"),
        color=alt.Color("variant:N", title=None, legend=alt.Legend(orient="bottom")),
    ).properties(width=420, height=260,
                 title="throughput-machine: memory-bound jobs flatten at the 25.6 GB/s bus")
    rule = alt.Chart(alt.Data(values=[{"y": 25.6}])).mark_rule(strokeDash=[4, 4]).encode(y="y:Q")
    (chart + rule).save(args.out, format="png", scale_factor=2)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
