"""Turn WSPerfLab's Oct-22-2013 load-curve reports into one CSV (curves.csv).

The reports (source/*/*.txt, copied unchanged from Netflix-Skunkworks/WSPerfLab
at commit 3c01285, test-results/Oct-22-2013/) were printed by the repository's
gatling_setup/gatling_driver/build_report.py (copied unchanged as
source/build_report.py.txt: Python 2, not run here) from Gatling's
simulation.log. One line per load step:

    clients <TAB> ok_per_s <TAB> ko_per_s <TAB> [latency percentiles, ms]

build_report.py: `'idx': (currentIndex+1)*usersPerRamp` (clients: 75 users
added per step), `okCount/float(runTime)` and `koCount/float(runTime)`
(responses with Gatling status OK / KO sent in the step's 25 s measured window,
per second), and `latencyList[int(pct*len/100)]` for `latencies = [0, 10, 25,
50, 75, 90, 95, 99, 99.99]` with latency = end of response - start of request
send (ms). The netty_results_to_750 report came from the earlier version of the
script (commit 364c029) that printed the first eight percentiles only.

    python extract.py [SOURCE_DIR] > curves.csv
"""

from __future__ import annotations

import ast
import csv
import sys
from pathlib import Path

# build_report.py's `latencies` list, in its order (percent).
PERCENTILES = ("0", "10", "25", "50", "75", "90", "95", "99", "99.99")
LATENCY_COLUMNS = tuple(f"p{p.replace('.', '_')}_ms" for p in PERCENTILES)
COLUMNS = ("server", "run", "clients", "ok_per_s", "ko_per_s", *LATENCY_COLUMNS)

# report file -> (server, run): which implementation served the load.
RUNS = {
    "java_bio_blocking/java_servlet_blocking.txt": ("tomcat-bio", "java_bio_blocking"),
    "netty_results_to_1500/netty.txt": ("netty", "netty_results_to_1500"),
    "netty_results_to_750/netty.txt": ("netty", "netty_results_to_750"),
    "play_normal_thread/play_normal_thread.txt": ("play", "play_normal_thread"),
}


class ReportError(ValueError):
    """A line that is not `clients TAB ok TAB ko TAB [percentiles]`."""


def parse_report_line(line: str) -> dict:
    """One step of a build_report.py report as a row keyed by COLUMNS[2:]."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) != 4:
        raise ReportError(f"expected 4 tab-separated fields, got {len(fields)}: {line!r}")
    latencies = ast.literal_eval(fields[3])
    if not isinstance(latencies, list) or not 1 <= len(latencies) <= len(PERCENTILES):
        raise ReportError(f"expected a list of up to {len(PERCENTILES)} latencies: {line!r}")
    row = {
        "clients": int(fields[0]),
        "ok_per_s": float(fields[1]),
        "ko_per_s": float(fields[2]),
    }
    # the eight-percentile reports have no 99.99th: None (an empty CSV cell)
    padded = latencies + [None] * (len(PERCENTILES) - len(latencies))
    row.update(zip(LATENCY_COLUMNS, padded, strict=True))
    return row


def parse_report(text: str) -> list[dict]:
    """Every non-blank line of a report."""
    return [parse_report_line(line) for line in text.splitlines() if line.strip()]


def extract(source: Path) -> list[dict]:
    """All runs' rows, tagged with server and run, in RUNS order."""
    rows = []
    for relative, (server, run) in RUNS.items():
        for row in parse_report((source / relative).read_text()):
            rows.append({"server": server, "run": run, **row})
    return rows


def write_csv(rows: list[dict], out) -> None:
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent / "source"
    write_csv(extract(source), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
