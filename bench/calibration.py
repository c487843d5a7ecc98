"""Calibration speed and recovery (issue 14's target: a five-parameter fit of one
measurement in at most 100 simulator evaluations and under 3 minutes on 2 cores).

A synthetic measurement is simulated at known values of five parameters of the
`pipeline` scenario; the fit starts from the whole box and must find them again.
Prints the number of evaluations, the wall time, and each parameter's recovery
error and whether the truth lies inside its 95% interval.

    python bench/calibration.py [--workers 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import warmcore
from warmcore.calibration.fit import FIGURES, CalibrationSpec, Calibrator

TRUTH = {"workload.service_us": 12.0, "work.code_kib": 96.0, "work.thread_kib": 24.0,
         "work.task_kib": 6.0, "work.produce_us": 3.0}
BOUNDS = {"workload.service_us": (4.0, 40.0), "work.code_kib": (16.0, 512.0),
          "work.thread_kib": (4.0, 128.0), "work.task_kib": (1.0, 32.0),
          "work.produce_us": (0.5, 12.0)}
FIGS = ("throughput_rps", "ipc", "llc_loads_per_req", "l1d_misses_per_req",
        "cpu_us_per_req", "p50_us", "instructions_per_req",
        "llc_misses_per_req")
SEEDS = [1, 2]
REQUESTS = 3000


def measurement() -> dict:
    sc = warmcore.Scenario.load("pipeline").with_(TRUTH, requests=REQUESTS)
    runs = [warmcore.simulate(sc, seed=s) for s in SEEDS]
    return {k: float(np.mean([FIGURES[k](r) for r in runs])) for k in FIGS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    spec = CalibrationSpec.from_data({
        "measurement": [{"name": "synthetic", "scenario": "pipeline", "figures": measurement()}],
        "fit": [{"path": p, "lo": lo, "hi": hi, "log": True} for p, (lo, hi) in BOUNDS.items()],
        "run": {"requests": REQUESTS, "seeds": SEEDS, "starts": 16, "max_evaluations": 100}})
    t0 = time.perf_counter()
    cal = Calibrator(spec, workers=args.workers).fit()
    wall = time.perf_counter() - t0
    print(f"five-parameter fit of one measurement: {cal.evaluations} evaluations "
          f"(target <= 100), {wall:.1f} s wall on {args.workers} workers (target < 180 s)")
    for p, truth in TRUTH.items():
        v = cal.values[p]
        lo, hi = cal.ci95[p]
        inside = "inside" if lo <= truth <= hi else "OUTSIDE"
        print(f"  {p:22s} truth {truth:8.3f}  fitted {v:8.3f}  error {100 * (v / truth - 1):+6.2f}%"
              f"  95% [{lo:.3f}, {hi:.3f}] {inside}")
    print(f"  condition number {cal.condition_number:.3g}; warnings: {cal.warnings or 'none'}")


if __name__ == "__main__":
    main()
