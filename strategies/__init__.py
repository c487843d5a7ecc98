"""Execution strategies, one module each, registered by name."""

from warmcore.strategies import shared_queue  # noqa: F401  (registers itself)
from warmcore.strategies import pc, pec, epc, adaptive  # noqa: F401  (Jetty strategies)
from warmcore.strategies import work_stealing  # noqa: F401
from warmcore.strategies import disruptor  # noqa: F401
from warmcore.strategies import virtual_threads  # noqa: F401
from warmcore.strategies import thread_per_connection  # noqa: F401
from warmcore.strategies import event_loop  # noqa: F401
from warmcore.strategies import thread_pool  # noqa: F401
from warmcore.strategies.base import REGISTRY, Strategy, get_strategy, register

__all__ = ["REGISTRY", "Strategy", "get_strategy", "register"]
