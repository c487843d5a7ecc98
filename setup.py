"""Optional compiled hot path: the hardware model's per-segment code built with Cython.

The modules in COMPILED stay plain Python: the hardware model's per-segment cost
(cache, coherence, membus, hardware) and the recorder, typed by the .pxd files
beside them. Everything else
is in pyproject.toml; the extensions are *optional*. Without a C compiler the
build warns and warmcore runs the same code as plain Python (same numbers, slower:
README.md gives the measured factor). The C is built with -ffp-contract=off so no
multiply-add is fused: the compiled and the plain module then round every
operation alike and give bit-identical results.

The source folders install under the ``warmcore`` namespace (pyproject's
package-dir: ``models/`` is ``warmcore.models``). Cython finds the augmenting
``.pxd`` of a module, and the ones it cimports, by the module's dotted name, so
``warmcore.models.cache`` needs ``warmcore/models/cache.pxd`` on its include
path; ``pxd_include_dir`` lays the .pxd files out that way under build/.
Without it the modules would compile untyped: valid, but silently slow
(tests/test_compiled.py checks that the typed modules are typed). A module with
no .pxd would compile untyped: issue 33 found that no faster than CPython 3.11
for the engine's per-event code, so COMPILED lists none.

Each build records what its extensions were built from: BuildExt writes
``compiled-sources.json`` beside them, in each folder (the sha256 of each module's
.py and of its package's .pxd files, and the extension's size), which each
package that may hold compiled modules checks on import: a stale extension (say
models/cache.py edited in an editable install since the last build) is refused,
the .py runs instead and one line says to rebuild (simcore/compiled.py). The
build side uses content hashes too: a generated .c whose sources' hashes differ
from ``build/cython-sources.json`` (what each .c was generated from) is deleted
before cythonize, so it is regenerated even when a git checkout left the .py
older than it.

The explorer, app.py at the checkout's top, is a Streamlit script rather than a
module: build_py ships a copy as ``warmcore/explorer/app.py``, alone in its folder,
since ``streamlit run`` puts the script's folder first on sys.path (``warmcore
explore`` runs it; an editable install runs the checkout's app.py).
"""

import hashlib
import json
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

# The hot path of the hardware model: cache warmth and the per-segment cost, typed by
# their .pxd files; and the recorder's per-request calls (simcore/recorder.pxd: 9%
# fewer instructions per M/M/c customer). A module with no .pxd may be listed too
# (compiled untyped), but none is: issue 33 compiled the kernel, recorder, histogram,
# pools, request factory, load generators, governor and strategies untyped,
# bit-identical, and measured no faster under CPython 3.11 (docs/architecture.md
# "The compiled hot path").
COMPILED = ("warmcore.models.cache", "warmcore.models.coherence", "warmcore.models.membus",
            "warmcore.models.hardware", "warmcore.simcore.recorder")
ROOT = Path(__file__).resolve().parent
SOURCE_DIRS = {"warmcore.models": "models", "warmcore.models.workloads": "models/workloads",
               "warmcore.simcore": "simcore", "warmcore.simcore.kernel": "simcore/kernel",
               "warmcore.strategies": "strategies"}    # as pyproject's package-dir
# Beside the extensions: what each was built from (warmcore.simcore.compiled.MANIFEST).
MANIFEST = "compiled-sources.json"
# What each generated .c was generated from.
C_RECORD = ROOT / "build" / "cython-sources.json"
# The digests of this build's sources, taken before cythonize read them (extensions()):
# what the manifest records, so that a source edited during the build is not recorded
# as built (it would then be refused as stale, the safe way round).
GENERATED_FROM: dict[str, dict[str, str]] = {}


def source_of(module: str, suffix: str = ".py") -> str:
    package, _, name = module.rpartition(".")
    return f"{SOURCE_DIRS[package]}/{name}{suffix}"


# The explorer script, and where the wheel ships it (warmcore.cli.explorer_script).
EXPLORER = ("app.py", "warmcore/explorer/app.py")


class BuildPy(build_py):
    """build_py, plus the explorer script copied to warmcore/explorer/ in the wheel."""

    def run(self):
        super().run()
        if not self.editable_mode:      # editable: warmcore explore runs the checkout's
            target = Path(self.build_lib, EXPLORER[1])
            self.mkpath(str(target.parent))
            self.copy_file(str(ROOT / EXPLORER[0]), str(target))

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        return outputs if self.editable_mode else [*outputs,
                                                   str(Path(self.build_lib, EXPLORER[1]))]


