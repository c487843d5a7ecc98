"""The JVM heap model (models/jvm_heap.py, ``[jvm]``): young collections that copy
the live objects, priced by the machine, run stop-the-world on GC threads; computed
by hand on small cases."""

from __future__ import annotations

import pytest

from warmcore.models.hardware import HardwareMachine
from warmcore.models.jvm_heap import JvmHeap, YoungGen
from warmcore.models.presets import Preset
from warmcore.simcore.config import ConfigError, load
from warmcore.simcore.work import THREAD

# 1 core at 1 GHz, 1 IPC, DRAM 100 ns, one miss at a time, no streamer: a cold line
# costs 100 ns (as tests/test_vthread_costs.py)
ONE = Preset(name="test-gc", description="1 core", cores_per_socket=1, pstates_ghz=(1.0,),
             base_ipc=1.0, mlp=1.0, dram_ns=100.0, extra={"stream_ahead_lines": 0.0})
CACHES = {e: e == "caches" for e in ("caches", "coherence", "contention", "membus", "smt",
                                     "dvfs", "switch_costs", "energy")}


def _stream(gen, live, garbage_per_ms, ms):
    """``live`` chunks of 1,000 B allocated and kept, then ``garbage_per_ms`` bytes of
    garbage a millisecond for ``ms`` ms: the collections it caused."""
    out = []
    for i in range(live):
        out.append(gen.allocate(("chunk", i), 1000.0, 16))
    for _ in range(ms):
        out.append(gen.allocate(None, garbage_per_ms))
    return [c for c in out if c is not None]


def test_collections_come_every_eden_and_copy_only_the_live_bytes():
    # eden Y = 10,000 B, survivor 2,000 B; 4 live chunks of 1,000 B, then A = 1,000 B/ms
    # of garbage for 50 ms: 54,000 B allocated. A collection when an allocation finds
    # no room: at the 11th, 21st, 31st, 41st and 51st KB -> 5 collections
    gen = YoungGen(10_000.0, 2_000.0, tenuring_threshold=15)
    cs = _stream(gen, live=4, garbage_per_ms=1000.0, ms=50)
    assert len(cs) == gen.collections == 5
    # the first copies the 4 chunks (4,000 B; 2 fit the survivor space, 2 promoted),
    # each later one the 2 survivors again (2,000 B): 12,000 B, 2,000 promoted. The
    # 46,000 B of garbage is never copied.
    assert [c.copied_bytes for c in cs] == [4000.0, 2000.0, 2000.0, 2000.0, 2000.0]
    assert gen.copied_bytes == 12_000.0 and gen.promoted_bytes == 2_000.0
    assert cs[0].objects[0] == (("chunk", 0), 1000.0, 16)
    assert gen.is_old(("chunk", 2)) and gen.in_young(("chunk", 0))
    assert not gen.in_young(("chunk", 2))


def test_the_tenuring_threshold_promotes_survivors_and_freed_objects_are_not_copied():
    gen = YoungGen(10_000.0, 2_000.0, tenuring_threshold=2)
    cs = _stream(gen, live=4, garbage_per_ms=1000.0, ms=50)
    # survivors of age 1 and 2 stay; at the third collection (age 3 > 2) they are
    # promoted: 4,000 + 2,000 + 2,000 copied, then nothing young is live
    assert [c.copied_bytes for c in cs] == [4000.0, 2000.0, 2000.0, 0.0, 0.0]
    assert gen.promoted_bytes == 4000.0
    # a chunk freed (its virtual thread done) is garbage: the next collection skips it
    gen2 = YoungGen(10_000.0, 2_000.0, 15)
    gen2.allocate(("chunk", 0), 1000.0)
    gen2.allocate(("chunk", 1), 1000.0)
    gen2.free(("chunk", 0))
    c = gen2.allocate(None, 9000.0)
    assert c.copied_bytes == 1000.0 and [o[0] for o in c.objects] == [("chunk", 1)]
    # a new object under a live key replaces the old (a new stack chunk for a thread)
    gen2.allocate(("chunk", 1), 500.0)
    c = gen2.allocate(None, 9600.0)
    assert c.copied_bytes == 500.0


class _Ctx:
    """Enough of a SimContext for JvmHeap's pricing (no threads spawned)."""


def _heap_for_pricing(machine):
    heap = JvmHeap.__new__(JvmHeap)
    heap.line = 64
    return heap


