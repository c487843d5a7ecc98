"""The explorer's setup as data (app.py draws it): the link that carries a setup (a
built-in scenario, the values changed from it, the strategies compared) and list
values written and read as inline TOML, as the list controls show them. No Streamlit:
tested on its own."""

from __future__ import annotations

import tomllib
from collections.abc import Callable

import warmcore
from warmcore.simcore.config import builtin_names

DEFAULT_SCENARIO = "pipeline"
# Phenomenon 1 on its own scenario: Jetty 8's one thread, the 9.0 milestone's
# dispatch of every parsed request (the parallel slowdown) and today's pec, which
# dispatches before parsing and recovers it (docs/strategies.md)
DEFAULT_STRATEGIES = ("pc", "jetty9-milestone", "pec")


def from_url(scenario: str | None, sets: list[str], strategies: str | None):
    """The setup a link names: a built-in scenario, PATH=VALUE changes to it (TOML
    values, as --set takes them) and the strategies compared."""
    name = scenario or DEFAULT_SCENARIO
    if name not in builtin_names():
        raise ValueError(f"scenario: {name!r} is not a built-in scenario")
    changes = {}
    for item in sets[:MAX_LINK_SETS]:
        path, eq, text = item.partition("=")
        if not eq:
            raise ValueError(f"set: {item!r} is not PATH=VALUE")
        changes[path] = tomllib.loads(f"v = {text}")["v"] if text else None
    names = [n for n in (strategies or "").split(",") if n] or list(DEFAULT_STRATEGIES)
    return name, changes, names


MAX_LINK_SETS = 200


def to_url(sc: warmcore.Scenario, base: str, names: list[str],
           builtin: Callable[[str], warmcore.Scenario]) -> dict | None:
    """The query parameters that give this setup back (None when it came with uploaded
    files, which a link cannot carry): the built-in scenario, every value that differs
    from it, the strategies compared."""
    ref = _flat(builtin(base).model_dump())
    now = _flat(sc.model_dump())
    if any(now.get(k) != v for k, v in ref.items() if k not in now):
        return None
    sets = [f"{k}={inline_toml(v)}" for k, v in now.items() if ref.get(k) != v]
    return {"scenario": base, "strategies": ",".join(names), "set": sets}


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out |= _flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


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




def downloaded_toml(toml: str, strategies: list[str]) -> str:
    """The applied setup as the TOML the explorer downloads: with the strategies
    compared (``strategy.compare``), so that ``warmcore compare FILE`` runs the same
    table."""
    sc = warmcore.Scenario.from_toml(toml)
    return sc.set("strategy.compare", list(strategies)).to_toml()
