"""Service-demand and think-time distributions, as block samplers.

Each is given by its mean (seconds) and a shape: deterministic, exponential,
lognormal (by coefficient of variation), or empirical (resampled from given
values). All draw from a named NumPy stream in blocks (simcore.rng).
"""

from __future__ import annotations

import math

import numpy as np

from warmcore.simcore.rng import block_sampler

KINDS = ("deterministic", "exponential", "lognormal", "empirical")


def sampler(kind: str, mean_s: float, gen: np.random.Generator, cv: float = 1.0,
            values_s=None):
    """A zero-argument callable returning one draw (seconds)."""
    if kind == "deterministic":
        return lambda: mean_s
    if kind == "exponential":
        return block_sampler(gen, lambda g, n: g.exponential(mean_s, n))
    if kind == "lognormal":
        # mean m and coefficient of variation cv -> sigma^2 = ln(1 + cv^2), mu = ln m - sigma^2/2
        s2 = math.log1p(cv * cv)
        mu = math.log(mean_s) - s2 / 2
        sigma = math.sqrt(s2)
        return block_sampler(gen, lambda g, n: g.lognormal(mu, sigma, n))
    if kind == "empirical":
        vals = np.asarray(values_s, dtype=float)
        return block_sampler(gen, lambda g, n: g.choice(vals, n))
    raise ValueError(f"unknown distribution {kind!r}; known: {', '.join(KINDS)}")


def dist_mean(kind: str, mean_s: float, values_s=None) -> float:
    """The distribution's mean (for empirical: of its values)."""
    if kind == "empirical":
        return float(np.mean(values_s))
    return mean_s


def dist_scv(kind: str, cv: float = 1.0, values_s=None) -> float:
    """Squared coefficient of variation, for Pollaczek-Khinchine style checks."""
    if kind == "deterministic":
        return 0.0
    if kind == "exponential":
        return 1.0
    if kind == "lognormal":
        return cv * cv
    v = np.asarray(values_s, dtype=float)
    return float(v.var() / v.mean() ** 2)
