"""Batch sweeps: identical rows whoever runs them (1 or 2 local workers, a Dask
LocalCluster, a real dask scheduler and worker), resumable after SIGKILL, failed
points recorded and retried, bad specs refused with one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warmcore.cli import main
from tests.helpers import stop
from warmcore.sweeps import load_spec, read_results, sweep

SPEC = """
scenario = "mmc"
set = ["run.requests=200"]
replications = 2
batch = 2
metrics = ["throughput_rps", "latency_us.p99", "requests"]
[axes]
"machine.cores" = [1, 2, 4]
"workload.rate_per_s" = {{start = 500.0, stop = 900.0, num = {num}}}
"""


def write_spec(tmp_path: Path, num: int = 2, text: str | None = None) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text if text is not None else SPEC.format(num=num))
    return p


def rows(out: Path):
    df = read_results(out)
    return df.sort_values(["point_id", "replication"]).reset_index(drop=True)


def test_rows_are_the_same_with_one_or_two_workers_and_on_a_local_dask_cluster(tmp_path):
    spec = write_spec(tmp_path)
    sweep(spec, tmp_path / "one", workers=1)
    sweep(spec, tmp_path / "two", workers=2)
    a, b = rows(tmp_path / "one"), rows(tmp_path / "two")
    assert len(a) == 3 * 2 * 2 and a.equals(b)
    assert a["error"].isna().all() and (a["requests"] == 200).all()
    assert a["seed"].nunique() == len(a)
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster:
        sweep(spec, tmp_path / "dask", scheduler=cluster.scheduler_address)
    assert rows(tmp_path / "dask").equals(a)


def test_a_point_s_rows_do_not_depend_on_the_other_points(tmp_path):
    """Seeds come from the spec and the point: a point run alone gives its rows."""
    sweep(write_spec(tmp_path), tmp_path / "all", workers=1)
    full = rows(tmp_path / "all")
    assert full.groupby("point_id")["seed"].nunique().eq(2).all()
    again = rows(tmp_path / "all")
    assert again.equals(full)


def test_rerun_skips_finished_points(tmp_path, monkeypatch):
    spec = write_spec(tmp_path)
    count = tmp_path / "count"
    monkeypatch.setenv("WARMCORE_SWEEP_COUNT", str(count))
    first = sweep(spec, tmp_path / "out", workers=1)
    second = sweep(spec, tmp_path / "out", workers=1)
    assert first["rows_written"] == 12 and second == {"rows_written": 0, "rows_failed": 0,
                                                      "rows_skipped": 12}
    assert len(count.read_text().split()) == 12


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_a_driver_killed_or_interrupted_loses_nothing_finished(tmp_path, sig):
    """SIGKILL of the driver and its pool, or Ctrl-C (SIGINT to the process group, as a
    terminal sends it): rerun, every point appears once and nothing is recomputed.
    After Ctrl-C every run computed was also written (the batches in flight finish)."""
    spec = write_spec(tmp_path, num=40)            # 3 x 40 points x 2 replications
    out, count = tmp_path / "out", tmp_path / "count"
    env = dict(os.environ, WARMCORE_SWEEP_COUNT=str(count))
    cmd = [sys.executable, "-m", "warmcore.cli", "sweep", str(spec), "--out", str(out),
           "--workers", "2", "--quiet"]
    p = subprocess.Popen(cmd, env=env, start_new_session=True, stderr=subprocess.PIPE,
                         text=True)
    _wait_for_parts(out)
    os.killpg(p.pid, sig)
    _, err = p.communicate(timeout=60)
    if sig == signal.SIGINT:                        # it stops by itself, quietly
        assert p.returncode == 130 and "Traceback" not in err, err[-2000:]
    before = rows(out)
    assert 0 < len(before) < 240
    ran_before = len(count.read_text().split())
    if sig == signal.SIGINT:    # the batches in flight finished and were written too
        assert ran_before == len(before)
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    after = rows(out)
    assert len(after) == 240 and not after.duplicated(["point_id", "replication"]).any()
    ran_after = len(count.read_text().split())
    # Nothing finished was recomputed: the rerun ran exactly the rows that were missing
    # (plus those of batches in flight when stopped, which had not been written).
    assert ran_after - ran_before == 240 - len(before)


def test_a_failing_point_is_recorded_and_retried(tmp_path):
    trace = tmp_path / "arrivals.txt"
    scenario = tmp_path / "trace.toml"
    scenario.write_text(f"""
