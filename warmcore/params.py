"""The typed parameter space of a scenario: every settable path with its type,
default, unit, allowed range and the source of its default.

Sweeps, calibration and the explorer's controls are all generated from this one
list, so a parameter added to a config model, a strategy's ``Params`` or a
governor's tunables appears everywhere without further code.
"""

from __future__ import annotations

import types
import typing
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from warmcore.simcore.config import Scenario

# Units by name suffix, as the scenario files spell them.
UNITS = (("_per_s", "1/s"), ("_us", "us"), ("_ns", "ns"), ("_ms", "ms"), ("_s", "s"),
         ("_kib", "KiB"), ("_mib", "MiB"), ("_ghz", "GHz"), ("_gbs", "GB/s"), ("_w", "W"),
         ("_cyc", "cycles"), ("_pct", "%"))

# Paths whose values are free-form or structural rather than a tunable number.
SKIP = {"name", "description", "machine.overrides", "machine.governor_params",
        "strategy.params", "strategy.compare", "workload.trace_file", "workload.service_values_us"}


@dataclass(frozen=True)
class Parameter:
    """One settable path of a scenario."""

    path: str                       # as --set and sweep axes write it: machine.cores
    type: str                       # "int", "float", "bool", "str", "choice", "list"
    default: Any                    # the model's default (None: the preset or the code decides)
    value: Any                      # the value in this scenario
    unit: str | None = None
    ge: float | None = None         # allowed range: >= ge, > gt, <= le, < lt
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple | None = None
    optional: bool = False          # None is allowed (meaning "the default of the preset")
    source: str = ""                # where the default comes from, as the code names it
    section: str = ""               # machine, workload, work, strategy, run...
    extra: dict = field(default_factory=dict)

    def check(self, value) -> None:
        """Raise ValueError with the reason if ``value`` is outside this parameter's range."""
        if value is None:
            if not self.optional:
                raise ValueError("must be set")
            return
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"must be one of {', '.join(map(str, self.choices))}")
        for bound, ok, word in ((self.ge, lambda v, b: v >= b, ">="),
                                (self.gt, lambda v, b: v > b, ">"),
                                (self.le, lambda v, b: v <= b, "<="),
                                (self.lt, lambda v, b: v < b, "<")):
            if bound is not None and isinstance(value, (int, float)) and not ok(value, bound):
                raise ValueError(f"must be {word} {bound:g}")


def parameters(scenario: Scenario | str) -> list[Parameter]:
    """Every settable path of ``scenario`` (a Scenario or a built-in name / TOML path):
    its config fields (the workload's own kind only), the strategy's tunables, the
    governor's tunables and the machine preset's parameters (``machine.overrides.*``)."""
    sc = scenario if isinstance(scenario, Scenario) else Scenario.load(scenario)
    out = list(_model_params(sc, ""))
    out += _strategy_params(sc)
    out += _governor_params(sc)
    out += _preset_params(sc)
    return out


def parameter(scenario: Scenario, path: str) -> Parameter:
    """The parameter at ``path``; KeyError naming the path if there is none."""
    for p in parameters(scenario):
        if p.path == path:
            return p
    raise KeyError(path)


def _model_params(model: BaseModel, prefix: str):
    for name, info in type(model).model_fields.items():
        path = prefix + name
        if path in SKIP:
            continue
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            yield from _model_params(value, path + ".")
            continue
        if isinstance(value, dict) and value and \
                all(isinstance(v, BaseModel) for v in value.values()):
            # a table of named entries ([resources] db = {permits = 100}): each
            # entry's fields, under the name the scenario gave it
            for key, entry in value.items():
                yield from _model_params(entry, f"{path}.{key}.")
            continue
        yield _from_field(path, info, value)


