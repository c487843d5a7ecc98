"""Cache warmth: how much of a footprint survives the foreign lines touched since.

Formulas
--------
Random replacement (Thiebaut and Stone, "Footprints in the cache", ACM TOCS
5(4), 1987): a line survives each foreign fill with probability 1 - 1/N, so
after K foreign lines

    warmth_random(K, N) = (1 - 1/N)^K  (~ exp(-K/N))

a-way LRU with S sets and random set placement (MODEL.md "Caches and warmth"):
the K foreign lines that land in one set are X ~ Poisson(K/S); a line at LRU
rank r (1 = most recent) survives iff X <= a - r. With its rank uniform over
1..a (a line of a footprint that fills the cache):

    warmth_lru(K, S, a) = (1/a) * sum_{r=1..a} P(X <= a - r)
                        = (1/a) * sum_{j=0..a-1} P(X <= j)

Footprints smaller than the cache (the departure from MODEL.md, see
docs/model-caches.md): an owner that touched L lines most recently has its
j-th-from-last line at rank 1 + Poisson(j/S) among its own lines, so it
survives K later foreign lines iff Poisson((j + K)/S) <= a - 1. Summing over
j and using d/dlam [a(1 - W(lam))] = P(Poisson(lam) <= a - 1):

    survivors_lru(K, L, S, a) = S * a * (W(K/S) - W((K + L)/S)),  W = warmth_lru per set

which is exact under the Poisson placement approximation, equals the number
of lines resident after touching L lines when K = 0 (S*a*(1 - W(L/S)):
L for L << S*a, S*a for L >> S*a: a footprint larger than the cache does not
fit), and tends to S*a*W(K/S), MODEL.md's formula, as L grows to the cache
size and beyond. ``CacheState`` uses it.

Per-cache state
---------------
``CacheState`` is one cache instance (an L1d or L2 per physical core, shared
by its SMT siblings; one LLC per LLC domain). It keeps a *clock*, the running
count of lines filled into it, and per owner key the clock at its last touch
(taken after that touch's own fills), the footprint it touched (lines) and a
coherence version. The foreign lines an owner has seen since are
``clock - stamp``: everything filled after its last touch, its own refills
excluded. Footprints of one segment are applied in order, so a later
footprint of the segment sees the earlier ones' fills as foreign (the
segment's new data streams in over the thread's older lines).

Memory is bounded: owners whose warmth fell below ``DEAD_WARMTH`` are
forgotten by an amortised sweep (O(1) per access on average: a sweep runs
when the table has grown by half), and at most ``max_owners`` entries are kept
(default: half the cache's lines, clamped to 512..32768; the oldest go first,
and an owner forgotten that way reads as cold).

Parameters and defaults: cache sizes, ways and the line size come from the
preset (models/presets.py); ``LAMBDA_STEP`` = 1/128 (table spacing in foreign
lines per set: linear interpolation error <= h^2/8 * max|W''| < 1e-5).
"""

from __future__ import annotations

import math

# Table index of a lam >= 0, where floor == int: math.floor(x) is ~3x cheaper than
# int(x) (a call of the int type), which matters in CacheState's hot path.
_floor = math.floor

# Spacing of the warmth table in lam = K/S (foreign lines per set).
LAMBDA_STEP = 1.0 / 128.0
_INV_STEP = 128.0
# Below this warmth (per set, with the footprint filling the cache) an owner is forgotten.
DEAD_WARMTH = 1e-7


def warmth_random(foreign_lines: float, cache_lines: float) -> float:
    """(1 - 1/N)^K: fraction of a footprint left after K foreign lines, random replacement."""
    if foreign_lines <= 0.0:
        return 1.0
    n = float(cache_lines)
    if n <= 1.0:
        return 0.0
    return math.exp(foreign_lines * math.log1p(-1.0 / n))


def _w_per_set(lam: float, ways: int) -> float:
    """(1/a) sum_{j<a} P(Poisson(lam) <= j) with a running Poisson term (O(a), no scipy)."""
    if lam <= 0.0:
        return 1.0
    term = math.exp(-lam)
    if term == 0.0:  # lam > ~745: every P(X <= j) for j < a is far below 1e-300
        return 0.0
    cdf = term
    total = cdf
    for i in range(1, ways):
        term *= lam / i
        cdf += term
        total += cdf
    w = total / ways
    return 1.0 if w > 1.0 else w


