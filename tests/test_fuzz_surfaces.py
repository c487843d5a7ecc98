"""The contract of issue 30 on every surface besides scenarios (tests/test_fuzz.py): sweep
specs, sweep output folders, calibration specs, perf stat files in every format,
PARAMS.toml and arrival traces, each generated valid, at the edges and broken (wrong
types, non-finite, huge, negative, repeated, truncated, re-encoded), each case run by
the CLI in a forked child under a memory limit and a timeout (tests/fuzzing.py). Every
one must exit 0 or 2, with no traceback and no hang; exit 2 is one line; what exit 0
prints is checked per command (valid JSON without NaN, a sweep folder whose rows are
whole and its own).

Cases per surface: WARMCORE_FUZZ_SURFACE_EXAMPLES (default 12: the file takes about 15 s
on two cores); in CI the inputs are derandomised, so a failure reproduces.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzzing import contract_violation, result_violation, run_cli
from warmcore.sweeps import read_results, sweep

EXAMPLES = int(os.environ.get("WARMCORE_FUZZ_SURFACE_EXAMPLES", "12"))
TIMEOUT = 60.0
CASE = settings(max_examples=EXAMPLES, deadline=None, derandomize=bool(os.environ.get("CI")),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

ODD = [math.nan, math.inf, -math.inf, 1e308, -1.0, 0, 0.0, 2**63, 10**30, 1e-320, "x", "",
       True, [], [1, 2], {"a": 1}, "caf\u00e9"]
TINY_SPEC = {"scenario": "mmc", "set": ["run.requests=20"], "metrics": ["throughput_rps"],
             "axes": {"machine.cores": [1, 2]}}


def literal(value) -> str:
    """A TOML literal of ``value``, NaN and infinities included (tomli_w refuses them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def toml_text(data: dict) -> str:
    """``data`` as TOML: top-level scalars, then each table as an inline table."""
    return "".join(f"{json.dumps(k)} = {literal(v)}\n" for k, v in data.items())


def damaged(draw, text: str) -> bytes:
    """``text`` as bytes, perhaps cut, with bytes inserted, or re-encoded."""
    raw = text.encode()
    how = draw(st.sampled_from(["as is", "as is", "cut", "insert", "latin1", "utf16"]))
    if how == "cut":
        return raw[:draw(st.integers(0, len(raw)))]
    if how == "insert":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + draw(st.binary(min_size=1, max_size=6)) + raw[at:]
    if how == "latin1":
        return text.encode("latin-1", errors="replace").replace(b"=", b"= \xe9", 1)
    if how == "utf16":
        return text.encode("utf-16")
    return raw


@pytest.fixture(autouse=True)
def _case_dirs(tmp_path):
    """Each Hypothesis example gets a folder of its own under the test's tmp_path
    (which pytest gives once per test, not per example)."""
    CASE_DIRS.append(tmp_path)
    yield
    CASE_DIRS.pop()


CASE_DIRS: list = []


def case_dir():
    return Path(tempfile.mkdtemp(dir=CASE_DIRS[-1]))


def check(o, what: str) -> None:
    why = contract_violation(o, result=False)
    assert why is None, f"{what}\n{' '.join(o.argv)[:300]}\n{why}"


def strict_json(text: str):
    def refuse(c):
        raise AssertionError(f"{c} in the JSON")
    return json.loads(text, parse_constant=refuse)


# -- sweep specs --------------------------------------------------------------------------

def axis_values(draw):
    small = st.one_of(st.integers(-2, 9), st.floats(-1e3, 1e3, allow_nan=False),
                      st.sampled_from(ODD))
    return draw(st.one_of(
        st.lists(small, max_size=4),
        st.fixed_dictionaries({"start": small, "stop": small}, optional={
            "num": st.sampled_from([0, 1, 2, 3, 2_000_000, -1, 1.5]),
            "step": st.sampled_from([0.0, 0.5, 1.0, 100.0, -1.0, 1e-9]),
            "log": st.booleans(), "bogus": st.just(1)})))


@st.composite
def sweep_specs(draw):
    spec = dict(TINY_SPEC)
    paths = ["machine.cores", "workload.rate_per_s", "workload.service_us", "server.cpus",
             "strategy.name", "run.warmup", "machine.nope", "", "a." * 300 + "b"]
    axes = {draw(st.sampled_from(paths)): axis_values(draw)
            for _ in range(draw(st.integers(0, 2)))}
    spec["axes"] = axes if axes or draw(st.booleans()) else {"machine.cores": [1, 1, 1]}
    for key, values in {
        "design": st.sampled_from(["grid", "random", "lhs", "sobol", "halton", 3]),
        "samples": st.sampled_from([1, 2, 4, 0, -3, 10**7, 2.5]),
        "replications": st.sampled_from([1, 2, 0, 10**6, "2"]),
        "seed": st.sampled_from([0, 1, -1, 2**64]),
        "metrics": st.lists(st.sampled_from(["throughput_rps", "latency_us.p99", "nope",
                                             "processes.server.cycles", "latency_us",
                                             "throughput_rps"]), max_size=3),
        "batch": st.sampled_from([1, 0, 10**6]),
        "max_wall": st.sampled_from([1.0, 0, -1, math.inf]),
        "scenario": st.sampled_from(["mmc", "nope", "", 5, "mmc.toml"]),
        "set": st.lists(st.sampled_from(["run.requests=30", "run.requests=0", "x", "",
                                         "machine.cores=1e9", "run.requests=1e9"]),
                        max_size=2).map(lambda extra: ["run.requests=20", *extra]),
    }.items():
        if draw(st.integers(0, 4)) == 0:
            spec[key] = draw(values)
    return spec


@CASE
@given(data=st.data())
def test_sweep_specs_keep_the_contract(data):
    tmp_path = case_dir()
    spec = data.draw(sweep_specs())
    (tmp_path / "spec.toml").write_bytes(damaged(data.draw, toml_text(spec)))
    o = run_cli(["sweep", "spec.toml", "--out", "out", "--workers", "1", "--quiet"],
                timeout=TIMEOUT, cwd=str(tmp_path))
    check(o, "sweep spec")
    if o.code == 0:
        rows = read_results(tmp_path / "out")
        assert not rows.duplicated(["point_id", "replication"]).any()


# -- sweep output folders ---------------------------------------------------------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep-folder")
    (d / "spec.toml").write_text(toml_text(TINY_SPEC) + 'batch = 1\n')
    (d / "other.toml").write_text(toml_text({**TINY_SPEC, "axes": {"machine.cores": [3]}}))
    sweep(d / "spec.toml", d / "out", workers=1)
    sweep(d / "other.toml", d / "other", workers=1)
    return d


@st.composite
def folder_damage(draw):
    return draw(st.lists(st.sampled_from(
        ["spec-garbage", "spec-json-list", "spec-wrong-hash", "spec-cut", "spec-gone",
         "part-cut", "part-bytes", "part-gone", "part-foreign", "part-not-parquet",
         "part-folder", "part-empty", "nothing"]), min_size=1, max_size=3))


def damage(draw, folder, kinds, other) -> None:
    parts = sorted(folder.glob("part-*.parquet"))
    spec = folder / "spec.json"
    for kind in kinds:
        part = parts[draw(st.integers(0, len(parts) - 1))] if parts else None
        if kind == "spec-garbage":
            spec.write_bytes(draw(st.binary(max_size=40)))
        elif kind == "spec-json-list":
            spec.write_text(draw(st.sampled_from(["[]", "{}", "null", '{"spec_hash": 1}',
                                                  '{"spec_hash": "x", "spec": {}}'])))
        elif kind == "spec-wrong-hash" and spec.exists():
            spec.write_bytes(spec.read_bytes().replace(b'"spec_hash": "', b'"spec_hash": "f', 1))
        elif kind == "spec-cut" and spec.exists():
            text = spec.read_bytes()
            spec.write_bytes(text[:draw(st.integers(0, len(text)))])
        elif kind == "spec-gone" and spec.exists():
            spec.unlink()
        elif kind == "part-cut" and part and part.is_file():
            raw = part.read_bytes()
            part.write_bytes(raw[:draw(st.integers(0, len(raw)))])
        elif kind == "part-bytes" and part and part.is_file():
            raw = part.read_bytes()
            at = draw(st.integers(0, len(raw)))
            part.write_bytes(raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at:])
        elif kind == "part-gone" and part and part.is_file():
            part.unlink()
        elif kind == "part-foreign":
            src = sorted(other.glob("part-*.parquet"))[0]
            shutil.copy(src, folder / "part-ffffffffffffffff.parquet")
        elif kind == "part-not-parquet":
            (folder / "part-eeeeeeeeeeeeeeee.parquet").write_text("not parquet")
        elif kind == "part-folder":
            (folder / "part-dddddddddddddddd.parquet").mkdir(exist_ok=True)
        elif kind == "part-empty":
            (folder / "part-cccccccccccccccc.parquet").write_bytes(b"")


