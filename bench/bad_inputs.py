"""Issue 30's experiment, as a new user would run it: 200 bad inputs (and a few unusual
but valid ones) to `sweep`, `sweep-report`, `calibrate`, `perf-parse`, `predict` and
PARAMS.toml, trace files and `run`/`compare` flags, each run as `warmcore ARGV` in a
forked child (its own process group, 3 GiB of address space, killed with its group after
20 s). Not a test (it takes about 6 minutes): the regression tests of every cause are in
tests/test_bad_inputs.py and tests/test_fuzz_surfaces.py.

    python bench/bad_inputs.py OUT_DIR [--skip-danger]

with the venv of the checkout under test (the script imports nothing of warmcore's
besides its command, so it runs against older checkouts too; --skip-danger leaves out
`--workers 100000`, which forks without limit where it is not refused). It prints one
line per case and the count of each outcome: ok, traceback, hang, silent (a refusal
expected, exit 0, or invalid JSON printed), refused-valid, bad-line (exit 2 without one
`warmcore:` line); OUT_DIR/results.json holds every case.

Issue 30 counted 62 of 200 mishandled (39 tracebacks, 3 hangs, 18 silently accepted).
This set, on main at 462426a: 47 tracebacks, 3 hangs, 39 silent (2 cases skipped as
dangerous); on branch i30: 200 ok.
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

TIMEOUT = 20.0
MEM = 3 << 30

# ---------------------------------------------------------------- harness

def drop_caps():
    import ctypes
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)

    class H(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class D(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    h = H(0x20080522, 0)
    d = (D * 2)()
    libc.capget(ctypes.byref(h), d)
    m = ~((1 << 1) | (1 << 2)) & 0xFFFFFFFF
    for f in ("effective", "permitted", "inheritable"):
        setattr(d[0], f, getattr(d[0], f) & m)
    libc.capset(ctypes.byref(h), d)


def run(argv, cwd, as_user=False, timeout=TIMEOUT):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setpgrp()
                resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                os.chdir(cwd)
                if as_user:
                    drop_caps()
                sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 (the child's)
                sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
                from warmcore.calibration.cli import main
                code = main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code if isinstance(code, int) else 1)
        deadline = time.monotonic() + timeout
        code = None
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)
        # whatever the child left in its group (pool workers) goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace"), \
            time.monotonic() - t0


def classify(code, stdout, stderr, expect):
    if code is None:
        return "hang"
    if "Traceback" in stderr or code not in (0, 2):
        return "traceback"
    if code == 2:
        lines = stderr.strip("\n").split("\n")
        if len(lines) != 1 or not lines[0].startswith("warmcore: "):
            return "bad-line"
        return "refused-valid" if expect == "ok" else "ok"
    # exit 0
    if expect == "refuse":
        return "silent"
    if expect == "json":
        try:
            json.loads(stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError:
            return "silent"           # invalid JSON printed
    return "ok"


# ---------------------------------------------------------------- peers

class Peer:
    def __init__(self, reply):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(8)
        self.s.settimeout(0.2)
        self.port = self.s.getsockname()[1]
        self.reply, self.stop_, self.conns = reply, False, []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.stop_:
            try:
                c, _ = self.s.accept()
            except OSError:
                continue
            self.conns.append(c)
            if self.reply:
                with contextlib.suppress(OSError):
                    c.sendall(self.reply)


# ---------------------------------------------------------------- workspace

SPEC = ('scenario = "mmc"\nset = ["run.requests=100"]\nmetrics = ["throughput_rps", '
        '"requests"]\n[axes]\n"machine.cores" = [1, 2]\n')


def params(values='"workload.service_us" = 10.0', fit='path = "workload.service_us"\n'
           'lo = 5.0\nhi = 80.0\nlog = false', opt="[0.0667]", cov="[[0.01]]", seeds="[1]",
           drop=()):
    top = []
    if "unit_optimum" not in drop:
        top.append(f"unit_optimum = {opt}")
    if "unit_cov" not in drop:
        top.append(f"unit_cov = {cov}")
    if "seeds" not in drop:
        top.append(f"seeds = {seeds}")
    text = "\n".join(top) + "\n"
    if "values" not in drop:
        text += values if values.startswith("values") else f"[values]\n{values}\n"
        text += "\n"
    if "fit" not in drop:
        text += fit if fit.startswith("fit") else f"[[fit]]\n{fit}\n"
    return text


def cal(fig='throughput_rps = 500.0', fit='path = "workload.service_us"\nlo = 100.0\n'
        'hi = 2000.0', run='requests = 100\nseeds = [1]\nstarts = 1\nmax_evaluations = 2',
        meas_extra='', drop=()):
    text = ""
    if "measurement" not in drop:
        text += f'[[measurement]]\nname = "m"\nscenario = "mmc"\n{meas_extra}\n'
        if fig is not None:
            text += f"[measurement.figures]\n{fig}\n"
    if "fit" not in drop:
        for f in (fit if isinstance(fit, list) else [fit]):
            text += f"[[fit]]\n{f}\n"
    text += f"[run]\n{run}\n"
    return text


def setup(d: Path):
    os.chmod(d, 0o777)
    w = lambda name, text: (d / name).write_bytes(text if isinstance(text, bytes)
                                                  else text.encode())
    w("base.toml", SPEC)
    w("other.toml", SPEC.replace("[1, 2]", "[1, 3]"))
    w("lists.toml", SPEC.replace('"machine.cores" = [1, 2]', '"server.cpus" = [[0], [0, 1]]'))
    w("FILE", "x")
    py = sys.executable
    for spec, out in [("base.toml", "done"), ("other.toml", "done-other"),
                      ("lists.toml", "lists")]:
        subprocess.run([py, "-c", "import sys; from warmcore.calibration.cli import main; "
                        "sys.exit(main(sys.argv[1:]))", "sweep", spec, "--out", out,
                        "--workers", "1", "--quiet"], cwd=d, check=True,
                       capture_output=True)
    parts = lambda f: sorted((d / f).glob("part-*.parquet"))
    damage = {
        "d-brace": lambda f: (f / "spec.json").write_text("{{{"),
        "d-list": lambda f: (f / "spec.json").write_text("[]"),
        "d-null": lambda f: (f / "spec.json").write_text("null"),
        "d-obj": lambda f: (f / "spec.json").write_text("{}"),
        "d-emptyspec": lambda f: (f / "spec.json").write_text(""),
        "d-binspec": lambda f: (f / "spec.json").write_bytes(b"\x00\xff\xfe garbage"),
        "d-trunc": lambda f: parts(f.name)[0].write_bytes(parts(f.name)[0].read_bytes()[:50]),
        "d-notpq": lambda f: (f / "part-eeeeeeeeeeeeeeee.parquet").write_text("not parquet"),
        "d-emptypart": lambda f: (f / "part-cccccccccccccccc.parquet").write_bytes(b""),
        "d-partdir": lambda f: (f / "part-dddddddddddddddd.parquet").mkdir(),
        "d-nospec": lambda f: (f / "spec.json").unlink(),
        "d-foreign": lambda f: shutil.copy(parts("done-other")[0],
                                           f / "part-ffffffffffffffff.parquet"),
        "d-schema": lambda f: _other_table(f / "part-bbbbbbbbbbbbbbbb.parquet"),
        "d-readme": lambda f: (f / "README.txt").write_text("notes"),
    }
    for name, fix in damage.items():
        shutil.copytree(d / "done", d / name)
        fix(d / name)
    shutil.copytree(d / "done-other", d / "d-otherspec")    # a folder of another spec
    (d / "empty-dir").mkdir()
    (d / "folder.json").mkdir()
    _other_table(d / "nopoint.parquet")
    (d / "ro").mkdir()
    os.chmod(d / "ro", 0o555)
    (d / "secret").mkdir()
    w("secret/s.toml", 'name = "x"\n')
    os.chmod(d / "secret" / "s.toml", 0o000)
    (d / "shut").mkdir()
    w("shut/s.toml", 'name = "x"\n')
    os.chmod(d / "shut", 0o000)
    w("perf.txt", "  1,000  cycles\n  2,000  instructions\n  3.5 msec task-clock\n")
    w("noctr.perf", "hello world\nnothing here\n")
    for name, text in FILES.items():
        w(name, text)
    with open(d / "huge.perf", "wb") as f:
        f.truncate(51 << 20)
        f.seek(0)
        f.write(b"  1,000  cycles\n")
    w("bigline.perf", "  1,000  cycles  # " + "x" * (1 << 20) + "\n")


def _other_table(path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), path)


def svc(rng: str) -> str:
    """The base spec over a range of workload.service_us instead of its cores axis."""
    return SPEC.replace('"machine.cores" = [1, 2]', f'"workload.service_us" = {{{rng}}}')


FILES = {
    # sweep specs
    "s-empty.toml": "",
    "s-garbage.toml": "this is = = not toml [[[",
    "s-latin1.toml": 'scenario = "caf\xe9"\n'.encode("latin-1"),
    "s-nul.toml": b'scenario = "mmc"\x00\n',
    "s-noscenario.toml": '[axes]\n"machine.cores" = [1, 2]\n',
    "s-scnope.toml": SPEC.replace('"mmc"', '"nope"'),
    "s-sc5.toml": SPEC.replace('"mmc"', "5"),
    "s-noaxes.toml": 'scenario = "mmc"\n[axes]\n',
    "s-axisnope.toml": SPEC.replace("machine.cores", "machine.nope"),
    "s-axisempty.toml": SPEC.replace("[1, 2]", "[]"),
    "s-axistype.toml": SPEC.replace("[1, 2]", '["x", "y"]'),
    "s-axisrange.toml": SPEC.replace("[1, 2]", "[0, 1]"),
    "s-repeat.toml": SPEC.replace("[1, 2]", "[2, 2, 2]"),
    "s-startstop.toml": svc("start = 5.0, stop = 1.0, step = 1.0"),
    "s-step0.toml": svc("start = 1.0, stop = 5.0, step = 0.0"),
    "s-stepneg.toml": svc("start = 1.0, stop = 5.0, step = -1.0"),
    "s-num0.toml": svc("start = 1.0, stop = 5.0, num = 0"),
    "s-numbig.toml": svc("start = 1.0, stop = 5.0, num = 2000000"),
    "s-big.toml": svc("start = 1.0, stop = 1e9, step = 1.0"),
    "s-grid.toml": 'scenario = "mmc"\n[axes]\n' + "".join(
        f'"work.{k}" = {{start = 0.0, stop = 1.0, num = 1000}}\n'
        for k in ("task_kib", "thread_kib", "code_kib")),
    "s-nan.toml": svc("start = nan, stop = 5.0, num = 3"),
    "s-metricnope.toml": SPEC.replace('"requests"]', '"requests", "nope_rps"]'),
    "s-metricsempty.toml": SPEC.replace('["throughput_rps", "requests"]', "[]"),
    "s-metricstr.toml": SPEC.replace('["throughput_rps", "requests"]', '"throughput_rps"'),
    "s-design.toml": 'design = "nope"\n' + SPEC,
    "s-samples0.toml": 'design = "lhs"\nsamples = 0\n' + SPEC,
    "s-samplesbig.toml": 'design = "lhs"\nsamples = 1000000000\n' + SPEC,
    "s-rep0.toml": "replications = 0\n" + SPEC,
    "s-repbig.toml": "replications = 10000000\n" + SPEC,
    "s-seedneg.toml": 'design = "random"\nseed = -1\n' + SPEC,
    "s-batch0.toml": "batch = 0\n" + SPEC,
    "s-setx.toml": SPEC.replace('"run.requests=100"', '"x"'),
    "s-setabc.toml": SPEC.replace('"run.requests=100"', '"machine.cores=abc"'),
    "s-unknown.toml": "colour = 1\n" + SPEC,
    "s-deep.toml": SPEC.replace('scenario = "mmc"\n', 'scenario = "mmc"\n' +
                                ".".join(["a"] * 3000) + " = 1\n"),
    # calibration specs
    "c-ok.toml": cal(),
    "c-empty.toml": "",
    "c-garbage.toml": "[[measurement\nname = ",
    "c-nomeas.toml": cal(drop=("measurement",)),
    "c-measempty.toml": "measurement = []\n" + cal(drop=("measurement",)),
    "c-nofit.toml": cal(drop=("fit",)),
    "c-fitempty.toml": "fit = []\n" + cal(drop=("fit",)),
    "c-zero.toml": cal(fig="throughput_rps = 0.0"),
    "c-neg.toml": cal(fig="throughput_rps = -5.0"),
    "c-nan.toml": cal(fig="throughput_rps = nan"),
    "c-inf.toml": cal(fig="throughput_rps = inf"),
    "c-str.toml": cal(fig='throughput_rps = "500"'),
    "c-fignope.toml": cal(fig="nope_rps = 500.0"),
    "c-oldname.toml": cal(fig="latency_p99_us = 500.0"),
    "c-cov.toml": cal(fig=None, meas_extra='perf = "cov.perf"\nrequests = 100'),
    "c-figcov.toml": cal(fig="throughput_rps = {value = 500.0, coverage = 2.5}"),
    "c-figunc.toml": cal(fig="throughput_rps = {value = 500.0, uncertainty = -1.0}"),
    "c-seedneg.toml": cal(run="requests = 100\nseeds = [-1]\nstarts = 1\nmax_evaluations = 2"),
    "c-seedsempty.toml": cal(run="requests = 100\nseeds = []\nstarts = 1\nmax_evaluations = 2"),
    "c-req0.toml": cal(run="requests = 0\nseeds = [1]\nstarts = 1\nmax_evaluations = 2"),
    "c-starts0.toml": cal(run="requests = 100\nseeds = [1]\nstarts = 0\nmax_evaluations = 2"),
    "c-maxev0.toml": cal(run="requests = 100\nseeds = [1]\nstarts = 1\nmax_evaluations = 0"),
    "c-wallneg.toml": cal(run="requests = 100\nseeds = [1]\nstarts = 1\nmax_evaluations = 2\n"
                              "max_wall = -1.0"),
    "c-twice.toml": cal(fit=['path = "workload.service_us"\nlo = 100.0\nhi = 2000.0'] * 2),
    "c-int.toml": cal(fit='path = "machine.cores"\nlo = 1.0\nhi = 1.5'),
    "c-lohi.toml": cal(fit='path = "workload.service_us"\nlo = 2000.0\nhi = 100.0'),
    "c-lonan.toml": cal(fit='path = "workload.service_us"\nlo = nan\nhi = 100.0'),
    "c-pathnope.toml": cal(fit='path = "workload.nope"\nlo = 1.0\nhi = 2.0'),
    "c-pathstr.toml": cal(fit='path = "strategy.name"\nlo = 1.0\nhi = 2.0'),
    "c-lo0.toml": cal(fit='path = "workload.service_us"\nlo = 0.0\nhi = 2000.0'),
    "c-loglo.toml": cal(fit='path = "work.task_kib"\nlo = 0.0\nhi = 8.0\nlog = true'),
    "c-perfnope.toml": cal(fig=None, meas_extra='perf = "nope.perf"\nrequests = 100'),
    "c-perfdir.toml": cal(fig=None, meas_extra='perf = "empty-dir"\nrequests = 100'),
    "c-perfnoctr.toml": cal(fig=None, meas_extra='perf = "noctr.perf"\nrequests = 100'),
    "c-mreq0.toml": cal(fig=None, meas_extra='perf = "perf.txt"\nrequests = 0'),
    "c-elapsed0.toml": cal(fig=None, meas_extra='perf = "perf.txt"\nrequests = 100\n'
                                                'elapsed_s = 0.0'),
    "c-scnope.toml": cal().replace('scenario = "mmc"', 'scenario = "nope"'),
    # perf files
    "cov.perf": "  1,000  cycles  [250.00%]\n",
    "p-empty.perf": "",
    "p-bin.perf": b"\x00\x01\x02binary\xff",
    "p-latin1.perf": "  1,000  cycles  # caf\xe9\n".encode("latin-1"),
    "p-big.perf": "1" * 400 + "  cycles\n",
    "p-inf.perf": '{"counter-value": "1e999", "event": "cycles"}\n',
    "p-nanstr.perf": '{"counter-value": "NaN", "event": "cycles"}\n',
    "p-nanbare.perf": '{"counter-value": NaN, "event": "cycles"}\n',
    "p-negjson.perf": '{"counter-value": "-5", "event": "cycles"}\n',
    "p-negcsv.perf": "-5,,cycles,100,100.00,,\n",
    "p-neghuman.perf": "  -5  cycles\n",
    "p-nanhuman.perf": "      nan      cycles   # 0.5 GHz\n",
    "p-infhuman.perf": "      inf      cycles\n",
    "p-cov250.perf": "  1,000  cycles  [250.00%]\n",
    "p-covneg.perf": "1000,,cycles,100,-1,,\n",
    "p-mixed.perf": "  1,000  instructions\n" + "1" * 400 + "  cycles\n",
    "p-mixedjson.perf": '{"counter-value": "1000", "event": "instructions"}\n'
                        '{"counter-value": "1e999", "event": "cycles"}\n',
    "p-csvcov.perf": "1000,,cycles,100,1e999,,\n2000,,instructions,100,100.00,,\n",
    "p-commas.perf": "  1,2,3  cycles\n",
    "p-jlist.perf": '{"counter-value": [], "event": "cycles"}\n',
    "p-jobj.perf": '{"counter-value": {}, "event": "cycles"}\n',
    "p-jevent5.perf": '{"counter-value": "1000", "event": 5}\n',
    "p-jtoplist.perf": '[{"counter-value": "1000", "event": "cycles"}]\n',
    "p-elapsedbig.perf": "  1,000  cycles\n\n   " + "1" * 400 + " seconds time elapsed\n",
    "p-elapsednan.perf": "  1,000  cycles\n\n   nan seconds time elapsed\n",
    "p-intnan.perf": "     nan  1,000  cycles\n     1.0  2,000  cycles\n",
    "p-percore.perf": "S0-D0-C?  x  1,000  cycles\n",
    "p-jagg.perf": '{"counter-value": "1000", "event": "cycles", "aggregate-number": 1e300}\n',
    "p-jcov.perf": '{"counter-value": "1000", "event": "cycles", "pcnt-running": "nan"}\n',
    # PARAMS.toml
    "params.toml": params(),
    "r-empty.toml": "",
    "r-garbage.toml": "values = = 1\n",
    "r-novalues.toml": params(drop=("values",)),
    "r-values5.toml": params(values="values = 5"),
    "r-valnope.toml": params(values='"workload.nope" = 1.0'),
    "r-lohi.toml": params(fit='path = "workload.service_us"\nlo = 90.0\nhi = 80.0\nlog = false'),
    "r-fitpath.toml": params(values='"workload.nope" = 1.0',
                             fit='path = "workload.nope"\nlo = 5.0\nhi = 80.0\nlog = false'),
    "r-shape.toml": params(cov="[[0.01, 0.0]]"),
    "r-covnan.toml": params(cov="[[nan]]"),
    "r-covneg.toml": params(cov="[[-0.5]]"),
    "r-covasym.toml": params(values='"workload.service_us" = 10.0\n"work.task_kib" = 1.0',
                             fit='path = "workload.service_us"\nlo = 5.0\nhi = 80.0\n'
                                 'log = false\n[[fit]]\npath = "work.task_kib"\nlo = 0.0\n'
                                 'hi = 8.0\nlog = false',
                             opt="[0.0667, 0.125]", cov="[[0.01, 0.5], [0.0, 0.01]]"),
    "r-seedneg.toml": params(seeds="[-1]"),
    "r-seedsempty.toml": params(seeds="[]"),
    "r-opt.toml": params(opt="[7.0]"),
    "r-range.toml": params(values='"workload.service_us" = 1e12'),
    "r-cores.toml": params(values='"machine.cores" = 1.5',
                           fit='path = "machine.cores"\nlo = 1.0\nhi = 4.0\nlog = false'),
    "r-len.toml": params(opt="[0.1, 0.2]"),
    # traces
    "t-short.txt": "0.001\n0.002\n",
    "t-ok.txt": "".join(f"{i * 1e-3}\n" for i in range(300)),
    "t-empty.txt": "",
    "t-nan.txt": "0.001\nnan\n0.003\n",
    "t-neg.txt": "-1\n0.001\n",
    "t-unsorted.txt": "0.003\n0.001\n0.002\n",
    "t-x.txt": "0.001\nx\n",
    "t-digits.txt": "1" * 400 + "\n",
    "t-latin1.txt": "0.001\ncaf\xe9\n".encode("latin-1"),
    "t-bin.txt": b"\x00\x01\x02\xff",
    "t-inf.txt": "0.001\ninf\n",
    "t-far.txt": "0.001\n2e6\n",
    "deep.toml": 'name = "x"\n' + ".".join(["a"] * 3000) + " = 1\n",
}

S = "--set"
OPEN = [S, 'workload.kind="open"', S, 'workload.arrival="trace"']


def trace(f):
    return ["run", "mmc", *OPEN, S, f'workload.trace_file="{f}"', "--requests", "100"]


# (surface, argv, expect, options) ; expect: refuse | ok | json | either
CASES = [
    # ---- sweep: output paths, spec files, flags (56)
    ("sweep", ["sweep", "base.toml", "--out", "FILE"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "FILE/sub"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "ro"], "refuse", {"user": 1}),
    ("sweep", ["sweep", "base.toml", "--out", "ro/x"], "refuse", {"user": 1}),
    ("sweep", ["sweep", "base.toml", "--out", ""], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", " "], "refuse", {}),
    ("sweep", ["sweep", "nope.toml", "--out", "o"], "refuse", {}),
    ("sweep", ["sweep", "empty-dir", "--out", "o"], "refuse", {}),
    *[("sweep", ["sweep", f, "--out", "o", "--workers", "1", "--quiet"], "refuse", {})
      for f in ["s-empty.toml", "s-garbage.toml", "s-latin1.toml", "s-nul.toml",
                "s-noscenario.toml", "s-scnope.toml", "s-sc5.toml", "s-noaxes.toml",
                "s-axisnope.toml", "s-axisempty.toml", "s-axistype.toml", "s-axisrange.toml",
                "s-repeat.toml", "s-startstop.toml", "s-step0.toml", "s-stepneg.toml",
                "s-num0.toml", "s-numbig.toml", "s-big.toml", "s-grid.toml", "s-nan.toml",
                "s-metricnope.toml", "s-metricsempty.toml", "s-metricstr.toml",
                "s-design.toml", "s-samples0.toml", "s-samplesbig.toml", "s-rep0.toml",
                "s-repbig.toml", "s-seedneg.toml", "s-batch0.toml", "s-setx.toml",
                "s-setabc.toml", "s-unknown.toml", "s-deep.toml"]],
    ("sweep", ["sweep", "base.toml", "--out", "o", "--workers", "0"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--workers", "-1"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--workers", "100000"], "refuse",
     {"danger": 1}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--workers", "abc"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--scheduler", "garbage"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--scheduler", "tls://127.0.0.1:1"],
     "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--scheduler", "tcp://127.0.0.1:1"],
     "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--scheduler", "tcp://127.0.0.1:99999"],
     "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--scheduler", "PEER-SILENT"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--scheduler", "PEER-HUGE"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--scheduler", "PEER-HTTP"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--params", "nope.toml"], "refuse", {}),
    ("sweep", ["sweep", "base.toml", "--out", "o", "--params", "r-lohi.toml"], "refuse", {}),
    # ---- sweep output folders (15)
    *[("folder", ["sweep", "base.toml", "--out", f, "--workers", "1", "--quiet"], "refuse", {})
      for f in ["d-brace", "d-list", "d-null", "d-obj", "d-emptyspec", "d-binspec", "d-trunc",
                "d-notpq", "d-emptypart", "d-partdir", "d-nospec", "d-foreign", "d-schema",
                "d-otherspec"]],
    ("folder", ["sweep", "base.toml", "--out", "d-readme", "--workers", "1", "--quiet"],
     "ok", {}),
    # ---- sweep-report (24)
    *[("report", ["sweep-report", f, "--no-charts"], "refuse", {})
      for f in ["nope", "empty-dir", "FILE", "d-brace", "d-list", "d-binspec", "d-trunc",
                "d-foreign", "d-schema", "d-notpq", "d-partdir", "nopoint.parquet",
                "base.toml", ""]],
    ("report", ["sweep-report", "lists", "--no-charts"], "ok", {}),
    ("report", ["sweep-report", ".", "--no-charts"], "ok", {"cwd": "lists"}),
    ("report", ["sweep-report", "d-nospec", "--no-charts"], "either", {}),
    ("report", ["sweep-report", "done", "--html", "done", "--no-charts"], "refuse", {}),
    ("report", ["sweep-report", "done", "--html", "FILE/r.html", "--no-charts"], "refuse", {}),
    ("report", ["sweep-report", "done", "--html", "", "--no-charts"], "refuse", {}),
    ("report", ["sweep-report", "done", "--charts", "FILE"], "refuse", {}),
    ("report", ["sweep-report", "done", "--charts", "ro"], "refuse", {"user": 1}),
    ("report", ["sweep-report", "done", "--html", "ro/r.html", "--no-charts"], "refuse",
     {"user": 1}),
    ("report", ["sweep-report", "done", "--charts", ""], "refuse", {}),
    # ---- calibrate (45)
    ("calibrate", ["calibrate", "nope.toml", "--out", "p.toml"], "refuse", {}),
    *[("calibrate", ["calibrate", f, "--out", "p.toml", "--workers", "1"], "refuse", {})
      for f in ["c-empty.toml", "c-garbage.toml", "c-nomeas.toml", "c-measempty.toml",
                "c-nofit.toml", "c-fitempty.toml", "c-zero.toml", "c-neg.toml", "c-nan.toml",
                "c-inf.toml", "c-str.toml", "c-fignope.toml", "c-oldname.toml", "c-cov.toml",
                "c-figcov.toml", "c-figunc.toml", "c-seedneg.toml", "c-seedsempty.toml",
                "c-req0.toml", "c-starts0.toml", "c-maxev0.toml", "c-wallneg.toml",
                "c-twice.toml", "c-int.toml", "c-lohi.toml", "c-lonan.toml", "c-pathnope.toml",
                "c-pathstr.toml", "c-lo0.toml", "c-loglo.toml", "c-perfnope.toml",
                "c-perfdir.toml", "c-perfnoctr.toml", "c-mreq0.toml", "c-elapsed0.toml",
                "c-scnope.toml"]],
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "done"], "refuse", {}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "FILE/p.toml"], "refuse", {}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", ""], "refuse", {}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "ro/p.toml"], "refuse", {"user": 1}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "p.toml", "--report", "done"], "refuse",
     {}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "p.toml", "--workers", "0"], "refuse", {}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "p.toml", "--workers", "100000"],
     "refuse", {"danger": 1}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "p.toml", "--scheduler", "garbage"],
     "refuse", {}),
    ("calibrate", ["calibrate", "c-ok.toml", "--out", "p.toml", "--scheduler", "x:99999"],
     "refuse", {}),
    # ---- perf-parse (34)
    *[("perf", ["perf-parse", f], "refuse", {})
      for f in ["nope.perf", "empty-dir", "p-empty.perf", "p-bin.perf", "p-latin1.perf",
                "p-big.perf", "p-inf.perf", "p-nanstr.perf", "p-nanbare.perf",
                "p-negjson.perf", "p-negcsv.perf", "p-neghuman.perf", "p-nanhuman.perf",
                "p-infhuman.perf", "p-cov250.perf", "p-covneg.perf", "p-commas.perf",
                "p-jlist.perf", "p-jobj.perf", "p-jevent5.perf", "huge.perf"]],
    *[("perf", ["perf-parse", f, "--json"], "json", {})
      for f in ["p-mixed.perf", "p-mixedjson.perf", "p-csvcov.perf", "p-jtoplist.perf",
                "p-elapsedbig.perf", "p-elapsednan.perf", "p-intnan.perf", "p-percore.perf",
                "p-jagg.perf", "p-jcov.perf", "bigline.perf", "p-big.perf", "p-cov250.perf"]],
    # ---- predict / PARAMS.toml (26)
    *[("params", ["predict", "mmc", "--params", f, "--requests", "50", "--draws", "2"],
       "refuse", {})
      for f in ["nope.toml", "empty-dir", "r-empty.toml", "r-garbage.toml", "r-novalues.toml",
                "r-values5.toml", "r-valnope.toml", "r-lohi.toml", "r-fitpath.toml",
                "r-shape.toml", "r-covnan.toml", "r-covneg.toml", "r-covasym.toml",
                "r-seedneg.toml", "r-seedsempty.toml", "r-opt.toml", "r-range.toml",
                "r-cores.toml", "r-len.toml"]],
    ("params", ["run", "mmc", "--params", "r-range.toml", "--requests", "50"], "refuse", {}),
    ("params", ["compare", "mmc", "--strategies", "pc", "--params", "r-range.toml",
                "--requests", "50"], "refuse", {}),
    ("params", ["sweep", "base.toml", "--out", "o", "--params", "r-range.toml"], "refuse", {}),
    ("params", ["predict", "mmc", "--params", "params.toml", "--draws", "1000000000"],
     "refuse", {}),
    ("params", ["predict", "mmc", "--params", "params.toml", "--draws", "-1"], "refuse", {}),
    ("params", ["predict", "mmc", "--params", "params.toml", "--draws", "0",
                "--requests", "50", "--json"], "json", {}),
    ("params", ["run", "mmc", "--params", "r-covnan.toml", "--requests", "50"], "refuse", {}),
    # ---- trace files (13)
    ("trace", ["run", "mmc", S, 'workload.trace_file="t-ok.txt"', "--requests", "100"],
     "refuse", {}),
    *[("trace", trace(f), "refuse", {})
      for f in ["t-short.txt", "nope.txt", "empty-dir", "t-empty.txt", "t-nan.txt",
                "t-neg.txt", "t-unsorted.txt", "t-x.txt", "t-digits.txt", "t-latin1.txt",
                "t-bin.txt", "t-inf.txt", "t-far.txt"]],
    # ---- run / compare flags and older surfaces (24)
    ("flags", ["run", "mmc", "--duration", "1e-320"], "refuse", {}),
    ("flags", ["run", "mmc", "--duration", "0"], "refuse", {}),
    ("flags", ["run", "mmc", "--duration", "nan"], "refuse", {}),
    ("flags", ["run", "mmc", "--duration", "-1"], "refuse", {}),
    ("flags", ["run", "mmc", "--requests", "0"], "refuse", {}),
    ("flags", ["run", "mmc", "--requests", "1000000000000"], "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", "pc", "--load", ""], "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", "pc", "--load", ","], "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", "pc", "--load", ",".join(["1"] * 30000)],
     "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", "pc", "--load", "nan"], "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", "pc", "--load", "abc"], "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", "pc", "--load", "-1"], "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", "nope"], "refuse", {}),
    ("flags", ["compare", "mmc", "--strategies", ""], "refuse", {}),
    ("flags", ["run", "hello", "--requests", "50", "--trace", "nope/t.json"], "refuse", {}),
    ("flags", ["run", "hello", "--requests", "50", "--trace", "t.txt"], "refuse", {}),
    ("flags", ["run", "hello", "--requests", "50", "--trace", "folder.json"], "refuse", {}),
    ("flags", ["run", "mmc", "--set", "strategy.params=5", "--strategy", "pec"], "refuse", {}),
    ("flags", ["run", "mmc", "--strategy", "pec", "--set", "strategy.params=5"], "refuse", {}),
    ("flags", ["run", "secret/s.toml"], "refuse", {"user": 1}),
    ("flags", ["run", "shut/s.toml"], "refuse", {"user": 1}),
    ("flags", ["run", "deep.toml"], "refuse", {}),
    ("flags", ["run", "mmc", "--max-wall", "0"], "refuse", {}),
    ("flags", ["run", "mmc", "--seed", "-1"], "refuse", {}),
]


# trimmed to the 200: redundant cases of each kind left out
DROP_FILES = {"s-noscenario.toml", "s-sc5.toml", "s-stepneg.toml", "s-num0.toml",
              "s-metricstr.toml", "s-seedneg.toml", "s-batch0.toml", "s-unknown.toml",
              "c-empty.toml", "c-garbage.toml", "c-measempty.toml", "c-fitempty.toml",
              "c-inf.toml", "c-str.toml", "c-starts0.toml", "c-maxev0.toml", "c-lonan.toml",
              "c-pathstr.toml", "c-perfdir.toml", "c-mreq0.toml", "p-infhuman.perf",
              "p-jobj.perf", "p-jagg.perf", "p-jcov.perf", "p-percore.perf", "p-commas.perf",
              "r-seedsempty.toml", "r-empty.toml", "r-garbage.toml"}
DROP_ARGV = [["sweep", "base.toml", "--out", "o", "--workers", "-1"],
             ["sweep", "base.toml", "--out", " "],
             ["perf-parse", "p-big.perf", "--json"],
             ["predict", "mmc", "--params", "params.toml", "--draws", "-1"],
             ["sweep-report", "FILE", "--no-charts"],
             ["sweep-report", "base.toml", "--no-charts"],
             ["sweep-report", "done", "--charts", ""],
             ["run", "mmc", "--duration", "0"], ["run", "mmc", "--duration", "-1"],
             ["run", "mmc", "--seed", "-1"]]
CASES = [c for c in CASES if not (set(c[1]) & DROP_FILES) and c[1] not in DROP_ARGV]


def main():
    outdir = Path(sys.argv[1])
    skip_danger = "--skip-danger" in sys.argv
    work = Path(tempfile.mkdtemp(prefix="i30-exp-"))
    setup(work)
    peers = {"PEER-SILENT": Peer(None), "PEER-HUGE": Peer(b"\xff" * 64),
             "PEER-HTTP": Peer(b"HTTP/1.1 400 Bad Request\r\n\r\n")}
    results = []
    for i, (surface, argv, expect, opt) in enumerate(CASES):
        argv = [f"tcp://127.0.0.1:{peers[a].port}" if a in peers else a for a in argv]
        if opt.get("danger") and skip_danger:
            results.append({"i": i, "surface": surface, "argv": argv, "outcome": "skipped"})
            continue
        # every case in a fresh copy-on-need: outputs named 'o' and 'p.toml' cleared
        for name in ("o", "p.toml"):
            p = work / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
        cwd = work / opt["cwd"] if "cwd" in opt else work
        code, out, err, secs = run(argv, str(cwd), as_user=bool(opt.get("user")))
        outcome = classify(code, out, err, expect)
        results.append({"i": i, "surface": surface, "argv": [a[:80] for a in argv][:10],
                        "expect": expect, "code": code, "outcome": outcome,
                        "seconds": round(secs, 2),
                        "stderr": err.strip()[-400:], "stdout": out[:200]})
        print(f"{i:3d} {surface:9s} {outcome:13s} {secs:5.1f}s  {' '.join(argv)[:70]}"
              f"  | {err.strip().splitlines()[-1][:110] if err.strip() else ''}", flush=True)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "results.json").write_text(json.dumps(results, indent=1))
    from collections import Counter
    print("cases:", len(results))
    print("outcomes:", dict(Counter(r["outcome"] for r in results)))
    by = {}
    for r in results:
        by.setdefault(r["surface"], Counter())[r["outcome"]] += 1
    for s, c in by.items():
        print(f"  {s:9s} {dict(c)}")
    for p in peers.values():
        p.stop_ = True
    os.chmod(work / "shut", 0o755)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
