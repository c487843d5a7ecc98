"""warmcore's what-if explorer: pick a machine and a workload, see how each strategy
behaves and why, change one thing and see what moved.

    warmcore explore                 # or: streamlit run app.py

A thin layer over the public API (``warmcore.Scenario``, ``warmcore.compare``,
``warmcore.parameters``, ``Result.per_request()``): the controls are generated from
the typed parameter space, so a new parameter appears here without touching this
file; no simulation logic lives here.
"""

from __future__ import annotations

import functools
import math

import streamlit as st

import warmcore
from warmcore.registry import strategies as all_strategies
from warmcore.simcore.config import changed_owners, files_named, resets, workload_kinds
# the job manager, the tables and charts: layer 4, tested without Streamlit
from warmcore import jobs, uploads
from warmcore.advice import doubts, verdict_text
from warmcore.explorer_charts import answer_charts, breakdown_chart, curve_charts, timeline_chart
from warmcore.explorer_data import (
    answer_curve_frame, answer_frame,
    comparison_deltas, comparison_frame, curve_deltas, curve_frame, curve_runs, curves_of,
    default_loads, interval_frame, knee_text, knees_of, overlaid_baseline, parse_loads,
    shows_baseline, stopped_note, styled, timeline_of, topology_text, why_not_overlaid)
from warmcore.explorer_setup import (
    DEFAULT_SCENARIO, DEFAULT_STRATEGIES, downloaded_toml, from_url, inline_toml,
    parse_list_control, to_url)
from warmcore.jobs import one_line

# The first view runs the built-in scenario at this many requests at most, so it
# appears within a few seconds; the run-length control raises it.
DEFAULT_REQUESTS = 3000
MAX_UPLOAD_BYTES = uploads.MAX_SCENARIO_BYTES
# The page waits this long for the comparison's runs (the script polls the worker
# thread, drawing progress, with a Stop button; any click ends the wait and the next
# script run finds the same runs going). Past it, a fragment keeps polling each second.
WAIT_S = 600.0

# Paths that have their own control above the generated ones, or none.
OWN_CONTROL = {"seed", "machine.preset", "machine.governor", "strategy.name", "workload.kind",
               "run.requests", "run.duration_s", "run.trace_events"}
# (path prefix, expander title), the most specific prefix first
SECTIONS = [("workload", "Workload"), ("work", "Work per request"),
            ("strategy.params", "Strategy tunables"),
            ("machine.governor_params", "Governor tunables"),
            ("machine.overrides", "Preset parameters (this machine's figures)"),
            ("machine", "Machine"), ("resources", "Resources (semaphores, pools)"),
            ("run", "Run"), ("", "Processes")]
SHOWN = ["Workload", "Work per request", "Strategy tunables", "Governor tunables", "Machine",
         "Preset parameters (this machine's figures)", "Resources (semaphores, pools)", "Run",
         "Processes"]


# -- runs (cached on the scenario's TOML) -----------------------------------------------

# Streamlit's cache around warmcore.jobs' run functions, keyed on the scenario's TOML
# and the run's arguments; ``_should_stop`` (underscored: not part of the key) is
# ``warmcore.simulate``'s progress and stop hook. A stopped run raises jobs.Stopped, so
# only complete runs are cached.

@st.cache_data(show_spinner=False, max_entries=256)
def run_one(scenario_toml: str, strategy: str, _should_stop=None) -> dict:
    return jobs.run_one(scenario_toml, strategy, _should_stop)


@st.cache_data(show_spinner=False, max_entries=1024)
def run_at_load(scenario_toml: str, strategy: str, load: float, _should_stop=None) -> dict:
    return jobs.run_at_load(scenario_toml, strategy, load, _should_stop)


@st.cache_data(show_spinner=False, max_entries=32)
def advise(scenario_toml: str, strategies: tuple, objective: str, _should_stop=None) -> dict:
    return jobs.advise(scenario_toml, strategies, objective, should_stop=_should_stop)


@st.cache_data(show_spinner=False, max_entries=64)
def run_traced(scenario_toml: str, strategy: str, events: int, _should_stop=None) -> dict:
    return jobs.run_traced(scenario_toml, strategy, events, _should_stop)


def job_for(slot: str, key, tasks) -> jobs.Job:
    """The session's job in ``slot`` for ``key`` (jobs.job_for on the session)."""
    return jobs.job_for(st.session_state, slot, key, tasks)


