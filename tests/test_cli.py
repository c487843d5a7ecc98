"""The CLI contract: JSON keys, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from warmcore.cli import main

CONTRACT = ["requests", "sim_seconds", "throughput_rps", "latency_us", "wait_us",
            "cpus_utilized", "task_clock_ms", "cycles", "instructions", "ipc", "ghz",
            "l1d_loads", "l1d_misses", "llc_loads", "llc_misses", "context_switches",
            "cpu_migrations", "joules", "makespan_s", "breakdown_us"]


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_has_the_contract_keys(capsys):
    code, out, _ = run_cli(["run", "mmc", "--requests", "3000", "--json"], capsys)
    assert code == 0
    r = json.loads(out)
    for key in CONTRACT:
        assert key in r, key
    assert set(r["latency_us"]) >= {"mean", "p50", "p90", "p99", "p999", "max"}
    assert "mean" in r["wait_us"]
    assert set(r["breakdown_us"]) == {"queue_wait", "dispatch", "compute", "cache_reload",
                                      "coherence", "contention", "blocked_io"}
    assert r["requests"] == 3000


def test_breakdown_adds_up_to_mean_latency(capsys):
    _, out, _ = run_cli(["run", "mmc", "--requests", "3000", "--json",
                         "--set", "work.backend_us=200"], capsys)
    r = json.loads(out)
    assert sum(r["breakdown_us"].values()) == pytest.approx(r["latency_us"]["mean"], rel=1e-9)
    assert r["breakdown_us"]["blocked_io"] > 100


def test_set_overrides_reach_the_run(capsys):
    _, out, _ = run_cli(["run", "mmc", "--requests", "2000", "--json", "--set",
                         "machine.cores=2", "--set", "workload.rate_per_s=1000"], capsys)
    r = json.loads(out)
    assert len(r["cpu_utilization"]) == 2
    assert r["offered_rps"] == 1000


@pytest.mark.parametrize("args,field", [
    (["--set", "machine.cores=0"], "machine.cores"),
    (["--set", "workload.rate_per_s=-5"], "workload.rate_per_s"),
    (["--set", "workload.rate_per_s=\"fast\""], "workload.rate_per_s"),
    (["--set", "workload.colour=1"], "workload.colour"),
    (["--set", "server.cpus=[0,9]"], "server.cpus"),
    (["--set", "machine.preset=\"cray-1\""], "machine.preset"),
    (["--set", "strategy.name=\"magic\""], "strategy.name"),
    (["--set", "workload.kind=\"teleport\""], "workload"),
    (["--set", "machine.governor=\"turbo-boost\""], "machine.governor"),
    (["--requests", "0"], "--requests"),
    (["--duration", "-1"], "--duration"),
    (["--set", "nonsense"], "--set"),
    (["--set", "machine.overrides.l2_kib=-5"], "machine.overrides.l2_kib"),
    (["--set", "machine.overrides.pstates_ghz=[2.0,1.0]"], "machine.overrides.pstates_ghz"),
    (["--set", "machine.overrides.warp=9"], "machine.overrides.warp"),
    (["--set", "machine.cores=100000"], "machine.cores"),
    (["--set", "machine.preset=\"i7-3770\"", "--set", "machine.governor=\"userspace\"",
      "--set", "machine.frequency_ghz=9.9"], "machine.frequency_ghz"),
    (["--set", "machine.preset=\"i7-3770\"", "--set", "machine.governor=\"ondemand\"",
      "--set", "machine.governor_params.up_threshold=400"],
     "machine.governor_params.up_threshold"),
    (["--set", "work.reference_preset=\"pdp-11\""], "work.reference_preset"),
])
def test_bad_input_gets_one_line_naming_the_field_and_exit_2(args, field, capsys):
    code, out, err = run_cli(["run", "mmc", *args], capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"warmcore: {field}"), lines[0]


def test_run_needs_a_limit(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text('[workload]\nkind = "open"\nrate_per_s = 10.0\n[run]\nwarmup = 0.1\n')
    code, _, err = run_cli(["run", str(f)], capsys)
    assert code == 2
    assert err.startswith("warmcore: run.requests: a run needs a request limit or a duration")


def test_malformed_toml_is_a_usage_error(tmp_path, capsys):
    f = tmp_path / "bad.toml"
    f.write_text("[workload\nkind = ")
    code, _, err = run_cli(["run", str(f)], capsys)
    assert code == 2 and err.startswith("warmcore: scenario:") and "not valid TOML" in err


def test_unknown_command_is_a_usage_error(capsys):
    code, _, err = run_cli(["frobnicate"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_overloaded_open_loop_finishes_and_says_the_queue_never_drained(capsys):
    code, out, _ = run_cli(["run", "mmc", "--requests", "3000", "--json", "--set",
                            "workload.rate_per_s=8000"], capsys)   # rho = 2 on 4 CPUs
    assert code == 0
    r = json.loads(out)
    assert r["drained"] is False
    assert any("never drained" in w for w in r["warnings"])
    assert r["throughput_rps"] == pytest.approx(4000, rel=0.05)


def test_duration_limit(capsys):
    _, out, _ = run_cli(["run", "mmc", "--duration", "0.5", "--json"], capsys)
    r = json.loads(out)
    assert r["sim_seconds"] == pytest.approx(0.5, rel=1e-9)
    assert r["requests"] == pytest.approx(0.5 * 3200, rel=0.15)


def test_human_output_reads_like_perf_stat(capsys):
    code, out, _ = run_cli(["run", "mmc", "--requests", "1000"], capsys)
    assert code == 0
    assert "task-clock (msec)" in out and "CPUs utilized" in out and "req/s" in out


def test_listings(capsys):
    assert any(line.startswith("mmc ") for line in run_cli(["scenarios"], capsys)[1].splitlines())
    out = run_cli(["presets"], capsys)[1]
    assert "ideal" in out and "i7-3770" in out
    assert "shared-queue" in run_cli(["strategies"], capsys)[1]


def test_console_script_runs_without_traceback():
    p = subprocess.run([sys.executable, "-m", "warmcore.cli", "run", "mmc", "--set",
                        "machine.cores=-1"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr


def test_replications_report_confidence_intervals(capsys):
    _, out, _ = run_cli(["run", "mmc", "--requests", "2000", "--json", "--set",
                         "run.replications=4"], capsys)
    r = json.loads(out)
    assert r["replications"] == 4 and len(set(r["seeds"])) == 4
    lo, hi = r["ci95"]["throughput_rps"]
    assert lo < r["throughput_rps"] < hi
    lo, hi = r["ci95"]["wait_us.mean"]
    assert lo < r["wait_us"]["mean"] < hi


def test_switching_strategy_drops_the_scenarios_own_tunables_but_keeps_command_line_ones(
        tmp_path):
    from warmcore.simcore.config import load

    f = tmp_path / "s.toml"
    f.write_text('[workload]\nkind = "open"\nrate_per_s = 100.0\n'
                 '[strategy]\nname = "shared-queue"\nparams = { threads = 2 }\n'
                 '[run]\nrequests = 10\n')
    assert load(str(f)).strategy.params == {"threads": 2}
    cfg = load(str(f), ["strategy.params.loops=3"], strategy="event-loop")
    assert cfg.strategy.name == "event-loop" and cfg.strategy.params == {"loops": 3}
    # Same strategy: nothing dropped.
    assert load(str(f), strategy="shared-queue").strategy.params == {"threads": 2}


def test_compare_applies_command_line_tunables_to_every_compared_strategy(capsys):
    """``compare --set strategy.params.NAME=...`` reaches every strategy, not only the
    scenario's own: on `ewyk` (a select pass per request) pc and pec with a 5 us select
    pass are slower than with their default, and pec's JSON is the same as ``run
    --strategy pec`` with the same --set."""
    base = ["compare", "ewyk", "--strategies", "pc,pec", "--requests", "1500", "--json"]
    code, out, _ = run_cli([*base, "--set", "strategy.params.select_us=5"], capsys)
    assert code == 0
    slow = {r["strategy"]: r for r in json.loads(out)}
    code, out, _ = run_cli(base, capsys)
    default = {r["strategy"]: r for r in json.loads(out)}
    for name in ("pc", "pec"):
        assert slow[name]["throughput_rps"] < 0.95 * default[name]["throughput_rps"]
    code, out, _ = run_cli(["run", "ewyk", "--strategy", "pec", "--requests", "1500",
                            "--set", "strategy.params.select_us=5", "--json"], capsys)
    assert json.loads(out) == slow["pec"]


def test_compare_refuses_a_tunable_one_strategy_lacks_before_running_any(capsys):
    code, out, err = run_cli(["compare", "pipeline", "--strategies", "pc,thread-pool",
                              "--requests", "500", "--set", "strategy.params.select_us=5"],
                             capsys)
    assert code == 2 and out == ""
    assert err.strip() == ("warmcore: strategy.params.select_us: unknown key "
                           "(strategy thread-pool)")


def test_every_strategy_runs_every_built_in_scenario(capsys):
    from warmcore.simcore.config import builtin_names
    from warmcore.registry import strategies

    for scenario in builtin_names():
        for strategy in strategies():
            assert main(["run", scenario, "--strategy", strategy, "--requests", "150",
                         "--json"]) == 0, (scenario, strategy)
            r = json.loads(capsys.readouterr().out)
            assert r["requests"] > 0 and r["stop_reason"] in ("request limit",
                                                              "workload finished")


@pytest.mark.parametrize("args", [["pipeline"], ["hello", "--strategy", "work-stealing"]])
def test_same_seed_same_json_across_processes_and_hash_seeds(args):
    """Bit for bit: nothing may depend on string hashing or process state."""
    import os

    def once(hashseed):
        env = dict(os.environ, PYTHONHASHSEED=str(hashseed))
        p = subprocess.run([sys.executable, "-m", "warmcore.cli", "run", *args, "--requests",
                            "400", "--json"], capture_output=True, text=True, env=env,
                           check=True)
        return p.stdout

    assert once(1) == once(2)


def test_a_reader_that_goes_away_is_not_an_error():
    """`warmcore ... | head`: the pipe closes early (the JSON with its trace rows is
    far more than a pipe holds); no traceback."""
    import subprocess
    import sys

    p = subprocess.run(f"{sys.executable} -m warmcore.calibration.cli run pipeline "
                       "--requests 200 --set run.trace_events=20000 --json | head -c 10",
                       shell=True, capture_output=True,
                       text=True, timeout=120)
    assert "Traceback" not in p.stderr and "Broken pipe" not in p.stderr, p.stderr


def test_compare_and_advise_take_the_strategies_the_scenario_names(tmp_path, capsys):
    """strategy.compare (the explorer's downloaded TOML) is what `compare` and `advise`
    run without --strategies; --strategies overrides it; an unknown name in it is the
    file's error, naming strategy.compare, for every command."""
    path = tmp_path / "mine.toml"
    path.write_text("[machine]\npreset = 'ideal'\ncores = 2\n[workload]\nkind = 'open'\n"
                    "rate_per_s = 5000\nservice_us = 100\n[strategy]\nname = 'pc'\n"
                    "compare = ['pc', 'shared-queue']\n[run]\nrequests = 300\n")
    code, out, _ = run_cli(["compare", str(path), "--json"], capsys)
    assert code == 0 and [r["strategy"] for r in json.loads(out)] == ["pc", "shared-queue"]
    code, out, _ = run_cli(["compare", str(path), "--json", "--strategies", "pc,epc"], capsys)
    assert code == 0 and [r["strategy"] for r in json.loads(out)] == ["pc", "epc"]
    path.write_text(path.read_text().replace("'shared-queue'", "'nope'"))
    for command in (["compare"], ["advise"], ["run"]):
        assert main([*command, str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(
            "warmcore: strategy.compare: unknown strategy 'nope'; known: "), err
    path.write_text(path.read_text().replace("compare = ['pc', 'nope']\n", ""))
    assert main(["compare", str(path)]) == 2
    assert "--strategies" in capsys.readouterr().err
