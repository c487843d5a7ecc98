"""The ``warmcore`` command line.

    warmcore run SCENARIO [--strategy NAME] [--set PATH=VALUE ...] [--seed N]
                 [--requests N | --duration SECONDS] [--json] [--trace FILE.json]
    warmcore compare SCENARIO --strategies A,B,... [--load L1,L2,...] [same options] [--json]
    warmcore advise SCENARIO --strategies A,B,... [--objective p99|p99<=US|...] [--loads ...]
                    [--replications N] [--tune PATH=V1,V2 --load L] [--workers N] [--json]
    warmcore scenarios | presets | strategies
    warmcore sweep SPEC.toml --out DIR [--workers N] [--scheduler tcp://HOST:PORT]
    warmcore sweep-report DIR [--html REPORT.html] [--charts DIR | --no-charts]
    warmcore explore [--port N] [--host ADDR]   # the what-if explorer (needs [app])

Usage errors and bad scenarios print one line (``warmcore: FIELD: REASON``) and
exit with code 2; scripts depend on this contract and on the JSON keys.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

from warmcore.simcore.config import (
    ConfigError,
    builtin_names,
    check_output_file,
    load,
    read_scenario_dict,
    short_repr,
)
from warmcore.simcore.config.schema import MIN_DURATION_S

USAGE_ERROR = 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):           # one line and exit 2, no usage dump
        # argparse says "argument --requests: ..."; the contract names the field first
        raise UsageError(re.sub(r"^argument ([^:]+): ", r"\1: ", message))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="warmcore", description="Simulate producer/consumer scheduling on "
                "modeled CPUs and report what perf stat and a load generator would.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    p.subcommands = sub           # layers above add their own (warmcore.calibration.cli)
    run = sub.add_parser("run", help="run one scenario")
    _scenario_args(run)
    run.add_argument("--strategy", help="execution strategy (see `warmcore strategies`)")
    run.add_argument("--trace", metavar="FILE.json", help="also write the run's last kernel "
                     "events (run.trace_events, default 5000) as a Chrome trace-event file "
                     "(Perfetto UI, chrome://tracing)")
    cmp_ = sub.add_parser("compare", help="run several strategies on one scenario")
    _scenario_args(cmp_)
    cmp_.add_argument("--strategies", help="comma-separated strategy names, e.g. pc,pec,epc "
                      "(default: the scenario's strategy.compare)")
    cmp_.add_argument("--load", help="comma-separated offered loads to sweep (open-loop "
                      "req/s, or closed-loop clients); prints each latency curve and knee")
    adv = sub.add_parser("advise", help="which strategy is best, up to what offered load, "
                         "by how much and why (docs/api.md, Advice)")
    _scenario_args(adv)
    adv.add_argument("--strategies", help="comma-separated strategies to compare (at least "
                     "two), e.g. pc,pec,epc (default: the scenario's strategy.compare)")
    adv.add_argument("--objective", default="throughput", help="throughput (default), p50, "
                     "p99, cpu, energy, or an SLO such as 'p99<=500' (us): the most "
                     "throughput within it")
    adv.add_argument("--loads", help="comma-separated offered loads (default: from the "
                     "scenario's capacity, light load to past saturation)")
    adv.add_argument("--replications", type=int, default=3,
                     help="seeds per point, the same for every strategy (default 3)")
    adv.add_argument("--min-margin", type=float, default=1.0, metavar="PCT",
                     help="the smallest margin, in %% of the runner-up's figure, that names "
                     "a strategy best (default 1: a smaller one is called a tie)")
    adv.add_argument("--refine", type=int, default=4,
                     help="bisections of the load at each crossover (default 4)")
    adv.add_argument("--tune", metavar="PATH=V1,V2,...", help="instead: the best value of "
                     "one setting of the scenario's strategy or machine (e.g. "
                     "strategy.params.threads=2,4,8 or machine.governor=performance,"
                     "schedutil) at --load")
    adv.add_argument("--load", help="with --tune: the offered load to tune at (default: "
                     "the scenario's)")
    adv.add_argument("--workers", type=int, default=1, help="local worker processes "
                     "(default 1: in this process)")
    adv.add_argument("--scheduler", help="a dask.distributed scheduler, tcp://HOST:PORT")
    sw = sub.add_parser("sweep", help="run a parameter sweep (docs/sweeps.md)")
    sw.add_argument("spec", help="sweep spec (TOML)")
    sw.add_argument("--out", required=True, help="output directory (Parquet part files)")
    sw.add_argument("--workers", type=int, help="local worker processes (default: all CPUs)")
    sw.add_argument("--scheduler", help="a dask.distributed scheduler, tcp://HOST:PORT "
                    "(or $WARMCORE_SCHEDULER)")
    sw.add_argument("--overwrite", action="store_true",
                    help="replace the output of a different spec")
    sw.add_argument("--retry-failed", action="store_true", help="rerun the failed points")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    rep = sub.add_parser("sweep-report", help="means with 95%% intervals, charts and a "
                         "sensitivity ranking of a sweep's results (docs/sweeps.md)")
    rep.add_argument("results", help="a sweep's output directory (or one Parquet file)")
    rep.add_argument("--html", metavar="REPORT.html", help="also write one self-contained "
                     "page with the tables and charts")
    charts = rep.add_mutually_exclusive_group()
    charts.add_argument("--charts", metavar="DIR", help="where the charts go, as HTML and "
                        "PNG (default: RESULTS-charts beside the results)")
    charts.add_argument("--no-charts", action="store_true", help="print the tables only")
    ex = sub.add_parser("explore", help="open the what-if explorer (Streamlit) on "
                        "127.0.0.1 and print its URL")
    ex.add_argument("--port", type=int, default=8501, help="its TCP port (default 8501)")
    ex.add_argument("--host", default="127.0.0.1", help=(
        "the address to serve on (default 127.0.0.1: this machine only). Another address "
        "serves it to whoever reaches it: they run simulations on this machine "
        "(docs/explorer.md, Security)"))
    sub.add_parser("scenarios", help="list the built-in scenarios")
    sub.add_parser("presets", help="list the CPU presets")
    sub.add_parser("strategies", help="list the execution strategies")
    return p


def _scenario_args(p) -> None:
    p.add_argument("scenario", help="built-in scenario name or a TOML file")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                   help="override a scenario value, e.g. --set machine.cores=4")
    p.add_argument("--seed", type=int)
    lim = p.add_mutually_exclusive_group()
    lim.add_argument("--requests", type=int, help="measured requests (after warm-up)")
    lim.add_argument("--duration", type=float, help="measured simulated seconds")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--max-wall", type=float, metavar="SECONDS",
                   help="wall-clock budget per run: past it the run ends early and its "
                        "result is marked partial")


# Hooks of the layers above (calibration's --params): each takes the loaded scenario
# and the parsed arguments and returns the scenario to run.
SCENARIO_HOOKS: list = []
# ... and for a sweep: each takes the loaded spec and the arguments, returns the spec.
SPEC_HOOKS: list = []


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = parser or build_parser()
    if not argv:                 # no command: the usage, as `warmcore --help` prints it
        parser.print_help()
        return USAGE_ERROR
    try:
        args = parser.parse_args(argv)
        return COMMANDS[args.cmd](args)
    except (UsageError, ConfigError) as e:
        print(f"warmcore: {e}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:
        # the reader went away (`warmcore ... | head`): nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("warmcore: interrupted (finished work is kept; rerun the same command to "
              "go on)", file=sys.stderr)
        return 130


def cmd_run(args) -> int:
    from warmcore.api import simulate

    sc = _load(args, strategy=args.strategy)
    added = False
    if args.trace is not None:
        if not args.trace.endswith(".json"):
            raise UsageError(f"--trace: {args.trace!r} should name a .json file")
        check_output_file(args.trace, "--trace")           # before the run
        if sc.run.trace_events == 0:
            from warmcore.trace import DEFAULT_EVENTS

            sc, added = sc.with_({"run.trace_events": DEFAULT_EVENTS}), True
    res = simulate(sc, max_wall=args.max_wall)
    _warn_partial(res)
    if args.trace:
        from warmcore.trace import write_chrome_trace

        write_chrome_trace(res, args.trace)
        if added:            # the printed result is the run's as asked, without the rows
            res = res.model_copy()
            res.trace = None
            res.model_fields_set.discard("trace")
    if args.json:
        print(res.to_json())
    else:
        print(format_result(res.model_dump(exclude_unset=True)))
    return 0


def _warn_partial(res) -> None:
    if res.partial:
        print(f"warmcore: warning: partial result ({res.stop_reason})", file=sys.stderr)


def _load(args, **extra):
    if args.requests is not None and args.requests <= 0:
        raise UsageError("--requests: must be a positive number")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise UsageError("--duration: must be a positive number of seconds")
    if args.duration is not None and args.duration < MIN_DURATION_S:
        raise UsageError(f"--duration: at least {MIN_DURATION_S:g} s (got {args.duration:g})")
    if args.max_wall is not None and not (math.isfinite(args.max_wall) and args.max_wall > 0):
        raise UsageError("--max-wall: must be a positive number of seconds")
    if args.seed is not None and args.seed < 0:
        raise UsageError("--seed: must be non-negative")
    # The hooks (a calibration's --params) change the scenario before the --set
    # overrides, so that an override may rely on a fitted value and still wins over it.
    sc = load(args.scenario, [])
    for hook in SCENARIO_HOOKS:
        sc = hook(sc, args)
    return load(sc, args.sets, requests=args.requests, duration_s=args.duration,
                seed=args.seed, **extra)


def cmd_compare(args) -> int:
    from warmcore.api import compare
    from warmcore.comparison import format_table, knee
    from warmcore.registry import get_strategy

    cfg = _load(args)
    names = _compared(args, cfg)
    if not names:
        raise UsageError("--strategies: name at least one strategy")
    for n in names:
        get_strategy(n)
    loads = _loads(args.load, "--load", cfg)
    progress = None if args.json else (lambda r: print(
        f"  ran {r.strategy} load {r.load if r.load is not None else '-'}", file=sys.stderr))
    # --set strategy.params.NAME=... applies to every compared strategy, not only to
    # the scenario's own (a strategy without that tunable is a usage error)
    paths = [s.split("=", 1)[0] for s in args.sets]
    keep = [p.split(".")[2] for p in paths if p.startswith("strategy.params.")]
    results = compare(cfg, names, loads, progress=progress, max_wall=args.max_wall,
                      keep_params=keep)
    for r in results:
        _warn_partial(r)
    if args.json:      # the same object per run as `run --json`, with its load
        print(json.dumps([r.to_dict() for r in results]))
        return 0
    rows = [r.per_request() for r in results]
    print(format_table(rows))
    if loads:
        print()
        for n in names:
            k = knee([r for r in rows if r["strategy"] == n])
            print(f" knee of {n}: " + (f"{k:g}" if k is not None else "not reached"))
    return 0


def _compared(args, cfg) -> list[str]:
    """--strategies A,B,..., or else the scenario's own strategy.compare."""
    if args.strategies is not None:
        return [n.strip() for n in args.strategies.split(",") if n.strip()]
    from warmcore.build import check_compared

    check_compared(cfg)
    return list(cfg.strategy.compare or ())


