"""perf stat parsers (issue 14 part 1): every format of docs/design/MODEL.md, the real Jetty file,
problems with line numbers, aliases, the ``perf-parse`` command, and a round trip.

The samples keep perf's own column layout, so their lines are as long as perf makes them."""
# ruff: noqa: E501

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warmcore.calibration.perfstat import (
    NOT_COUNTED,
    NOT_SUPPORTED,
    PerfStatError,
    canonical_event,
    load_perf_stat,
    parse_perf_stat,
    split_event,
)
from warmcore.calibration.cli import main

JETTY = Path(__file__).resolve().parents[2] / "shared/data/measurements/jetty-8.perf.txt"
if not JETTY.exists():                       # a worktree sits next to shared/, a clone may not
    JETTY = Path("/work/shared/data/measurements/jetty-8.perf.txt")


# ----------------------------------------------------------------------------- Jetty

@pytest.mark.skipif(not JETTY.exists(), reason="shared measurements not present")
def test_the_real_jetty_file_old_human_format_with_brackets():
    s = load_perf_stat(JETTY)
    assert s.format == "human-old" and s.problems == () and s.pid == "jetty-8"
    assert len(s.counters) == 11
    c = s.counters["cycles"]
    assert c.value == 53_963_171_579 and c.coverage == pytest.approx(0.2867)
    assert s.counters["L1-dcache-misses"].value == 782_601_144
    assert s.counters["L1-dcache-misses"].coverage == pytest.approx(0.2841)
    assert s.counters["LLC-misses"].value == 15_167_562
    assert s.counters["LLC-misses"].coverage == pytest.approx(0.0721)      # "[ 7.21%]"
    assert s.counters["instructions"].value == 49_404_471_415
    assert s.counters["instructions"].coverage == 1.0                       # no bracket
    tc = s.counters["task-clock"]                 # old perf printed no unit: msec implied
    assert tc.value == pytest.approx(27751.967126) and tc.unit == "msec"
    assert s.derived == {"cpus_utilized": 0.867, "ghz": 1.944, "ipc": 0.92}
    llc = s.counters["LLC-misses"].metrics[0]
    assert (llc.value, llc.unit, llc.kind) == (7.43, "% of all LL-cache hits", None)


# ----------------------------------------------------------------------------- human

CURRENT = """\
 Performance counter stats for 'system wide':

        226,054.13 msec cpu-clock                        #  224.588 CPUs utilized
               986      context-switches                 #    4.362 /sec
                 7      cpu-migrations                   #    0.031 /sec
    13,931,568,041      L1-dcache-loads                                               (40.13%)
   <not supported>      L1-icache-loads
     <not counted>      cpu_atom/cycles/                                              (0.00%)
     5,205,202,243      cpu_core/cycles/                 #    0.023 GHz               (59.87%)
     3,856,436,920      cpu_core/instructions/           #    0.74  insn per cycle    (59.87%)
                                                  #    0.12  stalled cycles per insn
       782,601,144      cpu_core/LLC-load-misses/u                                    (28.41%)

       1.006543216 seconds time elapsed

       0.003152000 seconds user
       0.010505000 seconds sys
"""


def test_current_human_format():
    s = parse_perf_stat(CURRENT)
    assert s.format == "human" and s.problems == ()
    assert s.system_wide and s.command is None
    assert (s.elapsed_s, s.user_s, s.sys_s) == (1.006543216, 0.003152, 0.010505)
    tc = s.counters["task-clock"]                # cpu-clock is an alias
    assert (tc.value, tc.unit, tc.raw_name) == (226054.13, "msec", "cpu-clock")
    assert s.counters["L1-dcache-loads"].coverage == pytest.approx(0.4013)
    assert s.counters["context-switches"].coverage == 1.0


def test_not_counted_and_not_supported_are_missing_values():
    s = parse_perf_stat(CURRENT)
    ic = s.counters["L1-icache-loads"]
    assert (ic.value, ic.status, ic.coverage) == (None, NOT_SUPPORTED, 0.0)
    atom = s.counters["cpu_atom/cycles"]
    assert (atom.value, atom.status, atom.pmu) == (None, NOT_COUNTED, "cpu_atom")


