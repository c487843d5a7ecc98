"""Execution strategies, one module each, registered by name."""

from strategies import shared_queue  # noqa: F401  (registers itself)
from strategies.base import REGISTRY, Strategy, get_strategy, register

__all__ = ["REGISTRY", "Strategy", "get_strategy", "register"]
