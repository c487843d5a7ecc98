"""Cache warmth: how much of a footprint survives the foreign lines touched since.

Formulas
--------
Random replacement (Thiebaut and Stone, "Footprints in the cache", ACM TOCS
5(4), 1987): a line survives each foreign fill with probability 1 - 1/N, so
after K foreign lines

    warmth_random(K, N) = (1 - 1/N)^K  (~ exp(-K/N))

a-way LRU with S sets and random set placement (docs/design/MODEL.md "Caches and warmth"):
the K foreign lines that land in one set are X ~ Poisson(K/S); a line at LRU
rank r (1 = most recent) survives iff X <= a - r. With its rank uniform over
1..a (a line of a footprint that fills the cache):

    warmth_lru(K, S, a) = (1/a) * sum_{r=1..a} P(X <= a - r)
                        = (1/a) * sum_{j=0..a-1} P(X <= j)

Footprints smaller than the cache (the departure from docs/design/MODEL.md, see
docs/model-caches.md): an owner that touched L lines most recently has its
j-th-from-last line at rank 1 + Poisson(j/S) among its own lines, so it
survives K later foreign lines iff Poisson((j + K)/S) <= a - 1. Summing over
j and using d/dlam [a(1 - W(lam))] = P(Poisson(lam) <= a - 1):

    survivors_lru(K, L, S, a) = S * a * (W(K/S) - W((K + L)/S)),  W = warmth_lru per set

which is exact under the Poisson placement approximation, equals the number
of lines resident after touching L lines when K = 0 (S*a*(1 - W(L/S)):
L for L << S*a, S*a for L >> S*a: a footprint larger than the cache does not
fit), and tends to S*a*W(K/S), docs/design/MODEL.md's formula, as L grows to the cache
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
from array import array

from warmcore.simcore.work import CODE, OWNER_KINDS, TASK, THREAD

# Spacing of the warmth table in lam = K/S (foreign lines per set).
LAMBDA_STEP = 1.0 / 128.0
_INV_STEP = 128.0
# No cap on an access's misses.
_INF = math.inf
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
    """docs/design/MODEL.md's a-way LRU warmth: (1/a) sum_{r=1..a} P(Poisson(K/S) <= a - r).

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


class _Entry:
    """What a cache remembers of one owner: the clock after its last touch, the
    lines of its footprint, the coherence version it saw."""

    __slots__ = ("stamp", "fp", "version")

    def __init__(self, stamp: float, fp: float, version):
        self.stamp = stamp
        self.fp = fp
        self.version = version


def _newest(owners: dict, keep: int) -> dict:
    """The ``keep`` most recently stamped entries of ``owners`` (ties: the later-inserted)."""
    return dict(sorted(owners.items(), key=lambda kv: kv[1].stamp)[-keep:])


