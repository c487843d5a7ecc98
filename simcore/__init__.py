"""warmcore's engine: scenarios, the simulated OS, the run loop, results and the CLI."""

from simcore.config import ConfigError, Scenario, load
from simcore.run import simulate

__all__ = ["ConfigError", "Scenario", "load", "simulate"]