def test_hybrid_pmu_names_and_modifiers():
    s = parse_perf_stat(CURRENT)
    core = s.counters["cpu_core/cycles"]
    assert (core.name, core.pmu, core.value) == ("cycles", "cpu_core", 5_205_202_243)
    llc = s.counters["cpu_core/LLC-misses:u"]
    assert (llc.name, llc.pmu, llc.modifiers) == ("LLC-misses", "cpu_core", "u")
    assert {c.pmu for c in s.find("cycles")} == {"cpu_core", "cpu_atom"}


def test_a_metric_on_its_own_line_belongs_to_the_counter_above():
    ins = parse_perf_stat(CURRENT).counters["cpu_core/instructions"]
    assert [(m.value, m.unit, m.kind) for m in ins.metrics] == [
        (0.74, "insn per cycle", "ipc"), (0.12, "stalled cycles per insn", None)]


REPEAT = """\
 Performance counter stats for './hackbench 10' (5 runs):

              0.54 msec task-clock:u                 #    0.655 CPUs utilized            ( +-  2.34% )
                 0      context-switches:u           #    0.000 /sec
         1,234,567      cycles:u                     #    2.286 GHz                      ( +-  0.68% )
           987,654      instructions:k               #    0.80  insn per cycle           ( +-  1.10% )  (75.00%)

          0.000830 +- 0.000024 seconds time elapsed  ( +-  2.89% )
"""


def test_repeat_mode_variance_and_user_kernel_suffixes():
    s = parse_perf_stat(REPEAT)
    assert s.problems == () and s.command == "./hackbench 10" and s.runs == 5
    assert (s.elapsed_s, s.elapsed_variance_pct) == (0.00083, 2.89)
    tc = s.counters["task-clock:u"]
    assert (tc.value, tc.unit, tc.modifiers, tc.variance_pct) == (0.54, "msec", "u", 2.34)
    ins = s.counters["instructions:k"]
    assert (ins.modifiers, ins.variance_pct, ins.coverage) == ("k", 1.10, 0.75)
    assert s.counters["context-switches:u"].variance_pct is None


PERF4 = """\

 Performance counter stats for process id '4242':

      12345.678901      task-clock (msec)         #    1.234 CPUs utilized
             1,000      context-switches          #    0.081 K/sec
               123      CPU-migrations            #    0.010 K/sec
    30,123,456,789      cycles                    #    2.440 GHz                      (83.33%)

      10.004166185 seconds time elapsed
"""


def test_task_clock_msec_in_parentheses_and_old_capitalised_names():
    s = parse_perf_stat(PERF4)
    assert s.pid == "4242" and s.problems == ()
    tc = s.counters["task-clock"]
    assert (tc.value, tc.unit) == (12345.678901, "msec")
    assert s.counters["cpu-migrations"].value == 123          # "CPU-migrations"
    assert s.derived["ghz"] == 2.44


HUMAN_INTERVAL = """\
#           time             counts unit events
     1.000156717           1,001.95 msec cpu-clock                        #    1.002 CPUs utilized
     1.000156717                 69      context-switches                 #   68.865 /sec
     1.000156717        412,345,678      cycles                           #    0.412 GHz                       (50.00%)
     2.001034567           1,000.50 msec cpu-clock                        #    1.000 CPUs utilized
     2.001034567                 71      context-switches                 #   70.965 /sec
     2.001034567        398,000,000      cycles                           #    0.398 GHz                       (50.00%)
     2.001034567                                                  #    0.50  stalled cycles per insn
"""


