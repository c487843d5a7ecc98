"""The compiled hot path (setup.py: Cython over the plain .py modules) changes speed only.

setup.py compiles the modules in COMPILED from the same .py sources, typed by the
.pxd files beside them. A build without a C compiler runs the same modules as
plain Python, so the two must give the same numbers bit for bit: every
arithmetic step in the same order, no fused multiply-adds (-ffp-contract=off),
the same tables. A built extension is used only while it matches its sources:
the build records their sha256 in compiled-sources.json beside it, and each
package that may hold compiled modules (the core's too) runs the .py instead of
a stale one, saying so in one line (simcore/compiled.py).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
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
for name in HIDE & set(sys.modules):   # mmc's ideal machine needs no cache model
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
                                 reason="extensions not built (no C compiler at install) "
                                        "or stale (then test_no_built_extension_is_stale "
                                        "fails)")


@needs_build
@pytest.mark.parametrize("args", [
    ["pipeline", "--strategy", "pec", "--requests", "1500"],     # coherence transfers
    ["contended", "--requests", "1500"],                         # contended lines, membus
    ["pipeline", "--set", "machine.preset=epyc-zen3", "--strategy", "pec",
     "--requests", "800"],                                       # transfers across CCXs
    ["throughput-machine", "--set", "workload.jobs=16", "--set", "machine.preset=t1000"],
    ["pipeline", "--strategy", "jetty9-milestone", "--requests", "1500"],   # pool dispatches
    ["pipeline", "--strategy", "pc", "--requests", "1500"],      # the full model's bench line
])
def test_compiled_and_plain_python_give_identical_results(args):
    assert run_cli(args, pure=True) == run_cli(args, pure=False)


def test_source_only_loader_really_loads_the_sources():
    """The check above is only worth something if the plain run is plain Python."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = SOURCE_ONLY.split("import warmcore.cli")[0] + (
        "import importlib\n"
        "for name in sorted(HIDE):\n"
        "    importlib.import_module(name)\n"
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
    "warmcore.simcore.recorder": ("Recorder", "in_system"),
}


def test_every_typed_module_is_probed():
    """The modules with a .pxd are the typed ones; each has a probe below."""
    import setup

    typed = {m for m in COMPILED if (ROOT / setup.source_of(m, ".pxd")).is_file()}
    assert typed == set(TYPED_PROBES)


@needs_build
@pytest.mark.parametrize("module", sorted(TYPED_PROBES))
def test_compiled_modules_are_typed_not_just_compiled(module):
    """Cython finds each .pxd by the module's dotted name (setup.pxd_include_dir);
    without it the build compiles the modules untyped: valid, and silently slow."""
    cls_name, attr = TYPED_PROBES[module]
    cls = getattr(importlib.import_module(module), cls_name)
    obj = cls.__new__(cls)
    with pytest.raises(TypeError):
        setattr(obj, attr, "not a number")


# -- a stale extension is refused ---------------------------------------------------

# Every package holding compiled modules checks them on import (its __init__).
CHECKED_PACKAGES = ("warmcore.simcore", "warmcore.simcore.kernel", "warmcore.strategies",
                    "warmcore.models", "warmcore.models.workloads")


def test_every_compiled_module_is_in_a_checked_package():
    assert {m.rpartition(".")[0] for m in COMPILED} <= set(CHECKED_PACKAGES)


@pytest.mark.parametrize("package", CHECKED_PACKAGES)
def test_no_built_extension_is_stale(package):
    """Every extension beside the sources matches them; else the checks above would
    skip, the compiled path untested. After editing a compiled module: pip install -e ."""
    assert importlib.import_module(package).STALE == {}, \
        "rebuild the extensions: pip install -e ."


def test_the_build_and_the_check_name_the_same_record():
    import setup

    from warmcore.simcore import compiled

    assert setup.MANIFEST == compiled.MANIFEST
    assert set(setup.source_digests("warmcore.models.cache")) == {
        "cache.py", "cache.pxd", "coherence.pxd", "membus.pxd", "hardware.pxd"}


def fake_build(folder: Path, sources=("mod.py", "mod.pxd")) -> Path:
    """A folder as the build leaves it: mod.py, mod.pxd, an 'extension' beside them (the
    check reads its size, never loads it) and the record of what it was built from."""
    from warmcore.simcore.compiled import MANIFEST, digest

    (folder / "mod.py").write_text("x = 1\n")
    (folder / "mod.pxd").write_text("cdef int x\n")
    ext = folder / f"mod{EXTENSION_SUFFIXES[0]}"
    ext.write_bytes(b"\0" * 100)
    (folder / MANIFEST).write_text(json.dumps({ext.name: {
        "module": "pkg.mod", "size": 100,
        "sources": {n: digest(folder / n) for n in sources}}}))
    return ext


def test_a_fresh_build_is_used(tmp_path):
    from warmcore.simcore.compiled import stale

    fake_build(tmp_path)
    (tmp_path / "other.py").write_text("")        # no extension: nothing to check
    assert stale(tmp_path) == {}


