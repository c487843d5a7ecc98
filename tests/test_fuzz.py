"""The fuzzed contract of issue 9: random scenario documents, ``--set`` values and
flags over every field of the typed parameter space (valid, boundary, non-finite,
huge, tiny, negative, wrong-typed, non-UTF-8 and non-TOML), each run by the CLI in
a forked child under a memory limit and a timeout (tests/fuzzing.py). Every one
must keep the contract: exit 0 or 2, no traceback, one line on exit 2, a valid
result with ordered percentiles and a non-negative breakdown on exit 0.

The number of cases is WARMCORE_FUZZ_EXAMPLES (default 120, about two minutes on
two cores); in CI the inputs are derandomised, so a failure reproduces.
"""

from __future__ import annotations

import math
import os
import time

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import warmcore
from tests.fuzzing import contract_violation, run_cli
from warmcore.registry import strategies as registered
from warmcore.simcore.config import builtin_names, read_scenario_dict

EXAMPLES = int(os.environ.get("WARMCORE_FUZZ_EXAMPLES", "120"))
MAX_WALL = 8.0          # the run's own budget; the child is killed at CHILD_TIMEOUT
CHILD_TIMEOUT = 90.0
REQUESTS = 300          # a short run unless the fuzz sets its length itself

SCENARIOS = builtin_names()
STRATEGIES = list(registered())

BAD_VALUES = [math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 1e-300, -1, -1.5, 0,
              0.0, 2**63, 2**64, 10**30, "x", "", "4", " 1", "1e999", True, False, [1, 2],
              [], {"a": 1}, "caf\u00e9", "\u0000"]
RAW_SET_VALUES = ["", "[", "{", "nan", "inf", "1e99999", "\"unterminated", "'x'", "1,2",
                  "0x10", "1_000", "true", "{a=1", "[1,", "1" * 400]


def _space(scenario: str, strategy: str):
    sc = warmcore.Scenario.load(scenario).with_(strategy=strategy)
    return sc, warmcore.parameters(sc)


SPACES: dict = {}


def space(scenario: str, strategy: str):
    if (scenario, strategy) not in SPACES:
        SPACES[scenario, strategy] = _space(scenario, strategy)
    return SPACES[scenario, strategy]


def valid_value(p):
    """A value inside the parameter's documented range."""
    if p.choices:
        return st.sampled_from(p.choices)
    if p.type == "bool":
        return st.booleans()
    lo = p.ge if p.ge is not None else (p.gt if p.gt is not None else 0)
    hi = p.le if p.le is not None else (p.lt if p.lt is not None else 1e6)
    if p.type == "int":
        lo = int(math.ceil(lo + (1 if p.gt is not None and p.ge is None else 0)))
        hi = int(hi - (1 if p.lt is not None and p.le is None else 0))
        return st.one_of(st.integers(lo, min(hi, lo + 64)), st.integers(lo, max(lo, hi)),
                         st.sampled_from([lo, max(lo, hi)]))
    if p.type in ("float", "float+int", "int+float"):
        return st.one_of(st.floats(lo, hi, allow_nan=False, allow_infinity=False),
                         st.sampled_from([lo, hi]))
    if p.type == "list":
        return st.lists(st.floats(0.001, 100.0), max_size=4)
    return st.text(max_size=8)


def any_value(p):
    return st.one_of(valid_value(p), st.sampled_from(BAD_VALUES),
                     st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                     st.text(max_size=6))


@st.composite
def settings_for(draw, scenario: str, strategy: str):
    _, params = space(scenario, strategy)
    picks = draw(st.lists(st.sampled_from(params), min_size=1, max_size=3,
                          unique_by=lambda p: p.path))
    return [(p.path, draw(any_value(p))) for p in picks]