def test_human_interval_mode_is_a_time_series():
    s = parse_perf_stat(HUMAN_INTERVAL)
    assert s.problems == () and len(s.comments) == 1          # the column header
    df = s.intervals_frame()
    assert list(df["time_s"].unique()) == [1.000156717, 2.001034567]
    cyc = df[df.counter == "cycles"]
    assert list(cyc["value"]) == [412_345_678, 398_000_000]
    assert list(cyc["coverage"]) == [0.5, 0.5]
    assert s.counters["cycles"].value == 412_345_678 + 398_000_000    # the sum
    assert s.counters["task-clock"].value == pytest.approx(2002.45)
    assert s.intervals[-1].metrics[-1].unit == "stalled cycles per insn"


PER_CORE = """\
 Performance counter stats for 'system wide':

S0-D0-C0           2           2,011.39 msec cpu-clock                        #    2.003 CPUs utilized
S0-D0-C0           2        123,456,789      cycles                           #    0.061 GHz
S0-D0-C1           2           2,010.12 msec cpu-clock                        #    2.002 CPUs utilized
S0-D0-C1           2         23,456,789      cycles                           #    0.012 GHz                      (80.00%)

       1.004166185 seconds time elapsed
"""


def test_human_per_core_breakdown():
    s = parse_perf_stat(PER_CORE)
    assert s.problems == ()
    cyc = s.counters["cycles"]
    assert cyc.value == 146_913_578 and cyc.coverage == pytest.approx(0.9)
    assert [(p.id, p.cpus, p.value) for p in cyc.parts] == [
        ("S0-D0-C0", 2, 123_456_789), ("S0-D0-C1", 2, 23_456_789)]


def test_human_per_socket_and_per_cpu():
    sock = parse_perf_stat("S0        4           4,021.51 msec cpu-clock\n"
                           "S1        4           3,999.00 msec cpu-clock\n")
    assert [(p.id, p.cpus) for p in sock.counters["task-clock"].parts] == [("S0", 4), ("S1", 4)]
    cpu = parse_perf_stat("CPU0            1,234      cycles\nCPU1            1,000      cycles\n")
    assert cpu.counters["cycles"].value == 2234
    assert [p.id for p in cpu.counters["cycles"].parts] == ["CPU0", "CPU1"]


def test_metric_group_lines_and_other_aggregation_ids():
    s = parse_perf_stat(
        "     5,205,202,243      cpu_core/cycles/\n"
        "          TopdownL1 (cpu_core)                 #     23.3 %  tma_backend_bound\n"
        "                                               #     15.0 %  tma_bad_speculation\n"
        "S0-D0        8            1,000      cycles\n"
        "N1           8            2,000      cycles\n"
        "           java-1234            3,000      cycles\n")
    assert s.problems == ()
    assert [(m.group, m.value, m.unit) for m in s.metrics] == [
        ("TopdownL1 (cpu_core)", 23.3, "% tma_backend_bound")]
    assert s.counters["cpu_core/cycles"].metrics[0].unit == "% tma_bad_speculation"
    assert [(p.id, p.cpus) for p in s.counters["cycles"].parts] == [
        ("S0-D0", 8), ("N1", 8), ("java-1234", None)]
    assert [c.pmu for c in s.find("cpu-cycles")] == ["cpu_core", ""]


# ----------------------------------------------------------------------------- CSV

CSV = """\
# started on Tue Mar  5 10:12:01 2024

225851.20,msec,cpu-clock,225850700108,100.00,224.431,CPUs utilized
986,,context-switches,225904108985,100.00,4.365,/sec
<not counted>,,slots,0,0.00,,
<not supported>,,L1-icache-loads,0,100.00,,
13931568041,,L1-dcache-loads,90601712320,40.13,,
3856436920,,cpu_core/instructions/,135126781219,59.87,0.74,insn per cycle
,,,,,0.12,stalled cycles per insn
782601144,,LLC-load-misses:u,90601712320,28.41,,
"""


