"""A bad setting as one line: ``ConfigError`` (the dotted field and the reason) and the
one translator of pydantic's validation errors into it.

Models name fields relative to their own table (a preset says ``v_min``, a governor
``params.up_threshold``); whoever puts that table into a scenario re-roots the error
with ``ConfigError.under`` (``machine.overrides.v_min``). A model validator that
blames a field raises ``ConfigError(field, reason)``: pydantic keeps the exception, so
the translator reads its field and reason instead of parsing a "field: reason" text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from pydantic import ValidationError


class ConfigError(ValueError):
    """A bad scenario: ``field`` is the dotted path, ``reason`` says what is wrong."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")

    def __reduce__(self):               # picklable: errors cross process pools and Dask
        return (ConfigError, (self.field, self.reason))

    def under(self, table: str, aliases: Mapping[str, str] | None = None) -> ConfigError:
        """The same error seen from where the model's table sits: the field prefixed
        with ``table`` ("machine.overrides" + "v_min"). ``aliases`` maps a field's first
        part to the path a user writes instead, whole (a preset's ``cores_per_socket``
        is set as ``machine.cores``)."""
        head, dot, rest = self.field.partition(".")
        if aliases and head in aliases:
            return ConfigError(aliases[head] + dot + rest, self.reason)
        return ConfigError(".".join(p for p in (table, self.field) if p), self.reason)


def short_repr(value, limit: int = 60) -> str:
    """repr of a value, cut to ``limit`` characters (errors never echo whole tables)."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit - 3] + "..."


# Tags pydantic puts in an error's path for the members of a union or a wrapped
# type ("constrained-int", "list[constrained-int]", "function-after[...]"): not
# fields a user writes.
_TYPE_TAG = re.compile(r"^(constrained-\w+|int|float|str|bool|none|[\w-]+\[.*\])$")


# pydantic's range and type messages, as a user reads them.
PLAIN_MESSAGES = {
    "less_than_equal": "must be at most {le}", "less_than": "must be below {lt}",
    "greater_than_equal": "must be at least {ge}", "greater_than": "must be greater than {gt}",
    "finite_number": "must be a finite number", "too_long": "at most {max_length} items",
    "int_type": "should be a whole number", "int_from_float": "should be a whole number",
    "float_type": "should be a number", "bool_type": "should be true or false",
    "string_type": "should be a string", "list_type": "should be a list",
    "too_short": "needs at least {min_length}",
    "tuple_type": "should be a list of numbers"}     # a preset's P-states, SMT curve


def _num(v):
    """A bound as written: 1024, 1e+07, 0.001."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e6:
        return str(int(v))
    return f"{v:g}" if isinstance(v, float) and float(f"{v:g}") == v else str(v)


def _got(value, note: str = "") -> str:
    """" (got VALUE)", or " (got VALUE, NOTE)": the value the reason is about."""
    return f" (got {short_repr(value)}{', ' + note if note else ''})"


def plain_message(err: dict, note: str = "") -> str:
    """One pydantic error's reason as a user reads it, with the value given."""
    ctx = {k: _num(v) for k, v in err.get("ctx", {}).items()}
    msg = PLAIN_MESSAGES.get(err["type"], err["msg"]).format(**ctx)
    if "input" in err and not isinstance(err["input"], dict):
        msg += _got(err["input"], note)
    return msg


def config_error(e: ValidationError, prefix: str = "", *,
                 aliases: Mapping[str, str] | None = None,
                 tags: Mapping[str, Collection[str]] | None = None,
                 unknown: str = "unknown key", plain: bool = True, indices: bool = True,
                 note: str = "") -> ConfigError:
    """The first error of a validation (one of a value given before one of a field left
    out) as one ConfigError: the field as a user writes it, the reason without
    pydantic's internals. What differs between the models:

    prefix   where the model's table sits ("strategy.params", "calibration")
    aliases  fields a user sets elsewhere (ConfigError.under)
    tags     {field: its tagged union's tags}: pydantic puts the member's tag in the
             path ("workload.open.rate_per_s"); dropped, and named when missing
    unknown  the reason for a key the model does not have
    plain    pydantic's range and type messages in plain words (PLAIN_MESSAGES);
             False keeps pydantic's own ("Input should be less than or equal to 100")
    indices  list positions in the path ("work.program.0"); False names the list
    note     added to "(got VALUE, note)": where the value went ("ondemand governor")
    """
    # A value given wrong before a table or field left out: the file's author wrote
    # the value, and a missing table hides the checks of the fields beside it
    err = min(e.errors(), key=lambda x: x["type"] == "missing")
    tags = tags or {}
    loc = [str(x) for x in err["loc"]
           if not _TYPE_TAG.match(str(x)) and (indices or not isinstance(x, int))]
    loc = [x for i, x in enumerate(loc) if not (i > 0 and x in tags.get(loc[i - 1], ()))]
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, ConfigError):         # a validator that names its field itself
        field = ".".join(p for p in (*loc, cause.field) if p)    # "": the table itself
        return ConfigError(field, cause.reason).under(prefix, aliases)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = unknown
    elif err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        union, tag = loc[-1], err["ctx"]["discriminator"].strip("'")
        known = ", ".join(tags.get(union, ()))
        if err["type"] == "union_tag_invalid":
            msg = f"unknown {union} {tag}; known: {known}"
        else:
            loc.append(tag)
            msg = f"missing; one of {known}"
    elif err["type"] in PLAIN_MESSAGES and plain:
        msg = plain_message(err, note)
    elif err["type"] in ("model_type", "dict_type", "model_attributes_type"):
        msg = f"should be a table (got {short_repr(err.get('input'))})"
    elif "input" in err and err["type"] != "missing" and not (
            err["type"] == "value_error" and isinstance(err["input"], dict)):
        # (a whole table's validator names its field itself: no dump of the table)
        msg += _got(err["input"], note)
    field = ".".join(loc) or ("" if prefix else "scenario")
    return ConfigError(field, msg).under(prefix, aliases)
