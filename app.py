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
import threading
import time

import altair as alt
import pandas as pd
import streamlit as st

import warmcore
from warmcore.registry import strategies as all_strategies
from warmcore.simcore.config import WORKLOAD_KINDS, ServiceShape

DEFAULT_SCENARIO = "pipeline"
DEFAULT_STRATEGIES = ("pc", "pec", "epc")
# The first view runs the built-in scenario at this many requests at most, so it
# appears within a few seconds; the run-length control raises it.
DEFAULT_REQUESTS = 3000
MAX_UPLOAD_BYTES = 64 * 1024
# Any one run stops after this many wall seconds and shows its partial result
# marked (docs/formats.md, "Ranges and caps"), so no setting can hold the page.
MAX_WALL_S = 120.0
# The page waits this long for the comparison's runs (the script polls the worker
# thread, drawing progress, with a Stop button; any click ends the wait and the next
# script run finds the same runs going). Past it, a fragment keeps polling each second.
WAIT_S = 600.0

# Comparison table: per_request() key -> (header with unit, format, better: max/min/None)
COLUMNS = {
    "throughput_rps": ("req/s", "{:,.0f}", "max"),
    "p50_us": ("p50 (us)", "{:,.1f}", "min"),
    "p99_us": ("p99 (us)", "{:,.1f}", "min"),
    "max_us": ("max (us)", "{:,.1f}", "min"),
    "cpus": ("CPUs", "{:.2f}", "min"),
    "cpu_us_per_req": ("CPU us/req", "{:.2f}", "min"),
    "ipc": ("IPC", "{:.2f}", "max"),
    "ghz": ("GHz", "{:.2f}", None),
    "llc_loads_per_req": ("LLC loads/req", "{:.1f}", "min"),
    "migrations_per_req": ("migrations/req", "{:.3f}", "min"),
    "switches_per_req": ("switches/req", "{:.3f}", "min"),
    "uj_per_req": ("uJ/req", "{:.1f}", "min"),
}
CAUSES = {"queue_wait": "queue wait", "dispatch": "dispatch and wake-up",
          "compute": "compute", "cache_reload": "cache reload", "coherence": "coherence",
          "contention": "contention", "blocked_io": "blocked I/O"}
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
TOPOLOGY = ["sockets", "cores_per_socket", "threads_per_core", "llc_domains_per_socket",
            "l1d_kib", "l2_kib", "llc_mib", "pstates_ghz", "turbo_ghz", "default_governor"]


# -- runs (cached on the scenario's TOML) -----------------------------------------------

class Stopped(Exception):
    """A run stopped from the page; its partial result (raised, so it is not cached)."""

    def __init__(self, result: dict):
        super().__init__("stopped")
        self.result = result


@st.cache_data(show_spinner=False, max_entries=256)
def run_one(scenario_toml: str, strategy: str, _should_stop=None) -> dict:
    """One strategy on the scenario: the ``run --json`` object. ``_should_stop`` (not
    part of the cache key) is ``warmcore.simulate``'s progress and stop hook."""
    sc = warmcore.Scenario.from_toml(scenario_toml)
    return _finished(warmcore.compare(sc, [strategy], max_wall=MAX_WALL_S,
                                      should_stop=_should_stop)[0])


@st.cache_data(show_spinner=False, max_entries=1024)
def run_at_load(scenario_toml: str, strategy: str, load: float, _should_stop=None) -> dict:
    """One strategy at one offered load (``warmcore.compare`` with ``loads``)."""
    sc = warmcore.Scenario.from_toml(scenario_toml)
    return _finished(warmcore.compare(sc, [strategy], loads=[load], max_wall=MAX_WALL_S,
                                      should_stop=_should_stop)[0])


@st.cache_data(show_spinner=False, max_entries=64)
def run_traced(scenario_toml: str, strategy: str, events: int, _should_stop=None) -> dict:
    """One strategy with its last ``events`` kernel events kept (``run.trace_events``)."""
    sc = warmcore.Scenario.from_toml(scenario_toml).with_({"run.trace_events": events})
    return _finished(warmcore.compare(sc, [strategy], max_wall=MAX_WALL_S,
                                      should_stop=_should_stop)[0])


def _finished(r: warmcore.Result) -> dict:
    """The run's JSON object; a run stopped from the page is raised, so it is not cached."""
    if r.stop_reason == "stopped":
        raise Stopped(r.to_dict())
    return r.to_dict()


