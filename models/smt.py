"""SMT: hardware threads of one core share its issue width.

A preset's ``smt_throughput`` curve holds the core's TOTAL throughput with k
busy hardware threads, relative to one lone thread (curve[0] == 1.0). Each
thread then runs at

    s(k) = curve[k-1] / k

of a lone thread (docs/design/MODEL.md "SMT"). Defaults: (1.0,) without SMT; e.g.
(1.0, 1.25) for a 2-way big core (Intel's ~15-30% Hyper-Threading gain), a
near-linear curve up to 4 threads for a throughput core (the presets carry
their sources). Beyond the curve's length the total stays at its last value.
"""

from __future__ import annotations

from collections.abc import Sequence


def smt_speed(k: int, curve: Sequence[float]) -> float:
    """Per-thread speed factor with ``k`` busy threads on the core (k < 1 counts as 1)."""
    if not curve:
        return 1.0
    if k < 1:
        k = 1
    i = k if k <= len(curve) else len(curve)
    return curve[i - 1] / k


def smt_total(k: int, curve: Sequence[float]) -> float:
    """Total core throughput with ``k`` busy threads: k * s(k)."""
    if k <= 0:
        return 0.0
    return k * smt_speed(k, curve)


def speed_table(curve: Sequence[float], threads: int) -> list[float]:
    """[s(0)=1, s(1), ..., s(threads)] for O(1) lookups on the hot path."""
    return [1.0] + [smt_speed(k, curve) for k in range(1, max(1, threads) + 1)]
