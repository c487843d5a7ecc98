"""Issue 9's examples, one per cause: every bad input gets one line naming the field
and the reason with exit code 2 (never a traceback, a hang or a MemoryError), and
runs that hit a cap end cleanly, marked partial."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

import warmcore
from tests.fuzzing import contract_violation, run_cli

FILES = {
    "latin1.toml": b'name = "caf\xe9"\n',
    "utf16.toml": "name = 'x'\n".encode("utf-16"),
    "binary.toml": bytes(range(256)),
    "deep.toml": b"x = " + b"[" * 5000 + b"]" * 5000,
    "strategy-scalar.toml": b'strategy = "pc"\n[workload]\nkind = "saturating"\n'
                            b"[run]\nrequests = 100\n",
    "nan-trace.txt": b"0.001\nnan\n0.003\n",
    "inf-trace.txt": b"0.001\ninf\n",
    "latin1-trace.txt": b"0.001\n0.002 # caf\xe9\n",
}


def S(*settings):
    return [a for s in settings for a in ("--set", s)]


# (argv, the field the one line must name, words it must contain)
BAD = [
    (["run", "latin1.toml"], "scenario", "not UTF-8 text (byte 11"),
    (["run", "utf16.toml"], "scenario", "not UTF-8 text (byte 0"),
    (["run", "binary.toml"], "scenario", "not UTF-8 text (byte 128"),
    (["run", "deep.toml"], "scenario", "nested too deeply"),
    (["run", "strategy-scalar.toml", "--strategy", "pec"], "strategy", "should be a table"),
    (["run", "hello", *S('machine.overrides={pstates_ghz="fast"}')],
     "machine.overrides.pstates_ghz", "list of numbers"),
    (["run", "hello", *S("machine.overrides={pstates_ghz=2.0}")],
     "machine.overrides.pstates_ghz", "list of numbers"),
    (["run", "hello", *S("machine.overrides={smt_throughput=1.0}")],
     "machine.overrides.smt_throughput", "list of numbers"),
    (["run", "hello", *S('machine.overrides={extra="x"}')], "machine.overrides.extra", "table"),
    (["run", "hello", *S("work.contended_ops=inf")], "work.contended_ops", "finite"),
    (["run", "hello", *S("workload.rate_per_s=inf")], "workload.rate_per_s", "finite"),
    (["run", "hello", *S("workload.rate_per_s=1e308")], "workload.rate_per_s", "at most"),
    (["run", "hello", *S("workload.rate_per_s=1e15")], "workload.rate_per_s", "at most"),
    (["run", "hello", *S("work.backend_us=inf")], "work.backend_us", "finite"),
    (["run", "hello", "--duration", "inf"], "--duration", "positive"),
    (["run", "hello", *S("run.duration_s=inf")], "run.duration_s", "finite"),
    (["run", "hello", *S("workload.service_us=1e308")], "workload.service_us", "at most"),
    (["run", "hello", *S("work.task_kib=inf")], "work.task_kib", "finite"),
    (["run", "hello", *S('workload.service="lognormal"', "workload.service_cv=1e308")],
     "workload.service_cv", "at most"),
    (["run", "hello", *S('workload.service="hyperexponential"', "workload.service_cv=0.5")],
     "workload.service_cv", "hyperexponential needs a cv of at least 1"),
    (["run", "mmc", *S('workload.arrival="batch"', 'workload.batch_sizes="constant"',
                       "workload.batch_size=2.5")], "workload.batch_size", "whole number"),
    (["run", "mmc", *S('workload.arrival="mmpp"', "workload.mmpp_off_fraction=1")],
     "workload.mmpp_off_fraction", "below 1"),
    (["run", "hello", *S('workload.arrival="batch"', 'workload.batch_sizes="constant"',
                         "workload.batch_size=2.5")], "workload.batch_size", "whole number"),
    (["run", "hello", *S('workload.arrival="mmpp"', "workload.mmpp_on_us=0")],
     "workload.mmpp_on_us", "at least 0.001"),
    (["run", "hello", *S('workload.arrival="trace"')], "workload.arrival", "mmpp"),
    (["run", "hello", *S("workload.timeout_closes=true")], "workload.timeout_closes",
     "needs pipelined = false and a timeout_us"),
    (["run", "hello", *S("strategy.name=\"thread-per-connection\"", "workload.timeout_us=300",
                         "workload.timeout_closes=true")], "workload.timeout_closes",
     "not modelled for thread-per-connection"),
    (["run", "mmc", *S("strategy.params.queue_capacity=-1")],
     "strategy.params.queue_capacity", "at least 0"),
    (["run", "mmc", *S('workload={kind="closed",think_us=0.0}',
                       "strategy.params.queue_capacity=2")],
     "strategy.params.queue_capacity", "re-send at once"),
    (["run", "mmc", *S('workload={kind="batch"}', "strategy.params.queue_capacity=2")],
     "strategy.params.queue_capacity", "never finish"),
    (["run", "mmc", *S('workload={kind="stream"}', "strategy.params.queue_capacity=2")],
     "strategy.params.queue_capacity", "does not model refused requests"),
    (["run", "mmc", *S("workload.timeout_us=0")], "workload.timeout_us", "at least"),
    (["run", "mmc", *S('workload={kind="closed",retries=11}')], "workload.retries",
     "at most 10"),
    (["run", "hello", *S("server.threads=10000000")], "server.threads", "at most"),
    (["run", "hello", *S("run.replications=1000000")], "run.replications", "at most"),
    (["run", "hello", "--requests", "1e30"], "--requests", "invalid int value: '1e30'"),
    (["run", "hello", *S("run.requests=1000000000000")], "run.requests", "at most"),
    (["run", "hello", *S("workload.connections=100000000")], "workload.connections", "at most"),
    (["run", "throughput-machine", *S("workload.jobs=100000000")], "workload.jobs", "at most"),
    (["run", "contended", *S("workload.producers=10000000")], "workload.producers", "at most"),
    (["run", "hello", "--strategy", "event-loop", *S("strategy.params.loops=10000000")],
     "strategy.params.loops", "cap of 100000"),
    (["run", "contended", "--strategy", "disruptor", *S("strategy.params.ring_size=1099511627776")],
     "strategy.params.ring_size", "at most 4194304"),
    (["run", "hello", "--strategy", "pec", *S("strategy=5")], "strategy", "should be a table"),
    (["run", "hello", "--requests", "100", *S("run=5")], "run", "should be a table"),
    (["compare", "hello", "--strategies", "pc", "--load", "nan"], "--load", "finite"),
    (["compare", "ewyk", "--strategies", "pc", "--load", "0.5"], "--load", "whole numbers"),
    (["compare", "hello", "--strategies", "pc", "--load", "inf"], "--load", "finite"),
    (["run", "hello", *S('workload.kind="open"', 'workload.arrival="trace"',
                       'workload.trace_file="nan-trace.txt"')],
     "workload.trace_file", "nan-trace.txt:2"),
    (["run", "hello", *S('workload.kind="open"', 'workload.arrival="trace"',
                       'workload.trace_file="inf-trace.txt"')],
     "workload.trace_file", "inf-trace.txt:2"),
    (["run", "hello", *S('workload.kind="open"', 'workload.arrival="trace"',
                       'workload.trace_file="latin1-trace.txt"')],
     "workload.trace_file", "not UTF-8 text (byte 17"),
    (["run", "hello", *S("machine.overrides={v_min=1.5,v_max=0.5}")],
     "machine.overrides.v_min", "above v_max"),
    (["run", "hello", *S("machine.overrides={llc_domains_per_socket=1000}")],
     "machine.overrides.llc_domains_per_socket", "LLC domains"),
    (["run", "hello", *S("machine.overrides={turbo_ghz=-1.0}")],
     "machine.overrides.turbo_ghz", "greater than 0"),
    (["run", "hello", *S("machine.overrides={tdp_w=-5.0}")], "machine.overrides.tdp_w",
     "greater than 0"),
    (["run", "hello", *S("machine.overrides={line_bytes=1.5}")], "machine.overrides.line_bytes",
     "whole number"),
    (["run", "hello", *S("machine.overrides={dram_ns=1e300}")], "machine.overrides.dram_ns",
     "cap of 1e+06"),
    (["run", "hello", *S("work.lock_us=inf")], "work.lock_us", "unknown key"),
    (["run", "hello", "--strategy", "thread-pool", *S("strategy.params.lock_us=inf")],
     "strategy.params.lock_us", "finite"),
    (["run", "hello", *S('machine.cores="4"')], "machine.cores", "whole number"),
    (["run", "hello", *S('machine.turbo="yes"')], "machine.turbo", "true or false"),
    (["run", "hello", *S("machine.cores=4\nfoo")], "--set", "line break"),
    (["run", "hello", *S("workload.rate_per_s=3.4e-41")], "workload.rate_per_s",
     "simulated s; at most 1e+06"),
    (["run", "hello", *S("server.cpus=-1")], "server.cpus", "greater than 0"),
    (["run", "hello", *S('machine.overrides={default_governor="zzz"}')],
     "machine.overrides.default_governor", "'ondemand'"),
    (["run", "hello", *S("machine.sockets=5000")], "machine.sockets", "at most 64"),
    (["run", "hello", *S("machine.sockets=64", "machine.cores=64")], "machine.cores",
     "64 sockets x 64 cores"),
    (["run", "hello", *S("machine.governor_params={sampling_rate_us=1e-9}")],
     "machine.governor_params.sampling_rate_us", ""),
    (["run", "hello", "--max-wall", "nan"], "--max-wall", "positive"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    for name, data in FILES.items():
        (d / name).write_bytes(data)
    return d


@pytest.mark.parametrize("argv,field,words", BAD, ids=[" ".join(b[0])[:70] for b in BAD])
def test_bad_input_gets_one_line_naming_its_field(argv, field, words, files):
    o = run_cli([*argv, "--json"] if argv[0] in ("run", "compare") else argv,
                timeout=60, cwd=str(files))
    assert contract_violation(o) is None, contract_violation(o)
    assert o.code == 2, o.stdout[:300]
    line = o.stderr.strip()
    assert line.startswith(f"warmcore: {field}: ") or line.startswith(f"warmcore: {field} "), line
    assert words in line, line
    assert "{" not in line.split("(got", 1)[0] or "overrides" in argv[-1], line  # no table echo


def test_messages_have_no_pydantic_internals():
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.Scenario.load("hello", ["server.cpus=-1"])
    assert e.value.field == "server.cpus" and "constrained" not in str(e.value)
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.simulate(warmcore.Scenario.load("pipeline", [
            "strategy.params.min_threads=500"]), requests=10)
    assert e.value.field == "strategy.params.min_threads", e.value
    assert "Value error" not in str(e.value)


def test_an_error_never_echoes_a_whole_table():
    big = "{" + ", ".join(f"k{i} = {i}" for i in range(200)) + "}"
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.Scenario.load("hello", [f"machine.cores={big}"])
    assert len(str(e.value)) < 200, str(e.value)


def test_strings_are_not_silently_converted():
    for setting in ('machine.cores="4"', 'machine.turbo="yes"', "machine.turbo=1",
                    'workload.service_us="100"', 'run.requests="5"'):
        with pytest.raises(warmcore.ConfigError):
            warmcore.Scenario.load("hello", [setting])
    # an integer where a float is wanted is a number, not a coercion
    assert warmcore.Scenario.load("hello", ["workload.service_us=100"]).workload.service_us == 100


def test_upload_bytes_are_checked_like_files():
    from warmcore.simcore.config import MAX_FILE_BYTES

    with pytest.raises(warmcore.ConfigError, match="not UTF-8 text"):
        warmcore.Scenario.from_toml(b"name = '\xff'")
    with pytest.raises(warmcore.ConfigError, match="larger than"):
        warmcore.Scenario.from_toml(b"#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(warmcore.ConfigError, match="nested too deeply"):
        warmcore.Scenario.from_toml("x = " + "[" * 5000 + "]" * 5000)


def test_nesting_is_counted_outside_strings_and_comments_and_capped_before_parsing():
    """Deep nesting is refused before tomllib recurses into it (a recursion overflow in
    its C calls can come out as SystemError instead of RecursionError); brackets in
    strings and comments do not count; the cap leaves any real file alone."""
    from warmcore.simcore.config import MAX_TOML_NESTING, parse_set, parse_toml, toml_nesting

    assert toml_nesting('x = [1, [2, {a = [3]}]]') == 4
    assert toml_nesting('[[servers]]\nname = "[[[["  # ]]]] [[[\n') == 2
    assert toml_nesting("x = '''[[\n[[''' \ny = \"\"\"a\\\"[[[\"\"\"\nz = \"\\\\[\"") == 0
    at_cap = "x = " + "[" * MAX_TOML_NESTING + "]" * MAX_TOML_NESTING
    assert toml_nesting(at_cap) == MAX_TOML_NESTING
    assert parse_toml(at_cap, "scenario")["x"] != []          # parsed, not refused
    over = "x = " + "[" * (MAX_TOML_NESTING + 1) + "]" * (MAX_TOML_NESTING + 1)
    with pytest.raises(warmcore.ConfigError, match="more than 100 levels"):
        parse_toml(over, "scenario")
    # a --set value nested too deeply stays text (validation then names the field)
    assert parse_set("work.program=" + over[4:]) == (["work", "program"], over[4:])


def test_no_command_prints_the_usage():
    o = run_cli([])
    assert o.code == 2 and "usage: warmcore" in o.stdout and "run" in o.stdout


def test_a_wall_budget_ends_a_long_run_marked_partial():
    o = run_cli(["run", "hello", "--requests", "5000000", "--max-wall", "1.5", "--json"],
                timeout=60)
    assert contract_violation(o) is None, contract_violation(o)
    assert o.code == 0 and o.seconds < 20
    r = json.loads(o.stdout)
    assert r["partial"] is True and r["stop_reason"] == "wall-clock budget"
    assert any(w.startswith("partial:") for w in r["warnings"])
    assert o.stderr.strip() == "warmcore: warning: partial result (wall-clock budget)"


def test_a_wall_budget_that_is_not_reached_changes_nothing():
    sc = warmcore.Scenario.load("pipeline")
    a = warmcore.simulate(sc, requests=3000).to_json()
    b = warmcore.simulate(sc, requests=3000, max_wall=1000).to_json()
    assert a == b


def test_a_wall_budget_skips_replications_not_begun():
    sc = warmcore.Scenario.load("hello", ["run.replications=50"])
    r = warmcore.simulate(sc, requests=200_000, max_wall=1.0)
    assert r.partial and r.replications < 50
    assert any("replications ran" in w for w in r.warnings)
    with pytest.raises(warmcore.ConfigError, match="max_wall"):
        warmcore.simulate(sc, max_wall=float("nan"))


def test_a_wall_budget_ends_a_run_stuck_at_one_instant(monkeypatch):
    """A bug that schedules events at zero delay forever (as the fuzz case
    `compare contended --strategies jetty9-milestone` once did) lets no simulated time
    pass for the watchdog and completes no requests: the budget still ends it,
    counted in events (warmcore.build.CHECK_EVENTS). An alarm turns a hang into a
    failure."""
    import signal
    import time

    import warmcore.build as wb

    real_build = wb.build

    def build_with_a_stuck_instant(cfg, seed):
        ctx = real_build(cfg, seed)

        def stuck(env):
            yield env.timeout(1e-3)
            while True:
                yield env.timeout(0.0)
        ctx.env.process(stuck(ctx.env))
        return ctx

    def hung(*_):
        raise TimeoutError("the budget did not end the stuck run")

    monkeypatch.setattr(wb, "build", build_with_a_stuck_instant)
    sc = warmcore.Scenario.load("pipeline")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        t0 = time.monotonic()
        r = warmcore.simulate(sc, requests=100_000, max_wall=1.0)
        took = time.monotonic() - t0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert r.partial and r.stop_reason == "wall-clock budget" and took < 10
    assert r.sim_seconds == pytest.approx(1e-3)      # stuck at the instant it began


def test_the_watchdog_leaves_a_stalled_run_to_end_as_stalled():
    """With nothing else scheduled the watchdog does not keep the run alive until the
    budget runs out: SimPy's queue empties, which is how a stall is recognised."""
    import time

    import simpy

    from warmcore.build import _watchdog
    from warmcore.simcore.recorder import Recorder

    env = simpy.Environment()
    rec = Recorder(env, measure_requests=10)
    rec.deadline = time.monotonic() + 60
    env.process(_watchdog(env, rec))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError):       # "No scheduled events left", as without it
        env.run(until=rec.stop)
    assert time.monotonic() - t0 < 5 and not rec.stopped


