"""A workload kind is one file (issue 27): a module of one's own, named in
WARMCORE_PLUGINS, defines a kind's [workload] table and its generator and registers
them; `run`, `compare --load` and a sweep then work on it with no other change.

The kind here is new to warmcore: arrivals whose gaps are uniform on [0, 2/rate]
(mean 1/rate, squared coefficient of variation 1/3), on the ideal machine, so the
figures can be checked by hand: the throughput is the rate offered, and the mean
service time the one given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

KIND = textwrap.dedent('''
    """A uniform-gap open loop: a workload kind in one file."""
    from typing import Literal

    from warmcore.models.workloads.base import Workload
    from warmcore.simcore.config import ServiceShape, WorkloadKind, register_workload


    class UniformCfg(ServiceShape):
        kind: Literal["uniform"]
        rate_per_s: float = 1000.0


    class Uniform(Workload):
        def __init__(self, ctx):
            super().__init__(ctx, 1)
            self.gen = ctx.streams.generator("arrivals")
            self.mean_gap = 1.0 / ctx.cfg.workload.rate_per_s

        def start(self):
            self.env.process(self._arrivals())

        def _arrivals(self):
            conn = self.connections[0]
            while True:
                yield self.env.timeout(self.gen.uniform(0.0, 2 * self.mean_gap))
                self.deliver(self.factory.make(self.env.now, conn.id), conn)


    register_workload(WorkloadKind(
        "uniform", UniformCfg, Uniform, load_field="rate_per_s",
        offered_rate=lambda wl: wl.rate_per_s, sockets=lambda wl: False))
''')

SCENARIO = textwrap.dedent('''
    name = "uniform-mmc"
    [machine]
    preset = "ideal"
    cores = 2
    [workload]
    kind = "uniform"
    rate_per_s = 1000.0
    service = "exponential"
    service_us = 500.0
    [run]
    requests = 4000
''')

SWEEP = textwrap.dedent('''
    scenario = "{scenario}"
    metrics = ["throughput_rps", "latency_us.mean"]
    [axes]
    "workload.rate_per_s" = [500.0, 1500.0]
''')


@pytest.fixture
def plugin(tmp_path):
    (tmp_path / "uniform_kind.py").write_text(KIND)
    (tmp_path / "uniform.toml").write_text(SCENARIO)
    env = {**os.environ, "WARMCORE_PLUGINS": "uniform_kind",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}

    def warmcore(*args, check=True):
        cmd = [sys.executable, "-m", "warmcore.calibration.cli", *args]
        return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=check)
    return tmp_path, warmcore


def test_run_on_a_kind_of_ones_own(plugin):
    where, warmcore = plugin
    r = json.loads(warmcore("run", "uniform.toml", "--json").stdout)
    # an open loop that keeps up serves what it is offered; the service is the one given
    assert r["throughput_rps"] == pytest.approx(1000.0, rel=0.08)
    assert r["service_us"]["mean"] == pytest.approx(500.0, rel=0.08)
    assert r["cpus_utilized"] == pytest.approx(0.5, rel=0.1)   # rho x c = 0.25 x 2


def test_compare_load_sets_the_kinds_own_load_field(plugin):
    where, warmcore = plugin
    out = warmcore("compare", "uniform.toml", "--strategies", "shared-queue,work-stealing",
                   "--load", "400,1600", "--json").stdout
    rows = json.loads(out)
    assert sorted((r["strategy"], r["load"]) for r in rows) == [
        ("shared-queue", 400.0), ("shared-queue", 1600.0),
        ("work-stealing", 400.0), ("work-stealing", 1600.0)]
    for r in rows:
        assert r["throughput_rps"] == pytest.approx(r["load"], rel=0.08)


def test_a_sweep_over_the_kinds_rate_runs_in_worker_processes(plugin):
    where, warmcore = plugin
    (where / "spec.toml").write_text(SWEEP.format(scenario=where / "uniform.toml"))
    warmcore("sweep", "spec.toml", "--out", "res", "--workers", "2")
    report = warmcore("sweep-report", "res").stdout
    assert "2 points" in report and "(0 failed)" in report
    from warmcore.sweep_report import load

    df, _spec = load(where / "res")
    by_rate = dict(zip(df["axis.workload.rate_per_s"], df["throughput_rps"], strict=True))
    assert by_rate[500.0] == pytest.approx(500.0, rel=0.08)
    assert by_rate[1500.0] == pytest.approx(1500.0, rel=0.08)


def test_without_the_plugin_the_kind_is_unknown_with_the_known_ones_named(plugin):
    where, warmcore = plugin
    env_free = subprocess.run(
        [sys.executable, "-m", "warmcore.calibration.cli", "run", "uniform.toml"],
        cwd=where, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "WARMCORE_PLUGINS"})
    assert env_free.returncode == 2
    assert env_free.stderr.strip().splitlines()[-1].endswith(
        "workload: unknown workload kind; known: batch, closed, connections, inject, "
        "open, saturating, stream")