def package_pxds(module: str) -> list[str]:
    """The .pxd files of the compiled modules of ``module``'s package (its own and the
    ones it may cimport: a changed layout there changes its C too). The stale check
    reads them beside the extension (simcore/compiled.py), so only its own folder's."""
    package = module.rpartition(".")[0]
    pxds = (source_of(m, ".pxd") for m in COMPILED if m.rpartition(".")[0] == package)
    return [f for f in pxds if (ROOT / f).is_file()]


def source_digests(module: str) -> dict[str, str]:
    """File name -> sha256 of what the module's extension is compiled from: its .py and
    its package's .pxd files."""
    files = [source_of(module), *package_pxds(module)]
    return {Path(f).name: hashlib.sha256((ROOT / f).read_bytes()).hexdigest() for f in files}


def drop_outdated_c() -> dict[str, dict[str, str]]:
    """Delete each generated .c whose sources changed since it was generated (by
    content: modification times do not survive a git checkout), so that cythonize
    regenerates it; return the digests to record once it has."""
    try:
        before = json.loads(C_RECORD.read_text())
    except (OSError, ValueError):
        before = {}
    now = {module: source_digests(module) for module in COMPILED}
    for module, digests in now.items():
        if before.get(module) != digests:
            (ROOT / source_of(module, ".c")).unlink(missing_ok=True)
    return now


class BuildExt(build_ext):
    """build_ext, plus compiled-sources.json beside the extensions: per extension file,
    the module, its size and the digests of the sources it was built from. An
    extension that failed to build (they are optional) loses its entry, so one left
    from an earlier build is refused at import rather than trusted."""

    def run(self):
        self._built = {}
        super().run()
        folders: dict[Path, dict] = {}
        for name, digests in self._built.items():
            fullname = self.get_ext_fullname(name)
            filename = Path(self.get_ext_filename(fullname))
            if self.inplace:    # setuptools copied it beside its source
                where = ROOT / source_of(fullname).rpartition("/")[0] / filename.name
            else:
                where = Path(self.build_lib, filename)
            entry = None if digests is None or not where.is_file() else {
                "module": fullname, "size": where.stat().st_size, "sources": digests}
            folders.setdefault(where.parent, {})[where.name] = entry
        for folder, entries in folders.items():
            manifest = folder / MANIFEST
            try:
                record = json.loads(manifest.read_text())
            except (OSError, ValueError):
                record = {}
            for ext, entry in entries.items():
                if entry is None:
                    record.pop(ext, None)
                else:
                    record[ext] = entry
            if record or manifest.exists():
                manifest.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")

    def build_extension(self, ext):
        self._built[ext.name] = None          # until it has built (or was up to date)
        super().build_extension(ext)
        self._built[ext.name] = GENERATED_FROM.get(ext.name)


def pxd_include_dir() -> str:
    """build/cython-pxd/warmcore/models/*.pxd: the .pxd files under their dotted names
    (of the modules that have one).
    A copy is rewritten only when its source differs, keeping the source's time:
    cythonize regenerates a .c older than a .pxd it uses, and fresh copies on every
    build made it regenerate and recompile cache and hardware each time."""
    top = ROOT / "build" / "cython-pxd"
    for module in COMPILED:
        source = ROOT / source_of(module, ".pxd")
        if not source.is_file():     # compiled untyped
            continue
        target = top.joinpath(*module.split(".")).with_suffix(".pxd")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            shutil.copy2(source, target)
        for pkg in target.relative_to(top).parents:   # packages need an __init__.pxd
            init = top / pkg / "__init__.pxd"
            if not init.is_file():
                init.touch()
    return str(top)


def extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # no Cython at build time: plain Python only
        return []
    generated_from = drop_outdated_c()
    GENERATED_FROM.update(generated_from)
    exts = cythonize(
        [Extension(name, [source_of(name)], extra_compile_args=["-O2", "-ffp-contract=off"])
         for name in COMPILED],
        include_path=[pxd_include_dir()],
        compiler_directives={"language_level": 3, "annotation_typing": False},
        quiet=True,
    )
    C_RECORD.write_text(json.dumps(generated_from, indent=1, sort_keys=True) + "\n")
    for ext in exts:   # set after cythonize, which builds new Extensions without the flag
        ext.optional = True   # a failed compile warns; the .py modules are used instead
    return exts


if __name__ == "__main__":   # the build runs this file as __main__; tests import COMPILED
    setup(ext_modules=extensions(), cmdclass={"build_py": BuildPy, "build_ext": BuildExt})
