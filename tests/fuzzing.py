"""Running the CLI on untrusted input in a forked child with a memory limit and a
timeout, and checking the CLI's contract on what comes back (tests/test_fuzz.py,
tests/test_validation.py).

The contract (docs/formats.md, "Ranges and caps"): exit code 0 or 2, never a
traceback; on exit 2 stderr is exactly one line naming the field and the reason;
on exit 0 stdout is a result that validates against the published schema, with
ordered percentiles and no negative part in the breakdown.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass

MEMORY_LIMIT = 3 << 30       # address space of the child: 3 GiB (RSS is far less)
PERCENTILES = ("min", "p50", "p90", "p99", "p999", "max")


@dataclass
class Outcome:
    argv: list[str]
    code: int | None         # None: killed at the timeout
    stdout: str
    stderr: str
    seconds: float


def run_cli(argv: list[str], timeout: float = 60.0, cwd: str | None = None,
            as_user: bool = False) -> Outcome:
    """``warmcore ARGV`` in a forked child (the imports are already done, so a case
    costs its run, not an interpreter start), under MEMORY_LIMIT, killed after
    ``timeout`` seconds. ``as_user``: file permissions apply to the child as to a user
    who is not root (root's override of them is dropped: tests run as root in CI)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:                                      # the child
            if as_user:
                drop_file_override()
            _child(argv, out.fileno(), err.fileno(), cwd)
        code = _wait(pid, timeout)
        seconds = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return Outcome(argv, code, out.read().decode(errors="replace"),
                       err.read().decode(errors="replace"), seconds)


CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2


def drop_file_override() -> None:
    """Drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from this process (capset(2)): as
    root, it then meets file permissions as their owner would. No-op when not root."""
    import ctypes

    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    head = Header(0x20080522, 0)                  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    if libc.capget(ctypes.byref(head), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    mask = ~((1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)) & 0xFFFFFFFF
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[0], field, getattr(data[0], field) & mask)
    if libc.capset(ctypes.byref(head), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _child(argv, out_fd, err_fd, cwd) -> None:
    code = 1
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        if cwd:
            os.chdir(cwd)
        import sys

        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (the child's own stdout)
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        from warmcore.calibration.cli import main   # the console script's entry point

        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:                                 # what an uncaught error prints
        traceback.print_exc()
        code = 1
    finally:
        try:
            import sys

            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)


def contract_violation(o: Outcome, result: bool = True) -> str | None:
    """Why ``o`` breaks the CLI's contract, or None if it keeps it. ``result``: exit 0
    prints a run's JSON result (run, compare), checked against the schema; commands
    that print something else (sweep, perf-parse) are checked by their callers."""
    if o.code is None:
        return f"no answer within the timeout ({o.seconds:.0f} s)"
    if "Traceback" in o.stderr or o.code not in (0, 2):
        return f"exit {o.code}: {o.stderr.strip()[-600:]}"
    if o.code == 2:
        lines = o.stderr.strip("\n").split("\n")
        if len(lines) != 1 or not lines[0].startswith("warmcore: "):
            return f"exit 2 with stderr not one 'warmcore: ' line: {o.stderr[:600]!r}"
        if "pydantic" in lines[0] or "Value error" in lines[0] or "constrained-" in lines[0]:
            return f"pydantic internals in the message: {lines[0]!r}"
        return None
    return result_violation(o.stdout) if result else None


def result_violation(stdout: str) -> str | None:
    from warmcore.result import Result

    try:
        data = json.loads(stdout)
    except ValueError as e:
        return f"exit 0 but stdout is not JSON ({e}): {stdout[:300]!r}"
    for r in data if isinstance(data, list) else [data]:
        try:
            Result.model_validate(r)
        except ValueError as e:
            return f"exit 0 but the result does not validate: {str(e)[:400]}"
        for group in ("latency_us", "service_us"):
            vals = [r[group][k] for k in PERCENTILES if r[group][k] is not None]
            if vals != sorted(vals):
                return f"{group} percentiles out of order: {r[group]}"
        bad = {k: v for k, v in r["breakdown_us"].items()
               if v is not None and (not math.isfinite(v) or v < 0)}
        if bad:
            return f"negative breakdown components: {bad}"
    return None