class Job:
    """Runs done one after another in a worker thread that the page polls: their
    progress, a stop flag each run checks (``should_stop``), and the results so far.
    It lives in the session, so a rerun of the script (any click) finds it going
    instead of starting over. ``tasks``: (label, run) pairs, ``run(should_stop)``
    returning a run's JSON object (or raising Stopped with its partial one)."""

    def __init__(self, key, tasks: list):
        self.key = key
        self.names = [label for label, _ in tasks]
        self._runs = [run for _, run in tasks]
        self.results: list[dict] = []
        self.error: Exception | None = None
        self.stop = threading.Event()
        self.current, self.fraction = 0, 0.0
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._work, name="warmcore-runs", daemon=True)
        self.thread.start()

    def _ask(self, fraction: float) -> bool:
        self.fraction = fraction
        return self.stop.is_set()

    def _work(self) -> None:
        try:
            for i, run in enumerate(self._runs):
                if self.stop.is_set():
                    break
                self.current, self.fraction = i, 0.0
                try:
                    self.results.append(run(self._ask))
                except Stopped as s:
                    self.results.append(s.result)
                    break
        except Exception as e:           # shown by the page as its one line
            self.error = e

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    @property
    def stopped(self) -> bool:
        return self.stop.is_set() and not self.running and (
            len(self.results) < len(self.names) or
            any(d.get("stop_reason") == "stopped" for d in self.results))

    def status(self) -> tuple[float, str]:
        n, i = len(self.names), min(self.current, len(self.names) - 1)
        done = (i + self.fraction) / n
        return min(1.0, done), (f"simulating {self.names[i]} ({i + 1}/{n}): "
                                f"{self.fraction:.0%} of its run, "
                                f"{time.monotonic() - self.started:.0f} s so far")


def job_for(slot: str, key, tasks) -> Job:
    """The session's job in ``slot`` for ``key``, started with ``tasks`` if there is
    none; a job for another key is stopped (its runs are not wanted any more)."""
    job = st.session_state.get(slot)
    if job is None or job.key != key:
        if job is not None:
            job.stop.set()
        job = st.session_state[slot] = Job(key, tasks)
    return job


def follow(job: Job, stop_key: str) -> bool:
    """Wait for ``job``, drawing its progress with a Stop button, up to the page's
    wait; True once it has ended, False while it runs on (a fragment then polls and
    reruns the page)."""
    job.thread.join(0.05)                # cached runs: no flash of the progress bar
    if not job.running:
        return True
    slot = st.empty()
    box = slot.container(border=True)
    c1, c2 = box.columns([1, 5], vertical_alignment="center")
    if c1.button("Stop", key=stop_key, type="secondary",
                 help="stop the runs here and show what they measured so far"):
        job.stop.set()
    bar = c2.progress(*job.status())
    end = time.monotonic() + st.session_state.get("wait_s", WAIT_S)
    while job.running and time.monotonic() < end:
        job.thread.join(0.1)
        bar.progress(*job.status())       # a click ends this script run here
    if job.running:
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
    job = st.session_state.get(slot)
    if job is None or job.key[0] != st.session_state.toml:
        if job is not None:
            job.stop.set()
            st.session_state[slot] = None
        return None
    if not follow(job, stop_key):
        return HALT
    st.session_state[slot] = None
    if job.error is not None:
        st.error(f"run failed: {one_line(job.error)}")
        return HALT
    return job


def run_all(scenario_toml: str, names: list[str]) -> list[warmcore.Result] | None:
    """The comparison's results (those a stop left, if stopped); None while they run
    on past the page's wait."""
    job = job_for("job", (scenario_toml, tuple(names)),
                  [(n, functools.partial(run_one, scenario_toml, n)) for n in names])
    if not follow(job, "stop_run"):
        return None
    if job.error is not None:
        raise job.error
    return [warmcore.Result.from_dict(d) for d in job.results]


@st.fragment(run_every=1.0)
def watch_job(job: Job) -> None:
    """Progress of runs that outlast the page's wait; the page reruns when they end."""
    if not job.running:
        st.rerun()
    st.caption("Still running: " + job.status()[1])


# -- state --------------------------------------------------------------------------------

def one_line(e: Exception) -> str:
    if isinstance(e, warmcore.ConfigError):
        return f"{e.field}: {e.reason}"
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")


def builtin(name: str) -> warmcore.Scenario:
    sc = warmcore.Scenario.load(name)
    if sc.run.requests is not None and sc.run.requests > DEFAULT_REQUESTS or \
            sc.run.duration_s is not None:
        sc = sc.with_(requests=DEFAULT_REQUESTS)
    return sc


def set_setup(sc: warmcore.Scenario, names: list[str] | None = None) -> None:
    """Make ``sc`` the applied setup; the form's widgets start over from it."""
    st.session_state.toml = sc.to_toml()
    known = all_strategies()
    names = [n for n in (names or st.session_state.get("strategies") or []) if n in known]
    if sc.strategy.name not in names:
        names = [sc.strategy.name, *names]
    st.session_state.strategies = names
    st.session_state.gen = st.session_state.get("gen", 0) + 1


