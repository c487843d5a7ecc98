"""Closed-form queueing results the engine is checked against (and that users can
compare a run with): Erlang C for M/M/c, Pollaczek-Khinchine for M/G/1."""

from __future__ import annotations


def erlang_c(c: int, offered: float) -> float:
    """Probability that an arrival waits in M/M/c with offered load a = lambda/mu < c.
    Computed through the Erlang B recursion, which is stable for large c."""
    if not 0 <= offered < c:
        raise ValueError(f"offered load {offered} must be in [0, c={c})")
    b = 1.0
    for k in range(1, c + 1):
        b = offered * b / (k + offered * b)
    rho = offered / c
    return b / (1 - rho + rho * b)


def mmc_wait(rate: float, service_s: float, c: int) -> float:
    """Mean time in queue Wq of M/M/c (seconds)."""
    a = rate * service_s
    return erlang_c(c, a) * service_s / (c - a)


def mg1_wait(rate: float, service_s: float, scv: float) -> float:
    """Mean time in queue of M/G/1 by Pollaczek-Khinchine:
    Wq = rho * (1 + Cs^2) * E[S] / (2 (1 - rho))."""
    rho = rate * service_s
    if not rho < 1:
        raise ValueError(f"utilisation {rho} must be below 1")
    return rho * (1 + scv) * service_s / (2 * (1 - rho))


def little_l(throughput: float, mean_sojourn: float) -> float:
    return throughput * mean_sojourn


__all__ = ["erlang_c", "little_l", "mg1_wait", "mmc_wait"]