def follow(job: jobs.Job, stop_key: str) -> bool:
    """Wait for ``job``, drawing its progress with a Stop button, up to the page's
    wait; True once it has ended, False while it runs on (a fragment then polls and
    reruns the page)."""
    if job.wait(0.05):                   # cached runs: no flash of the progress bar
        return True
    slot = st.empty()
    box = slot.container(border=True)
    c1, c2 = box.columns([1, 5], vertical_alignment="center")
    if c1.button("Stop", key=stop_key, type="secondary",
                 help="stop the runs here and show what they measured so far"):
        job.stop.set()
    bar = c2.progress(*job.status())
    # a click ends this script run inside bar.progress (Streamlit's rerun)
    if not job.wait(st.session_state.get("wait_s", WAIT_S), progress=bar.progress):
        with box:
            watch_job(job)
        return False
    slot.empty()
    return True


HALT = object()      # ended(): nothing more to draw in this section now


def ended(slot: str, stop_key: str):
    """The session's job in ``slot`` (keyed on the setup's TOML first) once it has
    ended, taken out of the session; None if there is none, or if the setup it ran
    was replaced (it is stopped: its runs are not wanted any more); HALT while it
    runs (its progress and Stop drawn) or if it failed (its one line shown)."""
    job = jobs.job_of_setup(st.session_state, slot, st.session_state.toml)
    if job is None:
        return None
    if not follow(job, stop_key):
        return HALT
    st.session_state[slot] = None
    if job.error is not None:
        st.error(f"run failed: {uploads.as_shown(job.error_line)}")
        return HALT
    return job


def run_all(scenario_toml: str, names: list[str]) -> list[warmcore.Result] | None:
    """The comparison's results (those a stop left, if stopped); None while they run
    on past the page's wait."""
    runnable = uploads.runnable(scenario_toml, st.session_state.uploads)
    job = job_for("job", (scenario_toml, tuple(names)),
                  [(n, functools.partial(run_one, runnable, n)) for n in names])
    if not follow(job, "stop_run"):
        return None
    if job.error is not None:
        raise job.error
    return [warmcore.Result.from_dict(d) for d in job.results]


@st.fragment(run_every=1.0)
def watch_job(job: jobs.Job) -> None:
    """Progress of runs that outlast the page's wait; the page reruns when they end."""
    if not job.running:
        st.rerun()
    st.caption("Still running: " + job.status()[1])


# -- state --------------------------------------------------------------------------------

def builtin(name: str) -> warmcore.Scenario:
    sc = warmcore.Scenario.load(name)
    if sc.run.requests is not None and sc.run.requests > DEFAULT_REQUESTS or \
            sc.run.duration_s is not None:
        sc = sc.with_(requests=DEFAULT_REQUESTS)
    return sc


def set_setup(sc: warmcore.Scenario, names: list[str] | None = None) -> None:
    """Make ``sc`` the applied setup; the form's widgets start over from it. The
    strategies compared: ``names``, else the setup's own ``strategy.compare``, else the
    ones compared so far (the session's TOML leaves them out: the runs' cache is keyed
    on it, and choosing strategies does not change a run)."""
    names = names or sc.strategy.compare
    if sc.strategy.compare is not None:
        sc = sc.set("strategy.compare", None)
    st.session_state.toml = sc.to_toml()
    known = all_strategies()
    names = [n for n in (names or st.session_state.get("strategies") or []) if n in known]
    if sc.strategy.name not in names:
        names = [sc.strategy.name, *names]
    st.session_state.strategies = names
    st.session_state.gen = st.session_state.get("gen", 0) + 1


def init_state() -> None:
    if "toml" not in st.session_state:
        st.session_state.error = None
        st.session_state.upload_seen = ()
        st.session_state.baseline = None
        st.session_state.uploads = {}        # files uploaded with the scenario: name -> bytes
        try:
            name, sets, names = from_url(st.query_params.get("scenario"),
                                         st.query_params.get_all("set"),
                                         st.query_params.get("strategies"))
        except (warmcore.ConfigError, ValueError) as e:
            st.session_state.error = f"link: {one_line(e)}"
            name, sets, names = DEFAULT_SCENARIO, [], list(DEFAULT_STRATEGIES)
        set_setup(builtin(name).edit(sets) if sets else builtin(name), names)
        st.session_state.base = name


def shortened_note(sc: warmcore.Scenario) -> str:
    """Says so when the view runs a built-in scenario for fewer requests than the
    scenario itself does (builtin() shortens the first view to DEFAULT_REQUESTS): on a
    scenario whose clients all start at once (ewyk-2015's 2000 client threads) a short
    run measures the start, not what the scenario is about."""
    base = st.session_state.base
    if not base or st.session_state.uploads:
        return ""
    own = warmcore.Scenario.load(base).run.requests
    if own is None or sc.run.requests is None or sc.run.requests >= own:
        return ""
    return (f"  \nshorter than the scenario's own {own:,} requests, for a quick first "
            f"view: set Requests to {own:,} for the figures its docs give")


