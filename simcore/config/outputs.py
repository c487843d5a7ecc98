"""Writing what a command produces: the path checked before any work, the file written
atomically. Every failure is a ConfigError naming the flag the path was given for.

    check_output_file(path, "--out")      # before a fit: not "", not a folder, writable
    check_output_dir(path, "--out")       # before a sweep: a folder (made if missing)
    write_atomic(path, text, "--out")     # a temporary file beside it, then renamed

A reader never sees half a file: the text goes to a temporary file in the same
folder, is flushed to disk, and replaces the target in one rename; if anything
fails the temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from warmcore.simcore.config.errors import ConfigError

_SERIAL = itertools.count()


def _reason(e: OSError) -> str:
    return e.strerror or type(e).__name__


def _nonempty(path, field: str) -> Path:
    if path is None or not str(path).strip():
        raise ConfigError(field, "an empty path (name a file or folder)")
    if "\x00" in str(path):
        raise ConfigError(field, f"{str(path)!r}: a path cannot hold a NUL character")
    return Path(path)


def _probe_writable(folder: Path, field: str, shown) -> None:
    """Create and remove a file in ``folder``: the one check that holds for root, a
    read-only file system and an ACL alike (``os.access`` does not)."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".warmcore-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise ConfigError(field, f"{shown}: cannot write in {folder} ({_reason(e)})") from None


def check_output_file(path, field: str) -> Path:
    """``path`` can be written as a file: not empty, not a folder, its folder exists and
    is writable. Checked before any work, so a fit never runs to fail at its end."""
    p = _nonempty(path, field)
    try:
        if p.is_dir():
            raise ConfigError(field, f"{path}: is a folder, not a file")
        folder = p.parent
        if not folder.exists():
            raise ConfigError(field, f"{path}: the folder {folder} does not exist")
        if not folder.is_dir():
            raise ConfigError(field, f"{path}: {folder} is not a folder")
    except OSError as e:            # a folder on the way that cannot be searched
        raise ConfigError(field, f"{path}: cannot reach it ({_reason(e)})") from None
    _probe_writable(folder, field, path)
    return p


def check_output_dir(path, field: str) -> Path:
    """``path`` is a writable folder, made (with its parents) if missing."""
    p = _nonempty(path, field)
    try:
        if p.exists() and not p.is_dir():
            raise ConfigError(field, f"{path}: is a file, not a folder")
        p.mkdir(parents=True, exist_ok=True)
    except ConfigError:
        raise
    except OSError as e:
        raise ConfigError(field, f"{path}: cannot make the folder ({_reason(e)})") from None
    _probe_writable(p, field, path)
    return p


def write_atomic(path, data: str | bytes, field: str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (see the module's text)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())

    write_atomic_with(path, write, field)


def write_atomic_with(path, write: Callable[[str], None], field: str) -> None:
    """``write(tmp)`` writes the whole file at the temporary path ``tmp``; it then
    replaces ``path`` in one rename (for writers that take a file name: Parquet,
    charts)."""
    p = _nonempty(path, field)
    # A name of its own per process and call (not mkstemp's: its file would keep mode
    # 0600 instead of what the umask gives every other file the user writes).
    tmp = str(p.parent / f".{p.name}.{os.getpid()}-{threading.get_ident()}-"
                         f"{next(_SERIAL)}.tmp")
    try:
        write(tmp)
        os.replace(tmp, p)
    except OSError as e:
        raise ConfigError(field, f"{path}: cannot write ({_reason(e)})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
