"""Reading scenario, sweep and trace files: size caps, UTF-8 with the offset of the
first bad byte, TOML with its nesting capped before parsing; the built-in scenarios.
Every failure is a ConfigError naming the field the file was given for."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

from warmcore.simcore.config.errors import ConfigError, short_repr

MAX_FILE_BYTES = 1 << 20   # a scenario or sweep file (TOML): 1 MiB
MAX_TRACE_BYTES = 1 << 28  # an arrival-trace file: 256 MiB
MAX_TRACE_ARRIVALS = 10_000_000   # held as 8-byte floats: 80 MB

BUILTIN_DIR = Path(__file__).parent.parent / "scenarios"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))


def read_scenario_dict(name_or_path: str) -> dict:
    """The raw dict of a built-in scenario name or a TOML file."""
    p = Path(name_or_path)
    try:
        if not p.suffix and (BUILTIN_DIR / f"{name_or_path}.toml").exists():
            p = BUILTIN_DIR / f"{name_or_path}.toml"
        elif not p.exists():
            raise ConfigError("scenario", f"{short_repr(name_or_path)} is neither a built-in "
                              f"scenario ({', '.join(builtin_names())}) nor a file")
    except ConfigError:
        raise
    except (OSError, ValueError) as e:  # a folder on the way we may not search; a NUL
        why = getattr(e, "strerror", None) or str(e)
        raise ConfigError("scenario", f"{short_repr(name_or_path)}: cannot read ({why})") \
            from None
    return parse_toml(read_text(p, "scenario"), f"scenario: {p}")


def scenario_dict_of_text(text: str | bytes) -> dict:
    """The raw dict of a scenario's TOML text, or of an uploaded file's bytes (UTF-8, at
    most MAX_FILE_BYTES, as a file on disk)."""
    if isinstance(text, bytes):
        if len(text) > MAX_FILE_BYTES:
            raise ConfigError("scenario", f"larger than {MAX_FILE_BYTES:,} bytes")
        text = decode_utf8(text, "scenario")
    return parse_toml(text, "scenario")


def read_text(path: str | Path, field: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A file's text: at most ``max_bytes``, UTF-8 (the byte offset of the first bad
    byte otherwise); every failure a ConfigError naming ``field`` and the file."""
    try:
        with open(path, "rb") as f:
            data = read_capped(f, max_bytes)
    except OSError as e:
        raise ConfigError(field, f"{path}: cannot read ({e.strerror})") from None
    if data is None:
        raise ConfigError(field, f"{path}: larger than {max_bytes:,} bytes")
    return decode_utf8(data, f"{field}: {path}")


def read_capped(f, max_bytes: int) -> bytes | None:
    """The bytes of the open binary file ``f``, or None if there are more than
    ``max_bytes``. The size first, then chunks: ``f.read(max_bytes + 1)`` would
    reserve the whole limit at once (256 MiB for a trace file) however small the
    file; a pipe has no size."""
    if os.fstat(f.fileno()).st_size > max_bytes:
        return None
    chunks, size = [], 0
    while size <= max_bytes and (chunk := f.read(1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks) if size <= max_bytes else None


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as text; a ConfigError with the offset of the first byte that is not
    UTF-8 (a latin-1 file, UTF-16, a binary). ``where`` is "field: file" or "field"."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        field, _, name = where.partition(": ")
        raise ConfigError(field, f"{name + ': ' if name else ''}not UTF-8 text (byte "
                                 f"{e.start}: 0x{data[e.start]:02x})") from None


# Arrays and inline tables nested deeper than this are refused before parsing: tomllib
# recurses once per level, and a recursion overflow inside its C calls can surface as
# SystemError ("error return without exception set", seen once on CPython 3.11.7 under
# load) instead of RecursionError. No scenario, sweep or calibration file nests more
# than a few levels.
MAX_TOML_NESTING = 100
# What can hold a bracket that is not nesting: strings (multi-line first) and comments.
_TOML_BRACKETS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\''
    r"|#[^\n]*|[\[{]|[\]}]", re.S)


def toml_nesting(text: str) -> int:
    """The deepest nesting of brackets and braces in ``text``, outside strings and
    comments (a table header ``[[a]]`` counts 2)."""
    depth = deepest = 0
    for m in _TOML_BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def parse_toml(text: str, where: str) -> dict:
    """TOML text as a dict; ``where`` is "field: file" (or "field") for the error line."""
    field, _, name = where.partition(": ")
    prefix = f"{name}: " if name else ""
    if toml_nesting(text) > MAX_TOML_NESTING:
        raise ConfigError(field, f"{prefix}not valid TOML (nested too deeply: more than "
                                 f"{MAX_TOML_NESTING} levels)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(field, f"{prefix}not valid TOML ({e})") from None
    # Dotted keys (a.b.c = 1) and table headers ([a.b.c]) nest without brackets: the
    # parsed document is measured too, or a key 3,000 levels deep reaches the code
    # that walks it (merging, validation) as a RecursionError.
    if data_nesting(data) > MAX_TOML_NESTING:
        raise ConfigError(field, f"{prefix}not valid TOML (nested too deeply: more than "
                                 f"{MAX_TOML_NESTING} levels)")
    return data


def data_nesting(data) -> int:
    """The deepest nesting of tables and arrays in parsed data, walked without
    recursion (it stops counting past MAX_TOML_NESTING + 1)."""
    deepest, stack = 0, [(data, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_TOML_NESTING:
            break
        children = node.values() if isinstance(node, dict) else \
            node if isinstance(node, list) else ()
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest
