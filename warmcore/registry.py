"""Strategies by name, discovered: every module of ``warmcore.strategies`` is imported
once and registers its classes with ``@register``, so adding a strategy is adding
one file (in the package, or a module named in WARMCORE_PLUGINS: simcore/plugins.py)."""

from __future__ import annotations

import importlib
import pkgutil

from warmcore import strategies as _package
from warmcore.simcore import plugins
from warmcore.strategies.base import REGISTRY, Strategy

_loaded = False


def _discover() -> None:
    global _loaded
    if _loaded:
        return
    for mod in sorted(pkgutil.iter_modules(_package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{_package.__name__}.{mod.name}")
    plugins.discover()          # WARMCORE_PLUGINS: strategies of the user's own
    _loaded = True


def strategies() -> dict[str, type[Strategy]]:
    """Every registered strategy, by name."""
    _discover()
    return dict(sorted(REGISTRY.items()))


def get_strategy(name: str) -> type[Strategy]:
    """The strategy class called ``name``; ConfigError (strategy.name) if unknown."""
    _discover()
    from warmcore.strategies.base import get_strategy as lookup

    return lookup(name)