def toml_literal(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    text = tomli_w.dumps({"v": value})
    return text.split("=", 1)[1].strip()


def _nest(path: str, value) -> dict:
    out: dict = {}
    node = out
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    return out


def _merge(data: dict, path: str, value) -> None:
    node = data
    keys = path.split(".")
    for k in keys[:-1]:
        nxt = node.get(k)
        if not isinstance(nxt, dict):
            nxt = node[k] = {}
        node = nxt
    node[keys[-1]] = value


@st.composite
def cli_case(draw, tmp):
    """argv for one case, and the file it reads (if any) written under ``tmp``."""
    scenario = draw(st.sampled_from(SCENARIOS))
    strategy = draw(st.sampled_from(STRATEGIES))
    sets = draw(settings_for(scenario, strategy))
    argv = ["run", "--strategy", strategy, "--max-wall", str(MAX_WALL), "--json"]
    head = ["--set", f"run.requests={REQUESTS}"]
    mode = draw(st.sampled_from(["set", "set", "file", "bytes", "flags", "compare"]))
    if mode == "compare":
        loads = draw(st.lists(st.sampled_from(["1", "2", "8", "0.5", "1000", "5e4", "-1", "0",
                                               "nan", "inf", "x", "", "1e308", "3"]),
                              max_size=3))
        names = draw(st.lists(st.sampled_from([*STRATEGIES, "nope", ""]), min_size=1,
                              max_size=2))
        body = ["compare", scenario, *head, "--strategies", ",".join(names),
                "--max-wall", str(MAX_WALL), "--json"]
        for path, value in sets[:1]:
            body += ["--set", f"{path}={toml_literal(value)}"]
        return [*body, "--load", ",".join(loads)] if loads else body
    if mode in ("set", "flags"):
        body = [scenario, *head]
        for path, value in sets:
            raw = draw(st.one_of(st.just(None), st.sampled_from(RAW_SET_VALUES)))
            text = raw if raw is not None and draw(st.booleans()) else toml_literal(value)
            body += ["--set", f"{path}={text}"]
        if mode == "flags":
            for flag in draw(st.lists(st.sampled_from(["--seed", "--requests", "--duration"]),
                                      max_size=2, unique=True)):
                body += [flag, str(draw(st.sampled_from(
                    ["-1", "0", "1", "1e30", "nan", "inf", "2", "100", "0.5", "x",
                     str(2**64), "1e-300"])))]
        return argv[:1] + body + argv[1:]
    data = read_scenario_dict(scenario)
    _merge(data, "run.requests", REQUESTS)
    for path, value in sets:
        _merge(data, path, value)
    try:
        text = tomli_w.dumps(data).encode()
    except (TypeError, ValueError):           # a value TOML cannot hold (NUL in a key...)
        text = (tomli_w.dumps(read_scenario_dict(scenario)) + "\n# \x00\n").encode()
    if mode == "bytes":                          # a corrupted or re-encoded file
        how = draw(st.sampled_from(["insert", "truncate", "utf16", "latin1"]))
        if how == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.binary(min_size=1, max_size=8)) + text[at:]
        elif how == "truncate":
            text = text[:draw(st.integers(0, len(text)))]
        elif how == "utf16":
            text = text.decode().encode("utf-16")
        else:
            text = text.replace(b"=", b"= \xe9", 1)
    path = tmp / f"case-{draw(st.integers(0, 10**9))}.toml"
    path.write_bytes(text)
    return [*argv[:1], str(path), *argv[1:]]


STATS = {"cases": 0, "exit": {}, "slowest": (0.0, None)}


@pytest.fixture(scope="module", autouse=True)
def report(request):
    yield
    slow, argv = STATS["slowest"]
    msg = (f"\nfuzz: {STATS['cases']} inputs, exit codes {STATS['exit']}, slowest "
           f"{slow:.1f} s: {' '.join(argv or [])[:300]}")
    print(msg)
    request.config.cache.set("warmcore/fuzz", {**STATS, "slowest": [slow, argv]})


@settings(max_examples=EXAMPLES, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_input_keeps_the_cli_contract(data, tmp_path):
    argv = data.draw(cli_case(tmp_path))
    t0 = time.monotonic()
    o = run_cli(argv, timeout=CHILD_TIMEOUT, cwd=str(tmp_path))
    took = time.monotonic() - t0
    STATS["cases"] += 1
    STATS["exit"][str(o.code)] = STATS["exit"].get(str(o.code), 0) + 1
    if took > STATS["slowest"][0]:
        STATS["slowest"] = (took, argv)
    why = contract_violation(o)
    assert why is None, f"{' '.join(argv)}\n{why}"
    assert o.code == 2 or took < MAX_WALL + 30, f"{took:.0f} s past its budget: {argv}"
