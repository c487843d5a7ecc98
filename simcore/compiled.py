"""A compiled module is used only while it matches its source.

setup.py builds the hot path with Cython from the plain ``.py`` modules (COMPILED
there: now the hardware model's cache, coherence, membus and hardware, and the
recorder, typed by their ``.pxd`` files; any module of the core, the strategies or
the workloads may be listed), and records in ``compiled-sources.json``, beside the
extensions of each folder, what each was built from: the sha256 of its ``.py`` and
of the ``.pxd`` files of its package (its own and those it may ``cimport``), and the
extension file's size. Python prefers an extension to the ``.py`` beside it, so an
edited ``cache.py`` in an editable install would otherwise be silently ignored until
the next build. Content hashes, not modification times: a git checkout sets the
times of the files it writes.

Each package that may hold compiled modules calls ``refuse_stale`` first thing in its
``__init__`` (before any of its modules is imported): ``warmcore.simcore``,
``warmcore.simcore.kernel``, ``warmcore.strategies``, ``warmcore.models`` and
``warmcore.models.workloads``. The check lives here, in the core, because the core
must not import ``models/`` (tests/test_layers.py) and both use it. On a mismatch
(a source changed, an extension replaced, or an extension with no build record)
every compiled module of that package runs from its ``.py`` instead (the
extensions of a package may ``cimport`` each other, so a plain module cannot sit
under a compiled one), with one line on standard error naming the stale ones and
how to rebuild; the numbers are the same, only slower (tests/test_compiled.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

MANIFEST = "compiled-sources.json"     # setup.py writes it, with the same name
REBUILD = "pip install -e ."


def digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def extensions(folder: str | Path) -> dict[str, str]:
    """Module stem -> the extension file the import system would load for it (the
    first of EXTENSION_SUFFIXES present), for every ``.py`` with one beside it."""
    names = set(os.listdir(folder))
    out = {}
    for src in sorted(n for n in names if n.endswith(".py")):
        stem = src[:-3]
        ext = next((stem + s for s in EXTENSION_SUFFIXES if stem + s in names), None)
        if ext is not None:
            out[stem] = ext
    return out


def stale(folder: str | Path) -> dict[str, str]:
    """Module stem -> why its extension does not match its source, for each extension
    in ``folder`` that cannot be trusted (empty: all match, or there are none)."""
    folder = Path(folder)
    exts = extensions(folder)
    if not exts:
        return {}
    try:
        record = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        record = {}
    hashes: dict[str, str] = {}           # each source file read once
    out = {}
    for stem, ext in exts.items():
        entry = record.get(ext)
        if not isinstance(entry, dict):
            out[stem] = "no build record"
            continue
        if entry.get("size") != (folder / ext).stat().st_size:
            out[stem] = "replaced after its build"
            continue
        changed = []
        for name, recorded in entry.get("sources", {}).items():
            if not (folder / name).is_file():     # an installed wheel has no .pxd
                continue
            if name not in hashes:
                hashes[name] = digest(folder / name)
            if hashes[name] != recorded:
                changed.append(name)
        if changed:
            out[stem] = f"{' and '.join(changed)} changed"
    return out


class SourceInstead:
    """A meta-path finder that loads the named modules from these ``.py`` files."""

    def __init__(self, sources: dict[str, Path]):
        self.sources = sources

    def find_spec(self, name, path=None, target=None):
        src = self.sources.get(name)
        return None if src is None else importlib.util.spec_from_file_location(name, src)


def refuse_stale(package: str, path: list[str]) -> dict[str, str]:
    """Called by the package's ``__init__``: if any extension of ``package`` is stale,
    have all of them load from their ``.py`` and say so once. Returns the stale ones
    (module name -> reason)."""
    found: dict[str, str] = {}
    sources: dict[str, Path] = {}
    for folder in path:
        bad = stale(folder)
        if bad:
            found.update({f"{package}.{stem}": why for stem, why in bad.items()})
            sources.update({f"{package}.{stem}": Path(folder, stem + ".py")
                            for stem in extensions(folder)})
    if found:
        sys.meta_path.insert(0, SourceInstead(sources))
        listed = "; ".join(f"{name.rpartition('.')[2]}: {why}"
                           for name, why in sorted(found.items()))
        print(f"warmcore: stale compiled modules ({listed}); "
              f"{package} runs its .py modules instead (same results, slower). "
              f"Rebuild: {REBUILD}", file=sys.stderr)
    return found