def init_state() -> None:
    if "toml" not in st.session_state:
        set_setup(builtin(DEFAULT_SCENARIO), list(DEFAULT_STRATEGIES))
        st.session_state.base = DEFAULT_SCENARIO
        st.session_state.error = None
        st.session_state.upload_seen = None
        st.session_state.baseline = None


# -- the sidebar ---------------------------------------------------------------------------

def control(p, key: str):
    """A widget for one parameter of the typed space; returns its value (None: unset)."""
    label = p.path.rsplit(".", 1)[-1] + (f" ({p.unit})" if p.unit else "")
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


def inline_toml(v) -> str:
    """``v`` as an inline TOML value (what the list controls show); None: empty."""
    import tomli_w

    if v is None:
        return ""
    if hasattr(v, "model_dump"):          # a request program's step
        v = v.model_dump(exclude_defaults=True)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {inline_toml(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(inline_toml(x) for x in v) + "]"
    return tomli_w.dumps({"v": v}).strip().removeprefix("v = ")


def parse_list_control(p, text: str):
    """The value a list control's text gives, or ValueError with a one-line reason."""
    import tomllib

    text = text.strip()
    if not text:
        if not p.optional:
            raise ValueError(f"{p.path}: needs a value")
        return None
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as e:
        reason = str(e).splitlines()[0].split(" (at ")[0]
        raise ValueError(f"{p.path}: {text!r} is not a TOML value ({reason})") from None


def section_of(path: str) -> str:
    for prefix, title in SECTIONS:
        if prefix and (path == prefix or path.startswith(prefix + ".")):
            return title
    return "Processes"


def topology_table(params) -> pd.DataFrame:
    by = {p.path.removeprefix("machine.overrides."): p for p in params}
    rows = []
    for k in TOPOLOGY:
        p = by.get(k)
        if p is not None:
            v = p.value
            v = ", ".join(f"{x:g}" for x in v) if isinstance(v, (list, tuple)) else v
            rows.append({"": k + (f" ({p.unit})" if p.unit else ""), "value": str(v)})
    return pd.DataFrame(rows).set_index("")


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
        set_setup(builtin(base))
        st.rerun()
    upload = sb.file_uploader(f"...or upload a scenario TOML, or a calibration's PARAMS.toml "
                              f"(at most {MAX_UPLOAD_BYTES // 1024} KiB)", type=["toml"],
                              key="upload")
    if upload is not None and upload.file_id != st.session_state.upload_seen:
        st.session_state.upload_seen = upload.file_id
        handle_upload(upload.name, upload.getvalue())
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
        st.dataframe(topology_table(params), width="stretch")
        govs = [None, *sorted(GOVERNORS)]
        governor = st.selectbox("Governor", govs, index=govs.index(sc.machine.governor)
                                if sc.machine.governor in govs else 0, key=f"gov{gen}",
                                format_func=lambda v: "(the preset's default)" if v is None
                                else v)
        known = list(all_strategies())
        chosen = st.multiselect("Strategies to compare", known,
                                default=st.session_state.strategies, key=f"strategies{gen}")
        main = st.selectbox("Scenario's own strategy (its tunables below)", known,
                            index=known.index(sc.strategy.name), key=f"main{gen}")
        c1, c2 = st.columns(2)
        seed = c1.number_input("Seed", min_value=0, value=sc.seed, step=1, key=f"seed{gen}")
        requests = c2.number_input("Requests", min_value=1, step=1000, key=f"req{gen}",
                                   value=sc.run.requests or DEFAULT_REQUESTS,
                                   help="measured requests (after warm-up) per strategy")
        kind = st.selectbox("Workload kind", WORKLOAD_KINDS,
                            index=WORKLOAD_KINDS.index(sc.workload.kind), key=f"kind{gen}",
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


def workload_of_kind(workload, kind: str, changes: dict | None = None) -> dict:
    """A workload table of another ``kind``: the service demand kept (distribution,
    mean, cv, serial), the kind's own fields at their defaults. An open loop needs a
    rate: the old workload's if it had one, else half of what one CPU serves at the
    mean service time (0.5 / service_us). ``changes``: service fields set with it."""
    shape = {k: getattr(workload, k) for k in ServiceShape.model_fields
             if getattr(workload, k) is not None}
    new = {"kind": kind, **shape, **(changes or {})}
    if kind == "open":
        rate = getattr(workload, "rate_per_s", None)
        new["rate_per_s"] = float(rate) if rate else round(0.5e6 / new["service_us"], 1)
    return new


def apply(sc, values, *, preset, governor, chosen, main, seed, requests, kind=None) -> None:
    """The form's values as a new scenario; a bad value shows one line, setup kept."""
    changes = {}
    if kind is not None and kind != sc.workload.kind:   # the old kind's fields do not apply
        shape = {}
        for path in [k for k in values if k.startswith("workload.")]:
            p, v = values.pop(path)
            if path.removeprefix("workload.") in ServiceShape.model_fields and v != p.value:
                shape[path.removeprefix("workload.")] = v
        changes["workload"] = workload_of_kind(sc.workload, kind, shape)
    for path, (p, v) in values.items():
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
    overrides = {k: v for k, v in changes.items() if k.startswith("machine.overrides.")}
    changes = {k: v for k, v in changes.items() if k not in overrides}
    if preset != sc.machine.preset:       # another machine: its own parameters and governor
        changes = {k: v for k, v in changes.items()
                   if not k.startswith("machine.governor_params.")}
        changes["machine.preset"] = preset
        changes["machine.overrides"] = {}
    elif overrides:
        data = dict(sc.machine.overrides)
        for k, v in overrides.items():
            keys = k.removeprefix("machine.overrides.").split(".")
            if len(keys) == 2:
                data[keys[0]] = {**data.get(keys[0], {}), keys[1]: v}
            else:
                data[keys[0]] = v
        changes["machine.overrides"] = data
    if governor != sc.machine.governor:
        changes["machine.governor"] = governor
        changes["machine.governor_params"] = {}
    if main != sc.strategy.name:
        changes = {k: v for k, v in changes.items() if not k.startswith("strategy.params.")}
    if not chosen:
        st.session_state.error = "strategies: pick at least one strategy to compare"
        return
    try:
        new = sc.with_({k: v for k, v in changes.items() if v is not None or
                        not k.startswith("machine.governor")},
                       strategy=main if main != sc.strategy.name else None,
                       seed=seed, requests=requests)
        for path, v in changes.items():      # an unset optional goes back to the default
            if v is None and path.count(".") == 1 and path.startswith("machine."):
                data = new.to_data()
                data["machine"].pop(path.split(".")[1], None)
                new = warmcore.Scenario.load(data)
        warmcore.check(new)                  # the machine and tunables too: setup kept
    except (warmcore.ConfigError, ValueError, KeyError) as e:
        st.session_state.error = one_line(e)
        return
    st.session_state.error = None
    st.session_state.toml = new.to_toml()
    st.session_state.strategies = list(chosen)
    if [p.path for p in warmcore.parameters(new)] != [p.path for p in warmcore.parameters(sc)]:
        st.session_state.gen += 1        # other controls (kind, strategy, machine): the
        st.rerun()                       # form starts over from the new setup


def handle_upload(name: str, data: bytes) -> None:
    """An uploaded scenario: too large, not UTF-8 or invalid -> one line, setup kept."""
    if len(data) > MAX_UPLOAD_BYTES:
        st.session_state.error = (f"{name}: {len(data):,} bytes, more than the "
                                  f"{MAX_UPLOAD_BYTES:,} allowed")
        return
    if _is_params(data):
        handle_params(name, data)
        return
    try:
        sc = warmcore.Scenario.from_toml(data)  # UTF-8 (else the byte offset), valid TOML
        all_strategies()[sc.strategy.name]     # noqa: B018 (known strategy?)
        warmcore.check(sc)                     # its machine and the strategy's tunables
    except KeyError:
        st.session_state.error = f"{name}: strategy.name: unknown strategy"
        return
    except warmcore.ConfigError as e:      # the strategy's tunables too (parameters)
        st.session_state.error = f"{name}: {e.field}: {e.reason}"
        return
    st.session_state.error = None
    st.session_state.base = None
    set_setup(sc)


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
                                         params))
    except warmcore.ConfigError as e:
        st.session_state.error = f"{name}: {e.field}: {e.reason}"
        return
    st.session_state.error = None
    st.session_state.fitted = {"name": name, "values": params["values"]}
    set_setup(sc)


# -- the page -------------------------------------------------------------------------------

def comparison_frame(results) -> pd.DataFrame:
    """One row per strategy; a partial run's row is marked "(partial)"."""
    rows = [r.per_request() for r in results]
    for row, r in zip(rows, results, strict=True):
        if r.partial:
            row["strategy"] += " (partial)"
    df = pd.DataFrame(rows).set_index("strategy")[list(COLUMNS)]
    return df.rename(columns={k: v[0] for k, v in COLUMNS.items()}).astype(float)


def styled(df: pd.DataFrame, baseline: pd.DataFrame | None):
    fmt = {v[0]: v[1] for v in COLUMNS.values()}
    s = df.style.format(fmt, na_rep="-")
    best = {v[0]: v[2] for v in COLUMNS.values() if v[2]}

    def mark(col: pd.Series):
        """The best cell(s) of a column; none where every row is the same."""
        if col.nunique(dropna=True) < 2:
            return [""] * len(col)
        target = col.max() if best[col.name] == "max" else col.min()
        return ["background-color: #c8f0c8; font-weight: bold" if v == target else ""
                for v in col]

    return s.apply(mark, subset=list(best))


def breakdown_chart(results, baseline_results=None) -> alt.Chart:
    rows = []
    for tag, rs in (("now", results), ("baseline", baseline_results or [])):
        for r in rs:
            for k, label in CAUSES.items():
                v = getattr(r.breakdown_us, k)
                rows.append({"strategy": r.strategy, "run": tag, "cause": label,
                             "us": 0.0 if v is None else float(v)})
    df = pd.DataFrame(rows)
    order = list(CAUSES.values())
    x = alt.X("run:N", title=None, sort=["baseline", "now"],
              axis=alt.Axis(labelAngle=0) if baseline_results else None)
    chart = alt.Chart(df).mark_bar().encode(
        x=x,
        y=alt.Y("sum(us):Q", title="mean us per request"),
        color=alt.Color("cause:N", sort=order, title="where the time went"),
        order=alt.Order("cause_order:Q"),
        column=alt.Column("strategy:N", title=None,
                          sort=list(dict.fromkeys(r.strategy for r in results))),
        tooltip=["strategy", "run", "cause", alt.Tooltip("us:Q", format=".2f")],
    ).transform_calculate(
        cause_order=f"indexof({order!r}, datum.cause)"
    ).properties(width=90, height=300)
    return chart


def default_loads(sc: warmcore.Scenario) -> str:
    """Offered loads around the scenario's own: a rate scaled, or counts doubling."""
    from warmcore.comparison import load_field

    field = load_field(sc)
    now = getattr(sc.workload, field, None)
    if field == "rate_per_s":
        now = now or 10_000.0
        return ", ".join(f"{now * f:g}" for f in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5))
    return ", ".join(str(n) for n in (1, 2, 4, 8, 16))