def changed_note(sc: warmcore.Scenario) -> str:
    """What the setup has changed from its built-in scenario, for the header (whose
    description is the built-in's)."""
    base = st.session_state.base
    q = to_url(sc, base, [], builtin) if base and not st.session_state.uploads else None
    changed = [s.split("=", 1)[0] for s in (q or {}).get("set", [])
               if not s.startswith("run.requests=")]
    if not changed:
        return ""
    more = f" and {len(changed) - 6} more" if len(changed) > 6 else ""
    return f"  \nchanged from the built-in: {', '.join(f'`{c}`' for c in changed[:6])}{more}"


def setup_toml() -> str:
    """The setup as it downloads: with the strategies compared."""
    return downloaded_toml(st.session_state.toml, st.session_state.strategies)


def share_link(sc: warmcore.Scenario) -> None:
    """Keep the page's address in step with the setup, so a reload or a copied link
    shows the same view."""
    if st.session_state.uploads or not st.session_state.base:
        st.query_params.clear()
        return
    q = to_url(sc, st.session_state.base, st.session_state.strategies, builtin)
    if q is None:
        st.query_params.clear()
        return
    st.query_params.from_dict({k: v for k, v in q.items() if v})


# -- the sidebar ---------------------------------------------------------------------------

def control(p, key: str):
    """A widget for one parameter of the typed space; returns its value (None: unset)."""
    # under Processes the process names the knob (server.threads, producer.threads)
    name = p.path if section_of(p.path) == "Processes" else p.path.rsplit(".", 1)[-1]
    label = name + (f" ({p.unit})" if p.unit else "")
    bits = [p.source] if p.source else []
    rng = [f"{w} {b:g}" for w, b in ((">=", p.ge), (">", p.gt), ("<=", p.le), ("<", p.lt))
           if b is not None]
    if rng:
        bits.append("range " + ", ".join(rng))
    if p.choices:
        bits.append("one of " + ", ".join(map(str, p.choices)))
    if p.optional:
        bits.append("empty: the preset's or the code's default"
                    + (f" ({p.default})" if p.default is not None else ""))
    help_ = "`" + p.path + "`  \n" + "  \n".join(bits)
    if p.type == "choice":
        opts = list(p.choices) + ([None] if p.optional else [])
        return st.selectbox(label, opts, index=opts.index(p.value), key=key, help=help_,
                            format_func=lambda v: "(default)" if v is None else str(v))
    if p.type == "bool":
        if p.optional:
            opts = [None, True, False]
            return st.selectbox(label, opts, index=opts.index(p.value), key=key, help=help_,
                                format_func=lambda v: "(default)" if v is None else str(v))
        return st.checkbox(label, value=bool(p.value), key=key, help=help_)
    if p.type in ("int", "float"):
        lo = p.ge if p.ge is not None else None
        hi = p.le if p.le is not None else None
        if p.type == "int":
            lo = int(math.floor(p.gt) + 1) if p.gt is not None and lo is None else lo
            hi = int(math.ceil(p.lt) - 1) if p.lt is not None and hi is None else hi
            return st.number_input(label, value=p.value, step=1, key=key, help=help_,
                                   min_value=None if lo is None else int(lo),
                                   max_value=None if hi is None else int(hi))
        value = None if p.value is None else float(p.value)
        return st.number_input(label, value=value, key=key, help=help_, format="%g",
                               min_value=None if lo is None else float(lo),
                               max_value=None if hi is None else float(hi))
    if p.type in LIST_TYPES:
        example = "[0, 1]" if p.type == "int+list" else "[1.0, 2.0]"
        return st.text_input(label + " (TOML)", value=inline_toml(p.value), key=key,
                             help=help_ + f"  \na TOML value, e.g. `{example}`"
                             + ("; empty: unset" if p.optional else ""))
    return None      # tables, free text: through an uploaded TOML


LIST_TYPES = ("list", "int+list")       # a text input, its value written as TOML
CONTROL_TYPES = ("int", "float", "bool", "choice", *LIST_TYPES)


def section_of(path: str) -> str:
    for prefix, title in SECTIONS:
        if prefix and (path == prefix or path.startswith(prefix + ".")):
            return title
    return "Processes"


