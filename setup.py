"""Optional compiled hot path: the hardware model's per-segment code built with Cython.

The modules in COMPILED stay plain Python; their .pxd files add C types for
Cython. Everything else is in pyproject.toml; the extensions are *optional*. Without
a C compiler the build warns and warmcore runs the same code as plain Python
(same numbers, about 4x slower on the cache-heavy scenarios). The C is built
with -ffp-contract=off so no multiply-add is fused: the compiled and the plain
module then round every operation alike and give bit-identical results.
"""

from setuptools import Extension, setup

# The hot path of the hardware model: cache warmth and the per-segment cost.
COMPILED = ("models.cache", "models.coherence", "models.membus", "models.hardware")


def extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # no Cython at build time: plain Python only
        return []
    exts = cythonize(
        [Extension(name, [name.replace(".", "/") + ".py"],
                   extra_compile_args=["-O2", "-ffp-contract=off"])
         for name in COMPILED],
        compiler_directives={"language_level": 3, "annotation_typing": False},
        quiet=True,
    )
    for ext in exts:   # set after cythonize, which builds new Extensions without the flag
        ext.optional = True   # a failed compile warns; the .py modules are used instead
    return exts


if __name__ == "__main__":   # the build runs this file as __main__; tests import COMPILED
    setup(ext_modules=extensions())
