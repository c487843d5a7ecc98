"""A streaming log-linear histogram of latencies (HdrHistogram's bucket layout).

Values are positive seconds. Each power of two is split into ``SUB`` linear
sub-buckets, so a bucket is at most 1/SUB of its values wide, and a percentile,
reported as its bucket's midpoint, is within 1/(2 SUB) of a recorded value:
SUB = 128 gives a relative error of at most 0.39% (from 1 ns to 2^50 ns),
under the 1% the product promises (tests/test_histogram.py checks both).
Recording is O(1) and allocation-free; memory is fixed whatever the run length,
which avoids the trap of load tools that re-sort every sample to report a
percentile (docs/model.md, phenomenon 6).
"""

from __future__ import annotations

import math

import numpy as np

SUB = 128                 # sub-buckets per power of two
_UNIT = 1e-9              # resolution: values are binned in nanoseconds
_EXP_MIN = 0              # 1 ns (Recorder.complete inlines _index assuming 0)
_EXP_MAX = 50             # 2^50 ns ~ 13 days
_N = (_EXP_MAX - _EXP_MIN + 1) * SUB


class LatencyHistogram:
    __slots__ = ("counts", "max", "min", "n", "total")

    def __init__(self):
        self.counts = [0] * _N
        self.n = 0
        self.total = 0.0
        self.min = math.inf
        self.max = 0.0

    def record(self, value_s: float) -> None:
        self.n += 1
        self.total += value_s
        self.max = max(self.max, value_s)
        self.min = min(self.min, value_s)
        self.counts[_index(value_s)] += 1

    def record_many(self, values) -> None:
        """Record a NumPy array of values at once (same buckets as ``record``)."""
        v = np.asarray(values, dtype=float)
        if not v.size:
            return
        self.n += int(v.size)
        self.total += float(v.sum())
        self.max = max(self.max, float(v.max()))
        self.min = min(self.min, float(v.min()))
        m, e = np.frexp(v / _UNIT)
        idx = (e - 1 - _EXP_MIN) * SUB + ((m - 0.5) * 2 * SUB).astype(np.int64)
        idx[v / _UNIT < 1.0] = 0
        np.minimum(idx, _N - 1, out=idx)
        binned = np.bincount(idx, minlength=_N)
        c = self.counts
        for i in np.flatnonzero(binned).tolist():
            c[i] += int(binned[i])

    def merge(self, other: LatencyHistogram) -> None:
        c = self.counts
        for i, v in enumerate(other.counts):
            if v:
                c[i] += v
        self.n += other.n
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan

    def quantile(self, q: float) -> float:
        """Value at quantile q in [0, 1]: the midpoint of the bucket holding it,
        clamped to the exact min and max."""
        if not self.n:
            return math.nan
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for i, v in enumerate(self.counts):
            if v:
                seen += v
                if seen >= rank:
                    return min(self.max, max(self.min, _midpoint(i)))
        return self.max

    def quantiles(self, qs) -> list[float]:
        return [self.quantile(q) for q in qs]


def _index(value_s: float) -> int:
    ns = value_s / _UNIT
    if ns < 1.0:
        return 0
    m, e = math.frexp(ns)          # ns = m * 2**e, m in [0.5, 1)
    i = (e - 1 - _EXP_MIN) * SUB + int((m - 0.5) * 2 * SUB)
    return i if i < _N else _N - 1


def _midpoint(i: int) -> float:
    e, s = divmod(i, SUB)
    lo = (1.0 + s / SUB) * 2.0 ** (e + _EXP_MIN)
    hi = (1.0 + (s + 1) / SUB) * 2.0 ** (e + _EXP_MIN)
    return 0.5 * (lo + hi) * _UNIT