def test_csv():
    s = parse_perf_stat(CSV)
    assert (s.format, s.separator, s.decimal_comma, s.problems) == ("csv", ",", False, ())
    assert [c.text for c in s.comments] == ["# started on Tue Mar  5 10:12:01 2024"]
    tc = s.counters["task-clock"]
    assert (tc.value, tc.unit, tc.runtime_ns, tc.coverage) == (225851.20, "msec",
                                                              225850700108, 1.0)
    assert tc.metrics[0].kind == "cpus_utilized" and tc.metrics[0].value == 224.431
    assert (s.counters["slots"].status, s.counters["slots"].coverage) == (NOT_COUNTED, 0.0)
    assert s.counters["L1-icache-loads"].status == NOT_SUPPORTED
    assert s.counters["L1-dcache-loads"].coverage == pytest.approx(0.4013)
    assert len(s.counters["cpu_core/instructions"].metrics) == 2
    assert s.counters["LLC-misses:u"].value == 782601144


def test_a_truncated_csv_line_is_a_problem_not_a_metric():
    s = parse_perf_stat(CSV_INTERVAL_PER_CORE + "2.002011002,S0-D0-C1,2,1200\n"
                        "2.002011002,S0-D0-C1,2,,,,,,0.5\n")
    assert [p.line for p in s.problems] == [11, 12]
    assert s.counters["cycles"].value == 123456789 + 23456789 + 100000000


def test_csv_repeat_variance_column():
    s = parse_perf_stat("1.20,msec,task-clock:u,2.34%,1204272,100.00,0.697,CPUs utilized\n"
                        "70,,page-faults:u,0.00%,1204272,100.00,58.126,K/sec\n")
    assert s.problems == ()
    assert s.counters["task-clock:u"].variance_pct == 2.34
    assert s.counters["page-faults:u"].variance_pct == 0.0


CSV_INTERVAL_PER_CORE = """\
# started on Tue Mar  5 10:12:01 2024

1.000961880,S0-D0-C0,2,2011.39,msec,cpu-clock,2011417650,100.00,1.003,CPUs utilized
1.000961880,S0-D0-C0,2,123456789,,cycles,2011417650,50.00,0.061,GHz
1.000961880,S0-D0-C1,2,2010.12,msec,cpu-clock,2010117650,100.00,1.002,CPUs utilized
1.000961880,S0-D0-C1,2,23456789,,cycles,2010117650,50.00,0.012,GHz
2.002011002,S0-D0-C0,2,2000.00,msec,cpu-clock,2000000000,100.00,1.000,CPUs utilized
2.002011002,S0-D0-C0,2,100000000,,cycles,2000000000,50.00,0.050,GHz
2.002011002,S0-D0-C1,2,2000.00,msec,cpu-clock,2000000000,100.00,1.000,CPUs utilized
2.002011002,S0-D0-C1,2,<not counted>,,cycles,0,0.00,,
"""


def test_csv_interval_and_per_core_columns():
    s = parse_perf_stat(CSV_INTERVAL_PER_CORE)
    assert s.problems == () and s.format == "csv"
    cyc = s.counters["cycles"]
    assert cyc.value == 123456789 + 23456789 + 100000000
    assert {p.id: p.value for p in cyc.parts} == {"S0-D0-C0": 223456789,
                                                  "S0-D0-C1": 23456789}
    df = s.intervals_frame()
    assert len(df) == 8 and set(df["part"]) == {"S0-D0-C0", "S0-D0-C1"}
    last = df[(df.time_s == 2.002011002) & (df.part == "S0-D0-C1") & (df.counter == "cycles")]
    assert last["status"].item() == NOT_COUNTED and last["value"].isna().item()


def test_csv_per_socket_and_per_cpu_columns():
    s = parse_perf_stat("S0,4,4021.51,msec,cpu-clock,4021510000,100.00,4.004,CPUs utilized\n"
                        "S1,4,3999.00,msec,cpu-clock,3999000000,100.00,3.982,CPUs utilized\n")
    assert [(p.id, p.cpus) for p in s.counters["task-clock"].parts] == [("S0", 4), ("S1", 4)]
    a = parse_perf_stat("CPU0,1000,,cycles,100,100.00,,\nCPU1,500,,cycles,100,100.00,,\n")
    assert a.counters["cycles"].value == 1500 and a.counters["cycles"].parts[1].cpus is None