def _from_field(path: str, info: FieldInfo, value, source: str = "",
                caps: dict | None = None) -> Parameter:
    """``caps``: the model's one cap per numeric type for fields with no upper bound of
    their own (``GENERIC_CAPS`` of a strategy's Params or a preset)."""
    kind, choices, optional = _kind(info.annotation)
    bounds = {}
    for m in [*info.metadata, *_annotated_metadata(info.annotation)]:
        for b in ("ge", "gt", "le", "lt"):
            if getattr(m, b, None) is not None:
                bounds[b] = getattr(m, b)
    cap = (caps or {}).get({"int": int, "float": float}.get(kind))
    if cap is not None and "le" not in bounds and "lt" not in bounds:
        bounds["le"] = cap
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    return Parameter(path=path, type=kind, default=default, value=value, unit=_unit(path),
                     choices=choices, optional=optional, section=path.split(".")[0],
                     source=info.description or source, **bounds)


def _annotated_metadata(annotation) -> list:
    """Constraints inside ``Annotated[...]``, also within ``X | None``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:     # a FieldInfo there carries its own metadata
        return [x for m in annotation.__metadata__
                for x in (m.metadata if isinstance(m, FieldInfo) else [m])]
    if origin in (typing.Union, types.UnionType):
        return [m for a in args for m in _annotated_metadata(a)]
    return []


def _kind(annotation) -> tuple[str, tuple | None, bool]:
    """("int" | "float" | ..., choices, None allowed) of a field's annotation."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind(args[0])
    if origin in (typing.Union, types.UnionType):
        optional = type(None) in args
        rest = [a for a in args if a is not type(None)]
        kinds = [_kind(a) for a in rest]
        names = {k[0] for k in kinds}
        name = "float" if names == {"int", "float"} else \
            "+".join(sorted(names)) if len(names) > 1 else kinds[0][0]
        return name, kinds[0][1] if len(kinds) == 1 else None, optional
    if origin is Literal:
        return "choice", tuple(args), False
    if origin in (list, tuple):
        return "list", None, False
    if origin is dict:
        return "table", None, False
    return getattr(annotation, "__name__", str(annotation)), None, False


def _unit(path: str) -> str | None:
    last = path.rsplit(".", 1)[-1]
    for suffix, unit in UNITS:
        if last.endswith(suffix):
            return unit
    return None


def _strategy_params(sc: Scenario) -> list[Parameter]:
    from warmcore.registry import get_strategy

    cls = get_strategy(sc.strategy.name)
    values = cls.validate_params(dict(sc.strategy.params), sc.strategy.shared_params)
    caps = getattr(cls.Params, "GENERIC_CAPS", None)
    return [_from_field(f"strategy.params.{name}", info, getattr(values, name),
                        source=f"{cls.name} strategy", caps=caps)
            for name, info in cls.Params.model_fields.items()]


def _governor_params(sc: Scenario) -> list[Parameter]:
    """machine.governor_params.*: the governor's tunables (its pydantic ``Tunables``)."""
    from warmcore.models.dvfs import GOVERNORS
    from warmcore.models.presets import get_preset

    name = sc.machine.governor or get_preset(sc.machine.preset).default_governor
    gov = GOVERNORS.get(name)
    if gov is None:
        return []
    return [_from_field(f"machine.governor_params.{k}", info,
                        sc.machine.governor_params.get(k, info.default),
                        source=f"Linux cpufreq {name}")
            for k, info in gov.Tunables.model_fields.items()]


def _preset_params(sc: Scenario) -> list[Parameter]:
    """machine.overrides.*: every field of the preset (models.presets.Preset), its
    range from the model, its default the preset's own value."""
    from warmcore.models.presets import get_preset

    preset = get_preset(sc.machine.preset)
    src = "; ".join(preset.sources) or f"preset {preset.name}"
    overrides = sc.machine.overrides
    out = []
    for model, obj, prefix, given in (
            (type(preset), preset, "machine.overrides.", overrides),
            (type(preset.extra), preset.extra, "machine.overrides.extra.",
             overrides.get("extra") or {})):
        for name, info in model.model_fields.items():
            if name in ("name", "description", "sources", "extra"):
                continue
            p = _from_field(prefix + name, info, given.get(name, getattr(obj, name)),
                            caps=getattr(model, "GENERIC_CAPS", None))
            out.append(dataclasses.replace(
                p, default=getattr(obj, name), section="machine",
                source=f"preset {preset.name}: " + (info.description or src)))
    return out