MAX_LOADS = 1000          # compare --load: each load is one run per strategy


def parse_loads(text: str, flag: str = "--load") -> list[float]:
    """``--load L1,L2,...``: finite positive numbers, at most MAX_LOADS, sorted."""
    items = [x for x in text.split(",") if x.strip()]
    if not items:
        raise UsageError(f"{flag}: no load given (a comma-separated list of numbers)")
    if len(items) > MAX_LOADS:
        raise UsageError(f"{flag}: {len(items):,} loads; at most {MAX_LOADS:,}")
    try:
        loads = sorted(float(x) for x in items)
    except ValueError:
        raise UsageError(f"{flag}: {short_repr(text)} is not a list of numbers") from None
    if not all(math.isfinite(x) and x > 0 for x in loads):
        raise UsageError(f"{flag}: loads must be finite positive numbers")
    return loads


def _loads(text: str | None, flag: str, cfg) -> list | None:
    """Offered loads from a comma-separated list: finite, positive, whole numbers for a
    workload whose load is a count (clients, connections, jobs)."""
    from warmcore.comparison import load_field

    if text is None:                        # (--load '' is as empty as --load ,)
        return None
    loads = parse_loads(text, flag)
    if load_field(cfg) != "rate_per_s" and not all(x == int(x) for x in loads):
        raise UsageError(f"{flag}: workload {cfg.workload.kind!r} takes whole numbers of "
                         f"{load_field(cfg).replace('_', ' ')}")
    return loads