def load_curves(sc: warmcore.Scenario, names: list[str]) -> None:
    """Latency, CPUs and CPU per request against offered load, the knee marked."""
    from warmcore.comparison import knee, load_field

    st.subheader("Load curves")
    try:
        field = load_field(sc)
    except warmcore.ConfigError as e:
        st.info(one_line(e))
        return
    with st.form("load_curves_form"):
        text = st.text_input(f"Offered loads (`workload.{field}`, comma-separated)",
                             value=default_loads(sc), key=f"loads{st.session_state.gen}")
        go = st.form_submit_button("Compute load curves")
    curves = st.session_state.get("curves")
    base = st.session_state.baseline
    if go:
        try:
            loads = sorted({float(x) for x in text.split(",") if x.strip()})
            if not loads or any(x <= 0 for x in loads):
                raise ValueError
        except ValueError:
            st.error(f"loads: {text!r} is not a list of positive numbers")
            return
        if field != "rate_per_s":
            loads = sorted({int(x) for x in loads})
        # the pinned baseline's curves too, at the same loads (when its load is the
        # same kind of number): cached runs, so a baseline computed before is free
        base_toml = None
        if base is not None and base["toml"] != st.session_state.toml:
            try:
                if load_field(warmcore.Scenario.from_toml(base["toml"])) == field:
                    base_toml = base["toml"]
            except warmcore.ConfigError:
                pass
        tasks = [("", st.session_state.toml, n, x) for n in names for x in loads]
        tasks += [("baseline: ", base_toml, n, x) for n in names for x in loads if base_toml]
        job_for("curves_job", (st.session_state.toml, base_toml, tuple(names), tuple(loads)),
                [(f"{tag}{n} at {x:g}", functools.partial(run_at_load, toml, n, x))
                 for tag, toml, n, x in tasks])
        st.session_state.curves_meta = {"toml": st.session_state.toml, "field": field,
                                        "base_toml": base_toml,
                                        "baseline": [bool(t[0]) for t in tasks]}
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
    if not curves["rows"]:
        return
    with_base = bool(curves.get("base_rows")) and base is not None and \
        curves.get("base_toml") == base["toml"]
    tagged = [{**r, "run": "now"} for r in curves["rows"]]
    if with_base:
        tagged += [{**r, "run": "baseline"} for r in curves["base_rows"]]
    df = pd.DataFrame(tagged)
    df["load"] = df["load"].astype(float)
    knees = []
    for run, rs in (("now", curves["rows"]), ("baseline", curves["base_rows"] if with_base
                                               else [])):
        for n in dict.fromkeys(r["strategy"] for r in rs):
            k = knee([r for r in rs if r["strategy"] == n])
            knees.append({"strategy": n, "knee": k, "run": run})
    kdf = pd.DataFrame([k for k in knees if k["knee"] is not None])
    x = alt.X("load:Q", title=f"offered load ({curves['field']})")
    color = alt.Color("strategy:N", sort=list(dict.fromkeys(df["strategy"])))
    dash = alt.StrokeDash("run:N", title="run", sort=["now", "baseline"],
                          scale=alt.Scale(domain=["now", "baseline"],
                                          range=[[1, 0], [6, 4]]))

    def knee_rules():
        return alt.Chart(kdf).mark_rule(strokeDash=[2, 2]).encode(
            x="knee:Q", color=color,
            opacity=alt.Opacity("run:N", sort=["now", "baseline"], legend=None,
                                scale=alt.Scale(domain=["now", "baseline"], range=[1, 0.4])),
            tooltip=["strategy", "run", "knee"])

    def chart(y: str, title: str):
        c = alt.Chart(df).mark_line(point=True).encode(
            x=x, y=alt.Y(f"{y}:Q", title=title), color=color, strokeDash=dash,
            tooltip=["strategy", "run", "load", alt.Tooltip(f"{y}:Q", format=",.2f")])
        if not kdf.empty:
            c = c + knee_rules()
        return c.properties(height=260)

    lat = df.melt(id_vars=["strategy", "load", "run"], value_vars=["p50_us", "p99_us"],
                  var_name="percentile", value_name="us")
    lat["percentile"] = lat["percentile"].str.removesuffix("_us")
    lat_chart = alt.Chart(lat).mark_line(point=True).encode(
        x=x, y=alt.Y("us:Q", title="latency (us)",
                     scale=alt.Scale(type="log")), color=color, strokeDash=dash,
        shape=alt.Shape("percentile:N", title="percentile",
                        scale=alt.Scale(domain=["p50", "p99"], range=["circle", "square"])),
        detail="percentile:N",
        tooltip=["strategy", "run", "load", "percentile", alt.Tooltip("us:Q", format=",.1f")])
    if not kdf.empty:
        lat_chart = lat_chart + knee_rules()
    c1, c2, c3 = st.columns(3)
    c1.altair_chart(lat_chart.properties(height=260), width="stretch")
    c2.altair_chart(chart("cpus", "CPUs utilized"), width="stretch")
    c3.altair_chart(chart("cpu_us_per_req", "CPU us per request"), width="stretch")

    def knee_text(run):
        return "; ".join(f"{k['strategy']}: " + ("not reached" if k["knee"] is None
                                                  else f"{k['knee']:g}")
                         for k in knees if k["run"] == run)

    st.caption("Knee (dotted): the last load before p99 latency doubles from the lightest "
               "load or throughput falls below 95% of the offered rate. " + knee_text("now")
               + (f"  \nBaseline (dashed lines, faint knees): {knee_text('baseline')}"
                  if with_base else ""))
    if with_base:
        st.markdown("**Load curves: change against the pinned baseline** (now minus "
                    "baseline, same loads)")
        st.dataframe(curve_deltas(curves["rows"], curves["base_rows"], knees),
                     width="stretch")
    elif base is not None:
        why = ("it is this setup" if base["toml"] == st.session_state.toml else
               "its offered load is another kind of number"
               if not _same_field(base["toml"], curves["field"]) else
               "it was pinned after these curves were computed; compute them again")
        st.caption(f"The pinned baseline's curves are not overlaid: {why}.")