@CASE
@given(data=st.data())
def test_damaged_sweep_folders_are_refused_or_whole(data, finished):
    tmp_path = case_dir()
    folder = tmp_path / "out"
    shutil.copytree(finished / "out", folder)
    damage(data.draw, folder, data.draw(folder_damage()), finished / "other")
    command = data.draw(st.sampled_from(["sweep", "sweep", "report"]))
    argv = ["sweep", str(finished / "spec.toml"), "--out", "out", "--workers", "1",
            "--quiet"] if command == "sweep" else ["sweep-report", "out", "--no-charts"]
    o = run_cli(argv, timeout=TIMEOUT, cwd=str(tmp_path))
    check(o, "sweep folder")
    if o.code == 0 and command == "sweep":        # reused: then whole and its own
        rows = read_results(folder)
        assert len(rows) == 2 and rows["error"].isna().all()
        assert not rows.duplicated(["point_id", "replication"]).any()


# -- calibration specs ------------------------------------------------------------------

TINY_CAL = {"measurement": [{"name": "m", "scenario": "mmc",
                             "figures": {"throughput_rps": 500.0}}],
            "fit": [{"path": "workload.service_us", "lo": 100.0, "hi": 2000.0}],
            "run": {"requests": 20, "seeds": [1], "starts": 1, "max_evaluations": 2}}