name = "trace"
[workload]
kind = "open"
arrival = "trace"
trace_file = "{trace}"
[run]
requests = 50
""")
    spec = write_spec(tmp_path, text=f"""
scenario = "{scenario}"
[axes]
"workload.service_us" = [10.0, 20.0]
""")
    out = tmp_path / "out"
    counts = sweep(spec, out, workers=1)
    df = rows(out)
    assert counts["rows_failed"] == 2 and df["error"].str.contains("trace").all()
    trace.write_text("\n".join(str(i * 1e-4) for i in range(200)))
    assert sweep(spec, out, workers=1)["rows_written"] == 0       # not retried unasked
    counts = sweep(spec, out, workers=1, retry_failed=True)
    df = rows(out)
    assert counts["rows_written"] == 2 and len(df) == 2 and df["error"].isna().all()


def test_another_spec_against_the_same_output_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    sweep(write_spec(tmp_path), out, workers=1)
    (tmp_path / "x").mkdir()
    other = write_spec(tmp_path / "x", num=3)
    assert main(["sweep", str(other), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another spec" in err[0]
    assert main(["sweep", str(other), "--out", str(out), "--quiet", "--overwrite",
                 "--workers", "1"]) == 0
    assert len(rows(out)) == 3 * 3 * 2


@pytest.mark.parametrize("axes, words", [
    ('"machine.nope" = [1, 2]', "machine.nope: not a parameter"),
    ('"machine.cores" = []', "empty axis"),
    ('"machine.cores" = ["four"]', "machine.cores"),
    ('"machine.cores" = [0]', "machine.cores: 0"),
    ('"workload.rate_per_s" = {start = 1.0, stop = 5.0, step = 0.0}', "greater than 0"),
    ('"run.warmup" = [1.5]', "run.warmup"),
])
def test_bad_specs_get_one_line_and_exit_2(tmp_path, capsys, axes, words):
    spec = write_spec(tmp_path, text=f'scenario = "mmc"\n[axes]\n{axes}\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_a_scheduler_that_does_not_answer_is_one_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr("warmcore.executor.CONNECT_TIMEOUT_S", 2)
    port = _free_port()
    code = main(["sweep", str(write_spec(tmp_path)), "--out", str(tmp_path / "out"),
                 "--quiet", "--scheduler", f"tcp://127.0.0.1:{port}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no Dask scheduler answers" in err[0]


def _wait_for_parts(out: Path, n: int = 3, timeout: float = 60) -> None:
    """Until the sweep writing to ``out`` has written ``n`` part files (midway)."""
    deadline = time.time() + timeout
    while time.time() < deadline and len(list(out.glob("part-*.parquet"))) < n:
        time.sleep(0.05)


def _listening(port: int, sched, timeout: float = 60) -> None:
    """Until the scheduler started as ``sched`` accepts connections on ``port``: its
    first start in a fresh environment compiles Dask's modules and takes seconds, and
    a driver started before it answers is refused (that one line is another test's)."""
    deadline = time.time() + timeout
    while time.time() < deadline and sched.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    stop(sched)                      # nothing else will: the test's try has not begun
    raise TimeoutError(f"the dask scheduler did not listen on port {port} in {timeout} s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_real_dask_scheduler_and_worker_on_loopback(tmp_path):
    pytest.importorskip("distributed")
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    sched = subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1",
                              "--port", str(port), "--no-dashboard"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _listening(port, sched)
    worker = subprocess.Popen([str(bindir / "dask"), "worker", addr, "--nworkers", "1",
                               "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        spec = write_spec(tmp_path)
        p = subprocess.run([sys.executable, "-m", "warmcore.cli", "sweep", str(spec),
                            "--out", str(tmp_path / "dask"), "--scheduler", addr, "--quiet"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        sweep(spec, tmp_path / "local", workers=1)
        assert rows(tmp_path / "dask").equals(rows(tmp_path / "local"))
    finally:
        for proc in (worker, sched):
            stop(proc)


def test_spec_loads_and_counts_its_points(tmp_path):
    from warmcore.sweeps import points

    spec = load_spec(write_spec(tmp_path, num=5))
    assert sum(1 for _ in points(spec)) == 15


@pytest.mark.slow
def test_a_dask_worker_killed_midway_loses_nothing(tmp_path):
    """A worker dies with batches in flight: Dask reruns them elsewhere, every row
    appears exactly once, and only the batches in flight ran twice."""
    pytest.importorskip("distributed")
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).parent / "dask")
    count = tmp_path / "count"
    env = dict(os.environ, WARMCORE_SWEEP_COUNT=str(count))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}

    def worker():
        return subprocess.Popen([dask, "worker", addr, "--nworkers", "1", "--nthreads", "1",
                                 "--host", "127.0.0.1", "--no-dashboard", "--no-nanny"],
                                start_new_session=True, **quiet)

    sched = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                              "--no-dashboard"], **quiet)
    _listening(port, sched)
    first, second = worker(), None
    spec, out = write_spec(tmp_path, num=40), tmp_path / "out"
    try:
        driver = subprocess.Popen([sys.executable, "-m", "warmcore.cli", "sweep", str(spec),
                                   "--out", str(out), "--scheduler", addr, "--quiet"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        _wait_for_parts(out)
        os.killpg(first.pid, signal.SIGKILL)
        assert len(list(out.glob("part-*.parquet"))) < 120     # killed midway (120 batches)
        second = worker()
        _, err = driver.communicate(timeout=180)
        assert driver.returncode == 0, err
        df = rows(out)
        assert len(df) == 240 and not df.duplicated(["point_id", "replication"]).any()
        assert df["error"].isna().all()
        ran = len(count.read_text().split())
        assert 240 <= ran <= 240 + 4 * 2          # at most the batches in flight, again
    finally:
        for proc in (second, first, sched):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_a_wall_budget_bounds_every_run_and_marks_its_row(tmp_path):
    spec = write_spec(tmp_path, text=SPEC.format(num=1).replace(
        'set = ["run.requests=200"]', 'set = ["run.requests=5000000"]\nmax_wall = 0.5'))
    t0 = time.monotonic()
    counts = sweep(load_spec(spec), tmp_path / "out", workers=1)
    df = rows(tmp_path / "out")
    assert counts["rows_written"] == 6 and df["partial"].all() and df["error"].isna().all()
    assert time.monotonic() - t0 < 6 * 0.5 + 30
    short = write_spec(tmp_path, text=SPEC.format(num=1))
    sweep(load_spec(short), tmp_path / "out2", workers=1)
    assert not rows(tmp_path / "out2")["partial"].any()


def test_bad_spec_numbers_are_refused(tmp_path, capsys):
    for bad in ("max_wall = -1", "max_wall = inf", "max_wall = nan"):
        spec = write_spec(tmp_path, text=SPEC.format(num=1) + "\n" + bad + "\n")
        spec.write_text(SPEC.format(num=1).replace("batch = 2", f"batch = 2\n{bad}"))
        assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "max_wall" in err[0], err


def test_automatic_batches_aim_at_half_a_second_of_work_and_shrink_at_the_end():
    from warmcore.sweeps import TASK_SECONDS, Batcher

    todo = iter(range(10_000))
    b = Batcher(None, slots=2, total=10_000)
    assert len(b.take(todo)) == 1                  # nothing measured yet: one run
    b.observe(runs=1, seconds=0.005)               # 5 ms a run -> 100 runs a task
    assert len(b.take(todo)) == int(TASK_SECONDS / 0.005)
    b.left = 40                                    # the end: spread over both workers
    assert b.size() == 10
    assert Batcher(3, slots=2, total=100).size() == 3     # the spec's batch wins


def test_batch_does_not_change_the_spec_hash_or_the_seeds(tmp_path):
    spec = load_spec(write_spec(tmp_path))
    assert spec.model_copy(update={"batch": 50}).digest() == spec.digest()


@pytest.mark.slow
def test_a_lost_scheduler_ends_the_driver_with_one_line_and_loses_nothing(tmp_path):
    """The Dask scheduler dies midway: the driver stops (one line, no traceback, no
    hang), every part written so far stays, and rerunning the same spec on local
    workers completes it with each row exactly once."""
    pytest.importorskip("distributed")
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).parent / "dask")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    sched = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                              "--no-dashboard"], start_new_session=True, **quiet)
    _listening(port, sched)
    worker = subprocess.Popen([dask, "worker", addr, "--nworkers", "1", "--nthreads", "1",
                               "--host", "127.0.0.1", "--no-dashboard"],
                              start_new_session=True, **quiet)
    spec, out = write_spec(tmp_path, num=40), tmp_path / "out"
    try:
        driver = subprocess.Popen([sys.executable, "-m", "warmcore.cli", "sweep", str(spec),
                                   "--out", str(out), "--scheduler", addr, "--quiet"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for_parts(out)
        os.killpg(sched.pid, signal.SIGKILL)
        _, err = driver.communicate(timeout=180)
        lines = err.strip().splitlines()
        assert driver.returncode != 0 and "Traceback" not in err, err[-3000:]
        assert len(lines) == 1 and lines[0].startswith("warmcore: "), lines
        before = rows(out)
        assert 0 < len(before) < 240
        subprocess.run([sys.executable, "-m", "warmcore.cli", "sweep", str(spec), "--out",
                        str(out), "--workers", "2", "--quiet"], check=True,
                       capture_output=True, timeout=300)
        after = rows(out)
        assert len(after) == 240 and not after.duplicated(["point_id", "replication"]).any()
        finished = before.set_index(["point_id", "replication"])
        again = after.set_index(["point_id", "replication"]).loc[finished.index]
        assert again["seed"].equals(finished["seed"])     # kept, not rewritten
    finally:
        for proc in (worker, sched):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.mark.parametrize("content,words", [
    (b'scenario = "caf\xe9"\n', "not UTF-8 text (byte 15: 0xe9)"),
    (b"x = " + b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    (b"#" * (1 << 20) + b"\n", "larger than 1,048,576 bytes"),
])
def test_a_spec_file_is_read_as_a_scenario_file_is(tmp_path, capsys, content, words):
    spec = tmp_path / "spec.toml"
    spec.write_bytes(content)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warmcore: sweep: ") and words in err[0], err


def test_a_resource_s_permits_are_a_sweep_axis(tmp_path):
    """loom's db semaphore: fewer permits, the same tasks take longer."""
    spec = write_spec(tmp_path, text='scenario = "loom"\nset = ["workload.jobs=200"]\n'
                      'metrics = ["makespan_s"]\n[axes]\n"resources.db.permits" = [5, 100]\n')
    sweep(spec, tmp_path / "out", workers=1)
    df = rows(tmp_path / "out").set_index("axis.resources.db.permits")
    assert df["error"].isna().all()
    assert df.loc[5, "makespan_s"] > 3 * df.loc[100, "makespan_s"]


def test_a_scenario_file_beside_the_spec_is_found_from_anywhere(tmp_path, monkeypatch):
    """A spec that names its scenario file relative to itself (as calibration specs
    do: examples/wsperflab-2015/staircase.sweep.toml) runs from any folder; a name
    that is neither a built-in scenario nor a file there or beside the spec is still
    refused naming the field."""
    from warmcore.sweeps import base_scenario
    from warmcore.simcore.config import ConfigError

    folder = tmp_path / "study"
    folder.mkdir()
    src = Path(__file__).parents[1] / "simcore" / "scenarios" / "mmc.toml"
    (folder / "base.toml").write_text(src.read_text())
    (folder / "s.sweep.toml").write_text(
        'scenario = "base.toml"\nset = ["run.requests=200"]\n'
        '[axes]\n"workload.rate_per_s" = [1000.0, 2000.0]\n')
    monkeypatch.chdir(tmp_path)                # not the spec's folder
    spec = load_spec(folder / "s.sweep.toml")
    assert Path(spec.scenario) == folder / "base.toml"
    assert base_scenario(spec).name == "mmc"
    (folder / "bad.sweep.toml").write_text(
        'scenario = "missing.toml"\n[axes]\n"workload.rate_per_s" = [1000.0]\n')
    with pytest.raises(ConfigError, match="scenario"):
        load_spec(folder / "bad.sweep.toml")
