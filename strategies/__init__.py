"""Execution strategies, one module each. A module registers its strategies with
``@warmcore.strategies.base.register``; ``warmcore.registry`` discovers the modules,
so a new strategy is one new file and no import line."""

from warmcore.simcore.compiled import refuse_stale

# Its compiled modules run only while they match their sources (simcore/compiled.py);
# checked before any of them is imported. Module name -> why refused, empty when all match.
STALE = refuse_stale(__name__, __path__)
