"""Closed-form queueing results the engine is checked against (and that users can
compare a run with): Erlang C for M/M/c, Pollaczek-Khinchine for M/G/1."""

from __future__ import annotations


def erlang_b(c: int, offered: float) -> float:
    """Blocking probability of M/M/c/c (Erlang's loss formula) at offered load a =
    lambda/mu, by the stable recursion B(k) = a B(k-1) / (k + a B(k-1)), B(0) = 1."""
    b = 1.0
    for k in range(1, c + 1):
        b = offered * b / (k + offered * b)
    return b


def mmck(c: int, k: int, offered: float) -> tuple[float, float]:
    """(blocking probability, mean number waiting) of M/M/c/K: c servers, room for K
    in the system (K - c waiting), offered load a = lambda/mu. Stationary p_n
    proportional to a^n / n! up to c and a^c / c! (a/c)^(n-c) beyond (Gross et al.,
    "Fundamentals of Queueing Theory", 4th ed., 2008, sec. 2.6); blocking is p_K (PASTA).
    The mean wait of an admitted request is Lq / (lambda (1 - p_K)) by Little."""
    if not 0 < c <= k:
        raise ValueError(f"need 0 < c <= K (c={c}, K={k})")
    terms = [1.0]
    for n in range(1, k + 1):
        terms.append(terms[-1] * offered / min(n, c))
    total = sum(terms)
    p = [t / total for t in terms]
    waiting = sum((n - c) * p[n] for n in range(c + 1, k + 1))
    return p[k], waiting


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


def mxg1_wait(rate: float, service_s: float, scv: float, batch_mean: float,
              batch_second_moment: float) -> float:
    """Mean time in queue of a request in M^X/G/1 (Poisson batches of X requests, the
    request rate ``rate``): the batch waits as one customer of M/G/1 whose service is
    the sum of its X services (Pollaczek-Khinchine with E[S_B^2] = E[X] Var S + E[X^2]
    E[S]^2), then behind the members ahead of it in its batch, (E[X^2] - E[X]) /
    (2 E[X]) of them on average (Gross, Shortle, Thompson and Harris, "Fundamentals of
    Queueing Theory", 4th ed., 2008, the M^[X]/G/1 queue; Kleinrock vol. 1, 1975)."""
    rho = rate * service_s
    if not rho < 1:
        raise ValueError(f"utilisation {rho} must be below 1")
    batch_rate = rate / batch_mean
    s2_batch = batch_mean * scv * service_s ** 2 + batch_second_moment * service_s ** 2
    batch_wait = batch_rate * s2_batch / (2 * (1 - rho))
    ahead = (batch_second_moment - batch_mean) / (2 * batch_mean)
    return batch_wait + ahead * service_s


def little_l(throughput: float, mean_sojourn: float) -> float:
    return throughput * mean_sojourn


__all__ = ["erlang_b", "erlang_c", "mmck", "little_l", "mg1_wait", "mmc_wait", "mxg1_wait"]
