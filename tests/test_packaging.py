"""The distribution: one top-level import package, ``warmcore``, with the source
folders, the compiled hot path (or its .py fallback) and the built-in scenarios."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import build_wheel

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_package(tmp_path):
    # Without a C compiler the (optional) extensions are skipped: faster, same layout.
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"warmcore"}
    for expected in ("warmcore/__init__.py", "warmcore/api.py",
                     "warmcore/simcore/kernel/__init__.py",
                     "warmcore/models/cache.py", "warmcore/strategies/pc.py",
                     "warmcore/calibration/__init__.py", "warmcore/simcore/config/edit.py",
                     "warmcore/simcore/scenarios/pipeline.toml",
                     "warmcore/explorer/app.py"):          # the explorer, alone in its folder
        assert expected in names
    assert [n for n in names if n.startswith("warmcore/explorer/")] == ["warmcore/explorer/app.py"]
    assert "warmcore/app.py" not in names
    assert not any(n.startswith(("tests/", "setup.py", "bench/")) for n in names)
    assert not any(n.endswith(".so") for n in names)      # no stale extension slipped in
    assert "warmcore/models/compiled-sources.json" not in names   # nor its build record
    assert not any(n.endswith((".c", ".pxd")) for n in names)      # build inputs stay out


def _imported(code: str, cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=cwd, capture_output=True,
                          text=True)


FILES = ("import warmcore, warmcore.simcore.kernel as k, warmcore.models.smt as m, "
         "warmcore.calibration as c; print(warmcore.__file__, k.__file__, m.__file__, "
         "c.__file__)")


@pytest.mark.parametrize("where", ["top", "elsewhere"])
def test_the_editable_install_imports_this_checkouts_sources(where, tmp_path):
    """The suite runs after ``pip install -e '.[test]'`` (README): from the checkout's top
    (warmcore/ found first on sys.path) and from any other folder (setuptools' editable
    finder), the package and the folders pyproject maps into it are this checkout's."""
    p = _imported(FILES, ROOT if where == "top" else tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(ROOT / "warmcore" / "__init__.py"),
                                str(ROOT / "simcore" / "kernel" / "__init__.py"),
                                str(ROOT / "models" / "smt.py"),
                                str(ROOT / "calibration" / "__init__.py")], (
        "not this checkout's sources: run the tests after pip install -e '.[test]' here")


@pytest.mark.parametrize("where", ["top", "elsewhere"])
@pytest.mark.parametrize("name", ["tests", "bench", "docs", "examples", "app", "setup"])
def test_only_the_mapped_folders_are_in_the_namespace(name, where, tmp_path):
    """No search-path patch: the checkout's other folders and files are not warmcore's."""
    p = _imported(f"import warmcore.{name}", ROOT if where == "top" else tmp_path)
    assert p.returncode == 1
    assert f"ModuleNotFoundError: No module named 'warmcore.{name}'" in p.stderr


def test_a_checkouts_package_folder_alone_says_how_to_install_it(tmp_path):
    """Python started at the top of a checkout that was never installed (or while a wheel
    is installed) finds that checkout's warmcore/, which holds only the orchestration:
    one clear error instead of a failure at the first import of a mapped folder."""
    shutil.copytree(ROOT / "warmcore", tmp_path / "warmcore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    p = _imported("import warmcore", tmp_path, "-S")      # -S: no site, no editable finder
    assert p.returncode == 1
    assert p.stderr.strip().splitlines()[-1] == (
        f"ImportError: warmcore: {tmp_path / 'warmcore'} is a source checkout's package "
        "folder without the folders an install maps into it; install the checkout "
        "(pip install -e .) or run from outside it")


def test_the_readmes_folder_table_matches_pyproject_and_the_layer_test():
    """README's "folder -> import path -> layer" table says what pyproject's package-dir
    and tests/test_layers.py do."""
    import re
    import tomllib

    from tests.test_layers import LAYERS, layer_of

    mapped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    rows = re.findall(r"^\| `(\w+)/` \| `([\w.]+)` \| (\d) ", (ROOT / "README.md").read_text(),
                      re.M)
    assert {folder for folder, _, _ in rows} == {*mapped.values(), "warmcore"}
    for folder, module, layer in rows:
        assert mapped.get(module, "warmcore") == folder
        assert layer_of(module)[0] == int(layer), module
    assert LAYERS["warmcore.app"][0] == 5      # app.py, the script, is the top layer too