CSV_SEMICOLON = """\
# started on Di 5. Mär 10:12:01 2024

225851,20;msec;cpu-clock;225850700108;100,00;224,431;CPUs utilized
986;;context-switches;225904108985;100,00;4,365;/sec
13931568041;;L1-dcache-loads;90601712320;40,13;;
<not counted>;;slots;0;0,00;;
"""


def test_csv_other_separator_with_decimal_comma():
    s = parse_perf_stat(CSV_SEMICOLON)
    assert (s.separator, s.decimal_comma, s.problems) == (";", True, ())
    assert s.counters["task-clock"].value == 225851.20
    assert s.counters["task-clock"].metrics[0].value == 224.431
    assert s.counters["L1-dcache-loads"].coverage == pytest.approx(0.4013)
    tabs = parse_perf_stat("1000\t\tcycles\t100\t100.00\t\t\n"
                           "2000\t\tinstructions\t100\t100.00\t2.00\tinsn per cycle\n")
    assert tabs.separator == "\t" and tabs.derived == {"ipc": 2.0}


# ----------------------------------------------------------------------------- JSON

JSON_LINES = """\
{"counter-value" : "225851.200000", "unit" : "msec", "event" : "cpu-clock", "event-runtime" : 225850700108, "pcnt-running" : 100.00, "metric-value" : "224.431000", "metric-unit" : "CPUs utilized"}
{"counter-value" : "986.000000", "unit" : "", "event" : "context-switches", "event-runtime" : 225904108985, "pcnt-running" : 100.00, "metric-value" : "4.364670", "metric-unit" : "/sec"}
{"counter-value" : "<not counted>", "unit" : "", "event" : "cpu_atom/cycles/", "event-runtime" : 0, "pcnt-running" : 0.00, "metric-value" : "0.000000", "metric-unit" : ""}
{"counter-value" : "<not supported>", "unit" : "", "event" : "L1-icache-loads", "event-runtime" : 0, "pcnt-running" : 100.00, "metric-value" : "0.000000", "metric-unit" : ""}
{"counter-value" : "3856436920.000000", "unit" : "", "event" : "cpu_core/instructions/", "event-runtime" : 135126781219, "pcnt-running" : 59.87, "metric-value" : "0.740000", "metric-unit" : "insn per cycle"}
{"metric-value" : "0.120000", "metric-unit" : "stalled cycles per insn"}
"""

JSON_OLD = """\
{"counter-value" : "3805.723968", "unit" : "msec", "event" : "cpu-clock", "event-runtime" : 3805731510100.00, "pcnt-running" : 100.00, "metric-value" : 4.007571, "metric-unit" : "CPUs utilized"}
{"counter-value" : "6166.000000", "unit" : "", "event" : "context-switches", "event-runtime" : 3805723045100.00, "pcnt-running" : 100.00, "metric-value" : 1.620191, "metric-unit" : "K/sec"}
{"counter-value" : "1200.000000", "unit" : "", "event" : "LLC-load-misses", "variance" : 1.25, "event-runtime" : 1000, "pcnt-running" : 25.00, "metric-value" : 0.000000, "metric-unit" : "(null)"}
"""


def test_json_lines_with_string_metric_values():
    s = parse_perf_stat(JSON_LINES)
    assert (s.format, s.problems) == ("json", ())
    assert s.counters["task-clock"].value == 225851.2
    assert s.counters["task-clock"].metrics[0].value == 224.431
    assert s.counters["cpu_atom/cycles"].status == NOT_COUNTED
    assert s.counters["L1-icache-loads"].status == NOT_SUPPORTED
    ins = s.counters["cpu_core/instructions"]
    assert ins.coverage == pytest.approx(0.5987)
    assert [m.unit for m in ins.metrics] == ["insn per cycle", "stalled cycles per insn"]


