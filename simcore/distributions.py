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
    min_cv = 0.0   # the smallest cv the shape can take (its fit's domain)

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


class Hyperexponential(Distribution):
    """Two-phase hyperexponential (H2) by its mean m and a coefficient of variation
    cv >= 1, fitted with balanced means (each phase carries half the mean: p1/mu1 =
    p2/mu2 = m/2), the standard two-moment fit: p1 = (1 + sqrt((cv^2 - 1) /
    (cv^2 + 1))) / 2, mu_i = 2 p_i / m (Whitt, "Approximating a point process by a
    renewal process", Oper. Res. 30(1), 1982; Allen, "Probability, Statistics and
    Queueing Theory", 2nd ed., 1990, sec. 3.2.8). A mix of short and long requests:
    cache hits and misses, small and large responses."""

    name = "hyperexponential"
    uses = ("cv",)
    min_cv = 1.0

    def __init__(self, mean_s: float, cv: float = 1.0, values_s=None):
        super().__init__(mean_s)
        self.cv = cv
        c2 = cv * cv
        self.p1 = (1.0 + math.sqrt((c2 - 1.0) / (c2 + 1.0))) / 2.0
        # Mean of each phase: m / (2 p_i).
        self.m1 = mean_s / (2.0 * self.p1)
        self.m2 = mean_s / (2.0 * (1.0 - self.p1))

    def sampler(self, gen):
        p1, m1, m2 = self.p1, self.m1, self.m2

        def draw(g, n):
            return g.exponential(1.0, n) * np.where(g.random(n) < p1, m1, m2)
        return block_sampler(gen, draw)

    @property
    def second_moment(self) -> float:
        return 2.0 * (self.p1 * self.m1 ** 2 + (1.0 - self.p1) * self.m2 ** 2)

    @property
    def scv(self) -> float:
        return self.second_moment / self.mean_s ** 2 - 1.0


class Coxian(Distribution):
    """Two-phase Coxian by its mean m and a coefficient of variation cv >= 1/sqrt(2):
    phase 1 (rate mu1 = 2/m), then phase 2 (rate mu2 = 1/(m cv^2)) with probability
    p = 1/(2 cv^2), else done (Marie's fit: Bolch, Greiner, de Meer and Trivedi,
    "Queueing Networks and Markov Chains", 2nd ed., 2006, sec. 1.3.1, eq. 1.53).
    Its mean is m/2 + p/mu2 = m, its variance 1/mu1^2 + 2p/mu2^2 - (p/mu2)^2 =
    m^2 (1/4 + cv^2 - 1/4) = (cv m)^2: a phase-type shape from cv 0.71 up."""

    name = "coxian"
    uses = ("cv",)
    min_cv = math.sqrt(0.5)

    def __init__(self, mean_s: float, cv: float = 1.0, values_s=None):
        super().__init__(mean_s)
        self.cv = cv
        c2 = cv * cv
        self.m1 = mean_s / 2.0              # 1 / mu1
        self.p = 1.0 / (2.0 * c2)
        self.m2 = mean_s * c2               # 1 / mu2

    def sampler(self, gen):
        p, m1, m2 = self.p, self.m1, self.m2

        def draw(g, n):
            first = g.exponential(m1, n)
            return first + (g.random(n) < p) * g.exponential(m2, n)
        return block_sampler(gen, draw)

    @property
    def scv(self) -> float:
        var = self.m1 ** 2 + 2.0 * self.p * self.m2 ** 2 - (self.p * self.m2) ** 2
        return var / self.mean_s ** 2


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
    cls.name: cls for cls in (Deterministic, Exponential, Lognormal, Hyperexponential, Coxian,
                           Empirical)}


def cv_problem(name: str, cv: float) -> str | None:
    """Why ``cv`` is outside the shape ``name`` can take, or None."""
    lo = DISTRIBUTIONS[name].min_cv
    if cv < lo:
        return f"{name} needs a cv of at least {lo:.4g} (got {cv:g})"
    return None


def distribution(name: str, mean_s: float, cv: float = 1.0, values_s=None) -> Distribution:
    """The distribution called ``name`` with these figures (KeyError if unknown: the
    config's choices come from DISTRIBUTIONS, so a scenario cannot name another)."""
    return DISTRIBUTIONS[name](mean_s, cv, values_s)


def sampler(name: str, mean_s: float, gen: np.random.Generator, cv: float = 1.0,
            values_s=None) -> Callable[[], float]:
    """One draw per call (seconds) of the distribution called ``name``."""
    return distribution(name, mean_s, cv, values_s).sampler(gen)
