"""warmcore advise (docs/api.md, Advice): the crossover finder on curves whose flip is
known, a difference inside the noise reported as such, the paired interval by hand,
a real simulated flip at a capacity computed by hand, tuning, the CLI's answer and
its refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import warmcore
from warmcore import advice as adv


# --------------------------------------------------------------------------- synthetic

class Curves(adv.Runner):
    """A runner whose 'runs' are known curves plus noise: ``curves[label](load)`` is
    the candidate's CPU us per request, each seed adds the same draw to every
    candidate (common random numbers) and one of its own of ``sd``."""

    def __init__(self, curves, sd, seeds=(1, 2, 3, 4)):
        super().__init__(base=None, seeds=list(seeds))
        self.curves, self.sd = curves, sd

    def run(self, pairs, seeds=None):
        for c, load in pairs:
            for s in seeds or self.seeds:
                if (c, load, s) not in self.done:
                    rng = np.random.default_rng([s, ord(c.label[0]), int(load * 1000)])
                    common = np.random.default_rng(s).normal(0, 1.0)
                    self.done[(c, load, s)] = fake(self.curves[c.label](load) + common
                                                   + rng.normal(0, self.sd))


def fake(cpu_us: float):
    row = {"throughput_rps": 1000.0, "p50_us": 10.0, "p99_us": 20.0, "cpus": 1.0,
           "cpu_us_per_req": cpu_us, "ipc": 1.0, "ghz": 3.0, "llc_loads_per_req": 1.0,
           "migrations_per_req": 0.0, "switches_per_req": 1.0, "uj_per_req": 5.0}
    return SimpleNamespace(per_request=lambda: row, partial=None, requests=1000,
                           offered_rps=None, arrived=1000, throughput_rps=1000.0,
                           in_flight_at_end=0, stop_reason="requests",
                           breakdown_us=SimpleNamespace(model_dump=lambda: {"compute": cpu_us}))


CANDS = [adv.Candidate("a", "a"), adv.Candidate("b", "b")]


def test_two_curves_that_cross_at_a_known_load_give_that_crossover():
    """a costs 10 + 0.1 x CPU us per request, b a flat 20: they cross at x = 100. The
    grid sees a best below it and b above; the bisection narrows the flip to an
    interval that holds 100 and is a tenth of the grid's gap wide at most (with no
    smallest winning margin: the bisection's own precision; with the default 1%, a
    and b tie where they are within 1% of each other, 98 < x < 102, and the flip's
    interval holds that band)."""
    runner = Curves({"a": lambda x: 10 + 0.1 * x, "b": lambda x: 20.0}, sd=0.05)
    tied = adv.answer_over(runner, CANDS, [10, 40, 70, 130, 160, 190],
                           adv.parse_objective("cpu"), integer=False, refine=8)
    [flip] = tied["crossovers"]
    assert flip["interval95"][0] <= 98 and flip["interval95"][1] >= 102, flip
    out = adv.answer_over(runner, CANDS, [10, 40, 70, 130, 160, 190],
                          adv.parse_objective("cpu").with_min_margin(0.0), integer=False,
                          refine=8)
    assert [(r["from"], r["to"], r["best"]) for r in out["ranges"]] == [
        (10, 70, "a"), (130, 190, "b")]
    [flip] = out["crossovers"]
    lo, hi = flip["interval95"]
    assert lo <= 100 <= hi and hi - lo <= 6.0, flip
    assert flip["from"] == "a" and flip["to"] == "b"
    assert abs(flip["load"] - 100) <= 3.0
    # at the flip's right end b is cheaper: the why's first figure is the CPU per request
    assert flip["why"]["figures"][0]["figure"] in ("cpu_us_per_req", "breakdown.compute")


def test_a_difference_inside_the_noise_names_no_winner():
    """a is 0.01 us cheaper than b everywhere, and each run's own noise is 1 us: at no
    load is it a winner at 95%, the answer says so, and there is no crossover."""
    runner = Curves({"a": lambda x: 20.0 - 0.01, "b": lambda x: 20.0}, sd=1.0)
    obj = adv.parse_objective("cpu")
    out = adv.answer_over(runner, CANDS, [10, 50, 90], obj, integer=False, refine=4)
    assert [(r["best"], r["from"], r["to"]) for r in out["ranges"]] == [(None, 10, 90)]
    assert out["crossovers"] == []
    text = adv.format_advice({**out, "objective_text": obj.describe(), "replications": 4,
                              "seeds": [1, 2, 3, 4], "runs": len(runner.done),
                              "strategies": ["a", "b"], "load_field": "workload.rate_per_s"})
    assert "no significant difference" in text and "no crossover" in text


def test_a_consistent_margin_below_one_percent_is_a_tie():
    """a is 0.1 us (0.5%) cheaper than b's 20 us at every load and seed, with almost no
    noise of its own: at 95% a is better, but by less than the 1% a real machine could
    confirm (MIN_MARGIN), so no winner is named; with min_margin 0.1% it is a, by
    0.5%."""
    runner = Curves({"a": lambda x: 20.0 - 0.1, "b": lambda x: 20.0}, sd=1e-4)
    obj = adv.parse_objective("cpu")
    out = adv.answer_over(runner, CANDS, [10, 50], obj, integer=False, refine=0)
    assert [(r["best"], r["from"], r["to"]) for r in out["ranges"]] == [(None, 10, 50)]
    assert {p["leader"] for p in out["points"]} == {"a"}
    assert all(p["margin"] == pytest.approx(0.1 / 20, rel=0.05) for p in out["points"])
    low = adv.answer_over(runner, CANDS, [10, 50], obj.with_min_margin(0.001),
                          integer=False, refine=0)
    assert [(r["best"], r["from"], r["to"]) for r in low["ranges"]] == [("a", 10, 50)]
    # (relative to b's mean, which carries the seeds' common draw: 0.1 / 20.5 here)
    assert low["ranges"][0]["margin"] == pytest.approx(0.005, rel=0.05)


@pytest.mark.parametrize("bad", [-0.01, 1.0, float("nan"), "1%", True])
def test_an_impossible_min_margin_is_refused(bad):
    with pytest.raises(warmcore.ConfigError, match="min_margin"):
        adv.parse_objective("cpu").with_min_margin(bad)


def test_the_paired_margin_and_its_interval_by_hand():
    """d = a - b = (2, 2, 1.5): mean 11/6, s = 0.2887, t(0.975, 2) = 4.3027, half-width
    4.3027 * 0.2887 / sqrt(3) = 0.7172; relative to b's mean 6.5/3."""
    margin, (lo, hi) = adv.paired_margin([3, 4, 5], [1, 2, 3.5])
    mb = 6.5 / 3
    assert margin == pytest.approx((11 / 6) / mb)
    assert lo == pytest.approx((11 / 6 - 0.71716) / mb, abs=1e-4)
    assert hi == pytest.approx((11 / 6 + 0.71716) / mb, abs=1e-4)
    assert adv.paired_margin([1.0], [2.0])[1][0] != adv.paired_margin([1.0], [2.0])[1][0]
    assert adv.paired_margin([5.0, 5.0], [5.0, 5.0 + 1e-12]) == (0.0, (0.0, 0.0))


