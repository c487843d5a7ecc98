"""The ``warmcore`` command with calibration's commands: the console script's entry
point. Calibration sits above the orchestration (docs/architecture.md), so it
extends ``warmcore.cli``'s parser rather than being imported by it:

    warmcore perf-parse FILE [--json]
    warmcore calibrate SPEC.toml --out PARAMS.toml [--json] [--report report.html]
                       [--workers N] [--scheduler tcp://HOST:PORT]
    warmcore predict SCENARIO --params PARAMS.toml [--strategy NAME] [--set ...] [--json]
    warmcore run|compare ... --params PARAMS.toml      # the fitted values applied
"""

from __future__ import annotations

import json
import sys

from warmcore import cli as base
from warmcore.calibration.perfstat import PerfStat, PerfStatError, load_perf_stat, short_text
from warmcore.simcore.config import Scenario


def build_parser():
    p = base.build_parser()
    sub = p.subcommands
    for name in ("run", "compare", "sweep"):
        sub.choices[name].add_argument(
            "--params", metavar="PARAMS.toml",
            help="apply a calibration's fitted values (warmcore calibrate) before --set")
    pp = sub.add_parser("perf-parse", help="show what warmcore reads from a perf stat file")
    pp.add_argument("file")
    pp.add_argument("--json", action="store_true")
    cal = sub.add_parser("calibrate", help="fit parameters to measurements "
                         "(docs/calibration.md)")
    cal.add_argument("spec", help="calibration spec (TOML)")
    cal.add_argument("--out", required=True, metavar="PARAMS.toml")
    cal.add_argument("--json", action="store_true")
    cal.add_argument("--report", metavar="report.html")
    cal.add_argument("--workers", type=int)
    cal.add_argument("--scheduler")
    pr = sub.add_parser("predict", help="a scenario at fitted values, with 95%% intervals")
    base._scenario_args(pr)
    pr.add_argument("--params", required=True, metavar="PARAMS.toml")
    pr.add_argument("--strategy")
    pr.add_argument("--draws", type=int, default=8,
                    help="parameter draws from the fit's covariance (default 8)")
    return p


def _params_hook(sc: Scenario, args) -> Scenario:
    if not getattr(args, "params", None):
        return sc
    from warmcore.calibration.params import apply_params, load_params

    return apply_params(sc, load_params(args.params))   # then the command line's --set


def _sweep_params_hook(spec, args):
    """A sweep of a calibrated model: the fitted values go first in the spec's ``set``
    (so the spec's own settings still win), and into its digest."""
    if not getattr(args, "params", None):
        return spec
    from warmcore.calibration.params import check_against, load_params
    from warmcore.sweeps import base_scenario, check_axes

    values = check_against(base_scenario(spec), load_params(args.params))
    fitted = [f"{k}={v!r}" for k, v in values.items()]
    spec = spec.model_copy(update={"set": [*fitted, *spec.set]})
    check_axes(spec)
    return spec


def cmd_perf_parse(args) -> int:
    return perf_parse(args.file, as_json=args.json)


def cmd_calibrate(args) -> int:
    from warmcore.calibration.fit import Calibrator, CalibrationSpec
    from warmcore.calibration.params import write_params

    from warmcore.executor import check_scheduler, check_workers
    from warmcore.simcore.config import check_output_file

    spec = CalibrationSpec.load(args.spec)
    # Everything the fit's end needs is checked before it starts: a fit of a hundred
    # simulations never runs to fail at writing its result.
    check_output_file(args.out, "--out")
    if args.report is not None:
        check_output_file(args.report, "--report")
    check_workers(args.workers)
    if args.scheduler:
        check_scheduler(args.scheduler)
    for m in spec.measurement:
        note = m.perf_note(spec.base_dir)
        if note:
            print(f" note: {m.name}: {note}", file=sys.stderr)
    progress = None if args.json else (
        lambda n: print(f"  evaluation {n}", file=sys.stderr) if n % 10 == 0 else None)
    cal = Calibrator(spec, workers=args.workers, scheduler=args.scheduler,
                     progress=progress).fit()
    write_params(cal, args.out)
    if args.report:
        from warmcore.calibration.report import write_report

        write_report(cal, args.report)
    if args.json:
        print(json.dumps(cal.to_dict()))
        return 0
    print(format_calibration(cal))
    print(f" -> {args.out}")
    return 0


def format_calibration(cal) -> str:
    lines = [f" {cal.evaluations} simulations; condition number {cal.condition_number:.3g}",
             "", f" {'parameter':34s} {'fitted':>12s}   95% interval"]
    for path, v in cal.values.items():
        lo, hi = cal.ci95[path]
        lines.append(f" {path:34s} {v:12.4g}   [{lo:.4g}, {hi:.4g}]")
    lines += ["", f" {'figure':44s} {'measured':>12s} {'fitted':>12s} {'sigmas':>7s}"]
    for f in cal.figures:
        lines.append(f" {f['figure']:44s} {f['measured']:12.5g} {f['fitted']:12.5g} "
                     f"{f['residual_sigmas']:+7.2f}")
    lines += [f" warning: {w}" for w in cal.warnings]
    lines += [f" note: {n}" for n in cal.notes]
    return "\n".join(lines)