def curves_of(job: Job, meta: dict) -> dict:
    """The load curves a finished (or stopped) job measured: each completed run's row,
    split into this setup's and the baseline's; a run cut short by Stop is left out."""
    rows, base_rows = [], []
    for d, is_base in zip(job.results, meta["baseline"], strict=False):
        if d.get("stop_reason") == "stopped":
            continue
        (base_rows if is_base else rows).append(warmcore.Result.from_dict(d).per_request())
    done = len(rows) + len(base_rows)
    return {**{k: meta[k] for k in ("toml", "field", "base_toml")}, "rows": rows,
            "base_rows": base_rows,
            "stopped": f"{done} of {len(job.names)} runs" if job.stopped else None}


CURVE_COLUMNS = {"p50_us": "p50 (us)", "p99_us": "p99 (us)", "throughput_rps": "req/s",
                 "cpus": "CPUs", "cpu_us_per_req": "CPU us/req"}


def _same_field(toml: str, field: str) -> bool:
    from warmcore.comparison import load_field

    try:
        return load_field(warmcore.Scenario.from_toml(toml)) == field
    except warmcore.ConfigError:
        return False


def curve_deltas(rows, base_rows, knees):
    """Each strategy at each load: every curve's figure now minus the baseline's, and
    the knee's move."""
    base = {(r["strategy"], r["load"]): r for r in base_rows}
    knee_of = {(k["strategy"], k["run"]): k["knee"] for k in knees}
    out = []
    for r in rows:
        b = base.get((r["strategy"], r["load"]))
        if b is None:
            continue
        d = {"strategy": r["strategy"], "load": r["load"]}
        for k, label in CURVE_COLUMNS.items():
            d[label] = (r[k] - b[k]) if r[k] is not None and b[k] is not None else math.nan
        kn, kb = knee_of.get((r["strategy"], "now")), knee_of.get((r["strategy"], "baseline"))
        d["knee"] = (f"{kb:g} -> {kn:g}" if kn is not None and kb is not None else
                     f"{'-' if kb is None else f'{kb:g}'} -> {'-' if kn is None else f'{kn:g}'}")
        out.append(d)
    df = pd.DataFrame(out).set_index(["strategy", "load"])
    return df.style.format({v: "{:+,.2f}" for v in CURVE_COLUMNS.values()}, na_rep="-")