def sidebar(sc: warmcore.Scenario) -> None:
    from warmcore.models.presets import PRESETS
    from warmcore.models.dvfs import GOVERNORS

    gen = st.session_state.gen
    sb = st.sidebar
    sb.header("Setup")
    from warmcore.simcore.config import builtin_names

    names = builtin_names()
    base = sb.selectbox("Start from a built-in scenario", names,
                        index=names.index(st.session_state.base)
                        if st.session_state.base in names else None, key=f"base{gen}",
                        placeholder="(an uploaded scenario)")
    if base is not None and base != st.session_state.base:
        st.session_state.base = base
        st.session_state.error = None
        st.session_state.uploads = {}
        set_setup(builtin(base))
        st.rerun()
    upload = sb.file_uploader(
        f"...or upload a scenario TOML (with the files it names, such as a trace of arrival "
        f"times), or a calibration's PARAMS.toml (a TOML at most {MAX_UPLOAD_BYTES // 1024} KiB, "
        f"a file at most {uploads.MAX_FILE_BYTES // 1024} KiB)",
        type=["toml", "txt", "csv", "tsv", "dat"], accept_multiple_files=True, key="upload")
    seen = tuple(f.file_id for f in upload or ())
    if seen != st.session_state.upload_seen:
        st.session_state.upload_seen = seen
        if st.session_state.error is not None and \
                st.session_state.error == st.session_state.get("upload_error"):
            st.session_state.error = None     # about files now removed or replaced
        if seen:
            handle_upload([(f.name, f.getvalue()) for f in upload])
        st.session_state.upload_error = st.session_state.error if seen else None
        st.rerun()
    fitted = st.session_state.get("fitted")
    if fitted:
        sb.info(f"fitted values from {fitted['name']}: " + ", ".join(
            f"{k} = {v:.4g}" for k, v in fitted["values"].items()))

    params = warmcore.parameters(sc)
    with sb.form("setup"):
        presets = sorted(PRESETS)
        preset = st.selectbox("CPU preset", presets, index=presets.index(sc.machine.preset),
                              key=f"preset{gen}", help=PRESETS[sc.machine.preset].description)
        st.markdown(topology_text(params))    # every row, values wrapped: not cut off
        govs = [None, *sorted(GOVERNORS)]
        governor = st.selectbox("Governor", govs, index=govs.index(sc.machine.governor)
                                if sc.machine.governor in govs else 0, key=f"gov{gen}",
                                format_func=lambda v: "(the preset's default)" if v is None
                                else v)
        known = list(all_strategies())
        chosen = st.multiselect("Strategies to compare", known,
                                default=st.session_state.strategies, key=f"strategies{gen}")
        st.caption("  \n".join(f"**{n}**: {all_strategies()[n].summary.split(': ', 1)[-1]}"
                                for n in chosen) + "  \nEach one's source and model: "
                   "docs/strategies.md in the repository")
        main = st.selectbox("Scenario's own strategy (its tunables below)", known,
                            index=known.index(sc.strategy.name), key=f"main{gen}")
        c1, c2 = st.columns(2)
        seed = c1.number_input("Seed", min_value=0, value=sc.seed, step=1, key=f"seed{gen}")
        requests = c2.number_input("Requests", min_value=1, step=1000, key=f"req{gen}",
                                   value=sc.run.requests or DEFAULT_REQUESTS,
                                   help="measured requests (after warm-up) per strategy")
        kinds = workload_kinds()
        kind = st.selectbox("Workload kind", kinds, index=kinds.index(sc.workload.kind),
                            key=f"kind{gen}",
                            help="another kind keeps the service demand and takes the "
                                 "kind's own defaults (docs/formats.md); its controls "
                                 "appear after Apply")
        values = {}
        groups: dict[str, list] = {}
        for p in params:
            if p.path in OWN_CONTROL or p.type not in CONTROL_TYPES:
                continue
            groups.setdefault(section_of(p.path), []).append(p)
        for title in SHOWN:
            if title not in groups:
                continue
            with st.expander(title, expanded=title == "Workload"):
                for p in groups[title]:
                    values[p.path] = (p, control(p, f"p{gen}:{p.path}"))
        applied = st.form_submit_button("Apply", type="primary", width="stretch")
    if applied:
        apply(sc, values, preset=preset, governor=governor, chosen=chosen, main=main,
              seed=int(seed), requests=int(requests), kind=kind)