def test_an_edited_source_makes_its_extension_stale_whatever_its_time(tmp_path):
    from warmcore.simcore.compiled import stale

    ext = fake_build(tmp_path)
    src = tmp_path / "mod.py"
    src.write_text("x = 2\n")
    os.utime(src, (0, 0))                           # older than the build, as after a
    assert stale(tmp_path) == {"mod": "mod.py changed"}   # git checkout of an old file
    src.write_text("x = 1\n")
    (tmp_path / "mod.pxd").write_text("cdef long x\n")
    assert stale(tmp_path) == {"mod": "mod.pxd changed"}
    (tmp_path / "mod.pxd").unlink()                 # an installed wheel has no .pxd
    assert stale(tmp_path) == {}
    ext.write_bytes(b"\0" * 99)
    assert stale(tmp_path) == {"mod": "replaced after its build"}


def test_an_extension_without_a_record_is_stale(tmp_path):
    from warmcore.simcore.compiled import MANIFEST, stale

    fake_build(tmp_path)
    (tmp_path / MANIFEST).unlink()
    assert stale(tmp_path) == {"mod": "no build record"}
    (tmp_path / MANIFEST).write_text("{}")
    assert stale(tmp_path) == {"mod": "no build record"}


def test_the_build_regenerates_c_whose_sources_changed_by_content(tmp_path, monkeypatch):
    """setup.py deletes a generated .c whose sources' digests differ from the record of
    what it was generated from, so cythonize regenerates it even when the changed .py
    is older than the .c."""
    import setup

    monkeypatch.setattr(setup, "ROOT", tmp_path)
    monkeypatch.setattr(setup, "C_RECORD", tmp_path / "build" / "cython-sources.json")
    monkeypatch.setattr(setup, "COMPILED", ("warmcore.models.mod",))
    (tmp_path / "build").mkdir()
    models = tmp_path / "models"
    models.mkdir()
    (models / "mod.py").write_text("x = 1\n")
    (models / "mod.pxd").write_text("cdef int x\n")
    c = models / "mod.c"
    c.write_text("/* generated */")
    record = setup.drop_outdated_c()        # no record yet: regenerate
    assert not c.exists()
    c.write_text("/* generated */")
    setup.C_RECORD.write_text(json.dumps(record))
    assert setup.drop_outdated_c() == record and c.exists()   # unchanged: kept
    (models / "mod.py").write_text("x = 2\n")
    os.utime(models / "mod.py", (0, 0))
    setup.drop_outdated_c()
    assert not c.exists()


def installed_copy(dest: Path) -> Path:
    """This checkout laid out as installed (the folders inside warmcore/), with its
    built extensions and their record."""
    site = dest / "site"
    skip = shutil.ignore_patterns("__pycache__", "*.c")
    shutil.copytree(ROOT / "warmcore", site / "warmcore", ignore=skip)
    for folder in ("simcore", "models", "strategies", "calibration"):
        shutil.copytree(ROOT / folder, site / "warmcore" / folder, ignore=skip)
    return site


LOADED = ("import sys, warmcore.cli; rc = warmcore.cli.main(sys.argv[1:]); "
          "print(*sorted(m.__file__.rsplit('/', 1)[1] for n, m in sys.modules.items() "
          "if n in {names!r}), file=sys.stderr); sys.exit(rc)")


def run_copy(site: Path, cwd: Path, package: str = "warmcore.models",
             args: tuple[str, ...] = ("pipeline",)) -> tuple[str, list[str]]:
    """Run the copy; stderr's last line lists the files of ``package``'s compiled
    modules as loaded."""
    code = LOADED.format(names={m for m in COMPILED if m.rpartition(".")[0] == package})
    p = subprocess.run([sys.executable, "-c", code, "run", *args, "--requests", "300",
                        "--json"], cwd=cwd, env=dict(os.environ, PYTHONPATH=str(site)),
                       capture_output=True, text=True, check=True)
    return p.stdout, p.stderr.splitlines()


def sources_of(package: str) -> str:
    """The .py files of ``package``'s compiled modules, as run_copy lists them."""
    return " ".join(sorted(m.rpartition(".")[2] + ".py" for m in COMPILED
                           if m.rpartition(".")[0] == package))


@needs_build
def test_an_edited_compiled_module_runs_from_its_source_and_says_so(tmp_path):
    site = installed_copy(tmp_path)
    compiled_out, err = run_copy(site, tmp_path)
    assert len(err) == 1 and not any(f.endswith(".py") for f in err[0].split())
    src = site / "warmcore" / "models" / "cache.py"
    src.write_text(src.read_text() + "# edited after the build\n")
    plain_out, err = run_copy(site, tmp_path)
    # the modules that cimport cache run as .py too: the package's every compiled module
    assert err == [
        "warmcore: stale compiled modules (cache: cache.py changed); warmcore.models runs "
        "its .py modules instead (same results, slower). Rebuild: pip install -e .",
        sources_of("warmcore.models")]
    assert plain_out == compiled_out



def test_a_core_package_refuses_its_stale_extension(tmp_path, monkeypatch):
    """The check is the core's (simcore/compiled.py), run first thing by every package
    that may hold compiled modules, the core's own included: a stale extension is
    never loaded (here it is not even a valid one, so loading it would fail), its
    .py runs instead and one line says so."""
    import warmcore.simcore.compiled as compiled

    folder = tmp_path / "corepkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    fake_build(folder)
    (folder / "mod.py").write_text("x = 2\n")          # edited after the build
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("corepkg", "corepkg.mod"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import corepkg

    assert compiled.refuse_stale("corepkg", corepkg.__path__) == {
        "corepkg.mod": "mod.py changed"}
    mod = importlib.import_module("corepkg.mod")
    assert mod.__file__.endswith("mod.py") and mod.x == 2
    monkeypatch.delitem(sys.modules, "corepkg.mod")