# --------------------------------------------------------------------------- simulated

DETERMINISTIC = warmcore.Scenario.load("mmc").edit({
    "workload.arrival": "constant", "workload.service": "deterministic"}, requests=400)


def test_a_simulated_flip_sits_at_the_capacity_computed_by_hand():
    """Constant arrivals, a constant 1,000 us of work and four ideal CPUs: pc serves on
    one thread, so above 1e6 / (its CPU us per request) req/s it cannot keep up while
    shared-queue's four workers can. The throughput answer flips from 'no difference'
    to shared-queue there (the capacity from pc's own CPU time per request at light
    load), and the probe finds the shared queue's 4,000 req/s saturate. With no
    smallest winning margin the flip is at the capacity; with the default 1% it is
    where shared-queue serves 1% more than pc's capacity, 1.01 x the capacity."""
    light = warmcore.simulate(DETERMINISTIC.edit({"workload.rate_per_s": 200.0},
                                                 strategy="pc"))
    capacity = 1e6 / light.per_request()["cpu_us_per_req"]
    assert 990 < capacity < 1000.1            # 1,000 us of work and the kernel's share
    out = adv.advise(DETERMINISTIC, ["pc", "shared-queue"], "throughput", replications=2,
                     refine=6, min_margin=0.0)
    [flip] = out["crossovers"]
    lo, hi = flip["interval95"]
    assert lo <= capacity <= hi and hi - lo <= 0.05 * capacity, flip
    margined = adv.advise(DETERMINISTIC, ["pc", "shared-queue"], "throughput",
                          replications=2, refine=6)
    [at] = margined["crossovers"]
    assert at["interval95"][0] <= 1.01 * capacity <= at["interval95"][1], at
    assert margined["min_margin"] == adv.MIN_MARGIN == 0.01
    assert (flip["from"], flip["to"]) == (None, "shared-queue")
    assert out["ranges"][-1]["best"] == "shared-queue"
    # past the shared queue's own 4,000 req/s: 4,000 against pc's capacity
    assert out["points"][-1]["margin"] == pytest.approx(4000 / capacity - 1, rel=0.01)
    assert 4000 <= out["capacity"] <= 8000
    assert {"queue_wait", "compute"} & {f["figure"].split(".")[-1]
                                        for f in flip["why"]["figures"]}


