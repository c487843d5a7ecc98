"""warmcore's public API: scenarios in, typed results out.

    import warmcore
    sc = warmcore.Scenario.load("pipeline")
    r = warmcore.simulate(sc, requests=5000)
    rows = warmcore.compare(sc, ["pc", "pec", "epc"], requests=5000)
    warmcore.frame(rows)                   # a pandas DataFrame, one row per run
    warmcore.parameters(sc)                # every settable path, typed, with its range

The CLI, sweeps, calibration and the explorer all go through these calls.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from warmcore import build
from warmcore.comparison import with_strategy
from warmcore.registry import get_strategy
from warmcore.result import Result
from warmcore.simcore.config import ConfigError, Scenario, files_named

ScenarioLike = Scenario | str | Path | dict


def as_scenario(scenario: ScenarioLike) -> Scenario:
    """A Scenario from a Scenario, a built-in name, a TOML path or a dict."""
    return scenario if isinstance(scenario, Scenario) else Scenario.load(scenario)


def check(scenario: ScenarioLike, *, uploads: Collection[str] | None = None) -> Scenario:
    """Everything a run validates short of running it: the scenario, the machine it
    builds (preset with its overrides, governor and its tunables) and the strategy's
    tunables. ConfigError naming the field otherwise; the scenario if all is well.

    Files a run reads (a trace) are read when it runs. ``uploads``: the names of the
    files that came with the scenario (the explorer): then a field naming any other
    file is refused here, before anything reads it, since it would be a file of the
    machine that serves the page (docs/explorer.md, Security)."""
    from warmcore.params import parameters

    sc = as_scenario(scenario)
    if uploads is not None:
        refuse_server_files(sc, uploads)
    build.build_machine(sc)
    parameters(sc)                       # the strategy's tunables, validated
    build.check_compared(sc)
    return sc


def refuse_server_files(sc: Scenario, uploads: Collection[str]) -> None:
    """ConfigError for the first field of ``sc`` that names a file other than one of
    ``uploads`` (bare file names)."""
    for path, value in files_named(sc):
        if value not in uploads:
            raise ConfigError(path, "names a file on the machine that serves the explorer; "
                                    "upload the file together with the scenario and name it "
                                    "by its file name")


def simulate(scenario: ScenarioLike, seed: int | None = None, requests: int | None = None,
             duration: float | None = None, max_wall: float | None = None,
             should_stop: Callable[[float], bool] | None = None) -> Result:
    """Run a scenario (all its replications) and return its result.

    ``seed`` replaces the scenario's seed; ``requests`` or ``duration`` (simulated
    seconds) replace its run length. The same scenario and seed give the same
    result bit for bit. ``max_wall`` bounds the call's wall-clock seconds: past it
    the run ends early and the result has ``partial=True`` (and a warning).
    ``should_stop(fraction_done)`` is called about every 50 ms of wall time with the
    fraction of the run done (0..1, for a progress bar); returning True ends the run
    there the same way, with ``stop_reason == "stopped"``. Neither changes a run that
    they do not end: its result is the same bit for bit."""
    sc = as_scenario(scenario)
    if requests is not None or duration is not None:
        sc = sc.with_(requests=requests, duration_s=duration)
    return Result.from_dict(build.simulate(sc, seed, max_wall=max_wall,
                                           should_stop=should_stop))


def compare(scenario: ScenarioLike, strategies: Iterable[str],
            loads: Iterable[float] | None = None, seed: int | None = None,
            requests: int | None = None, duration: float | None = None,
            progress: Callable[[Result], None] | None = None,
            max_wall: float | None = None,
            should_stop: Callable[[float], bool] | None = None,
            keep_params: Iterable[str] = ()) -> list[Result]:
    """One result per strategy (and per offered load, if given), in that order.

    A strategy other than the scenario's runs with its default tunables, except
    those named in ``keep_params`` (the scenario's values of them carried over;
    ``warmcore compare`` passes the ``--set strategy.params.NAME`` given to it): a
    strategy that has no such tunable is a ConfigError naming it.

    Every run uses the same seed, so all strategies see the same arrivals and
    service demands (common random numbers). A load sets the open-loop rate, the
    closed-loop clients, the saturating connections or the batch jobs
    (``warmcore.comparison.load_field``). ``max_wall`` bounds each run's wall-clock
    seconds, as in ``simulate``. ``should_stop(fraction_done)`` as in ``simulate``,
    the fraction of all the runs done; a run it stops is the last one returned."""
    sc = as_scenario(scenario)
    if requests is not None or duration is not None:
        sc = sc.with_(requests=requests, duration_s=duration)
    keep = list(keep_params)
    results = []
    load_list = list(loads) if loads is not None else [None]
    # every run's scenario is built (validated) before the first runs: a bad one is
    # reported at once, not after the others have spent their time
    jobs = [(load, with_strategy(sc, name, load, keep))
            for name in strategies for load in load_list]
    for _load, run_sc in jobs:
        get_strategy(run_sc.strategy.name).validate_params(dict(run_sc.strategy.params),
                                                          run_sc.strategy.shared_params)
    for i, (load, run_sc) in enumerate(jobs):
        ask = None if should_stop is None else \
            (lambda f, i=i: should_stop((i + f) / len(jobs)))
        r = simulate(run_sc, seed=seed, max_wall=max_wall, should_stop=ask)
        if load is not None:
            r = r.model_copy(update={"load": load})
            r.model_fields_set.add("load")
        results.append(r)
        if progress:
            progress(r)
        if r.stop_reason == "stopped":
            break
    return results


def frame(results: Iterable[Result], per_request: bool = False):
    """A pandas DataFrame, one row per result: every figure flattened
    (``latency_us.p99``...), or with ``per_request`` the comparison table's columns."""
    import pandas as pd

    results = list(results)
    if per_request:
        return pd.DataFrame([r.per_request() for r in results])
    return pd.DataFrame([r.to_series() for r in results]).reset_index(drop=True)
