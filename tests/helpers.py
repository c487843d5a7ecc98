"""Shared helpers for tests: build scenarios from dicts and run them."""

from __future__ import annotations

import copy
import csv
from pathlib import Path

import numpy as np
from scipy import stats

from warmcore.simcore.config import apply_sets, read_scenario_dict, validate
from warmcore.build import simulate, simulate_once


def scenario(base: str = "mmc", sets: dict | None = None, workload: dict | None = None,
             **run):
    """A validated scenario: a built-in one, its workload table replaced by ``workload``
    if given, then ``sets`` ({dotted.path: value}) and ``run`` options applied."""
    data = copy.deepcopy(read_scenario_dict(base))
    if workload is not None:
        data["workload"] = dict(workload)
    apply_sets(data, [f"{k}={_toml(v)}" for k, v in (sets or {}).items()])
    data["run"].update(run)
    if "duration_s" in run:
        data["run"].pop("requests", None)
    return validate(data)


def _toml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}={_toml(x)}" for k, x in v.items()) + "}"
    return repr(v) if not isinstance(v, list) else "[" + ",".join(_toml(x) for x in v) + "]"


def run(base="mmc", sets=None, seed=None, **runopts) -> dict:
    cfg = scenario(base, sets, **runopts)
    return simulate(cfg) if seed is None else simulate_once(cfg, seed)


def request_factory(sets: dict | None = None, base: str = "pipeline"):
    """The RequestFactory of a built-in scenario edited by ``sets``, on a stand-in
    context: the i7-3770's nominal instructions per second and one seeded stream."""
    import warmcore
    from warmcore.models.workloads.base import RequestFactory

    class Ctx:
        cfg = warmcore.Scenario.load(base).edit(sets or {})

        class machine:
            nominal_ips = 4.42e9

        class streams:
            @staticmethod
            def generator(_name):
                return np.random.default_rng(1)

    return RequestFactory(Ctx)


def replicate(cfg, key_fn, reps: int, base_seed: int = 7):
    """Run ``reps`` independent replications; return the values of key_fn(result)."""
    seeds = np.random.SeedSequence(base_seed).generate_state(reps).tolist()
    return np.array([key_fn(simulate_once(cfg, int(s))) for s in seeds])


def ci(values, level: float = 0.99) -> tuple[float, float]:
    """Mean and Student-t half-width of a confidence interval at ``level``."""
    v = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(half)


def build_wheel(dest, compiled: bool = False):
    """Build warmcore's wheel into ``dest`` from a clean copy of the source: a working
    tree's build/ folder may hold extensions of older sources, which setuptools would
    put in the wheel. Without ``compiled`` no C compiler is offered (faster; the
    extensions are optional). Returns the wheel's path."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    src = Path(dest) / "src"
    shutil.copytree(root, src, symlinks=True, ignore=shutil.ignore_patterns(
        "build", "dist", ".git", ".venv", "*.egg-info", "__pycache__", "*.so", "*.c",
        ".pytest_cache", ".hypothesis"))
    env = dict(os.environ, **({} if compiled else {"CC": "/bin/false"}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest),
                    str(src)], check=True, env=env, capture_output=True)
    (wheel,) = Path(dest).glob("warmcore-*.whl")
    return wheel


def stop(proc, timeout: float = 10.0) -> None:
    """End a server a test started: SIGTERM, then SIGKILL if it lingers."""
    import subprocess

    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


STUDY_CURVES = Path(__file__).parents[1] / "docs" / "data" / "wsperflab-2015" / "curves.csv"


def study_loop_migrations_per_request() -> dict[int, float]:
    """The study's RxNetty migrations a request at each staircase step, the whole
    machine's (docs/data/wsperflab-2015: read off its slides' charts): the step's
    migrations over its 60 s of requests, at Tomcat's rate where RxNetty's line is
    hidden under Tomcat's (the first steps: the same latency-bound rate); the steps
    where neither rate could be read (50 and 1100 clients, at the charts' edges) are
    left out."""
    with STUDY_CURVES.open() as f:
        rows = [r for r in csv.DictReader(f)
                if r["rxnetty_migrations"] and (r["rxnetty_req_s"] or r["tomcat_req_s"])]
    return {int(r["clients"]): float(r["rxnetty_migrations"])
            / (60.0 * float(r["rxnetty_req_s"] or r["tomcat_req_s"])) for r in rows}