def _whole(loads: list | None, cfg) -> list | None:
    """Loads of a workload whose load is a count, as whole numbers."""
    from warmcore.comparison import load_field

    if loads is None or load_field(cfg) == "rate_per_s":
        return loads
    return [int(x) for x in loads]


def cmd_advise(args) -> int:
    from warmcore import advice as adv

    cfg = _load(args)
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers: must be at least 1")
    progress = None if args.json or not sys.stderr.isatty() else (
        lambda n: print(f"\r  {n} runs", end="", file=sys.stderr, flush=True))
    if not 0 <= args.min_margin < 100:      # also refuses nan
        raise UsageError(f"--min-margin: must be from 0 to below 100 (%), got "
                         f"{args.min_margin:g}")
    common = dict(objective=args.objective, replications=args.replications,
                  workers=args.workers, scheduler=args.scheduler, progress=progress,
                  min_margin=args.min_margin / 100)
    if args.tune:
        path, _, values = args.tune.partition("=")
        if not path or not values:
            raise UsageError("--tune: give PATH=V1,V2,... such as strategy.params.threads=2,4")
        load = _loads(args.load, "--load", cfg)
        if load is not None and len(load) != 1:
            raise UsageError("--load: with --tune, one load")
        out = adv.tune(cfg, path.strip(), [v.strip() for v in values.split(",") if v.strip()],
                       load=_whole(load, cfg)[0] if load else None, **common)
        text = adv.format_tuning(out)
    else:
        names = _compared(args, cfg)
        if len(names) < 2:
            raise UsageError("--strategies: name at least two strategies to compare")
        out = adv.advise(cfg, names, refine=args.refine,
                         loads=_whole(_loads(args.loads, "--loads", cfg), cfg), **common)
        text = adv.format_advice(out)
    if progress:
        print(file=sys.stderr)
    print(json.dumps(out) if args.json else text)
    return 0


