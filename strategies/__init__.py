"""Execution strategies, one module each, registered by name."""

from strategies import shared_queue  # noqa: F401  (registers itself)
from strategies import pc, pec, epc, adaptive  # noqa: F401  (Jetty strategies)
from strategies.base import REGISTRY, Strategy, get_strategy, register

__all__ = ["REGISTRY", "Strategy", "get_strategy", "register"]
