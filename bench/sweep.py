"""Sweep speed and memory, measured in one run (the machines are shared and noisy,
so only ratios within one run mean much):

* the speedup of 2 local workers over 1 on a sweep of >= 200 short points
  (target >= 1.8x on 2 cores);
* the per-point overhead of the Dask path against the local pool, on a
  LocalCluster of the same size (target under 10 ms per point);
* the driver's peak memory for a 100,000-point spec, dry run (points and ids
  generated, nothing simulated).

    python bench/sweep.py [--points 240]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import warmcore.api  # noqa: F401  (loaded before timing: both runs start warm)
from warmcore.sweeps import point_id, points, sweep, validate_spec


def spec(n: int, requests: int = 1500):
    return validate_spec({
        "scenario": "mmc", "set": [f"run.requests={requests}"],
        "metrics": ["throughput_rps"],
        "axes": {"workload.rate_per_s": {"start": 500.0, "stop": 3000.0, "num": n}}})


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=240)
    a = ap.parse_args()
    s = spec(a.points)
    with tempfile.TemporaryDirectory() as d:
        one = timed(lambda: sweep(s, Path(d) / "one", workers=1))
        two = timed(lambda: sweep(s, Path(d) / "two", workers=2))
        print(f"{a.points} points: 1 worker {one:.2f} s, 2 workers {two:.2f} s, "
              f"speedup {one / two:.2f}x   (target >= 1.8 on 2 cores)")
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                          host="127.0.0.1") as cluster:
            dask_s = timed(lambda: sweep(s, Path(d) / "dask",
                                         scheduler=cluster.scheduler_address))
        per_point_ms = (dask_s - two) / a.points * 1e3
        print(f"dask LocalCluster (2 workers) {dask_s:.2f} s: overhead "
              f"{per_point_ms:.2f} ms per point against the local pool   (target < 10)")
    big = validate_spec({"scenario": "mmc", "axes": {
        "workload.rate_per_s": {"start": 100.0, "stop": 3000.0, "num": 1000},
        "machine.cores": list(range(1, 101))}})
    tracemalloc.start()
    n = sum(1 for p in points(big) if point_id(p))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"dry run of a {n:,}-point spec: driver peak {peak / 2**10:.0f} KiB of Python heap "
          "(points are generated lazily)")


if __name__ == "__main__":
    main()