def cmd_sweep(args) -> int:
    from warmcore.sweeps import load_spec, points, sweep

    spec = load_spec(args.spec)
    for hook in SPEC_HOOKS:
        spec = hook(spec, args)
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        total = sum(1 for _ in points(spec)) * spec.replications
        bar = tqdm(total=total, unit="run", file=sys.stderr)
    try:
        counts = sweep(spec, args.out, workers=args.workers, scheduler=args.scheduler,
                       overwrite=args.overwrite, retry_failed=args.retry_failed,
                       progress=bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    print(f"{counts['rows_written']} rows written, {counts['rows_skipped']} already there, "
          f"{counts['rows_failed']} failed -> {args.out}")
    return 0


def cmd_sweep_report(args) -> int:
    """Every error of a report is one line, ``warmcore: error: ...``."""
    from warmcore.sweep_report import report

    charts_dir = None if args.no_charts else (args.charts or "default")
    try:
        report(args.results, html=args.html, charts_dir=charts_dir)
    except ConfigError as e:
        raise UsageError(f"error: {e}") from None
    except OSError as e:
        raise UsageError(f"error: {e.filename or args.results}: {e.strerror}") from None
    return 0


def explorer_script():
    """The explorer's Streamlit script, a Path (None if missing).

    ``streamlit run`` puts the script's folder first on sys.path. The wheel therefore
    ships the script alone in a folder of its own, warmcore/explorer/app.py (setup.py's
    build_py copies the checkout's app.py there), where nothing can stand in for a
    standard or third-party module, as warmcore/trace.py did for the stdlib's trace
    while the script sat in warmcore/. An editable install has no copy: it runs the
    checkout's own app.py, at the checkout's top."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    shipped = here / "explorer" / "app.py"
    if shipped.is_file():
        return shipped
    checkout = here.parent
    if (checkout / "app.py").is_file() and (checkout / "pyproject.toml").is_file():
        return checkout / "app.py"
    return None


def cmd_explore(args) -> int:
    """``streamlit run`` on the explorer (explorer_script), headless, on loopback unless
    ``--host`` says otherwise (with a warning of what that means)."""
    import importlib.util

    if importlib.util.find_spec("streamlit") is None:
        raise UsageError("explore: Streamlit is not installed; pip install 'warmcore[app]'")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port: {args.port} is not a TCP port")
    app = explorer_script()
    if app is None:
        raise UsageError("explore: the app is missing (neither warmcore/explorer/app.py nor "
                         "a checkout's app.py); reinstall warmcore")
    if not args.host or any(c.isspace() for c in args.host):
        raise UsageError(f"--host: {args.host!r} is not an address")
    if not _is_loopback(args.host):
        print(served_warning(args.host, args.port), file=sys.stderr, flush=True)
    print(f"warmcore explorer: http://{args.host}:{args.port}/  (Ctrl-C stops it)", flush=True)
    # -P: no current directory on sys.path. Started in a checkout (as the README's
    # install-and-open command does), the checkout's warmcore/ folder would stand in
    # for the installed package, and the page would fail at its first import.
    cmd = [sys.executable, "-P", "-m", "streamlit", "run", str(app),
           "--server.address", args.host, "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "minimal",
           # Streamlit's smallest upload cap (MB): an oversized file is refused by the
           # server before it is read into memory; the app's own caps are lower.
           "--server.maxUploadSize", "1"]
    # Streamlit replaces this process: a signal to it (Ctrl-C, kill) stops the server
    # itself, and no child outlives its parent.
    os.execv(sys.executable, cmd)
    return 0            # not reached


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:                  # a host name: may resolve to anything
        return False


def served_warning(host: str, port: int) -> str:
    """What serving the explorer beyond this machine means, in one line."""
    from warmcore.jobs import MAX_CONCURRENT_RUNS, MAX_WALL_S
    from warmcore.uploads import MAX_FILE_BYTES, MAX_SCENARIO_BYTES

    return (f"warmcore: warning: serving the explorer on {host}:{port}: anyone who reaches "
            f"it runs simulations on this machine (each run stops after {MAX_WALL_S:g} s of "
            f"wall time, at most {MAX_CONCURRENT_RUNS} at once; uploads of at most "
            f"{MAX_SCENARIO_BYTES // 1024} KiB for a scenario and {MAX_FILE_BYTES // 1024} KiB "
            "for a file it names; "
            "docs/explorer.md, Security)")


def cmd_scenarios(args) -> int:
    for name in builtin_names():
        d = read_scenario_dict(name)
        print(f"{name:20s} {d.get('description', '')}")
    return 0


def cmd_presets(args) -> int:
    from warmcore.models.presets import PRESETS

    for name, p in sorted(PRESETS.items()):
        topo = f"{p.sockets}x{p.cores_per_socket}c/{p.n_cpus}t"
        clock = f"{p.pstates_ghz[0]:.2f}-{p.pstates_ghz[-1]:.2f} GHz"
        print(f"{name:14s} {topo:12s} {clock:16s} {p.description}")
    return 0


def cmd_strategies(args) -> int:
    from warmcore.registry import strategies

    for name, cls in strategies().items():
        print(f"{name:22s} {cls.summary}")
    return 0


COMMANDS = {"run": cmd_run, "compare": cmd_compare, "advise": cmd_advise, "sweep": cmd_sweep,
            "sweep-report": cmd_sweep_report,
            "explore": cmd_explore,
            "scenarios": cmd_scenarios,
            "presets": cmd_presets,
            "strategies": cmd_strategies}


# A median under this (us) is shown in nanoseconds: one decimal of a microsecond
# would say "0.4" for what LMAX's latency test reports as 52 ns.
NS_BELOW_US = 1.0


def _percentile_row(label: str, d: dict, keys: tuple) -> str:
    """One row of percentiles, in microseconds, or in nanoseconds when the median is
    under NS_BELOW_US."""
    if d["p50"] < NS_BELOW_US:
        return f" {label + ' ns':<17}" + "  ".join(f"{k} {d[k] * 1e3:,.0f}" for k in keys)
    return f" {label + ' us':<17}" + "  ".join(f"{k} {d[k]:.1f}" for k in keys)


def _outcome_rows(r: dict) -> list[str]:
    """What the clients got (issue 31), when some request was refused or timed out:
    the window's arrivals, refusals and timeouts with their share of the arrivals, and
    the goodput (answers in time per second). None otherwise: nothing changed."""
    rejected, timed_out = r.get("rejected") or 0, r.get("timed_out") or 0
    if not rejected and not timed_out:
        return []
    arrived = r["arrived"]

    def share(k: int) -> str:
        return f"{k:,} ({k / arrived:.2%})" if arrived else f"{k:,}"
    return [f" clients          arrived {arrived:,}  rejected {share(rejected)}  "
            f"timed out {share(timed_out)}  goodput {r['goodput_rps']:,.1f} req/s"]


def format_result(r: dict) -> str:
    """A perf-stat-like summary of one result."""
    lat = r["latency_us"]
    srv = r["service_us"]
    n = max(r["requests"], 1)
    lines = [
        (f" Scenario {r['scenario']} | strategy {r['strategy']} | machine {r['machine']} | "
        f"seed {r['seed']}"),
        "",
        (f" {r['requests']:>16,} requests in {r['sim_seconds']:.4f} simulated s"
        f"   {r['throughput_rps']:,.1f} req/s"),
        _percentile_row("latency", lat, ("min", "mean", "p50", "p90", "p99", "p999", "max")),
        _percentile_row("service", srv, ("min", "p50", "p90", "p99", "p999", "max")),
        f" wait us          mean {r['wait_us']['mean']:.1f}",
        *_outcome_rows(r),
        "",
        f" {r['task_clock_ms']:>16,.2f} task-clock (msec)   "
        f"# {r['cpus_utilized']:.3f} CPUs utilized",
        f" {r['user_s']:>16,.6f} seconds user",
        f" {r['sys_s']:>16,.6f} seconds sys",
        f" {r['context_switches']:>16,} context-switches   # {r['context_switches'] / n:.3f} /req",
        f" {r['cpu_migrations']:>16,} cpu-migrations     # {r['cpu_migrations'] / n:.3f} /req",
        f" {r['cycles']:>16,.0f} cycles             # {r['ghz']:.3f} GHz",
        f" {r['instructions']:>16,.0f} instructions       # {r['ipc']:.2f} insn per cycle",
        f" {r['l1d_loads']:>16,.0f} L1-dcache-loads",
        f" {r['l1d_misses']:>16,.0f} L1-dcache-misses",
        f" {r['llc_loads']:>16,.0f} LLC-loads          # {r['llc_loads'] / n:.1f} /req",
        f" {r['llc_misses']:>16,.0f} LLC-misses",
        f" {r.get('llc_stores', 0.0):>16,.0f} LLC-stores         "
        f"# {r.get('llc_stores', 0.0) / n:.1f} /req",
        f" {r.get('llc_store_misses', 0.0):>16,.0f} LLC-store-misses",
        f" {r['joules']:>16,.3f} Joules             # {r['joules_per_request'] * 1e6:.2f} uJ/req",
    ]
    if r.get("makespan_s") is not None:
        lines.append(f" {r['makespan_s']:>16.6f} makespan (s)")
    lines.append("")
    lines.append(" where a request's time went (mean us): " + ", ".join(
        f"{k} {v:.2f}" for k, v in r["breakdown_us"].items()))
    for w in r.get("warnings", []):
        lines.append(f" warning: {w}")
    if "ci95" in r:
        lo, hi = r["ci95"]["throughput_rps"]
        lines.append(f" {r['replications']} replications; throughput 95% CI [{lo:,.1f}, {hi:,.1f}]")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