def apply(sc, values, *, preset, governor, chosen, main, seed, requests, kind=None) -> None:
    """The form's values as a new scenario, through the edit path the command line and
    the API use (``Scenario.edit``: another preset, governor, strategy or workload kind
    resets what belongs to it); a bad value shows one line, setup kept."""
    owners = {"machine.preset": preset, "machine.governor": governor, "strategy.name": main,
              "workload.kind": sc.workload.kind if kind is None else kind}
    changed = changed_owners(sc, owners)
    changes = {k: owners[k] for k in changed}
    for path, (p, v) in values.items():
        if resets(changed, path):           # drawn for the old preset, strategy or kind
            continue
        if p.type in LIST_TYPES:             # text: unchanged, or parsed as TOML
            if v.strip() == inline_toml(p.value):
                continue
            try:
                v = parse_list_control(p, v)
            except ValueError as e:
                st.session_state.error = str(e)
                return
            if isinstance(p.value, (list, tuple)) and isinstance(v, list) and \
                    v == list(p.value):
                continue
        if v != p.value:
            changes[path] = v
    if not chosen:
        st.session_state.error = "strategies: pick at least one strategy to compare"
        return
    try:
        new = sc.edit(changes, seed=seed, requests=requests)
        warmcore.check(new, uploads=st.session_state.uploads)   # machine, tunables, files
    except (warmcore.ConfigError, ValueError, KeyError) as e:
        st.session_state.error = one_line(e)
        return
    st.session_state.error = None
    st.session_state.toml = new.to_toml()
    st.session_state.strategies = list(chosen)
    if [p.path for p in warmcore.parameters(new)] != [p.path for p in warmcore.parameters(sc)]:
        st.session_state.gen += 1        # other controls (kind, strategy, machine): the
        st.rerun()                       # form starts over from the new setup


def handle_upload(files: list[tuple[str, bytes]]) -> None:
    """Uploaded files: one scenario TOML (or a PARAMS.toml) and the files it names. Too
    large, not UTF-8, invalid, or naming a file not uploaded with it -> one line, setup
    kept (docs/explorer.md, Security)."""
    tomls = [(n, d) for n, d in files if n.lower().endswith(".toml")]
    if len(tomls) != 1:
        st.session_state.error = ("upload: one scenario TOML (or PARAMS.toml) at a time, with "
                                  "the files it names (got "
                                  f"{len(tomls)} TOML files)")
        return
    name, data = tomls[0]
    if len(data) > MAX_UPLOAD_BYTES:
        st.session_state.error = (f"{name}: {len(data):,} bytes, more than the "
                                  f"{MAX_UPLOAD_BYTES:,} allowed")
        return
    if _is_params(data):
        handle_params(name, data)
        return
    attached = {n: d for n, d in files if (n, d) != (name, data)}
    try:
        for n, d in attached.items():
            uploads.store(n, d)               # its size and name checked
        sc = uploaded_scenario(data)           # UTF-8 (else the byte offset), valid TOML
        all_strategies()[sc.strategy.name]     # noqa: B018 (known strategy?)
        warmcore.check(sc, uploads=attached)   # its machine, tunables, no server file
    except KeyError:
        st.session_state.error = f"{name}: strategy.name: unknown strategy"
        return
    except warmcore.ConfigError as e:      # the strategy's tunables too (parameters)
        st.session_state.error = f"{name}: {e.field}: {e.reason}"
        return
    st.session_state.error = None
    st.session_state.base = None
    named = {v for _, v in files_named(sc)}
    st.session_state.uploads = {n: d for n, d in attached.items() if n in named}
    set_setup(sc)


def uploaded_scenario(data: bytes) -> warmcore.Scenario:
    """An uploaded scenario; without a [run] table (a run length), it runs as long as a
    built-in does here (DEFAULT_REQUESTS), as ``warmcore run FILE --requests N`` would,
    so that what else the file says is checked and shown."""
    from warmcore.simcore.config.files import scenario_dict_of_text

    d = scenario_dict_of_text(data)
    run = d.setdefault("run", {})
    if isinstance(run, dict) and "requests" not in run and "duration_s" not in run:
        run["requests"] = DEFAULT_REQUESTS
    return warmcore.Scenario.load(d)


def _is_params(data: bytes) -> bool:
    """A calibration's PARAMS.toml (warmcore calibrate --out), not a scenario."""
    return b"unit_cov" in data and b"[values]" in data


def handle_params(name: str, data: bytes) -> None:
    """An uploaded PARAMS.toml: its fitted values applied to the current setup (as
    ``warmcore run --params`` does); one line if they do not fit it, setup kept."""
    from warmcore.calibration.params import apply_params, check_params
    from warmcore.simcore.config import decode_utf8

    try:
        params = check_params(decode_utf8(data, "--params"), name)
        sc = warmcore.check(apply_params(warmcore.Scenario.from_toml(st.session_state.toml),
                                         params), uploads=st.session_state.uploads)
    except warmcore.ConfigError as e:
        st.session_state.error = f"{name}: {e.field}: {e.reason}"
        return
    st.session_state.error = None
    st.session_state.fitted = {"name": name, "values": params["values"]}
    set_setup(sc)


# -- the page -------------------------------------------------------------------------------

