"""warmcore compare: same random streams for every strategy, a row each, load sweeps."""

from __future__ import annotations

import json

import pytest

from warmcore.api import compare
from warmcore.cli import main
from warmcore.comparison import knee
from warmcore.result import Result
from tests.helpers import scenario


def test_compare_gives_one_row_per_strategy_and_load(capsys):
    code = main(["compare", "mmc", "--strategies", "shared-queue", "--requests", "2000",
                 "--load", "1000,3000", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [(r["strategy"], r["load"]) for r in rows] == [("shared-queue", 1000.0),
                                                          ("shared-queue", 3000.0)]
    assert rows[0]["throughput_rps"] == pytest.approx(1000, rel=0.1)


def test_compare_json_is_the_run_json_plus_load(capsys):
    """One schema: each compare object is exactly what `run --json` prints for that
    strategy and load, with the load added."""
    main(["compare", "mmc", "--strategies", "shared-queue", "--requests", "500",
          "--load", "2000", "--json"])
    (row,) = json.loads(capsys.readouterr().out)
    main(["run", "mmc", "--strategy", "shared-queue", "--requests", "500",
          "--set", "workload.rate_per_s=2000.0", "--json"])
    single = json.loads(capsys.readouterr().out)
    assert row.pop("load") == 2000.0
    assert row == single
    Result.from_dict(row)


def test_rows_use_common_random_numbers():
    cfg = scenario("mmc", requests=2000)
    a, b = compare(cfg, ["shared-queue", "shared-queue"])
    assert a.to_dict() == b.to_dict()


def test_knee_is_the_last_load_before_latency_bends():
    cfg = scenario("mmc", requests=4000)
    rows = [r.per_request() for r in
            compare(cfg, ["shared-queue"], [1000.0, 2000.0, 3000.0, 3900.0, 5000.0])]
    # rho = 0.25 .. 0.75 stays flat-ish; 0.975 bends (p99 > 2x); 1.25 saturates.
    assert knee(rows) == 3000.0


def test_compare_table_and_knee_lines(capsys):
    code = main(["compare", "mmc", "--strategies", "shared-queue", "--requests", "1000",
                 "--load", "500,1000"])
    out = capsys.readouterr().out
    assert code == 0 and "req/s/CPU" in out and "knee of shared-queue" in out


@pytest.mark.parametrize("args", [["--strategies", "nope"], ["--strategies", ","],
                                  ["--strategies", "shared-queue", "--load", "x"],
                                  ["--strategies", "shared-queue", "--load", "-3"]])
def test_compare_bad_arguments_exit_2(args, capsys):
    assert main(["compare", "mmc", *args]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