def cmd_predict(args) -> int:
    from warmcore.calibration.fit import predict
    from warmcore.calibration.params import load_params

    from warmcore.calibration.fit import MAX_DRAWS

    if not 0 <= args.draws <= MAX_DRAWS:            # each draw is one simulation
        raise base.UsageError(f"--draws: from 0 to {MAX_DRAWS:,} (got {args.draws})")
    params = load_params(args.params)
    base._load(args)                                # the scenario and flags validate
    out = predict(params, args.scenario, strategy=args.strategy, sets=args.sets,
                  draws=args.draws, requests=args.requests or 3000,
                  max_wall=args.max_wall)
    if args.json:
        print(json.dumps(out))
        return 0
    print(base.format_result(out))
    for k, (lo, hi) in out.get("interval95", {}).items():
        print(f" {k:34s} 95% [{lo:.6g}, {hi:.6g}]")
    return 0


# -- perf-parse's output -------------------------------------------------------------------

def _fmt_value(value: float | None, status: str) -> str:
    if value is None:
        return f"<{status}>"
    if value == int(value):
        return f"{value:,.0f}"
    return f"{value:,.6f}".rstrip("0")


def _fmt_counter_rows(stat: PerfStat) -> list[str]:
    head = f"  {'event':28s} {'value':>20s} {'unit':5s} {'coverage':>8s} {'+-':>7s}  " \
           f"{'status':13s} derived"
    rows = [head]
    for key, c in stat.counters.items():
        var = f"{c.variance_pct:.2f}%" if c.variance_pct is not None else "-"
        derived = "; ".join(f"{m.value:g} {m.unit}" for m in c.metrics if m.value is not None)
        rows.append(f"  {key:28s} {_fmt_value(c.value, c.status):>20s} {c.unit:5s} "
                    f"{c.coverage:>8.2%} {var:>7s}  {c.status:13s} {derived}".rstrip())
        rows += [f"      {p.id:24s} {_fmt_value(p.value, p.status):>20s} {'':5s} "
                 f"{p.coverage:>8.2%}" for p in c.parts]
    return rows


_FORMATS = {"human-old": "human, multiplexing in brackets (perf 3.x)",
            "human": "human", "json": "JSON lines (-j)"}


def _fmt_header(stat: PerfStat) -> list[str]:
    fmt = _FORMATS.get(stat.format) or (
        f"CSV (-x{stat.separator!r}{', decimal comma' if stat.decimal_comma else ''})")
    lines = [f"{stat.source}: perf stat, {fmt}"]
    if stat.target:
        runs = f" ({stat.runs} runs)" if stat.runs else ""
        lines.append(f"  counters of {stat.target}{runs}")
    return lines


def _fmt_footer(stat: PerfStat) -> list[str]:
    lines = []
    times = [f"{label} {v:.6f} s" for label, v in
             (("elapsed", stat.elapsed_s), ("user", stat.user_s), ("sys", stat.sys_s))
             if v is not None]
    if times:
        lines.append("  " + ", ".join(times))
    if stat.intervals:
        ts = sorted({s.time_s for s in stat.intervals})
        lines.append(f"  interval mode: {len(ts)} intervals, {ts[0]:g} s to {ts[-1]:g} s "
                     f"({len(stat.intervals)} readings; the values above are their sums)")
    lines += [f"  metric {m.group + ': ' if m.group else ''}{m.value:g} {m.unit}"
              for m in stat.metrics if m.value is not None]
    lines.append(f"  {len(stat.comments)} comment/hint lines; "
                 f"{len(stat.problems)} line{'' if len(stat.problems) == 1 else 's'} not read"
                 + (":" if stat.problems else ""))
    lines += [f"    line {p.line}: {p.reason}: {short_text(p.text.strip(), 120)}"
              for p in stat.problems]
    return lines


def format_perf_stat(stat: PerfStat) -> str:
    """What perf-parse prints: the counters read, with coverage, variance and status."""
    return "\n".join(_fmt_header(stat) + _fmt_counter_rows(stat) + _fmt_footer(stat))


def _no_counters(path: str, stat: PerfStat) -> str:
    if stat.problems:
        p = stat.problems[0]
        more = f" (and {len(stat.problems) - 1} more lines)" if len(stat.problems) > 1 else ""
        return f"{path}:{p.line}: no perf stat counters read; {p.reason}{more}"
    return f"{path}:1: no perf stat counters in the file" + (
        "" if stat.comments else " (it is empty)")


def perf_parse(path: str, *, as_json: bool = False) -> int:
    """``warmcore perf-parse``: 0 if counters were read, 2 (one line on stderr) if not."""
    try:
        stat = load_perf_stat(path)
    except PerfStatError as e:
        print(f"warmcore: error: {e}", file=sys.stderr)
        return 2
    if not stat.counters:
        print(f"warmcore: error: {_no_counters(path, stat)}", file=sys.stderr)
        return 2
    print(json.dumps(stat.to_dict(), indent=2, allow_nan=False) if as_json
          else format_perf_stat(stat))
    return 0


def main(argv: list[str] | None = None) -> int:
    base.COMMANDS.update({"perf-parse": cmd_perf_parse, "calibrate": cmd_calibrate,
                          "predict": cmd_predict})
    if _params_hook not in base.SCENARIO_HOOKS:
        base.SCENARIO_HOOKS.append(_params_hook)
    if _sweep_params_hook not in base.SPEC_HOOKS:
        base.SPEC_HOOKS.append(_sweep_params_hook)
    return base.main(argv, parser=build_parser())


if __name__ == "__main__":
    sys.exit(main())
