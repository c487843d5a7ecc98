"""The direction of dependencies, enforced: every import statement of every source
file (module level or inside a function) points to the same layer or a lower one.

    5  app.py, calibration/                     the explorer and calibration (and
                                                Streamlit: only the explorer draws)
    4  warmcore/ (orchestration: api, build, cli, registry, sweeps, the explorer's
       jobs, tables and charts...)
    3  models/, strategies/                     hardware physics and strategies
    1  simcore/                                 the engine core

models/ and strategies/ are siblings: neither imports the other. import-linter
would do the same, but it walks the installed package's folder, and an editable
install maps the source folders into ``warmcore`` from outside that folder, so
it would not see them; parsing the files here works for any install.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# module prefix (as imported) -> (layer, name); the longest prefix wins.
LAYERS = {
    "warmcore.simcore": (1, "core"),
    "warmcore.models": (3, "models"),
    "warmcore.strategies": (3, "strategies"),
    "warmcore.calibration": (5, "calibration"),
    "warmcore.app": (5, "app"),
    "warmcore": (4, "orchestration"),
    # the explorer's widgets: below it, the job manager, its tables and charts run
    # (and are tested) without Streamlit
    "streamlit": (5, "streamlit"),
}
# source location -> the module prefix it installs as (pyproject's package-dir)
SOURCES = {"simcore": "warmcore.simcore", "models": "warmcore.models",
           "strategies": "warmcore.strategies", "calibration": "warmcore.calibration",
           "warmcore": "warmcore", "app.py": "warmcore.app"}
# Siblings in one layer that must not import each other.
SEPARATE = {("models", "strategies"), ("strategies", "models")}


def layer_of(module: str) -> tuple[int, str] | None:
    best = None
    for prefix, layer in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and \
                (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best[1] if best else None


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def source_files(root: Path = ROOT):
    """(path, module name) of every source file of the package."""
    for src, prefix in SOURCES.items():
        where = root / src
        if where.is_file():
            yield where, prefix
            continue
        for path in sorted(where.rglob("*.py")):
            rel = path.relative_to(where).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield path, ".".join([prefix, *parts])


def back_edges(root: Path = ROOT) -> list[str]:
    bad = []
    for path, module in source_files(root):
        mine = layer_of(module)
        for line, target in imports_of(path, module):
            theirs = layer_of(target)
            if mine is None or theirs is None or target in ("warmcore", "warmcore.__init__"):
                continue
            if theirs[0] > mine[0] or (mine[1], theirs[1]) in SEPARATE:
                bad.append(f"{path.relative_to(root)}:{line}: {mine[1]} ({module}) imports "
                           f"{theirs[1]} ({target})")
    return bad


def test_no_import_points_up_or_across():
    assert back_edges() == []


def test_every_source_folder_is_checked():
    modules = {m for _, m in source_files()}
    for expected in ("warmcore.simcore.kernel", "warmcore.models.cache",
                     "warmcore.strategies.pc", "warmcore.api", "warmcore.build",
                     "warmcore.jobs", "warmcore.explorer_data", "warmcore.explorer_charts",
                     "warmcore.app"):
        assert expected in modules


@pytest.mark.parametrize("where, line, edge", [
    ("simcore/kernel/core.py", "from warmcore.build import simulate", "core"),
    ("simcore/config/edit.py", "import warmcore.api", "core"),
    ("models/cache.py", "from warmcore.strategies.base import Strategy", "models"),
    ("strategies/pc.py", "from warmcore.models.hardware import HardwareMachine", "strategies"),
    ("strategies/pc.py", "from warmcore.registry import get_strategy", "strategies"),
    ("warmcore/build.py", "from warmcore.calibration import fit", "orchestration"),
    ("warmcore/jobs.py", "import streamlit as st", "orchestration"),
    ("warmcore/explorer_charts.py", "from streamlit import altair_chart", "orchestration"),
])
def test_a_deliberate_back_edge_is_caught(tmp_path, where, line, edge):
    """The check itself: a copy of the tree with one back-edge added fails it."""
    for src in SOURCES:
        p = ROOT / src
        if p.is_file():
            (tmp_path / src).write_text(p.read_text())
        else:
            for f in p.rglob("*.py"):
                dest = tmp_path / src / f.relative_to(p)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(f.read_text())
    target = tmp_path / where
    target.write_text(target.read_text() + f"\n\ndef _edge():\n    {line}\n")
    found = back_edges(tmp_path)
    assert len(found) >= 1 and all(where in f for f in found)
    assert any(f"{edge} (" in f for f in found)
