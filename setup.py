"""Optional compiled hot path: the hardware model's per-segment code built with Cython.

The modules in COMPILED stay plain Python; their .pxd files add C types for
Cython. Everything else is in pyproject.toml; the extensions are *optional*. Without
a C compiler the build warns and warmcore runs the same code as plain Python
(same numbers, about 4x slower on the cache-heavy scenarios). The C is built
with -ffp-contract=off so no multiply-add is fused: the compiled and the plain
module then round every operation alike and give bit-identical results.

The source folders install under the ``warmcore`` namespace (pyproject's
package-dir: ``models/`` is ``warmcore.models``). Cython finds the augmenting
``.pxd`` of a module, and the ones it cimports, by the module's dotted name, so
``warmcore.models.cache`` needs ``warmcore/models/cache.pxd`` on its include
path; ``pxd_include_dir`` lays the .pxd files out that way under build/.
Without it the modules would compile untyped: valid, but silently slow
(tests/test_compiled.py checks that the built modules are typed).

The explorer, app.py at the checkout's top, is a Streamlit script rather than a
module: build_py ships a copy as ``warmcore/explorer/app.py``, alone in its folder,
since ``streamlit run`` puts the script's folder first on sys.path (``warmcore
explore`` runs it; an editable install runs the checkout's app.py).
"""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

# The hot path of the hardware model: cache warmth and the per-segment cost.
COMPILED = ("warmcore.models.cache", "warmcore.models.coherence", "warmcore.models.membus",
            "warmcore.models.hardware")
ROOT = Path(__file__).resolve().parent
SOURCE_DIRS = {"warmcore.models": "models"}    # as pyproject's package-dir


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


def pxd_include_dir() -> str:
    """build/cython-pxd/warmcore/models/*.pxd: the .pxd files under their dotted names."""
    top = ROOT / "build" / "cython-pxd"
    for module in COMPILED:
        target = top.joinpath(*module.split(".")).with_suffix(".pxd")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / source_of(module, ".pxd"), target)
        for pkg in target.relative_to(top).parents:   # packages need an __init__.pxd
            (top / pkg / "__init__.pxd").touch()
    return str(top)


def extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # no Cython at build time: plain Python only
        return []
    exts = cythonize(
        [Extension(name, [source_of(name)], extra_compile_args=["-O2", "-ffp-contract=off"])
         for name in COMPILED],
        include_path=[pxd_include_dir()],
        compiler_directives={"language_level": 3, "annotation_typing": False},
        quiet=True,
    )
    for ext in exts:   # set after cythonize, which builds new Extensions without the flag
        ext.optional = True   # a failed compile warns; the .py modules are used instead
    return exts


if __name__ == "__main__":   # the build runs this file as __main__; tests import COMPILED
    setup(ext_modules=extensions(), cmdclass={"build_py": BuildPy})
