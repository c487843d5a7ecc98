"""The one way a scenario changes: ``edit_scenario``. The command line (``load``: a
file, its ``--set`` options and the run flags), the API (``Scenario.load``, ``set``,
``with_``, ``edit``) and the explorer's form all call it, so a change means the same
wherever it is made.

A change is a dotted path and a value; None puts the setting back to its default.
Some settings own others, which belong to them and mean nothing to another choice
(``OWNED``): changing the preset resets its overrides and the governor's tunables,
changing the governor its tunables, changing the strategy its tunables (but for
the names in ``keep``, and all of them when the scenario says they are the setup's:
``strategy.shared_params``), and changing the workload kind keeps only the service
demand (the kind's own fields take their defaults; an open loop gets the old rate,
or half of what one CPU serves at the mean service time). What the same edit gives
for an owned table is applied after the reset, so it stays.
"""

from __future__ import annotations

import contextlib
import copy
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from warmcore.simcore.config.errors import ConfigError, short_repr
from warmcore.simcore.config.files import MAX_TOML_NESTING, read_scenario_dict, toml_nesting
from warmcore.simcore.config.kinds import WORKLOADS
from warmcore.simcore.config.schema import Scenario, ServiceShape, validate

# {dotted.path: value}, or (dotted.path, value) pairs applied in order
Changes = Mapping[str, Any] | Iterable[tuple[str, Any]]

# owner -> the tables it owns. The workload's kind owns the workload's table but for
# its service shape (KIND_KEEPS).
OWNED = {
    "machine.preset": ("machine.overrides", "machine.governor_params"),
    "machine.governor": ("machine.governor_params",),
    "strategy.name": ("strategy.params",),
    "workload.kind": ("workload",),
}
KIND_KEEPS = ("kind", *ServiceShape.model_fields)
# An open loop switched to from a kind without a rate is offered this fraction of what
# one CPU serves at the mean service time.
OPEN_LOOP_LOAD = 0.5


def edit_scenario(base: Scenario | Mapping, changes: Changes | None = None, *,
                  strategy: str | None = None, seed: int | None = None,
                  requests: int | None = None, duration_s: float | None = None,
                  keep: Sequence[str] = ()) -> Scenario:
    """``base`` (a Scenario, or a scenario's raw data) with ``changes`` ({dotted.path:
    value}, or (path, value) pairs applied in order), validated: a new Scenario.

    strategy    run this strategy (the change "strategy.name")
    keep        tunable names whose values carry over to another strategy
    seed        the seed
    requests, duration_s   the run's length: either replaces the other
    """
    data = base.to_data() if isinstance(base, Scenario) else copy.deepcopy(dict(base))
    given = [(path.split("."), copy.deepcopy(value)) for path, value in _pairs(changes)]
    if strategy is not None:
        given.append((["strategy", "name"], strategy))
    if seed is not None:
        given.append((["seed"], seed))
    after = _applied(data, given)
    for owner in _changed(data, after):
        _reset(data, owner, after, keep)
    for keys, value in given:           # after the resets: what the edit gives stays
        set_path(data, keys, value)
    set_run_limit(data, requests=requests, duration_s=duration_s)
    return validate(data)


def load(name_or_path: str | Scenario, sets: Sequence[str] = (), **run_overrides) -> Scenario:
    """Built-in name, TOML path or a Scenario, then --set overrides, then run overrides
    (strategy, seed, requests, duration_s, or any other field of ``run``), validated."""
    pairs = [(".".join(keys), value) for keys, value in map(parse_set, sets)]
    flags = {k: run_overrides.pop(k, None) for k in ("strategy", "seed", "requests",
                                                     "duration_s")}
    pairs += [(f"run.{k}", v) for k, v in run_overrides.items() if v is not None]
    source = (name_or_path if isinstance(name_or_path, Scenario)
              else read_scenario_dict(name_or_path))
    return edit_scenario(source, pairs, **flags)


def changed_owners(base: Scenario, changes: Changes) -> list[str]:
    """The owners (OWNED) whose value ``changes`` would change in ``base``."""
    data = base.to_data()
    return _changed(data, _applied(data, [(path.split("."), value)
                                          for path, value in _pairs(changes)]))


def resets(owners: Iterable[str], path: str) -> bool:
    """Does changing ``owners`` reset the setting at ``path``? (A form that shows the
    current preset's overrides, strategy's tunables or workload kind's fields shows
    stale ones once the same submission changes it: the new ones appear after.)"""
    for owner in owners:
        for table in OWNED[owner]:
            if path.startswith(table + ".") and not (
                    owner == "workload.kind" and path.removeprefix("workload.") in KIND_KEEPS):
                return True
    return False


def _pairs(changes: Changes | None) -> Iterable[tuple[str, Any]]:
    if changes is None:
        return ()
    return changes.items() if isinstance(changes, Mapping) else changes


def _applied(data: dict, given: list) -> dict:
    """A copy of ``data`` with the ``given`` (keys, value) pairs set, as they are: what
    the owners become."""
    after = copy.deepcopy(data)
    for keys, value in given:
        set_path(after, keys, copy.deepcopy(value))
    return after