class CacheState:
    """One cache instance: a fill clock and, per owner, an _Entry (stamp, lines, version).

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
        self._icpt = array("d", tab.icpt)   # typed double[::1] when compiled
        self._slope = array("d", tab.slope)
        self._tn = tab.n
        self._k_dead = tab.lam_dead * self.sets
        self.name = name

    def _surv(self, e) -> float:
        """Lines of entry ``e``'s footprint still resident: S*a*(W(K/S) - W((K+fp)/S))."""
        fp = e.fp
        k = self.clock - e.stamp
        x = k * self._scale if k > 0.0 else 0.0
        # Table positions are compared with the table's length before the int()
        # (x >= 0, so int() is floor): compiled, int() is a C cast, defined only in range.
        if x >= self._tn:
            return 0.0
        c = self._icpt
        b = self._slope
        i = int(x)
        w = c[i] + b[i] * x
        x += fp * self._scale
        if x < self._tn:
            i = int(x)
            w -= c[i] + b[i] * x
        s = self.lines * w
        if s > fp:
            return fp
        return s if s > 0.0 else 0.0

    def resident(self, key, version=None) -> float:
        """Lines of ``key``'s recorded footprint still resident now (0 if unknown/invalid)."""
        e = self.owners.get(key)
        if e is None or (version is not None and e.version != version):
            return 0.0
        return self._surv(e)

    def warm(self, key, lines: float, version=None) -> float:
        """Warm lines among ``lines`` of ``key`` touched now (no state change)."""
        e = self.owners.get(key)
        if e is None or (version is not None and e.version != version):
            return 0.0
        surv = self._surv(e)
        fp = e.fp
        return surv if lines >= fp else surv * lines / fp

    def access(self, key, lines: float, cap: float = _INF, version=None,
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
        if e is None or (version is not None and e.version != version):
            miss = lines
            fp = lines
        else:
            surv = self._surv(e)
            fp = e.fp
            if lines >= fp:
                miss = lines - surv
                fp = lines
            else:
                # touching a subset: the untouched part's survivors stay recorded
                f = lines / fp
                miss = lines - surv * f
                fp = lines + surv * (1.0 - f)
        if miss > cap:
            miss = cap
        self.clock = clock = self.clock + miss + extra_fills
        if e is None:
            # __new__ and three stores: compiled, this skips __init__'s argument parsing
            e = _Entry.__new__(_Entry)
            e.stamp = clock
            e.fp = fp
            e.version = store
            self.owners[key] = e
            if len(self.owners) > self._sweep_at:
                self._sweep()
        else:
            e.stamp = clock
            e.fp = fp
            e.version = store
        return miss

    def _sweep(self) -> None:
        horizon = self.clock - self._k_dead
        live = {}
        for k, e in self.owners.items():
            if e.stamp >= horizon:
                live[k] = e
        keep = self.max_owners // 2
        if len(live) > keep:
            live = _newest(live, keep)
        self.owners = live
        self._sweep_at = min(self.max_owners, max(256, len(live) + (len(live) >> 1) + 1))
        if self._sweep_at <= len(live):
            self._sweep_at = len(live) + 1

    def flush(self) -> None:
        """Every line leaves this cache (a core's idle state flushed it): each owner
        then reads as cold. The clock stays, so later footprints age as before."""
        self.owners = {}

    def __len__(self) -> int:
        return len(self.owners)


# Owner ids (Hierarchy.owner_id): kind codes, in OWNER_KINDS order, and the bound
# below which an int key maps arithmetically (4 * key + code stays a machine word).
_KIND_CODE = {kind: code for code, kind in enumerate(OWNER_KINDS)}
_ARITH_KEYS = 1 << 60


class Hierarchy:
    """A machine's caches and the walk of one segment's footprints through them.

    The hot loop of models.hardware.HardwareMachine.execute (whose docstring
    gives the accounting), kept here so that it compiles with CacheState when
    the extension is built (models/cache.pxd; see docs/engine.md "Speed").

    l1d, l1i, l2  per physical core (l1i entries None: code shares the L1d;
                  has_l2 False: no private L2, L1 misses go to the LLC)
    llc           per LLC domain
    coherence     check and update ``directory`` (models.coherence.Directory)
    topology      models.coherence.Topology (LLC domains, transfer latencies)

    ``touch(core, llc_domain, footprint, thread_key)`` walks the footprints and
    leaves the segment's totals in ``l2_hits``, ``llc_hits``, ``dram_lines``,
    ``c2c_ns``, ``data_lines``, ``l1_misses``, ``llc_loads``, ``llc_misses``,
    ``llc_stores`` and ``llc_store_misses``,
    and in ``walk_dram_lines`` the DRAM lines of its sequential walks (TASK
    footprints, and THREAD ones with their own key: what the L2 streamer
    follows, models.hardware "Streams")
    (fields, not a tuple: compiled, the caller reads them as C doubles);
    ``c2c_lines`` counts the lines moved core to core so far.

    Loads and stores, as perf counts them on Intel cores: a data line that misses
    the L2 goes to the LLC as a demand data read, or, when the core's first access
    to it is a store, as a demand RFO (read for ownership). perf's generic LLC-loads
    and LLC-misses count the reads only and LLC-stores / LLC-store-misses the RFOs
    (Linux arch/x86/events/intel/core.c, ``snb_hw_cache_extra_regs``, used for Sandy
    and Ivy Bridge: C(LL) OP_READ = SNB_DMND_READ (DMND_DATA_RD | LLC_DATA_RD),
    OP_WRITE = SNB_DMND_WRITE (DMND_RFO | LLC_RFO); ``hsw_hw_cache_extra_regs``
    and ``skl_hw_cache_extra_regs`` split them the same way). A footprint's
    ``fresh`` lines are the ones written first (objects allocated and filled) and
    are taken to be its coldest: memory just allocated, that no cache holds, while
    the lines it reads are the ones somebody wrote for it (a request's bytes, which a
    client's core or DDIO may have left in the LLC). So of its L2 misses the first
    ``fresh`` are stores and the rest loads, and likewise of its LLC misses. L1d
    misses count both, as L1D.REPLACEMENT (perf's L1-dcache-load-misses on those
    cores) does; the time a miss costs does not depend on its kind.

    Owner ids: the directory and the caches know an owner (kind, key) by an int,
    so the five tables a footprint visits hash and compare a machine word rather
    than a tuple (a third of the full model's time went to that). Non-negative
    int keys (request and thread ids) map arithmetically, 4 * key + kind; other
    keys get negative ids from a table (structures and connections: a few per
    scenario). ``owner(oid)`` gives (kind, key) back.
    """

    __slots__ = ("l1d", "l1i", "l2", "llc", "has_l2", "coherence", "directory", "topology",
                 "c2c_lines", "_ids", "_names", "_kind_code", "_task_code", "_thread_code",
                 "_code_code", "l2_hits", "llc_hits",
                 "dram_lines", "c2c_ns",
                 "data_lines", "l1_misses", "llc_loads", "llc_misses", "llc_stores",
                 "llc_store_misses", "walk_dram_lines")

    def __init__(self, l1d, l1i, l2, llc, has_l2, coherence, directory, topology):
        self.l1d = list(l1d)
        self.l1i = [d if i is None else i for i, d in zip(l1i, l1d, strict=True)]
        self.l2 = list(l2) if has_l2 else self.l1d
        self.llc = list(llc)
        self.has_l2 = bool(has_l2)
        self.coherence = bool(coherence)
        self.directory = directory
        self.topology = topology
        self.c2c_lines = 0.0
        self.l2_hits = self.llc_hits = self.dram_lines = self.c2c_ns = 0.0
        self.data_lines = self.l1_misses = self.llc_loads = self.llc_misses = 0.0
        self.llc_stores = self.llc_store_misses = 0.0
        # DRAM lines of the last touch's sequential walks: what the L2 streamer can
        # follow (models.hardware "Streams")
        self.walk_dram_lines = 0.0
        # kind -> {key -> negative id}, for keys that are not ids: two lookups of
        # keys whose hashes are cached or cheap, instead of a new (kind, key) tuple
        # hashed whole on every touch (issue 33)
        self._ids = {}
        self._names = []     # -id - 1 -> (kind, key)
        self._kind_code = _KIND_CODE    # compiled: a typed dict, no global lookup
        # the codes touch compares with, as C fields (three dict lookups a touch before)
        self._task_code = _KIND_CODE[TASK]
        self._thread_code = _KIND_CODE[THREAD]
        self._code_code = _KIND_CODE[CODE]

    def owner_id(self, kind, key):
        """The int the tables know owner (kind, key) by (see the class docstring)."""
        return self._owner_of(self._kind_code.get(kind, -1), kind, key)

    def _owner_of(self, code, kind, key):
        """``owner_id`` with ``kind``'s code already looked up (-1: not one of
        OWNER_KINDS), as ``touch`` has it."""
        if code >= 0 and type(key) is int and key >= 0 and key < _ARITH_KEYS:
            ik = key            # a C integer when compiled
            return ik * 4 + code
        return self._table_id(kind, key)

    def _table_id(self, kind, key):
        ids = self._ids.get(kind)
        if ids is None:
            ids = self._ids[kind] = {}
        oid = ids.get(key)
        if oid is None:
            self._names.append((kind, key))
            oid = ids[key] = -len(self._names)
        return oid

    def owner(self, oid):
        """(kind, key) of an owner id."""
        if oid >= 0:
            return OWNER_KINDS[oid % 4], oid // 4
        return self._names[-oid - 1]

    def touch(self, core, my_llc, footprint, thread_key):
        l1 = self.l1d[core]
        l1i = self.l1i[core]
        l2 = self.l2[core]
        llc = self.llc[my_llc]
        coh = self.coherence
        directory = self.directory
        entries = directory.entries
        has_l2 = self.has_l2
        l2_hits = llc_hits = dram = c2c_ns = touched = l1m = llcl = llcm = 0.0
        llcs = llcsm = walked = 0.0
        # The kind of each footprint is looked up once, as its code (owner_id's),
        # and then compared as an int: compiled, a string comparison is a call.
        kind_code = self._kind_code
        task = self._task_code
        thread = self._thread_code
        code_kind = self._code_code
        for f in footprint:
            # simcore.work.Footprint is a named tuple: unpacked in one go, since
            # compiled code indexes a tuple subclass through its Python-level slot
            # (slot_sq_item: a call of __getitem__ per index, seven times the cost of
            # this unpacking through the iterator protocol)
            kind, key, lines, writes, fresh = f
            if lines <= 0.0:
                continue
            code = kind_code.get(kind, -1)
            # a walk the L2 streamer can follow (models.hardware "Streams"): a
            # request's bytes or a message (TASK), or an object a thread owns and
            # touches whole, front to back (THREAD with its own key: a virtual
            # thread's stack chunk, copied by freeze and thaw); not the running
            # thread's own stack, re-touched in place (THREAD, key None)
            walk = code == task or (code == thread and key is not None)
            if key is None and code == thread:
                key = thread_key
            okey = self._owner_of(code, kind, key)
            ver = store = None
            x = cross = 0.0
            if coh:
                d = entries.get(okey)
                if d is None:
                    if writes:
                        store = directory.write(okey, core)
                else:
                    store = ver = d[1]
                    if d[0] != core:
                        if d[2]:
                            # modified by another core: our private copies are stale
                            # (the version check makes them miss); the lines still
                            # warm in the writer's caches come over, then are shared
                            x, lat, cross = self._from_writer(d, core, my_llc, okey, lines)
                            c2c_ns += x * lat
                        if writes:
                            store = directory.write(okey, core)
                    elif writes and not d[2]:
                        # we wrote it last but others have read it since: their
                        # copies are invalidated (while dirty, nobody else has one)
                        store = directory.write(okey, core)
            is_code = code == code_kind
            m1 = (l1i if is_code else l1).access(okey, lines, _INF, ver, store)
            m2 = l2.access(okey, lines, m1, ver, store) if has_l2 else m1
            if x > 0.0:
                # the transferred lines are not LLC hits nor DRAM reads
                m3 = llc.access(okey, lines, m2 - x, ver, store, cross)
                llc_hits += m2 - x - m3
            else:
                m3 = llc.access(okey, lines, m2, ver, store)
                llc_hits += m2 - m3
            l2_hits += m1 - m2
            dram += m3
            if walk:
                walked += m3
            if not is_code:
                touched += lines
                l1m += m1
                miss = m3 + cross       # from DRAM, or from a cache outside this LLC
                if fresh > 0.0:
                    # the lines written first are the coldest (class docstring): they
                    # go to the LLC as RFOs before any read line does
                    st = fresh if fresh < m2 else m2
                    llcs += st
                    llcl += m2 - st
                    st = fresh if fresh < miss else miss
                    llcsm += st
                    llcm += miss - st
                else:
                    llcl += m2
                    llcm += miss
        self.l2_hits = l2_hits
        self.llc_hits = llc_hits
        self.dram_lines = dram
        self.walk_dram_lines = walked
        self.c2c_ns = c2c_ns
        self.data_lines = touched
        self.l1_misses = l1m
        self.llc_loads = llcl
        self.llc_misses = llcm
        self.llc_stores = llcs
        self.llc_store_misses = llcsm

    def flush_core(self, core) -> None:
        """``core``'s own caches (L1I, L1D, L2) flushed to the LLC, as a core does in C3
        and deeper (models.hardware "Idle states empty a core's caches"): its next
        touches reload from the LLC, which still holds what it wrote."""
        self.l1d[core].flush()
        if self.l1i[core] is not self.l1d[core]:
            self.l1i[core].flush()
        if self.has_l2:
            self.l2[core].flush()

    def _from_writer(self, d, core, my_llc, okey, lines):
        """Lines of ``okey`` modified by core d[0] that it still holds: returns
        (lines transferred, latency ns, those of them from outside this LLC domain).
        The writer's copy becomes shared (clean)."""
        wcore = d[0]
        ver = d[1]
        topo = self.topology
        wllc = topo.core_llc[wcore]
        held = self.l2[wcore].warm(okey, lines, ver)
        d[2] = False
        if wllc == my_llc:
            x = held if held < lines else lines
            self.c2c_lines += x
            return x, topo.ns_llc, 0.0
        h = self.llc[wllc].warm(okey, lines, ver)
        if h > held:
            held = h
        x = held if held < lines else lines
        self.c2c_lines += x
        return x, topo.core_transfer_ns(core, wcore), x
