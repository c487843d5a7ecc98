"""examples/wsperflab-2013: the extraction of WSPerfLab's load curves, and the
example's scenarios and calibration spec (docs/calibration.md, "WSPerfLab")."""

import csv
import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wsperflab-2013"


def _extract_module():
    spec = importlib.util.spec_from_file_location("wsperflab_extract", EXAMPLE / "extract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Two lines of test-results/Oct-22-2013/java_bio_blocking/java_servlet_blocking.txt
# and one of netty_results_to_750/netty.txt (eight percentiles: the earlier script).
FIXTURE = (
    "75\t382.52\t0.0\t[194, 195, 195, 195, 196, 197, 200, 206, 367]\n"
    "300\t141.6\t0.04\t[2058, 2087, 2098, 2116, 2157, 2174, 2179, 2382, 60001]\n"
    "750\t2326.84\t0.0\t[191, 193, 194, 196, 200, 207, 214, 314]\n"
)


def test_parse_report_reads_every_column():
    rows = _extract_module().parse_report(FIXTURE)
    assert len(rows) == 3
    assert rows[0] == {
        "clients": 75, "ok_per_s": 382.52, "ko_per_s": 0.0,
        "p0_ms": 194, "p10_ms": 195, "p25_ms": 195, "p50_ms": 195, "p75_ms": 196,
        "p90_ms": 197, "p95_ms": 200, "p99_ms": 206, "p99_99_ms": 367,
    }
    assert rows[1]["ko_per_s"] == 0.04 and rows[1]["p99_99_ms"] == 60001
    assert rows[2]["p99_ms"] == 314 and rows[2]["p99_99_ms"] is None


def test_parse_report_refuses_a_malformed_line():
    module = _extract_module()
    with pytest.raises(module.ReportError, match="4 tab-separated fields"):
        module.parse_report("75 382.52 0.0 [1, 2]\n")


def _csv_rows():
    with open(EXAMPLE / "curves.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_curves_csv_is_what_extract_writes(tmp_path):
    module = _extract_module()
    out = tmp_path / "curves.csv"
    with open(out, "w") as f:
        module.write_csv(module.extract(EXAMPLE / "source"), f)
    assert out.read_text() == (EXAMPLE / "curves.csv").read_text()


@pytest.mark.parametrize(
    "run, clients, ok, ko, p50, p99",
    [
        # numbers copied by hand from the WSPerfLab reports (commit 3c01285)
        ("java_bio_blocking", 75, "382.52", "0.0", "195", "206"),
        ("java_bio_blocking", 225, "248.16", "0.0", "923", "953"),
        ("java_bio_blocking", 375, "0.0", "6.32", "60000", "60001"),
        ("netty_results_to_1500", 750, "2220.6", "7.36", "195", "367"),
        ("netty_results_to_1500", 1425, "2536.36", "0.0", "199", "580"),
        ("play_normal_thread", 300, "1091.48", "0.0", "272", "404"),
    ],
)
def test_curves_csv_matches_the_source_numbers(run, clients, ok, ko, p50, p99):
    row = next(r for r in _csv_rows() if r["run"] == run and int(r["clients"]) == clients)
    assert (row["ok_per_s"], row["ko_per_s"], row["p50_ms"], row["p99_ms"]) == (ok, ko, p50, p99)
