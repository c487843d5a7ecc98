"""warmcore: should this task run on the thread that produced it, or be dispatched?

The public API (docs/api.md)::

    import warmcore
    sc = warmcore.Scenario.load("pipeline")          # built-in name, TOML file or dict
    r = warmcore.simulate(sc, requests=5000)         # a typed warmcore.Result
    print(r.throughput_rps, r.latency_us.p99)
    rs = warmcore.compare(sc, ["pc", "pec", "epc"])  # one Result per strategy
    warmcore.frame(rs)                               # pandas DataFrame
    warmcore.parameters(sc)                          # the typed parameter space

Names are loaded on first use, so ``import warmcore.models.cache`` does not pull in
the engine, SimPy or SciPy.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# In a source checkout, Python started at the repository's top finds this folder
# before the installed package; the folders that pyproject maps into the namespace
# (simcore/, models/, strategies/, calibration/, app.py) then live beside it, not in
# it. Searching the checkout's top as well finds them, so ``import warmcore`` works
# there as it does installed (then running the checkout's own sources).
_here = Path(__file__).resolve().parent
if not (_here / "simcore").is_dir() and (_here.parent / "simcore" / "kernel.py").is_file():
    __path__.append(str(_here.parent))

try:
    __version__ = version("warmcore")
except PackageNotFoundError:        # a source tree that was never installed
    __version__ = "0+unknown"

_EXPORTS = {
    "Scenario": "warmcore.simcore.config",
    "ConfigError": "warmcore.simcore.config",
    "Result": "warmcore.result",
    "simulate": "warmcore.api",
    "compare": "warmcore.api",
    "frame": "warmcore.api",
    "check": "warmcore.api",
    "parameters": "warmcore.params",
    "sweep": "warmcore.sweeps",
    "report_sweep": "warmcore.sweep_report",
    "Parameter": "warmcore.params",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'warmcore' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
