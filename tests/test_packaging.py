"""The distribution: one top-level import package, ``warmcore``, with the source
folders, the compiled hot path (or its .py fallback) and the built-in scenarios."""

from __future__ import annotations

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
    for expected in ("warmcore/__init__.py", "warmcore/api.py", "warmcore/simcore/kernel.py",
                     "warmcore/models/cache.py", "warmcore/strategies/pc.py",
                     "warmcore/calibration/__init__.py",
                     "warmcore/simcore/scenarios/pipeline.toml"):
        assert expected in names
    assert not any(n.startswith(("tests/", "setup.py", "bench/")) for n in names)
    assert not any(n.endswith(".so") for n in names)      # no stale extension slipped in


def test_import_from_the_top_of_a_checkout_finds_the_mapped_folders():
    """Python started in the checkout finds warmcore/ there before any installed copy;
    the folders pyproject maps into the namespace must still be found."""
    code = ("import warmcore, warmcore.simcore.kernel as k, warmcore.models.smt as m; "
            "print(k.__file__); print(m.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [str(ROOT / "simcore" / "kernel.py"), str(ROOT / "models" / "smt.py")]