def warmth_lru(foreign_lines: float, sets: int, ways: int) -> float:
    """MODEL.md's a-way LRU warmth: (1/a) sum_{r=1..a} P(Poisson(K/S) <= a - r).

    In [0, 1], 1 at K = 0, non-increasing in K. About 1-2 us per call for a <= 16.
    """
    if foreign_lines <= 0.0:
        return 1.0
    return _w_per_set(foreign_lines / sets, ways)


def survivors_lru(foreign_lines: float, lines: float, sets: int, ways: int) -> float:
    """Expected lines of an L-line footprint still resident after K foreign lines (see module)."""
    if lines <= 0.0:
        return 0.0
    lam_k = max(0.0, foreign_lines) / sets
    s = sets * ways * (_w_per_set(lam_k, ways) - _w_per_set(lam_k + lines / sets, ways))
    return min(lines, max(0.0, s))


class WarmthTable:
    """W(lam) for one associativity on a grid, linearly interpolated (~0.2 us a lookup).

    ``w(lam)`` approximates ``warmth_lru(lam * S, S, ways)`` to < 1e-5.
    """

    __slots__ = ("ways", "table", "icpt", "slope", "lam_max", "lam_dead", "n")

    def __init__(self, ways: int):
        self.ways = ways
        tab = []
        i = 0
        while True:
            w = _w_per_set(i * LAMBDA_STEP, ways)
            tab.append(w)
            if w < DEAD_WARMTH * 1e-3 and i > 0:
                break
            i += 1
        tab.append(0.0)
        tab.append(0.0)
        self.table = tab
        self.n = len(tab) - 2
        self.lam_max = self.n * LAMBDA_STEP
        # W = icpt[i] + slope[i] * x on cell i (x = lam / LAMBDA_STEP): one multiply-add
        self.slope = [tab[i + 1] - tab[i] for i in range(len(tab) - 1)] + [0.0]
        self.icpt = [tab[i] - self.slope[i] * i for i in range(len(tab))]
        # foreign lines per set after which even a cache-filling footprint is below
        # DEAD_WARMTH (owners that old are forgotten)
        i = 0
        while tab[i] > DEAD_WARMTH:
            i += 1
        self.lam_dead = i * LAMBDA_STEP

    def w(self, lam: float) -> float:
        x = lam * _INV_STEP
        i = int(x)
        if i >= self.n:
            return 0.0
        t = self.table
        a = t[i]
        return a + (t[i + 1] - a) * (x - i)


_TABLES: dict[int, WarmthTable] = {}


def warmth_table(ways: int) -> WarmthTable:
    """The shared table for ``ways`` (built once per associativity)."""
    t = _TABLES.get(ways)
    if t is None:
        t = _TABLES[ways] = WarmthTable(ways)
    return t


