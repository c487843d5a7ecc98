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
import importlib.util
from importlib.metadata import PackageNotFoundError, version

# pyproject's package-dir installs the source folders (simcore/, models/,
# strategies/, calibration/) under this package: a wheel puts them inside it, an
# editable install maps the checkout's own folders in through setuptools' finder.
# A checkout's warmcore/ found on sys.path without that install (Python started at
# the checkout's top while warmcore is installed from a wheel, or not at all) holds
# only the orchestration: say so here instead of failing at the first import below.
if importlib.util.find_spec(f"{__name__}.simcore") is None:
    raise ImportError(
        f"warmcore: {__path__[0]} is a source checkout's package folder without the "
        "folders an install maps into it; install the checkout (pip install -e .) or "
        "run from outside it", name=__name__)

from warmcore.simcore import plugins as _plugins  # noqa: E402  (tiny: no pydantic, no SimPy)


def _discover_builtin_kinds() -> None:
    """The composition root: the core looks workload kinds up by name; this is where
    it learns to import the modules that define them (simcore/plugins.py)."""
    from warmcore.models import workloads

    workloads.discover()


_plugins.add_discoverer(_discover_builtin_kinds)

try:
    __version__ = version("warmcore")
except PackageNotFoundError:        # files put on sys.path without their metadata
    __version__ = "0+unknown"

_EXPORTS = {
    "Scenario": "warmcore.simcore.config",
    "ConfigError": "warmcore.simcore.config",
    "Result": "warmcore.result",
    "simulate": "warmcore.api",
    "compare": "warmcore.api",
    "frame": "warmcore.api",
    "check": "warmcore.api",
    "advise": "warmcore.advice",
    "tune": "warmcore.advice",
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