def timeline(names: list[str]) -> None:
    """Which thread ran where over the run's last kernel events, per CPU; the same
    window as a Chrome trace-event file."""
    from warmcore.trace import chrome_trace

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
                  functools.partial(run_traced, st.session_state.toml, who, int(events)))])
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
    r = warmcore.Result.from_dict(shown["result"])
    if shown.get("stopped"):
        st.warning(f"Stopped: the timeline ends where the run was stopped, after "
                   f"{r.requests:,} measured requests (the window is the kernel events "
                   "before the stop).")
    doc = chrome_trace(r)
    ev = doc["traceEvents"]
    cpu_names = {e["tid"]: e["args"]["name"] for e in ev
                 if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 1}
    t0 = doc["otherData"]["window_us"][0] if doc["otherData"]["window_us"] else 0.0
    bars = pd.DataFrame([{"cpu": cpu_names[e["tid"]], "start_us": e["ts"] - t0,
                          "end_us": e["ts"] - t0 + e["dur"], "thread": e["args"]["thread"],
                          "step": e["name"], "request": e["args"].get("request", -1)}
                         for e in ev if e["ph"] == "X" and e["pid"] == 1])
    if bars.empty:
        st.info("no kernel events in this run")
        return
    where = {}
    for e in ev:                          # the CPU a migrating thread arrived on
        if e["ph"] == "X" and e["pid"] == 2 and e["cat"] == "thread":
            where[(e["tid"], e["ts"])] = e["args"]["cpu"]
    migr = pd.DataFrame([{"cpu": cpu_names[where[(e["tid"], e["ts"])]], "t_us": e["ts"] - t0,
                          "what": f"thread {e['tid']}: {e['name']}"}
                         for e in ev if e["ph"] == "i" and (e["tid"], e["ts"]) in where])
    order = [cpu_names[k] for k in sorted(cpu_names)]
    t1 = doc["otherData"]["window_us"][1] - t0
    clocks = []                           # each CPU's clock (its counter track) as spans
    for cpu in sorted(cpu_names):
        track = sorted((e["ts"] - t0, e["args"]["GHz"]) for e in ev
                       if e["ph"] == "C" and e["name"] == f"CPU {cpu} clock")
        for (a, ghz), (b, _) in zip(track, [*track[1:], (t1, None)], strict=True):
            if b > a:
                clocks.append({"cpu": cpu_names[cpu], "from_us": a, "to_us": b, "ghz": ghz})
    clocks = pd.DataFrame(clocks)
    y = alt.Y("cpu:N", sort=order, title=None, axis=alt.Axis(labelLimit=400))
    gantt = alt.Chart(bars).mark_bar(height=16, yOffset=-5).encode(
        x=alt.X("start_us:Q", title="simulated us from the window's start"), x2="end_us:Q",
        y=y, color=alt.Color("thread:N", title="thread"),
        tooltip=["cpu", "thread", "step", "request", alt.Tooltip("start_us:Q", format=".2f"),
                 alt.Tooltip("end_us:Q", format=".2f")])
    if not clocks.empty:                  # a band under each CPU's work: its clock
        lo, hi = float(clocks["ghz"].min()), float(clocks["ghz"].max())
        band = alt.Chart(clocks).mark_bar(height=6, yOffset=10).encode(
            x="from_us:Q", x2="to_us:Q", y=y,
            color=alt.Color("ghz:Q", title="clock (GHz)",
                            scale=alt.Scale(scheme="orangered",
                                            domain=[lo - 0.5, hi] if lo == hi else [lo, hi])),
            tooltip=["cpu", alt.Tooltip("ghz:Q", title="GHz", format=".2f"),
                     alt.Tooltip("from_us:Q", format=".1f"),
                     alt.Tooltip("to_us:Q", format=".1f")])
        gantt = alt.layer(gantt, band).resolve_scale(color="independent")
    if not migr.empty:
        gantt = gantt + alt.Chart(migr).mark_point(shape="triangle-down", color="black",
                                                   size=60, filled=True, yOffset=-5).encode(
            x="t_us:Q", y=y, tooltip=["what", "t_us"])
    st.altair_chart(gantt.properties(height=max(160, 34 * len(order))), width="stretch")
    od = doc["otherData"]
    st.caption(f"{r.strategy}: the run's last {od['kernel_events']:,} kernel events, "
               f"{(od['window_us'][1] - od['window_us'][0]):,.0f} simulated us; "
               f"{len(migr)} migrations (black triangles); the band under each CPU is its "
               f"clock ({od['clock_changes']} changes in the window); CPU labels give each "
               "CPU's mean clock over the run.")
    import json

    st.download_button("Download as Chrome trace (Perfetto, chrome://tracing)",
                       json.dumps(doc), file_name=f"{r.scenario}-{r.strategy}.trace.json",
                       mime="application/json")