def _changed(before: Mapping, after: Mapping) -> list[str]:
    """The owners whose value differs between two versions of a scenario's data."""
    return [o for o in OWNED if _owner_value(after, o) != _owner_value(before, o)]


def _owner_value(data: Mapping, owner: str):
    """The owner's value in the raw ``data``, its default if unset (None for the
    workload's kind, which has none)."""
    section, field = owner.split(".")
    node = data.get(section)
    if isinstance(node, dict) and field in node:
        return node[field]
    return getattr(Scenario.model_fields[section].default, field, None)


def _reset(data: dict, owner: str, after: dict, keep: Sequence[str]) -> None:
    """Put what ``owner`` owns in ``data`` back to its defaults; ``after`` is ``data``
    with the edit applied."""
    if owner == "workload.kind":
        _switch_kind(data, after)
        return
    for table in OWNED[owner]:
        section, key = table.split(".")
        node = data.get(section)
        if not isinstance(node, dict) or key not in node:
            continue
        kept = {}
        if owner == "strategy.name" and isinstance(node[key], dict):
            shared = node.get("shared_params") is True     # the setup's: all carry
            kept = {k: v for k, v in node[key].items() if shared or k in keep}
        if kept:
            node[key] = kept
        else:
            del node[key]


def _switch_kind(data: dict, after: dict) -> None:
    """The workload as the kind it has in ``after``: the service shape kept, the kind's
    own fields at their defaults; a kind that needs a rate (``WorkloadKind.needs_rate``:
    an open loop) gets the old one, or OPEN_LOOP_LOAD of one CPU at the mean service
    time (the new one, if the edit changes it)."""
    old, new = data.get("workload"), after.get("workload")
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return                          # validation names what is wrong
    kind = new.get("kind")
    data["workload"] = {"kind": kind,
                        **{k: v for k, v in old.items() if k in ServiceShape.model_fields}}
    described = WORKLOADS.get(kind) if isinstance(kind, str) else None
    if described is None or not described.needs_rate:
        return
    rate = old.get("rate_per_s", _default_rate(old.get("kind")))
    service_us = new.get("service_us", ServiceShape.model_fields["service_us"].default)
    if _positive(rate):
        data["workload"]["rate_per_s"] = float(rate)
    elif _positive(service_us):         # else validation names the service time
        data["workload"]["rate_per_s"] = round(OPEN_LOOP_LOAD * 1e6 / service_us, 1)


def _positive(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x > 0


def _default_rate(kind) -> float | None:
    """The rate a workload of ``kind`` has when it does not say (None: no rate)."""
    described = WORKLOADS.get(kind) if isinstance(kind, str) else None
    field = described.config.model_fields.get("rate_per_s") if described else None
    return field.default if field else None


def parse_set(assignment: str) -> tuple[list[str], object]:
    """``a.b.c=VALUE`` -> (['a','b','c'], value); VALUE is read as TOML, else as a string."""
    if "=" not in assignment:
        raise ConfigError("--set", f"{assignment!r} is not PATH=VALUE")
    path, raw = assignment.split("=", 1)
    if any(c in assignment for c in "\n\r\x00"):
        raise ConfigError("--set", f"{path.strip()!r}: the value holds a line break or NUL")
    keys = path.strip().split(".")
    if not all(keys):
        raise ConfigError("--set", f"{path!r} is not a dotted path")
    value = raw.strip()
    if toml_nesting(value) <= MAX_TOML_NESTING:       # deeper: text (see parse_toml)
        with contextlib.suppress(tomllib.TOMLDecodeError):
            value = tomllib.loads(f"v = {value}")["v"]
    return keys, value


def apply_sets(data: dict, sets: list[str]) -> dict:
    """``--set`` strings written into the raw ``data``, as they are (no OWNED rules)."""
    for s in sets:
        keys, value = parse_set(s)
        set_path(data, keys, value)
    return data


def set_path(data: dict, keys: list[str], value) -> None:
    """data[k1][k2]...[kn] = value, making the tables on the way; None removes the key
    (the setting's default)."""
    if not all(keys):
        raise ConfigError(".".join(keys), "not a dotted path")
    node = data
    for i, k in enumerate(keys[:-1]):
        node = _table(node, k, ".".join(keys[:i + 1]))
    if value is None:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value


def _table(node: dict, key: str, field: str | None = None) -> dict:
    """node[key], a table (made if missing); a ConfigError naming ``field`` (the key's
    dotted path) if it holds a value."""
    sub = node.get(key)
    if sub is None:
        sub = node[key] = {}
    elif not isinstance(sub, dict):
        raise ConfigError(field or key, f"should be a table (got {short_repr(sub)})")
    return sub


def set_run_limit(data: dict, requests: int | None = None,
                  duration_s: float | None = None) -> None:
    """A request limit replaces the scenario's duration and the other way round."""
    run = _table(data, "run")
    if requests is not None:
        run["requests"] = requests
        if duration_s is None:
            run.pop("duration_s", None)
    if duration_s is not None:
        run["duration_s"] = duration_s
        if requests is None:
            run.pop("requests", None)
