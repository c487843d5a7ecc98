"""The compiled hot path (setup.py: Cython over the plain .py modules) changes speed only.

A build without a C compiler runs the same modules as plain Python, so the two
must give the same numbers bit for bit: every arithmetic step in the same
order, no fused multiply-adds (-ffp-contract=off), the same tables.
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from setup import COMPILED  # noqa: E402  (the list the build compiles)

# Run warmcore's CLI with the extensions hidden: each module in COMPILED loads
# from its .py source, as it would where the build found no C compiler.
SOURCE_ONLY = """
import importlib.machinery, importlib.util, sys
from pathlib import Path
HIDE = set({names!r})

class SourceOnly(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in HIDE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        src = Path(spec.origin).with_name(name.rsplit(".", 1)[1] + ".py")
        return importlib.util.spec_from_file_location(name, src)

sys.meta_path.insert(0, SourceOnly)
import warmcore.cli
rc = warmcore.cli.main(sys.argv[1:])
for name in HIDE:
    assert sys.modules[name].__file__.endswith(".py"), name
sys.exit(rc)
"""


def compiled_modules() -> list[str]:
    return [n for n in COMPILED if not importlib.import_module(n).__file__.endswith(".py")]


def run_cli(args: list[str], pure: bool) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = ([sys.executable, "-c", SOURCE_ONLY.format(names=list(COMPILED))] if pure
           else [sys.executable, "-m", "warmcore.cli"])
    p = subprocess.run([*cmd, "run", *args, "--json"], capture_output=True, text=True,
                       env=env, cwd=ROOT, check=True)
    return p.stdout


needs_build = pytest.mark.skipif(not compiled_modules(),
                                 reason="extensions not built (no C compiler at install)")


@needs_build
@pytest.mark.parametrize("args", [
    ["pipeline", "--strategy", "pec", "--requests", "1500"],     # coherence transfers
    ["contended", "--requests", "1500"],                         # contended lines, membus
    ["pipeline", "--set", "machine.preset=epyc-zen3", "--strategy", "pec",
     "--requests", "800"],                                       # transfers across CCXs
    ["throughput-machine", "--set", "workload.jobs=16", "--set", "machine.preset=t1000"],
])
def test_compiled_and_plain_python_give_identical_results(args):
    assert run_cli(args, pure=True) == run_cli(args, pure=False)


def test_source_only_loader_really_loads_the_sources():
    """The check above is only worth something if the plain run is plain Python."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = SOURCE_ONLY.split("import warmcore.cli")[0] + (
        "import warmcore.models.hardware\n"
        "print(sorted(m.__file__ for n, m in sys.modules.items() if n in HIDE))\n")
    p = subprocess.run([sys.executable, "-c", code.format(names=list(COMPILED))],
                       capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    files = ast.literal_eval(p.stdout)
    assert len(files) == len(COMPILED) and all(f.endswith(".py") for f in files)


def test_every_extension_is_optional_so_a_build_without_a_compiler_still_installs():
    """cythonize builds new Extension objects; the optional flag must survive it
    (it once did not, and a machine without gcc could not install warmcore)."""
    pytest.importorskip("Cython")     # in the test extra; the build gets it from pyproject
    import setup

    exts = setup.extensions()
    assert sorted(e.name for e in exts) == sorted(COMPILED)
    assert all(e.optional for e in exts)
    assert all("-ffp-contract=off" in e.extra_compile_args for e in exts)


# One C-typed attribute per compiled module (from its .pxd): assigning a str to it
# raises TypeError only where the module was compiled with its .pxd; a plain
# module, or one compiled untyped, takes any value.
TYPED_PROBES = {
    "warmcore.models.cache": ("CacheState", "lines"),
    "warmcore.models.coherence": ("Directory", "max_entries"),
    "warmcore.models.membus": ("MemoryBus", "dram_ns"),
    "warmcore.models.hardware": ("HardwareMachine", "n_cpus"),
}


@needs_build
@pytest.mark.parametrize("module", COMPILED)
def test_compiled_modules_are_typed_not_just_compiled(module):
    """Cython finds each .pxd by the module's dotted name (setup.pxd_include_dir);
    without it the build compiles the modules untyped: valid, and silently slow."""
    cls_name, attr = TYPED_PROBES[module]
    cls = getattr(importlib.import_module(module), cls_name)
    obj = cls.__new__(cls)
    with pytest.raises(TypeError):
        setattr(obj, attr, "not a number")