def test_json_lines_with_numeric_metric_values_and_variance():
    s = parse_perf_stat(JSON_OLD)
    assert s.problems == ()
    assert s.counters["task-clock"].metrics[0].value == 4.007571
    assert s.counters["task-clock"].runtime_ns == 3805731510100
    llc = s.counters["LLC-misses"]
    assert (llc.value, llc.variance_pct, llc.coverage, llc.metrics) == (1200, 1.25, 0.25, ())


def test_json_interval_per_socket():
    text = "\n".join(
        json.dumps({"interval": t, "socket": sock, "aggregate-number": 4,
                    "counter-value": f"{v:f}", "unit": "", "event": "cycles",
                    "event-runtime": 10, "pcnt-running": 100.0,
                    "metric-value": "0.5", "metric-unit": "GHz"})
        for t, sock, v in [(1.0, "S0", 10), (1.0, "S1", 20), (2.0, "S0", 30), (2.0, "S1", 40)])
    s = parse_perf_stat(text)
    assert s.counters["cycles"].value == 100
    assert [(p.id, p.cpus, p.value) for p in s.counters["cycles"].parts] == [
        ("S0", 4, 40), ("S1", 4, 60)]
    assert [x.time_s for x in s.intervals] == [1.0, 1.0, 2.0, 2.0]


def test_json_metric_groups_metric_only_and_two_objects_on_a_line():
    s = parse_perf_stat(
        '{"counter-value" : "1117309.000000", "unit" : "", "event" : "UNC_M_CAS_COUNT.RD", "event-runtime" : 8017286783, "pcnt-running" : 100.00, "metric-value" : 124.961911, "metric-unit" : "MB/s  memory_bandwidth_read"} {"metric-value" : 237.237504, "metric-unit" : "MB/s  memory_bandwidth_total"}\n'
        '{"metricgroup" : "TopdownL1 (cpu_core)"}\n'
        '{"metric-value" : "23.300000", "metric-unit" : "tma_backend_bound"}\n'
        '{"GHz" : "0.990", "insn per cycle" : "2.06"}\n')
    assert s.problems == ()
    unc = s.counters["UNC_M_CAS_COUNT.RD"]
    assert [m.unit for m in unc.metrics] == ["MB/s memory_bandwidth_read",
                                             "MB/s memory_bandwidth_total"]
    assert [(m.group, m.value, m.kind) for m in s.metrics] == [
        ("TopdownL1 (cpu_core)", 23.3, None), ("metric-only", 0.99, "ghz"),
        ("metric-only", 2.06, "ipc")]


def test_json_broken_line_is_a_problem_with_its_number():
    s = parse_perf_stat(JSON_LINES + '{"counter-value" : "12", "unit" : "", "eve\n')
    assert len(s.counters) == 5
    assert [(p.line, p.reason.split(":")[0]) for p in s.problems] == [(7, "invalid JSON")]


# ----------------------------------------------------------------------------- names, problems

@pytest.mark.parametrize("raw, canonical", [
    ("LLC-load-misses", "LLC-misses"), ("LLC-misses", "LLC-misses"),
    ("L1-dcache-load-misses", "L1-dcache-misses"), ("L1-dcache-misses", "L1-dcache-misses"),
    ("cpu-clock", "task-clock"), ("task-clock", "task-clock"), ("llc-MISSES", "LLC-misses"),
    ("CPU-migrations", "cpu-migrations"), ("UNC_M_CAS_COUNT.RD", "UNC_M_CAS_COUNT.RD"),
])
def test_aliases(raw, canonical):
    assert canonical_event(raw) == canonical


def test_split_event():
    assert split_event("cpu_core/LLC-load-misses/u") == ("cpu_core", "LLC-misses", "u")
    assert split_event("cycles:uk") == ("", "cycles", "uk")
    assert split_event("power/energy-pkg/") == ("power", "energy-pkg", "")
    assert split_event("sched:sched_switch") == ("", "sched:sched_switch", "")


