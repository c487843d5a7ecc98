"""Issue 31's outputs wherever results are shown: the arrivals, refusals, timeouts and
goodput of a run in `warmcore run`'s text, the comparison table (`compare`), the
explorer's comparison, the JSON schema, and a sweep's rows and report; and none of
them where no client was refused or timed out (the default output is unchanged)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import warmcore
from warmcore.cli import format_result, main

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ("arrived", "rejected", "timed_out", "goodput_rps", "rejected_rate",
            "timed_out_rate")
# mmc with no waiting room and clients that give up after 3 ms: both outcomes happen
BOUNDED = {"strategy.params.queue_capacity": 0, "workload.timeout_us": 3000.0}


@pytest.fixture(scope="module")
def bounded():
    sc = warmcore.Scenario.load("mmc").edit(BOUNDED)
    return warmcore.simulate(sc, requests=3000)


@pytest.fixture(scope="module")
def plain():
    return warmcore.simulate(warmcore.Scenario.load("mmc"), requests=3000)


def test_run_text_shows_what_the_clients_got(bounded, plain):
    r = bounded.to_dict()
    (line,) = [x for x in format_result(r).splitlines() if x.startswith(" clients")]
    assert f"arrived {r['arrived']:,}" in line
    assert f"rejected {r['rejected']:,} ({r['rejected_rate']:.2%})" in line
    assert f"timed out {r['timed_out']:,} ({r['timed_out_rate']:.2%})" in line
    assert f"goodput {r['goodput_rps']:,.1f} req/s" in line
    assert r["rejected"] > 0 and r["timed_out"] > 0
    assert " clients" not in format_result(plain.to_dict())


def test_comparison_table_has_the_outcome_columns_only_when_they_happen(bounded, plain):
    from warmcore.comparison import format_table

    rows = [bounded.per_request()]
    text = format_table(rows)
    for header in ("arrived/s", "goodput/s", "rejected%", "timed out%"):
        assert header in text
    assert rows[0]["arrived_rps"] == pytest.approx(bounded.arrived / bounded.sim_seconds)
    assert rows[0]["rejected_pct"] == pytest.approx(bounded.rejected_rate * 100)
    assert "goodput/s" not in format_table([plain.per_request()])


def test_explorer_comparison_has_the_outcome_columns(bounded, plain):
    from warmcore.explorer_data import comparison_frame

    df = comparison_frame([bounded])
    for col in ("arrived (req/s)", "goodput (req/s)", "rejected (%)", "timed out (%)"):
        assert col in df.columns
    assert df["goodput (req/s)"].iloc[0] == pytest.approx(bounded.goodput_rps)
    assert "goodput (req/s)" not in comparison_frame([plain]).columns


def test_json_schema_describes_the_outcomes(bounded):
    import jsonschema

    schema = json.loads((ROOT / "docs" / "result.schema.json").read_text())
    for k in OUTCOMES:
        assert k in schema["properties"], k
    jsonschema.validate(json.loads(json.dumps(bounded.to_dict())), schema)


SPEC = """
scenario = "mmc"
set = ["run.requests=1000", "workload.timeout_us=3000.0"]
replications = 2
metrics = ["throughput_rps", "arrived", "rejected", "timed_out", "goodput_rps",
           "rejected_rate", "timed_out_rate"]
[axes]
"strategy.params.queue_capacity" = [0, 8]
"""


def test_a_sweep_keeps_and_reports_the_outcomes(tmp_path):
    """A sweep's rows keep the outcomes named in its metrics, and its report gives each
    a mean and interval per point: a waiting room of 8 refuses less than none."""
    from warmcore.sweeps import read_results

    (tmp_path / "spec.toml").write_text(SPEC)
    out = tmp_path / "results"
    assert main(["sweep", str(tmp_path / "spec.toml"), "--out", str(out), "--workers", "1",
                 "--quiet"]) == 0
    rows = read_results(out)
    for k in OUTCOMES:
        assert f"{k}" in rows.columns, k
    by = rows.groupby("axis.strategy.params.queue_capacity")["rejected_rate"].mean()
    assert by[0] > by[8] >= 0
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["sweep-report", str(out)]) == 0
    text = buf.getvalue()
    for k in ("goodput_rps", "rejected_rate", "timed_out_rate"):
        assert k in text, k
