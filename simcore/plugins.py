"""Registries of what a scenario names by kind, filled by the layers above and
discovered on first use.

The core names workload kinds (and the orchestration names strategies) without
importing the modules that define them: each such module registers its kind when
it is imported, and the orchestration, which may import every layer, tells the
core how to import them all (``add_discoverer``: ``warmcore/__init__`` does, for
the built-in packages). A registry runs the discoverers once, before its first
lookup. Modules named in the environment variable ``WARMCORE_PLUGINS``
(comma-separated, importable from ``sys.path``) are imported then too: a workload
kind or a strategy of your own in one file, with no edit to warmcore (it also
reaches a sweep's worker processes, which inherit the environment).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

PLUGINS_ENV = "WARMCORE_PLUGINS"

T = TypeVar("T")

_discoverers: list[Callable[[], None]] = []
_discovered = False


def add_discoverer(discover: Callable[[], None]) -> None:
    """``discover()`` imports modules that register kinds; run once, at first lookup."""
    global _discovered
    _discoverers.append(discover)
    _discovered = False


def discover() -> None:
    """Import everything that registers kinds (once): the discoverers', then the
    modules named in WARMCORE_PLUGINS."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for found in list(_discoverers):
        found()
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        importlib.import_module(name)


class Registry(Generic[T]):
    """Items by name, registered by the modules that define them."""

    def __init__(self, what: str):
        self.what = what          # "workload kind": for messages
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items and self._items[name] is not item:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._items[name] = item
        return item

    def get(self, name: str) -> T | None:
        discover()
        return self._items.get(name)

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted (whatever order the modules loaded in)."""
        discover()
        return tuple(sorted(self._items))

    def __iter__(self) -> Iterator[T]:
        return (self._items[n] for n in self.names())

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None