def load_curves(sc: warmcore.Scenario, names: list[str]) -> None:
    """Latency, CPUs and CPU per request against offered load, the knee marked."""
    from warmcore.comparison import load_field

    st.subheader("Load curves")
    try:
        field = load_field(sc)
    except warmcore.ConfigError as e:
        st.info(one_line(e))
        return
    with st.form("load_curves_form"):
        text = st.text_input(f"Offered loads (`workload.{field}`, comma-separated)",
                             value=default_loads(sc, st.session_state.get("shown_results", [])),
                             key=f"loads{st.session_state.gen}")
        go = st.form_submit_button("Compute load curves")
    curves = st.session_state.get("curves")
    base = st.session_state.baseline
    if go:
        try:
            loads = parse_loads(text, field)
        except ValueError as e:
            st.error(str(e))
            return
        start_curves(field, names, loads, overlaid_baseline(base, st.session_state.toml, field))
    job = ended("curves_job", "stop_curves")
    if job is HALT:
        return
    if job is not None:
        curves = st.session_state.curves = curves_of(job, st.session_state.curves_meta)
    if not curves or curves["toml"] != st.session_state.toml:
        st.caption("Each strategy at each offered load, same seed; runs are cached. With a "
                   "pinned baseline, its curves are computed too and overlaid (dashed).")
        return
    if curves.get("stopped"):
        st.warning(f"Stopped: load curves from {curves['stopped']}; compute them again "
                   "for the rest (the runs done are cached).")
    if curves["rows"]:
        draw_curves(curves, base)


def start_curves(field: str, names: list[str], loads: list, base_toml: str | None) -> None:
    """The load curves' job: each strategy at each load, and the pinned baseline's
    setup at the same loads (cached runs, so a baseline computed before is free)."""
    toml = st.session_state.toml
    runs = curve_runs(toml, base_toml, names, loads)
    base = st.session_state.baseline or {}
    job_for("curves_job", (toml, base_toml, tuple(names), tuple(loads)),
            [(r.label, functools.partial(
                run_at_load, uploads.runnable(r.toml, base.get("uploads", {}) if r.baseline
                                              else st.session_state.uploads),
                r.strategy, r.load))
             for r in runs])
    st.session_state.curves_meta = {"toml": toml, "field": field, "base_toml": base_toml,
                                    "baseline": [r.baseline for r in runs]}


def draw_curves(curves: dict, base: dict | None) -> None:
    """The three curve charts, the knees, and the change against the pinned baseline."""
    with_base = shows_baseline(curves, base)
    knees = knees_of(curves, with_base)
    for column, chart in zip(st.columns(3), curve_charts(curve_frame(curves, with_base), knees,
                                                         curves["field"]), strict=True):
        column.altair_chart(chart, width="stretch")
    st.caption("Knee (dotted): the last load before p99 latency doubles from the lightest "
               "load or throughput falls below 95% of the offered rate. "
               + knee_text(knees, "now")
               + (f"  \nBaseline (dashed lines, faint knees): {knee_text(knees, 'baseline')}"
                  if with_base else ""))
    if with_base:
        st.markdown("**Load curves: change against the pinned baseline** (now minus "
                    "baseline, same loads)")
        st.dataframe(curve_deltas(curves["rows"], curves["base_rows"], knees),
                     width="stretch")
    elif base is not None:
        why = why_not_overlaid(base["toml"], st.session_state.toml, curves["field"])
        st.caption(f"The pinned baseline's curves are not overlaid: {why}.")


def timeline(names: list[str]) -> None:
    """Which thread ran where over the run's last kernel events, per CPU; the same
    window as a Chrome trace-event file."""
    st.subheader("Timeline: which thread ran on which CPU")
    with st.form("timeline_form"):
        c1, c2 = st.columns(2)
        who = c1.selectbox("Strategy", names, key=f"tl_strategy{st.session_state.gen}")
        events = c2.number_input("Kernel events (the run's last)", min_value=50,
                                 max_value=20_000, value=600, step=100,
                                 key=f"tl_events{st.session_state.gen}",
                                 help="`run.trace_events`: the window ends with the run")
        go = st.form_submit_button("Show timeline")
    shown = st.session_state.get("timeline")
    if go:
        job_for("timeline_job", (st.session_state.toml, who, int(events)),
                [(f"{who} with its trace",
                  functools.partial(run_traced, uploads.runnable(
                      st.session_state.toml, st.session_state.uploads), who, int(events)))])
    job = ended("timeline_job", "stop_timeline")
    if job is HALT:
        return
    if job is not None:
        if not job.results:              # stopped before its run began
            st.session_state.timeline = None
            st.warning("Stopped before the run began: no timeline.")
            return
        shown = st.session_state.timeline = {"toml": st.session_state.toml,
                                             "result": job.results[0],
                                             "stopped": job.stopped}
    if not shown or shown["toml"] != st.session_state.toml:
        st.caption("One more run of the chosen strategy with its kernel trace kept.")
        return
    draw_timeline(warmcore.Result.from_dict(shown["result"]), shown.get("stopped"))