@st.composite
def calibration_specs(draw):
    m = dict(TINY_CAL["measurement"][0])
    f = dict(TINY_CAL["fit"][0])
    run = dict(TINY_CAL["run"])
    odd = st.sampled_from(ODD)
    for table, key, values in [
        (m, "figures", st.dictionaries(st.sampled_from(["throughput_rps", "ipc", "nope",
                                                        "cpu_us_per_request"]),
                                       st.one_of(odd, st.fixed_dictionaries(
                                           {"value": odd}, optional={"coverage": odd,
                                                                     "uncertainty": odd})),
                                       max_size=2)),
        (m, "scenario", st.sampled_from(["mmc", "nope", "", 3])),
        (m, "perf", st.sampled_from(["perf.txt", "nope.txt", ".", ""])),
        (m, "requests", st.sampled_from([100, 0, -1, 2.5, 10**30])),
        (m, "elapsed_s", odd),
        (f, "path", st.sampled_from(["workload.service_us", "machine.cores", "nope",
                                     "strategy.name", ""])),
        (f, "lo", odd), (f, "hi", odd), (f, "log", st.sampled_from([True, 1, "yes"])),
        (run, "requests", st.sampled_from([20, 0, -5, 10**8, 2.5])),
        (run, "seeds", st.sampled_from([[1], [], [-1], [2**64], list(range(100)), "1"])),
        (run, "starts", st.sampled_from([1, 2, 0, 10**6])),
        (run, "max_evaluations", st.sampled_from([2, 3, 1, 10**7])),
        (run, "max_wall", st.sampled_from([1.0, 0.0, -1.0, math.nan])),
    ]:
        if draw(st.integers(0, 5)) == 0:
            table[key] = draw(values)
    fits = [f] * draw(st.sampled_from([1, 1, 2, 0]))
    return {"measurement": [m], "fit": fits, "run": run}