def page() -> None:
    st.set_page_config(page_title="warmcore explorer", layout="wide")
    init_state()
    sc = warmcore.Scenario.from_toml(st.session_state.toml)
    sidebar(sc)
    sc = warmcore.Scenario.from_toml(st.session_state.toml)    # as applied
    st.title("warmcore: what-if explorer")
    st.caption(f"**{sc.name}**: {sc.description}  \nmachine `{sc.machine.preset}`, "
               f"workload `{sc.workload.kind}`, seed {sc.seed}, "
               f"{sc.run.requests or 0:,} requests per strategy")
    if st.session_state.error:
        st.error(st.session_state.error)
    names = st.session_state.strategies
    try:
        results = run_all(st.session_state.toml, names)
    except Exception as e:            # a failing run: its one line, not a traceback
        st.error(f"run failed: {one_line(e)}")
        return
    if results is None:               # still running: the fragment above polls
        return
    job = st.session_state.job
    if job.stopped:
        ran = [r.strategy for r in results]
        left = [n for n in names if n not in ran]
        c1, c2 = st.columns([5, 1], vertical_alignment="center")
        c1.warning("Stopped: partial result. " + "; ".join(
            f"{r.strategy}: stopped at {job.fraction:.0%} of its run, {r.requests:,} of "
            f"{sc.run.requests or 0:,} measured requests" + (" (still in its warm-up)"
                                                              if not r.requests else "")
            for r in results if r.stop_reason == "stopped")
            + (f"; not run: {', '.join(left)}" if left else ""))
        if c2.button("Run again", help="run this setup again, to the end"):
            st.session_state.job = None
            st.rerun()
        results = [r for r in results if r.requests]   # a run stopped in its warm-up
    if results:                          # (none: a stop in the warm-up measured nothing)
        comparison_section(sc, results)
    load_curves(sc, names)
    timeline(names)


