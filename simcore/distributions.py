"""Distributions of service demands, think times, calls and gaps: a class each, as
Ciw's ``ciw.dists`` does, so adding one is adding a class, not editing if-chains.

A distribution is built from the figures a scenario gives (its mean in seconds and,
where the shape needs one, a coefficient of variation or a list of values) and hands
out draws from a named NumPy stream in blocks (``simcore.rng.block_sampler``). It
also knows its mean and squared coefficient of variation, what queueing formulas
(Pollaczek-Khinchine, Kingman) need. ``DISTRIBUTIONS`` maps each name a scenario
writes (``workload.service = "lognormal"``) to its class; the config's choices are
its keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from warmcore.simcore.rng import block_sampler


class Distribution:
    """One shape: ``sampler(gen)`` returns a zero-argument callable, one draw (seconds)
    per call; ``mean_s`` and ``scv`` describe it."""

    name = ""
    uses = ()      # which of cv / values the shape reads (for docs and checks)

    def __init__(self, mean_s: float, cv: float = 1.0, values_s=None):
        self.mean_s = mean_s

    def sampler(self, gen: np.random.Generator) -> Callable[[], float]:
        raise NotImplementedError

    @property
    def scv(self) -> float:
        """Squared coefficient of variation (variance / mean^2)."""
        raise NotImplementedError


class Deterministic(Distribution):
    name = "deterministic"

    def sampler(self, gen):
        mean_s = self.mean_s
        return lambda: mean_s

    @property
    def scv(self) -> float:
        return 0.0


class Exponential(Distribution):
    name = "exponential"

    def sampler(self, gen):
        mean_s = self.mean_s
        return block_sampler(gen, lambda g, n: g.exponential(mean_s, n))

    @property
    def scv(self) -> float:
        return 1.0


class Lognormal(Distribution):
    """By its mean m and coefficient of variation: sigma^2 = ln(1 + cv^2),
    mu = ln m - sigma^2 / 2."""

    name = "lognormal"
    uses = ("cv",)

    def __init__(self, mean_s: float, cv: float = 1.0, values_s=None):
        super().__init__(mean_s)
        self.cv = cv

    def sampler(self, gen):
        s2 = math.log1p(self.cv * self.cv)
        mu = math.log(self.mean_s) - s2 / 2
        sigma = math.sqrt(s2)
        return block_sampler(gen, lambda g, n: g.lognormal(mu, sigma, n))

    @property
    def scv(self) -> float:
        return self.cv * self.cv


class Empirical(Distribution):
    """Resampled, with replacement, from measured values (its mean is theirs)."""

    name = "empirical"
    uses = ("values",)

    def __init__(self, mean_s: float = 0.0, cv: float = 1.0, values_s=None):
        self.values = np.asarray(values_s, dtype=float)
        super().__init__(float(np.mean(self.values)))

    def sampler(self, gen):
        vals = self.values
        return block_sampler(gen, lambda g, n: g.choice(vals, n))

    @property
    def scv(self) -> float:
        return float(self.values.var() / self.values.mean() ** 2)


DISTRIBUTIONS: dict[str, type[Distribution]] = {
    cls.name: cls for cls in (Deterministic, Exponential, Lognormal, Empirical)}


def distribution(name: str, mean_s: float, cv: float = 1.0, values_s=None) -> Distribution:
    """The distribution called ``name`` with these figures (KeyError if unknown: the
    config's choices come from DISTRIBUTIONS, so a scenario cannot name another)."""
    return DISTRIBUTIONS[name](mean_s, cv, values_s)


def sampler(name: str, mean_s: float, gen: np.random.Generator, cv: float = 1.0,
            values_s=None) -> Callable[[], float]:
    """One draw per call (seconds) of the distribution called ``name``."""
    return distribution(name, mean_s, cv, values_s).sampler(gen)