@CASE
@given(data=st.data())
def test_calibration_specs_keep_the_contract(data):
    tmp_path = case_dir()
    spec = data.draw(calibration_specs())
    (tmp_path / "perf.txt").write_text("  1,000  cycles\n  2,000  instructions\n"
                                       "  3.5 msec task-clock\n")
    text = "".join(f"[[measurement]]\n{toml_text(m)}" for m in spec["measurement"]) + \
        "".join(f"[[fit]]\n{toml_text(f)}" for f in spec["fit"]) + \
        f"[run]\n{toml_text(spec['run'])}"
    (tmp_path / "cal.toml").write_bytes(damaged(data.draw, text))
    out = data.draw(st.sampled_from(["p.toml", "p.toml", ".", "nope/p.toml", ""]))
    o = run_cli(["calibrate", "cal.toml", "--out", out, "--workers", "1", "--json"],
                timeout=TIMEOUT, cwd=str(tmp_path))
    check(o, "calibration spec")
    if o.code == 0:
        strict_json(o.stdout)
        assert (tmp_path / out).is_file()
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


# -- perf stat files in every format ----------------------------------------------------

VALUES = ["1,234", "1234", "0", "12.5", "-5", "nan", "NaN", "inf", "1e999", "1" * 400, "",
          "<not counted>", "<not supported>", "x", "1,2,3", "0x10"]
EVENTS = ["cycles", "instructions", "task-clock", "cpu_core/cycles/", "LLC-load-misses:u",
          "r01c2", "", "cycles cycles"]
COVER = ["100.00", "28.67", "0.00", "250.00", "-1", "nan", "1e999"]


@st.composite
def perf_files(draw):
    fmt = draw(st.sampled_from(["human-old", "human", "csv", "csv;", "json"]))
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        v, e, c = (draw(st.sampled_from(xs)) for xs in (VALUES, EVENTS, COVER))
        if fmt == "human-old":
            lines.append(f"  {v:>16}  {e}  # 1.0 GHz  [{c}%]")
        elif fmt == "human":
            lines.append(f"  {v:>16}  {e}  # 1.0 GHz  ( +- 0.5% )  ({c}%)")
        elif fmt.startswith("csv"):
            sep = fmt[3:] or ","
            lines.append(sep.join([v, "", e, draw(st.sampled_from(["100", "1e999", "-1"])),
                                   c, draw(st.sampled_from(["1.0", "", "nan"])), "GHz"]))
        else:
            value = draw(st.sampled_from([v, 5, -5, 1e300, 10**400]))
            obj = {"counter-value": value, "event": e, "pcnt-running": c,
                   "aggregate-number": draw(st.sampled_from([1, 1e300, -1]))}
            lines.append(json.dumps(obj) if not isinstance(value, int) or value < 10**300
                         else json.dumps(obj).replace(str(value), "1" * 400))
    if draw(st.booleans()):
        lines.append(f"       {draw(st.sampled_from(['1.5', '1' * 400, 'nan']))} "
                     "seconds time elapsed")
    return "\n".join(lines) + "\n"


@CASE
@given(data=st.data())
def test_perf_files_keep_the_contract(data):
    tmp_path = case_dir()
    (tmp_path / "p.perf").write_bytes(damaged(data.draw, data.draw(perf_files())))
    o = run_cli(["perf-parse", "p.perf", "--json"], timeout=TIMEOUT, cwd=str(tmp_path))
    check(o, "perf file")
    if o.code == 0:
        stat = strict_json(o.stdout)
        for c in stat["counters"].values():
            assert c["value"] is None or (math.isfinite(c["value"]) and c["value"] >= 0), c
            assert 0 <= c["coverage"] <= 1, c