def test_a_copy_costs_its_instructions_and_the_lines_the_caches_say():
    m = HardwareMachine(ONE, effects=CACHES)
    heap = _heap_for_pricing(m)
    # two stack chunks of 1,024 B (16 lines) with 16 frames each, object_ins 100 and
    # chunk_frame_ins 100: 2 x (100 + 128 words + 16 x 100) = 3,656 instructions
    seg = heap.copy_segment([(("vstack", 1), 1024.0, 16), (("vstack", 2), 1024.0, 16)],
                            index=1, worker=0, object_ins=100.0, frame_ins=100.0)
    assert seg.instructions == 3656.0
    assert [(f.kind, f.key, f.lines, f.writes) for f in seg.footprint] == [
        (THREAD, ("vstack", 1), 16.0, True), (THREAD, ("vstack", 2), 16.0, True),
        (THREAD, ("gc-to-space", 1, 0), 32.0, True)]
    # cold: 3,656 ns + 32 chunk lines + 32 to-space lines from DRAM (64 x 100 ns)
    assert m.execute(0, seg, "gc", 0.0)[0] == pytest.approx(3656e-9 + 6.4e-6)
    # the same chunks warm on this core (a carrier froze them just now): only the
    # fresh to-space lines miss
    warm = heap.copy_segment([(("vstack", 1), 1024.0, 16), (("vstack", 2), 1024.0, 16)],
                             index=2, worker=0, object_ins=100.0, frame_ins=100.0)
    assert m.execute(0, warm, "gc", 0.0)[0] == pytest.approx(3656e-9 + 3.2e-6)


def _loom(*sets, heap=True):
    from warmcore.build import build, finish, run_built
    sc = load("loom", ["workload.jobs=300", *sets])
    if not heap:
        sc = sc.edit({"jvm.young_mib": None})
    ctx = build(sc, 1)
    return finish(ctx, run_built(ctx)), ctx


def test_a_collection_stops_the_mutators_and_its_cpu_is_the_process_cpu():
    # 300 virtual threads: 248 B each at their start, a 1,672 B chunk each at their
    # first freeze (16 frames of 96 B, its metadata and bitmap), 32 B per park on the
    # semaphore. A young generation of 0.25 MiB (eden 7/8 of it, 229,376 B) fills
    # several times.
    r, ctx = _loom("jvm.young_mib=0.25")
    heap = ctx.heap
    st = heap.stats
    assert r["requests"] == 300
    assert heap.gen.eden_bytes == 0.25 * (1 << 20) * 7 / 8
    assert ctx.strategy.cont.chunk_bytes == pytest.approx(56 + (1536 + 16) * (1 + 1 / 32))
    assert st["collections"] >= heap.gen.allocated_bytes // heap.gen.eden_bytes
    assert st["copied_bytes"] > 0 and st["safepoint_stops"] > 0 and st["pause_s"] > 0
    # the GC threads' CPU is in the server's task-clock: the same run without the heap
    # spends less
    gc_cpu = sum(t.ctr[0] for t in ctx.server.threads if t.name.startswith("gc-"))
    assert gc_cpu > 0
    r0, ctx0 = _loom(heap=False)
    assert ctx0.heap is None
    assert r["task_clock_ms"] > r0["task_clock_ms"]


def test_the_heap_is_off_unless_asked_and_bad_sizes_are_refused():
    assert load("loom").jvm.young_mib is not None        # the report's JVM: on
    assert load("pipeline").jvm.young_mib is None        # not a JVM that allocates here
    with pytest.raises(ConfigError, match="jvm.young_mib"):
        load("loom", ["jvm.young_mib=-1"])
    with pytest.raises(ConfigError, match="jvm.survivor_ratio"):
        load("loom", ["jvm.survivor_ratio=1"])


def test_collections_charge_the_virtual_threads_and_not_the_pool():
    """3,000 tasks of `loom` with a 2 MiB young generation: the virtual threads' live
    chunks fill the eden again and again, the pool's 136 bytes a task never do.
    Measured: 11 collections, 19.7 MB copied, 68.05 -> 71.20 us of CPU a task for
    the virtual threads; the pool unchanged at 56.73."""
    per = lambda r: r["task_clock_ms"] * 1e3 / r["requests"]  # noqa: E731
    pool = ("strategy.params.kernel_threads=true", "strategy.params.pool=200")
    vt, vctx = _loom("workload.jobs=3000", "jvm.young_mib=2")
    vt0, _ = _loom("workload.jobs=3000", heap=False)
    pl, pctx = _loom("workload.jobs=3000", "jvm.young_mib=2", *pool)
    pl0, _ = _loom("workload.jobs=3000", *pool, heap=False)
    st = vctx.heap.stats
    assert st["collections"] >= 8
    # every thread's first chunk is live when it is copied: at least 3,000 x 1,672 B
    assert st["copied_bytes"] >= 3000 * vctx.strategy.cont.chunk_bytes
    gc_cpu = sum(t.ctr[0] for t in vctx.server.threads if t.name.startswith("gc-"))
    assert gc_cpu * 1e6 / 3000 > 2.0                     # us a task of copying
    assert per(vt) > per(vt0) + 2.0
    assert pctx.heap.stats["collections"] == 0
    assert per(pl) == per(pl0)