class CacheState:
    """One cache instance: a fill clock and, per owner, [stamp, footprint lines, version].

    size_bytes, ways, line_bytes  geometry (sets = lines / ways)
    max_owners                    bound on remembered owners (default lines/2 in 512..32768)

    ``access(key, lines, cap, version, store)`` is the hot path: the warm lines
    of ``key`` among the ``lines`` touched now, misses = min(cap, lines - warm)
    fill the cache (the clock advances by them), and the owner is stamped
    *after* its own fills, so its own refills are never foreign to it. An
    entry recorded under another coherence ``version`` than the one expected
    reads as cold (it was invalidated); ``store`` is the version recorded
    (default: ``version``). ``warm``/``resident`` inspect without changing state.

    Cost: one dict lookup, two table interpolations and an in-place update
    (O(1)). Forgetting is amortised: when the table has grown by half since
    the last sweep, entries older than the dead horizon (``clock - stamp``
    beyond which even a cache-filling footprint has warmth < DEAD_WARMTH) are
    dropped, then the oldest beyond max_owners / 2.
    """

    __slots__ = ("lines", "ways", "sets", "inv_sets", "clock", "owners", "max_owners",
                 "_icpt", "_slope", "_tn", "_scale", "_k_dead", "_sweep_at", "name")

    def __init__(self, size_bytes: float, ways: int, line_bytes: int = 64,
                 max_owners: int | None = None, name: str = ""):
        n = max(1, int(size_bytes // line_bytes))
        ways = max(1, min(int(ways), n))
        self.ways = ways
        self.sets = max(1, n // ways)
        self.lines = self.sets * ways
        self.inv_sets = 1.0 / self.sets
        self._scale = self.inv_sets * _INV_STEP  # lines -> table position
        self.clock = 0.0
        self.owners: dict = {}
        if max_owners is None:
            max_owners = min(32768, max(512, self.lines // 2))
        self.max_owners = max(2, int(max_owners))
        self._sweep_at = min(self.max_owners, 256)
        tab = warmth_table(ways)
        self._icpt = tab.icpt
        self._slope = tab.slope
        self._tn = tab.n
        self._k_dead = tab.lam_dead * self.sets
        self.name = name

    def _surv(self, e) -> float:
        """Lines of entry ``e``'s footprint still resident: S*a*(W(K/S) - W((K+fp)/S))."""
        fp = e[1]
        k = self.clock - e[0]
        x = k * self._scale if k > 0.0 else 0.0
        i = _floor(x)
        tn = self._tn
        if i >= tn:
            return 0.0
        c = self._icpt
        b = self._slope
        w = c[i] + b[i] * x
        x += fp * self._scale
        i = _floor(x)
        if i < tn:
            w -= c[i] + b[i] * x
        s = self.lines * w
        if s > fp:
            return fp
        return s if s > 0.0 else 0.0

    def resident(self, key, version=None) -> float:
        """Lines of ``key``'s recorded footprint still resident now (0 if unknown/invalid)."""
        e = self.owners.get(key)
        if e is None or (version is not None and e[2] != version):
            return 0.0
        return self._surv(e)

    def warm(self, key, lines: float, version=None) -> float:
        """Warm lines among ``lines`` of ``key`` touched now (no state change)."""
        e = self.owners.get(key)
        if e is None or (version is not None and e[2] != version):
            return 0.0
        surv = self._surv(e)
        fp = e[1]
        return surv if lines >= fp else surv * lines / fp

    def access(self, key, lines: float, cap: float | None = None, version=None,
               store=None, extra_fills: float = 0.0) -> float:
        """Touch ``lines`` of ``key``; returns the misses (lines not warm, at most ``cap``).

        The misses (plus ``extra_fills``, lines this access brings in that were
        counted elsewhere) fill the cache; the owner is stamped after them.
        ``version``: expected coherence version (None: no check); ``store``: the
        version to record (default ``version``).
        """
        if store is None:
            store = version
        e = self.owners.get(key)
        if e is None or (version is not None and e[2] != version):
            miss = lines
            fp = lines
        else:
            # _surv inlined: this is the simulator's hottest code
            fp = e[1]
            k = self.clock - e[0]
            scale = self._scale
            x = k * scale if k > 0.0 else 0.0
            i = _floor(x)
            tn = self._tn
            if i >= tn:
                miss = lines
                fp = lines
            else:
                c = self._icpt
                b = self._slope
                w = c[i] + b[i] * x
                x += fp * scale
                i = _floor(x)
                if i < tn:
                    w -= c[i] + b[i] * x
                surv = self.lines * w
                if surv > fp:
                    surv = fp
                elif surv < 0.0:
                    surv = 0.0
                if lines >= fp:
                    miss = lines - surv
                    fp = lines
                else:
                    # touching a subset: the untouched part's survivors stay recorded
                    f = lines / fp
                    miss = lines - surv * f
                    fp = lines + surv * (1.0 - f)
        if cap is not None and miss > cap:
            miss = cap
        self.clock = clock = self.clock + miss + extra_fills
        if e is None:
            self.owners[key] = [clock, fp, store]
            if len(self.owners) > self._sweep_at:
                self._sweep()
        else:
            e[0] = clock
            e[1] = fp
            e[2] = store
        return miss

    def _sweep(self) -> None:
        owners = self.owners
        horizon = self.clock - self._k_dead
        live = {k: e for k, e in owners.items() if e[0] >= horizon}
        keep = self.max_owners // 2
        if len(live) > keep:
            live = dict(sorted(live.items(), key=lambda kv: kv[1][0])[-keep:])
        self.owners = live
        self._sweep_at = min(self.max_owners, max(256, len(live) + (len(live) >> 1) + 1))
        if self._sweep_at <= len(live):
            self._sweep_at = len(live) + 1

    def __len__(self) -> int:
        return len(self.owners)