def comparison_section(sc: warmcore.Scenario, results: list) -> None:
    """The comparison table (with its deltas against a pinned baseline), the baseline
    and download buttons, and why: where a request's time went."""
    st.session_state.results = [r.to_dict() for r in results]    # what the page shows
    df = comparison_frame(results)
    base = st.session_state.baseline
    base_df = base_results = None
    if base is not None:
        base_results = [warmcore.Result.from_dict(d) for d in base["results"]]
        base_df = comparison_frame(base_results)

    st.subheader("Comparison")
    st.dataframe(styled(df, base_df), width="stretch")
    st.caption("Best value per column highlighted. Every strategy ran the same arrivals "
               "and service demands (same seed).")
    if base_df is not None:
        common = df.index.intersection(base_df.index)
        delta = (df.loc[common] - base_df.loc[common])
        st.markdown("**Change against the pinned baseline** (now minus baseline)")
        st.dataframe(delta.style.format({v[0]: "{:+,.2f}" for v in COLUMNS.values()},
                                        na_rep="-"), width="stretch")
    c1, c2, c3 = st.columns(3)
    if c1.button("Pin as baseline", help="later changes show their delta against this run"):
        st.session_state.baseline = {"toml": st.session_state.toml,
                                     "results": st.session_state.results}
        st.rerun()
    if base is not None and c2.button("Clear baseline"):
        st.session_state.baseline = None
        st.rerun()
    c3.download_button("Download scenario TOML", st.session_state.toml,
                       file_name=f"{sc.name}.toml", mime="application/toml",
                       help=f"`warmcore run FILE --json` reproduces the {sc.strategy.name} "
                            "run; --strategy NAME the others")

    st.subheader("Why: where a request's time went")
    st.altair_chart(breakdown_chart(results, base_results))
    for r in results:
        for w in r.warnings:
            st.warning(f"{r.strategy}: {w}")


if __name__ == "__main__":      # streamlit run (and AppTest) run the file as __main__;
    page()                      # importing it (tests, docs) draws nothing