def test_tuning_a_pool_names_the_size_that_serves_the_load():
    """2,000 req/s of 1,000 us requests need two CPUs: a pool of one thread serves
    1,000, of four all of it; four is best, by about 100%, at 95%."""
    sc = warmcore.Scenario.load("mmc").edit(
        {"workload.rate_per_s": 2000.0, "workload.arrival": "constant",
         "workload.service": "deterministic"}, requests=400)
    out = adv.tune(sc, "strategy.params.threads", [1, 4], "throughput", replications=2)
    assert out["best"] == "strategy.params.threads=4"
    assert out["margin"] == pytest.approx(1.0, abs=0.05)
    assert out["interval95"][0] > 0.9
    # an Objective passed in keeps the margin it carries (the answer says which it
    # used); a min_margin given as well overrides it
    strict = adv.parse_objective("throughput").with_min_margin(0.3)
    held = adv.tune(sc, "strategy.params.threads", [1, 4], strict, replications=2)
    assert held["min_margin"] == 0.3 and held["best"] == "strategy.params.threads=4"
    assert adv.tune(sc, "strategy.params.threads", [1, 4], strict, replications=2,
                    min_margin=0.02)["min_margin"] == 0.02


def test_local_processes_give_the_same_answer_as_one_process():
    kw = dict(loads=[500.0, 1500.0], replications=2, refine=1)
    one = adv.advise(DETERMINISTIC, ["pc", "shared-queue"], "p99", workers=1, **kw)
    two = adv.advise(DETERMINISTIC, ["pc", "shared-queue"], "p99", workers=2, **kw)
    assert json.dumps(one) == json.dumps(two)


def test_an_overloaded_or_backlogged_run_is_never_best_for_latency():
    """At 1,500 req/s pc's queue grows: its p99 depends on how long it ran, so the
    latency answer does not trust it, and says why."""
    out = adv.advise(DETERMINISTIC, ["pc", "shared-queue"], "p99", loads=[1500.0],
                     replications=2, refine=0)
    [point] = out["points"]
    assert point["best"] == "shared-queue" and point["runner_up"] is None
    assert any("overloaded" in d for d in point["doubts"]["pc"])


# --------------------------------------------------------------------------- CLI

def cli(*args):
    return subprocess.run([sys.executable, "-m", "warmcore.cli", *args],
                          capture_output=True, text=True)


def test_advise_pipeline_answers_with_ranges_and_crossovers_as_json():
    out = cli("advise", "pipeline", "--strategies", "pc,pec,epc", "--json", "--requests",
              "300", "--replications", "2", "--refine", "1", "--loads", "1,4")
    assert out.returncode == 0, out.stderr
    a = json.loads(out.stdout)
    assert a["objective"] == "throughput" and a["load_field"] == "workload.connections"
    assert a["loads"] == [1, 4] and a["strategies"] == ["pc", "pec", "epc"]
    for r in a["ranges"]:
        assert set(r) >= {"from", "to", "best", "margin", "interval95"}
    assert isinstance(a["crossovers"], list) and isinstance(a["why"], list)
    assert a["runs"] == 3 * 2 * 2 + 3 * 2 * len(a["crossovers"])


@pytest.mark.parametrize("args, line", [
    (["--strategies", "pc"], "warmcore: --strategies: name at least two strategies to "
                             "compare"),
    (["--strategies", "pc,nope"], "warmcore: --strategies: unknown strategy 'nope'; known: "),
    (["--strategies", "pc,pec", "--objective", "p42"], "warmcore: --objective: 'p42' is "
                                                        "not one of"),
    (["--strategies", "pc,pec", "--objective", "p99<=-3"], "warmcore: --objective: the "
                                                           "SLO's p99 bound"),
    (["--strategies", "pc,pec", "--replications", "0"], "warmcore: --replications: must "
                                                        "be between 1 and 100"),
    (["--strategies", "pc,pec", "--loads", "1,x"], "warmcore: --loads: '1,x' is not"),
    (["--strategies", "pc,pec", "--loads", "1.5"], "warmcore: --loads: workload "
                                                   "'saturating' takes whole numbers"),
    (["--tune", "strategy.params.threads"], "warmcore: --tune: give PATH=V1,V2"),
    (["--tune", "strategy.params.threads=1,x"], "warmcore: strategy.params.threads"),
    (["--strategies", "pc,pec", "--workers", "0"], "warmcore: --workers: must be at "
                                                   "least 1"),
    (["--strategies", "pc,pec", "--min-margin", "100"], "warmcore: --min-margin: must be "
                                                        "from 0 to below 100 (%), got 100"),
    (["--strategies", "pc,pec", "--min-margin", "nan"], "warmcore: --min-margin: must be "
                                                        "from 0 to below 100 (%), got nan"),
])
def test_bad_advice_requests_get_one_line_and_exit_2(args, line):
    out = cli("advise", "pipeline", *args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(line) and out.stderr.count("\n") == 1, out.stderr


def test_an_slo_answer_says_up_to_what_load_each_strategy_holds_it():
    """p99 <= 1,500 us with 1,000 us of constant work: pc holds it while it keeps up
    (below 999 req/s), the shared queue up to its 4,000."""
    out = adv.advise(DETERMINISTIC, ["pc", "shared-queue"], "p99<=1500",
                     loads=[500.0, 900.0, 1500.0, 3500.0, 4500.0], replications=2, refine=0)
    assert out["slo_holds_up_to"] == {"pc": 900.0, "shared-queue": 3500.0}
    assert adv.verdict_text(out).endswith(
        "The SLO holds up to: pc 900 req/s, shared-queue 3,500 req/s.")