def test_aliases_merge_across_a_file_and_a_repeat_is_reported_not_dropped():
    s = parse_perf_stat("  1,000  LLC-load-misses\n  2,000  L1-dcache-load-misses\n"
                        "  3.50 msec task-clock\n  3.60 msec cpu-clock\n")
    assert s.counters["LLC-misses"].value == 1000
    assert s.counters["L1-dcache-misses"].raw_name == "L1-dcache-load-misses"
    assert s.counters["task-clock"].value == 3.5
    [p] = s.problems
    assert p.line == 4 and "repeats the counter read at line 3" in p.reason


def test_unreadable_lines_are_problems_with_line_numbers():
    text = CURRENT.replace("               986      context-switches",
                           "Time: 0.118\n               986      context-switches")
    text += "   1,234,56\n    12,345 cycles  # 1.0 GHz  [oops\n"
    s = parse_perf_stat(text)
    lines = text.splitlines()
    assert [p.line for p in s.problems] == [4, 19, 20]
    assert all(lines[p.line - 1] == p.text for p in s.problems)
    assert len(s.counters) == 9                                  # the rest still read


def test_hints_are_comments_not_problems():
    s = parse_perf_stat(CURRENT + "\nSome events weren't counted. Try disabling the NMI "
                        "watchdog:\n\techo 0 > /proc/sys/kernel/nmi_watchdog\n"
                        "\tperf stat ...\n\techo 1 > /proc/sys/kernel/nmi_watchdog\n")
    assert s.problems == () and len(s.comments) == 4


# ----------------------------------------------------------------------------- files, CLI

def test_load_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"  1,000  cycles\n  2,000 instr\xe9ctions\n")
    with pytest.raises(PerfStatError, match=r"bad.txt:2: not UTF-8 text \(byte 0xe9 at "
                                            r"byte offset 29\)"):
        load_perf_stat(bad)
    big = tmp_path / "big.txt"
    big.write_text("  1,000  cycles\n" * 100)
    with pytest.raises(PerfStatError, match="larger than the 0 MB limit"):
        load_perf_stat(big, max_bytes=1000)
    with pytest.raises(PerfStatError, match="is a directory"):
        load_perf_stat(tmp_path)
    with pytest.raises(PerfStatError, match="no such file"):
        load_perf_stat(tmp_path / "missing.txt")


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.skipif(not JETTY.exists(), reason="shared measurements not present")
def test_cli_human_output(capsys):
    code, out, err = run(["perf-parse", str(JETTY)], capsys)
    assert code == 0 and err == ""
    assert "multiplexing in brackets" in out
    assert any(ln.split()[:2] == ["cycles", "53,963,171,579"] and "28.67%" in ln
               for ln in out.splitlines())
    assert "0 lines not read" in out