# -- PARAMS.toml --------------------------------------------------------------------------

GOOD_PARAMS = {"values": {"workload.service_us": 900.0},
               "fit": [{"path": "workload.service_us", "lo": 100.0, "hi": 2000.0,
                        "log": False}],
               "unit_optimum": [0.42], "unit_cov": [[0.01]], "seeds": [1]}


@st.composite
def params_docs(draw):
    doc = json.loads(json.dumps(GOOD_PARAMS))
    odd = st.sampled_from(ODD)
    for key, values in {
        "values": st.one_of(st.dictionaries(st.sampled_from(["workload.service_us", "nope",
                                                              "machine.cores"]), odd,
                                            max_size=2), odd),
        "fit": st.one_of(st.lists(st.fixed_dictionaries(
            {"path": st.sampled_from(["workload.service_us", "machine.cores", "x"]),
             "lo": odd, "hi": odd}), max_size=2), odd),
        "unit_optimum": st.one_of(st.lists(odd, max_size=2), odd),
        "unit_cov": st.one_of(st.lists(st.lists(odd, max_size=2), max_size=2), odd,
                              st.just([[-1.0]]), st.just([[0.0, 1.0], [0.0, 0.0]])),
        "seeds": st.one_of(st.lists(odd, max_size=2), odd),
    }.items():
        if draw(st.integers(0, 3)) == 0:
            doc[key] = draw(values)
    return doc


@CASE
@given(data=st.data())
def test_params_files_keep_the_contract(data):
    tmp_path = case_dir()
    doc = data.draw(params_docs())
    (tmp_path / "p.toml").write_bytes(damaged(data.draw, toml_text(doc)))
    draws = data.draw(st.sampled_from(["0", "2", "-1", "1000000000"]))
    command = data.draw(st.sampled_from(["predict", "run"]))
    argv = ["predict", "mmc", "--params", "p.toml", "--requests", "50", "--draws", draws,
            "--json"] if command == "predict" else \
        ["run", "mmc", "--params", "p.toml", "--requests", "50", "--json"]
    o = run_cli(argv, timeout=TIMEOUT, cwd=str(tmp_path))
    check(o, "PARAMS.toml")
    if o.code == 0:
        out = strict_json(o.stdout)
        if command == "run":
            assert result_violation(o.stdout) is None
        else:
            assert all(lo <= hi for lo, hi in out.get("interval95", {}).values())


# -- arrival traces ---------------------------------------------------------------------

TIMES = ["0.001", "0.002", "0", "-1", "nan", "inf", "1e999", "1" * 400, "2e6", "x", "",
         "# c", "0.003,5", "0.0005", "1e-9"]


@CASE
@given(data=st.data())
def test_trace_files_keep_the_contract(data):
    tmp_path = case_dir()
    times = data.draw(st.lists(st.sampled_from(TIMES), max_size=30))
    if data.draw(st.booleans()):            # mostly a valid, sorted trace with a flaw
        times = [f"{i * 1e-4:.6f}" for i in range(data.draw(st.integers(0, 200)))] + times
    (tmp_path / "t.txt").write_bytes(damaged(data.draw, "\n".join(times) + "\n"))
    requests = data.draw(st.sampled_from(["10", "50", "500"]))
    argv = ["run", "mmc", "--set", 'workload.kind="open"', "--set", 'workload.arrival="trace"',
            "--set", 'workload.trace_file="t.txt"', "--requests", requests,
            "--max-wall", "5", "--json"]
    o = run_cli(argv, timeout=TIMEOUT, cwd=str(tmp_path))
    why = contract_violation(o)
    assert why is None, f"trace {times[:12]}\n{why}"
    if o.code == 0:
        assert json.loads(o.stdout)["requests"] > 0