def draw_timeline(r: warmcore.Result, stopped: bool) -> None:
    """The traced run's Gantt chart per CPU, its caption and the trace's download."""
    import json

    from warmcore.trace import chrome_trace

    if stopped:
        st.warning(f"Stopped: the timeline ends where the run was stopped, after "
                   f"{r.requests:,} measured requests (the window is the kernel events "
                   "before the stop).")
    doc = chrome_trace(r)
    t = timeline_of(doc)
    if t.bars.empty:
        st.info("no kernel events in this run")
        return
    st.altair_chart(timeline_chart(t), width="stretch")
    od = doc["otherData"]
    st.caption(f"{r.strategy}: the run's last {od['kernel_events']:,} kernel events, "
               f"{(od['window_us'][1] - od['window_us'][0]):,.0f} simulated us; "
               f"{len(t.migrations)} migrations (black triangles); the band under each CPU "
               f"is its clock ({od['clock_changes']} changes in the window); CPU labels give "
               "each CPU's mean clock over the run.")
    st.download_button("Download as Chrome trace (Perfetto, chrome://tracing)",
                       json.dumps(doc), file_name=f"{r.scenario}-{r.strategy}.trace.json",
                       mime="application/json")


def page() -> None:
    st.set_page_config(page_title="warmcore explorer", layout="wide")
    init_state()
    sc = warmcore.Scenario.from_toml(st.session_state.toml)
    sidebar(sc)
    sc = warmcore.Scenario.from_toml(st.session_state.toml)    # as applied
    share_link(sc)
    st.title("warmcore: what-if explorer")
    st.caption(f"**{sc.name}**: {sc.description}  \nmachine `{sc.machine.preset}`, "
               f"workload `{sc.workload.kind}`, seed {sc.seed}, "
               f"{sc.run.requests or 0:,} requests per strategy" + shortened_note(sc)
               + changed_note(sc))
    if st.session_state.error:
        st.error(st.session_state.error)
    names = st.session_state.strategies
    try:
        results = run_all(st.session_state.toml, names)
    except Exception as e:            # a failing run: its one line, not a traceback
        st.error(f"run failed: {uploads.as_shown(one_line(e))}")
        return
    if results is None:               # still running: the fragment above polls
        return
    job = st.session_state.job
    if job.stopped:
        c1, c2 = st.columns([5, 1], vertical_alignment="center")
        c1.warning(stopped_note(results, names, job.fraction, sc.run.requests or 0))
        if c2.button("Run again", help="run this setup again, to the end"):
            st.session_state.job = None
            st.rerun()
        results = [r for r in results if r.requests]   # a run stopped in its warm-up
    answer_section(sc, names)
    if results:                          # (none: a stop in the warm-up measured nothing)
        comparison_section(sc, results)
    load_curves(sc, names)
    timeline(names)


OBJECTIVE_LABELS = {"throughput": "most throughput", "p99": "lowest p99 latency",
                    "p50": "lowest p50 latency", "cpu": "least CPU per request",
                    "energy": "least energy per request", "slo": "most throughput within "
                    "a p99 SLO"}


def answer_section(sc: warmcore.Scenario, names: list[str]) -> None:
    """The answer to the user's question: which strategy is best for an objective, up
    to what offered load and by how much (warmcore.advise across loads derived from the
    setup's capacity), as a verdict line, throughput and the objective against the
    offered load with the crossovers marked, and the table of the curves' values."""
    from warmcore.comparison import load_field

    st.subheader("Answer: which strategy, up to what load")
    try:
        field = load_field(sc)
    except warmcore.ConfigError as e:
        st.info(one_line(e))
        return
    with st.form("answer_form"):
        c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
        objective = c1.selectbox("Best means", list(OBJECTIVE_LABELS),
                                 format_func=OBJECTIVE_LABELS.get, key="objective")
        slo = c2.number_input("p99 SLO (us)", min_value=1.0, value=1000.0, key="slo_us",
                              help="with 'most throughput within a p99 SLO'")
        go = c3.form_submit_button("Find the answer", type="primary")
    wanted = f"p99<={slo:g}" if objective == "slo" else objective
    if go:
        if len(names) < 2:
            st.error("Strategies to compare: choose at least two")
            return
        job_for("answer_job", (st.session_state.toml, tuple(names), wanted),
                [("the answer across loads", functools.partial(
                    advise, uploads.runnable(st.session_state.toml, st.session_state.uploads),
                    tuple(names), wanted))])
    job = ended("answer_job", "stop_answer")
    if job is HALT:
        return
    if job is not None:
        if not job.results or "ranges" not in job.results[0]:
            st.warning("Stopped: no answer (the runs done are cached: find it again to go on)")
            return
        st.session_state.answer = {"toml": st.session_state.toml, "names": list(names),
                                   "advice": job.results[0]}
    held = st.session_state.get("answer")
    if not held or held["toml"] != st.session_state.toml or held["names"] != list(names):
        st.caption(f"Runs each strategy at offered loads (`workload.{field}`) from a light "
                   "load to past saturation, two seeds each (the same for every strategy), "
                   "and names the best only where it is better at 95% and by 1% or "
                   "more (a smaller margin is a tie).")
        return
    draw_answer(held["advice"], field, sc.workload.kind == "open")