def test_cli_json_output(tmp_path, capsys):
    f = tmp_path / "p.csv"
    f.write_text(CSV_SEMICOLON + "garbage;line\n")
    code, out, _ = run(["perf-parse", str(f), "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["format"] == "csv" and d["decimal_comma"] is True
    assert d["counters"]["task-clock"]["value"] == 225851.2
    assert d["problems"] == [{"line": 7, "text": "garbage;line",
                              "reason": "no value;unit;event columns (separator ';')"}]


@pytest.mark.parametrize("content, message", [
    (b"", r"empty.txt:1: no perf stat counters in the file \(it is empty\)"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00", r"empty.txt:1: binary file"),
    (b"caf\xe9\n", r"empty.txt:1: not UTF-8 text"),
    (b"hello\nworld\n", r"empty.txt:1: no perf stat counters read; not a perf stat counter "
                        r"line \(and 1 more lines\)"),
])
def test_cli_unusable_file_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    f = tmp_path / "empty.txt"
    f.write_bytes(content)
    code, out, err = run(["perf-parse", str(f)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("warmcore: error: ") and "Traceback" not in err
    assert __import__("re").search(message, err), err


def test_cli_missing_file(tmp_path, capsys):
    code, _, err = run(["perf-parse", str(tmp_path / "nope.txt")], capsys)
    assert code == 2 and err.strip().endswith("nope.txt: no such file")


# ----------------------------------------------------------------------------- round trip

EVENTS = ["cycles", "instructions", "LLC-loads", "LLC-misses", "L1-dcache-loads",
          "L1-dcache-misses", "context-switches", "cpu-migrations", "branch-misses",
          "cpu_core/cycles/", "cpu_atom/instructions/", "page-faults:u", "cache-misses:k"]


@st.composite
def counter_sets(draw):
    events = draw(st.lists(st.sampled_from(EVENTS), min_size=1, max_size=8, unique=True))
    out = [("task-clock", "msec", draw(st.integers(1, 10**9)) / 100, "counted", 1.0)]
    for ev in events:
        status = draw(st.sampled_from(["counted"] * 4 + ["not counted", "not supported"]))
        value = draw(st.integers(0, 10**13)) if status == "counted" else None
        cov = draw(st.integers(1, 10000)) / 10000 if status == "counted" else 0.0
        out.append((ev, "", value, status, cov))
    return out


def _value_text(value, status, fmt):
    if value is None:
        return f"<{status}>"
    return fmt.format(value)


def render_human(cs, old):
    lines = [" Performance counter stats for 'system wide':", ""]
    for ev, unit, value, status, cov in cs:
        v = _value_text(value, status, "{:,.2f}" if unit else "{:,}")
        if old:
            tail = f"  [{cov * 100:5.2f}%]" if status == "counted" and cov < 1 else ""
            lines.append(f" {v:>18} {ev}{tail}")          # perf 3.x printed no unit
        else:
            tail = f"  ({cov * 100:.2f}%)" if status != "not supported" and cov < 1 else ""
            lines.append(f" {v:>18} {unit:5s} {ev:40s}{tail}")
    return "\n".join([*lines, "", "       1.000000000 seconds time elapsed", ""])


def render_csv(cs, sep, comma):
    def num(x, spec):
        t = format(x, spec)
        return t.replace(".", ",") if comma else t
    lines = ["# started on Mon Jan  1 00:00:00 2024", ""]
    for ev, unit, value, status, cov in cs:
        v = f"<{status}>" if value is None else num(value, ".2f" if unit else "d")
        lines.append(sep.join([v, unit, ev, "1000", num(cov * 100, ".2f"), "", ""]))
    return "\n".join(lines) + "\n"


def render_json(cs, numeric_metric):
    lines = []
    for ev, unit, value, status, cov in cs:
        v = f"<{status}>" if value is None else f"{value:f}"
        metric = 1.5 if numeric_metric else "1.500000"
        lines.append(json.dumps({"counter-value": v, "unit": unit, "event": ev,
                                 "event-runtime": 1000, "pcnt-running": round(cov * 100, 2),
                                 "metric-value": metric, "metric-unit": "M/sec"}))
    return "\n".join(lines) + "\n"


RENDERERS = {
    "human-old": lambda cs: render_human(cs, old=True),
    "human": lambda cs: render_human(cs, old=False),
    "csv,": lambda cs: render_csv(cs, ",", comma=False),
    "csv;": lambda cs: render_csv(cs, ";", comma=True),
    "csv-tab": lambda cs: render_csv(cs, "\t", comma=False),
    "json-str": lambda cs: render_json(cs, numeric_metric=False),
    "json-num": lambda cs: render_json(cs, numeric_metric=True),
}


@settings(max_examples=40, deadline=None)
@given(cs=counter_sets())
@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_round_trip(fmt, cs):
    s = parse_perf_stat(RENDERERS[fmt](cs))
    assert s.problems == ()
    assert len(s.counters) == len(cs)
    for ev, unit, value, status, cov in cs:
        pmu, name, mods = split_event(ev)
        c = s.counters[f"{pmu}/{name}" if pmu else name] if not mods else \
            s.counters[f"{name}:{mods}"]
        assert (c.status, c.unit) == (status, unit)
        assert c.value == (pytest.approx(value, rel=1e-12) if value is not None else None)
        if status == "counted":
            expect = cov if not fmt.startswith("human") or cov < 1 else 1.0
            assert c.coverage == pytest.approx(expect, abs=5e-5)
