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
    if not getattr(args, "params", None) or args.cmd == "predict":
        return sc
    from warmcore.calibration.params import apply_params, load_params

    fitted = apply_params(sc, load_params(args.params))
    return Scenario.load(fitted, args.sets)        # the command line's --set still wins


def _sweep_params_hook(spec, args):
    """A sweep of a calibrated model: the fitted values go first in the spec's ``set``
    (so the spec's own settings still win), and into its digest."""
    if not getattr(args, "params", None):
        return spec
    from warmcore.calibration.params import load_params
    from warmcore.sweeps import check_axes

    values = load_params(args.params)["values"]
    fitted = [f"{k}={v!r}" for k, v in values.items()]
    spec = spec.model_copy(update={"set": [*fitted, *spec.set]})
    check_axes(spec)
    return spec


def cmd_perf_parse(args) -> int:
    from warmcore.calibration.perfstat import load_perf_stat

    ps = load_perf_stat(args.file)
    if not ps.counters:
        where = f":{ps.problems[0][0]}" if ps.problems else ""
        why = ps.problems[0][2] if ps.problems else "empty"
        raise base.UsageError(f"{args.file}{where}: no perf stat counters read ({why})")
    if args.json:
        print(json.dumps(ps.to_dict()))
        return 0
    print(f" {args.file}: {ps.format} format, {len(ps.counters)} rows"
          + (f", command {ps.command}" if ps.command else ""))
    print(f" {'event':32s} {'total':>20s} {'unit':6s} {'coverage':>8s} {'+-':>6s}  status")
    for e in ps.events():
        rows = [c for c in ps.counters if c.event == e]
        tot = ps.total(e)
        var = rows[0].variance_pct
        print(f" {e:32s} {('-' if tot is None else f'{tot:,.2f}'):>20s} {rows[0].unit:6s} "
              f"{ps.coverage(e) * 100:7.2f}% {('' if var is None else f'{var:.2f}%'):>6s}  "
              f"{rows[0].status}")
    for key in ("elapsed_s", "user_s", "sys_s"):
        if getattr(ps, key) is not None:
            print(f" {key:32s} {getattr(ps, key):>20,.6f}")
    for n, text, why in ps.problems:
        print(f" line {n}: {why}: {text}")
    return 0


def cmd_calibrate(args) -> int:
    from warmcore.calibration.fit import Calibrator, CalibrationSpec
    from warmcore.calibration.params import write_params

    spec = CalibrationSpec.load(args.spec)
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
    return "\n".join(lines)


def cmd_predict(args) -> int:
    from warmcore.calibration.fit import predict
    from warmcore.calibration.params import load_params

    params = load_params(args.params)
    if args.draws < 0:
        raise base.UsageError("--draws: must be 0 or more")
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
