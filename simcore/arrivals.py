"""Arrival processes of an open loop as gap samplers: each is a zero-argument callable
returning the time (s) from one arrival to the next, so the open loop's delivery (and
its event elision) is the same for all of them. A batch is a gap followed by zero
gaps, an MMPP's gaps follow its hidden on/off state.

``rate_per_s`` is always the long-run mean rate of requests (what a load generator's
``-R`` sets and what sweeps and the capacity estimate vary); the bursty processes
redistribute the same requests in time.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from warmcore.simcore.distributions import sampler
from warmcore.simcore.rng import block_sampler


def mmpp_rates(rate: float, on_s: float, off_s: float, off_fraction: float) -> tuple:
    """(lambda_on, lambda_off) of a two-state MMPP whose long-run mean rate is ``rate``:
    the mean is (lambda_on on_s + lambda_off off_s) / (on_s + off_s) with lambda_off =
    off_fraction x lambda_on (off_fraction 0: an interrupted Poisson process)."""
    on = rate * (on_s + off_s) / (on_s + off_fraction * off_s)
    return on, on * off_fraction


def mmpp_dispersion(rate: float, on_s: float, off_s: float, off_fraction: float,
                    t: float = math.inf) -> float:
    """The index of dispersion of counts Var N(t) / E N(t) of the stationary two-state
    MMPP over a window of t seconds: 1 + K (1 - (1 - e^(-a t)) / (a t)), with a = r1 +
    r2 and K = 2 r1 r2 (l1 - l2)^2 / (a^2 (l1 r2 + l2 r1)) its limit as t grows (r1 =
    1/on_s, r2 = 1/off_s the rates of leaving each state; Heffes and Lucantoni, IEEE
    JSAC 4(6), 1986, eq. 7; Fischer and Meier-Hellstern, "The Markov-modulated Poisson
    process (MMPP) cookbook", Performance Evaluation 18(2), 1993, sec. 4)."""
    l1, l2 = mmpp_rates(rate, on_s, off_s, off_fraction)
    r1, r2 = 1.0 / on_s, 1.0 / off_s
    a = r1 + r2
    k = 2.0 * r1 * r2 * (l1 - l2) ** 2 / (a * a * (l1 * r2 + l2 * r1))
    if math.isinf(t):
        return 1.0 + k
    return 1.0 + k * (1.0 - (1.0 - math.exp(-a * t)) / (a * t))


def mmpp_gaps(gen: np.random.Generator, rate: float, on_s: float, off_s: float,
              off_fraction: float) -> Callable[[], float]:
    """Gaps of a two-state (on/off) Markov-modulated Poisson process, starting in its
    stationary state. Exponential sojourns (means on_s, off_s); in each state a Poisson
    stream at its rate. By memorylessness, a gap that would cross the state's end is
    cut there and drawn afresh in the next state."""
    rates = mmpp_rates(rate, on_s, off_s, off_fraction)
    sojourn = (on_s, off_s)
    unit = block_sampler(gen, lambda g, n: g.exponential(1.0, n))
    state = [0 if gen.random() < on_s / (on_s + off_s) else 1]
    left = [unit() * sojourn[state[0]]]

    def gap() -> float:
        t = 0.0
        s, rem = state[0], left[0]
        while True:
            lam = rates[s]
            d = unit() / lam if lam > 0.0 else math.inf
            if d < rem:
                left[0] = rem - d
                state[0] = s
                return t + d
            t += rem
            s = 1 - s
            rem = unit() * sojourn[s]
    return gap


def batch_gaps(gen: np.random.Generator, rate: float, mean_size: float,
               shape: str) -> Callable[[], float]:
    """Gaps of batch Poisson arrivals (M^X): batches at rate / E[X], each of X requests
    arriving at one instant; X constant (``mean_size``, whole) or geometric on 1, 2, ...
    with mean ``mean_size`` (P(X = k) = (1 - q) q^(k-1), q = 1 - 1/mean_size)."""
    epoch_gap = sampler("exponential", mean_size / rate, gen)
    if shape == "constant":
        k = round(mean_size)
        size = lambda: k        # noqa: E731
    else:
        size = block_sampler(gen, lambda g, n: g.geometric(1.0 / mean_size, n))
    left = [0]

    def gap() -> float:
        if left[0] > 0:
            left[0] -= 1
            return 0.0
        left[0] = size() - 1
        return epoch_gap()
    return gap


def batch_moments(mean_size: float, shape: str) -> tuple[float, float]:
    """(E[X], E[X^2]) of the batch size."""
    if shape == "constant":
        k = round(mean_size)
        return float(k), float(k * k)
    p = 1.0 / mean_size
    return mean_size, (2.0 - p) / (p * p)
