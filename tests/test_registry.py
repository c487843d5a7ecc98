"""Strategies are discovered: adding one is adding one file to strategies/."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import warmcore
from warmcore import registry
from warmcore.strategies.base import REGISTRY

NEW_STRATEGY = '''
from warmcore.strategies.shared_queue import SharedQueue
from warmcore.strategies.base import register


@register
class Copycat(SharedQueue):
    name = "copycat-test-only"
    summary = "a strategy dropped into the package as one file"
'''


def test_a_new_file_in_the_package_is_a_new_strategy(tmp_path, monkeypatch):
    (tmp_path / "copycat_test_only.py").write_text(NEW_STRATEGY)
    monkeypatch.setattr(registry._package, "__path__",
                        [*registry._package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_loaded", False)
    try:
        assert "copycat-test-only" in registry.strategies()
        r = warmcore.simulate(warmcore.Scenario.load("mmc").with_(
            strategy="copycat-test-only", requests=200))
        assert r.strategy == "copycat-test-only" and r.requests == 200
    finally:
        REGISTRY.pop("copycat-test-only", None)
        sys.modules.pop("warmcore.strategies.copycat_test_only", None)


def test_every_strategy_module_registers_without_an_import_line():
    names = registry.strategies()
    assert {"pc", "pec", "epc", "adaptive", "work-stealing", "disruptor", "event-loop",
            "thread-pool", "thread-per-connection", "virtual-threads",
            "shared-queue"} <= set(names)
    init = ast.parse(Path(registry._package.__path__[0], "__init__.py").read_text())
    # its one import is the compiled modules' stale check (simcore/compiled.py), no strategy
    imports = [n for n in ast.walk(init) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [(n.module, [a.name for a in n.names]) for n in imports] == [
        ("warmcore.simcore.compiled", ["refuse_stale"])]