def draw_answer(a: dict, field: str, open_loop: bool) -> None:
    st.success(verdict_text(a))
    df = answer_curve_frame(a)
    for column, chart in zip(st.columns(2), answer_charts(
            df, a["crossovers"], field, a["objective_text"].split(" (")[0], open_loop),
            strict=True):
        column.altair_chart(chart, width="stretch")
    st.caption("Crossovers: dashed rules, their 95% intervals shaded; runs in doubt "
               "(a window too short for the load, an overloaded queue for latency) are "
               "crosses and never named best. The answer across these loads, "
               f"{a['replications']} seeds each, {a['runs']} runs:")
    st.dataframe(answer_frame(a), width="stretch", hide_index=True)
    for c in a["crossovers"]:
        w = c["why"]
        st.markdown(f"**Why it flips at ~{c['load']:,.0f}** ({w['a']} vs {w['b']}): " + "; ".join(
            f"{f['figure']} {f['a']:,.3g} vs {f['b']:,.3g}" for f in w["figures"]))


def comparison_section(sc: warmcore.Scenario, results: list) -> None:
    """The comparison table (with its deltas against a pinned baseline), the baseline
    and download buttons, and why: where a request's time went."""
    st.session_state.results = [r.to_dict() for r in results]    # what the page shows
    st.session_state.shown_results = results
    df = comparison_frame(results)
    base = st.session_state.baseline
    base_df = base_results = None
    if base is not None:
        base_results = [warmcore.Result.from_dict(d) for d in base["results"]]
        base_df = comparison_frame(base_results)

    st.subheader("Comparison")
    st.dataframe(styled(df), width="stretch")
    st.caption("Best value per column highlighted: among runs not in doubt, and a cost "
               "(CPUs, per-request figures) only among strategies serving at least 95% of "
               "the most throughput. Every strategy ran the same arrivals and service "
               "demands (same seed).")
    intervals = interval_frame(results)
    if intervals is not None:
        st.markdown("**95% intervals** over the replications (`run.replications`, "
                    "Student t): the table shows their means; where two strategies' "
                    "intervals overlap, their difference may be noise")
        st.dataframe(intervals, width="stretch")
    for r in results:
        for d in doubts(r):
            st.warning(f"{r.strategy} (in doubt): {d}")
    if base_df is not None:
        st.markdown("**Change against the pinned baseline** (now minus baseline)")
        st.dataframe(comparison_deltas(df, base_df).shown, width="stretch")
    c1, c2, c3 = st.columns(3)
    if c1.button("Pin as baseline", help="later changes show their delta against this run"):
        st.session_state.baseline = {"toml": st.session_state.toml,
                                     "results": st.session_state.results,
                                     "uploads": st.session_state.uploads}
        st.rerun()
    if base is not None and c2.button("Clear baseline"):
        st.session_state.baseline = None
        st.rerun()
    if st.session_state.uploads:         # the scenario and the files it names, together
        c3.download_button("Download setup (.zip)", uploads.setup_zip(
                           setup_toml(), st.session_state.uploads, sc.name),
                           file_name=f"{sc.name}.zip", mime="application/zip",
                           help=f"unzip it and run `warmcore compare {sc.name}.toml --json` in "
                                "that folder: it reproduces this table (`warmcore run` the "
                                f"{sc.strategy.name} run alone)")
    else:
        c3.download_button("Download scenario TOML", setup_toml(),
                           file_name=f"{sc.name}.toml", mime="application/toml",
                           help="`warmcore compare FILE --json` reproduces this table "
                                f"(`warmcore run FILE` the {sc.strategy.name} run alone)")

    st.subheader("Why: where a request's time went")
    st.altair_chart(breakdown_chart(results, base_results))
    for r in results:
        for w in r.warnings:
            st.warning(f"{r.strategy}: {w}")


if __name__ == "__main__":      # streamlit run (and AppTest) run the file as __main__;
    page()                      # importing it (tests, docs) draws nothing
