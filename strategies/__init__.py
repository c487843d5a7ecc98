"""Execution strategies, one module each. A module registers its strategies with
``@warmcore.strategies.base.register``; ``warmcore.registry`` discovers the modules,
so a new strategy is one new file and no import line."""