def test_an_overloaded_open_loop_of_any_size_is_bounded(tmp_path):
    """10^6 times capacity (one CPU, 10 ms per request: 100 req/s; offered 1e8 req/s):
    the run stops at run.max_in_flight, exit 0, marked partial, and its peak RSS stays
    under 0.6 GB (about 1.2 KB per request in flight: 0.32 GB; 1.8 GB at the old
    2,000,000 cap). The peak is the process's own VmHWM: getrusage's ru_maxrss
    would carry over the RSS of the forked parent (pytest, hundreds of MB late in a
    serial session) across the exec."""
    code = ("import json, warmcore\n"
            "sc = warmcore.Scenario.load('hello', ['workload.service_us=10000.0',"
            " 'machine.cores=1', 'workload.rate_per_s=1e8'])\n"
            "r = warmcore.simulate(sc)\n"
            "hwm = next(int(line.split()[1]) for line in open('/proc/self/status')"
            " if line.startswith('VmHWM:'))\n"
            "print(json.dumps({'rss_kib': hwm,"
            " 'partial': r.partial, 'stop': r.stop_reason, 'arrived': r.arrived}))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS,
                                                             (3 << 30, 3 << 30)))
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert got["partial"] and got["stop"].startswith("in-flight requests passed")
    assert got["rss_kib"] < 600 * 1024, got


def test_the_parameter_space_names_a_bad_strategy_tunable():
    """warmcore.parameters validates the strategy's tunables with the same one line (the
    explorer calls it on every uploaded file)."""
    sc = warmcore.Scenario.load("pipeline", ["strategy.params.max_threads=-1"])
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.parameters(sc)
    assert e.value.field == "strategy.params.max_threads"
    assert "greater than 0" in e.value.reason and "strategy pc" in e.value.reason


def test_a_queue_wait_of_rounding_error_is_zero_not_negative():
    """Found by the fuzz suite: no request waited, and the remainder of the breakdown's
    sums came out at -1.3e-13 us."""
    r = warmcore.simulate(warmcore.Scenario.load("mmc", ["workload.service_us=0.5"])
                          .with_(strategy="shared-queue"), requests=300)
    assert r.breakdown_us.queue_wait >= 0.0
