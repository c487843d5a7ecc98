"""A JVM's young generation and its stop-the-world copying collections (``[jvm]``).

What it models (HotSpot's generational collectors; the sources are JDK 21's G1 and
the Java SE GC tuning guide):

* **Allocation.** A strategy allocates objects by key (``allocate``): a virtual
  thread, its stack chunk, an AQS node, a queued Runnable. A key of ``None`` is
  garbage at once (temporaries); a keyed object is live until ``free``. Every
  allocation fills the eden (TLAB bump allocation: no work is charged for it).
* **A young collection when the eden is full.** It copies every *live* object of
  the young generation, none of the garbage (G1ParScanThreadState::
  do_copy_to_survivor_space: ``Copy::aligned_disjoint_words`` of the object, a CAS
  of the forwarding pointer into the old copy's header, the age table, then
  ``oop_iterate_backwards`` over the copy's reference fields). An object goes to a
  survivor region while they have room and its age is under the tenuring
  threshold, else it is promoted (copied to the old generation: the same work).
  Survivors are copied again at the next collection; promoted objects are not
  (old-generation collections are not modelled).
* **The work is the machine's.** Each GC thread runs one segment: per object
  ``object_ins`` instructions, one per 8-byte word copied (the copy is a memcpy:
  one 16-byte load and store per two words), ``chunk_frame_ins`` per frame of a
  stack chunk (InstanceStackChunkKlass::oop_oop_iterate_stack walks the frames and
  their oop maps), and as footprints the object's own lines (its owner key: the
  cache model decides whether they are still cached, and the GC thread's core
  becomes their owner, so a carrier that thaws a moved chunk fetches it from
  there) plus the same number of fresh to-space lines written. So a copy costs
  what the caches, the DRAM latency, the memory-level parallelism and the memory
  bus of the preset say, not a copying rate.
* **Stop the world.** A collection is a safepoint: the GC threads (one per server
  CPU, as ParallelGCThreads for up to 8 CPUs; spawned at the first collection) are
  woken, the strategies' threads
  stop at their next poll (``safepoint``: they park on a futex, as
  SafepointSynchronize::block does) and are woken when the last GC thread is done.
  The GC threads belong to the server process: their CPU is in its task-clock, as
  a JVM's GC threads are in its process's CPU.

Simplified: old-generation, mixed and full collections; G1's adaptive young
size, adaptive tenuring threshold and per-collection fixed work (root scanning of
thread stacks, remembered sets, code roots, termination); a running mutator is
stopped at its next poll, not mid-segment (time to safepoint).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from warmcore.simcore.work import THREAD, Footprint, Segment

MIB = 1 << 20
WORD_BYTES = 8
# Copy::aligned_disjoint_words is a memcpy: one instruction per 8-byte word (a 16-byte
# SSE2 load and store per two words, glibc's memcpy; the same count as freeze's copy).
COPY_INS_PER_WORD = 1.0


@dataclass(slots=True)
class Collection:
    """One young collection's bookkeeping: what it copied, where to."""

    index: int
    objects: list = field(default_factory=list)   # (key, bytes, frames) copied
    copied_bytes: float = 0.0
    promoted_bytes: float = 0.0
    survivor_bytes: float = 0.0


class YoungGen:
    """The eden and survivor spaces as bookkeeping: which live objects a collection
    copies, and where (module docstring). No time, no threads: tested by hand."""

    def __init__(self, eden_bytes: float, survivor_bytes: float, tenuring_threshold: int):
        self.eden_bytes = eden_bytes
        self.survivor_bytes = survivor_bytes
        self.tenuring_threshold = tenuring_threshold
        self.used = 0.0                  # bytes allocated since the last collection
        self.eden: dict = {}             # live key -> (bytes, frames), allocated since
        self.survivors: dict = {}        # live key -> (bytes, frames, age)
        self.old: set = set()            # keys promoted and still live
        self.collections = 0
        self.copied_bytes = 0.0
        self.promoted_bytes = 0.0
        self.allocated_bytes = 0.0

    def allocate(self, key, nbytes: float, frames: int = 0) -> Collection | None:
        """Allocate ``nbytes``; ``key`` None is garbage at once, else the object is live
        until ``free(key)`` (a new object under a live key replaces it: the old one
        is garbage). An allocation the eden has no room left for collects first and
        then takes its place in the emptied eden (the allocation failure that starts
        a young collection): that collection is returned, else None."""
        collection = None
        if self.used + nbytes > self.eden_bytes and self.used > 0:
            collection = self.collect()
        if key is not None:
            self.free(key)
            self.eden[key] = (nbytes, frames)
        self.used += nbytes
        self.allocated_bytes += nbytes
        return collection

    def free(self, key) -> None:
        """The object under ``key`` is garbage from now on."""
        if self.eden.pop(key, None) is None and self.survivors.pop(key, None) is None:
            self.old.discard(key)

    def in_young(self, key) -> bool:
        """Is the object under ``key`` live in the young generation (eden or survivor)?
        G1's requires_barriers(chunk) is its negation for a live chunk."""
        return key in self.eden or key in self.survivors

    def is_old(self, key) -> bool:
        return key in self.old

    def collect(self) -> Collection:
        """Copy the young generation's live objects: survivors first (the older),
        then the eden's, each to a survivor region while there is room and its age is
        under the threshold, else to the old generation."""
        self.collections += 1
        c = Collection(self.collections)
        room = self.survivor_bytes
        survivors: dict = {}
        for key, (nbytes, frames, age) in self.survivors.items():
            room = self._copy(c, survivors, key, nbytes, frames, age + 1, room)
        for key, (nbytes, frames) in self.eden.items():
            room = self._copy(c, survivors, key, nbytes, frames, 1, room)
        self.survivors = survivors
        self.eden = {}
        self.used = 0.0
        self.copied_bytes += c.copied_bytes
        self.promoted_bytes += c.promoted_bytes
        return c

    def _copy(self, c: Collection, survivors: dict, key, nbytes, frames, age, room) -> float:
        c.objects.append((key, nbytes, frames))
        c.copied_bytes += nbytes
        if age <= self.tenuring_threshold and nbytes <= room:
            survivors[key] = (nbytes, frames, age)
            c.survivor_bytes += nbytes
            return room - nbytes
        self.old.add(key)
        c.promoted_bytes += nbytes
        return room


class JvmHeap:
    """The young generation of the server's JVM, its GC threads and its safepoints
    (module docstring). Strategies reach it as ``ctx.heap`` (None when ``[jvm]`` is
    off) through four calls: ``allocate``, ``free``, ``in_young`` and
    ``safepoint``."""

    def __init__(self, ctx, cfg):
        self.ctx = ctx
        self.kernel = ctx.kernel
        self.cfg = cfg
        young = cfg.young_mib * MIB
        survivor = young / cfg.survivor_ratio
        self.gen = YoungGen(young - survivor, survivor, cfg.tenuring_threshold)
        preset = getattr(ctx.machine, "preset", None)
        self.line = preset.line_bytes if preset is not None else 64
        self.paused = False
        self.queued: deque = deque()       # collections waiting for the GC threads
        self.busy = 0                       # GC threads still working on this pause
        self.stopped: list = []             # mutators parked at the safepoint
        self.idle_gc: list = []
        self.work: dict = {}                # GC thread -> its segment of this pause
        self.stats = {"collections": 0, "copied_bytes": 0.0, "promoted_bytes": 0.0,
                      "pause_s": 0.0, "safepoint_stops": 0}
        self.pause_t0 = 0.0
        self.n_gc_threads = cfg.gc_threads or len(ctx.server_cpus)
        self.gc_threads: list = []          # spawned at the first collection

    # -- the calls strategies make -------------------------------------------------

    def allocate(self, key, nbytes: float, frames: int = 0, waker=None) -> None:
        """Allocate an object (``YoungGen.allocate``); one the eden has no room for
        starts a collection (``waker``: the allocating thread, which pays the GC
        threads' futex wakes)."""
        c = self.gen.allocate(key, nbytes, frames)
        if c is not None:
            self._collected(c, waker)

    def free(self, key) -> None:
        self.gen.free(key)

    def in_young(self, key) -> bool:
        return self.gen.in_young(key)

    def safepoint(self, t):
        """A mutator's safepoint poll (``yield from heap.safepoint(t)``): during a
        collection it parks until the GC threads are done."""
        while self.paused:
            self.stats["safepoint_stops"] += 1
            self.stopped.append(t)
            t.syscall("futex_wait")
            yield t.park()

    # -- collections ---------------------------------------------------------------

    def _collected(self, c: Collection, waker) -> None:
        st = self.stats
        st["collections"] += 1
        st["copied_bytes"] += c.copied_bytes
        st["promoted_bytes"] += c.promoted_bytes
        self.queued.append(c)
        if not self.paused:
            self._start_pause(waker)

    def _start_pause(self, waker) -> None:
        c = self.queued.popleft()
        self.paused = True
        self.pause_t0 = self.ctx.env.now
        if not self.gc_threads:
            # Spawned (and placed) at the first collection, so that a run that never
            # collects is exactly the run without the heap: idle GC threads cost
            # nothing in a JVM either.
            self.gc_threads = [self.kernel.spawn(self.ctx.server, f"gc-{i}", self._gc_thread)
                               for i in range(self.n_gc_threads)]
        shares = self.split(c, len(self.gc_threads))
        self.busy = len(self.gc_threads)
        for th, seg in zip(self.gc_threads, shares, strict=True):
            self.work[th] = seg
        idle, self.idle_gc = self.idle_gc, []
        for th in idle:
            self.kernel.wake(th, waker)

    def split(self, c: Collection, n: int) -> list[Segment]:
        """The collection's copying as ``n`` GC threads' segments: objects dealt out in
        turn (G1's workers take them from work-stealing queues)."""
        cfg = self.cfg
        parts = [[] for _ in range(n)]
        for i, obj in enumerate(c.objects):
            parts[i % n].append(obj)
        return [self.copy_segment(p, c.index, i, cfg.object_ins, cfg.chunk_frame_ins)
                for i, p in enumerate(parts)]

    def copy_segment(self, objects, index: int, worker: int, object_ins: float,
                     frame_ins: float) -> Segment:
        """One GC thread's share: per object its instructions, its words copied, its
        frames walked; its own lines read (and now owned by this core) and as many
        fresh to-space lines written."""
        ins = 0.0
        fps = []
        to_space = 0.0
        line = self.line
        for key, nbytes, frames in objects:
            ins += object_ins + nbytes / WORD_BYTES * COPY_INS_PER_WORD + frames * frame_ins
            fps.append(Footprint(THREAD, key, nbytes / line, True))
            to_space += nbytes / line
        if to_space:
            fps.append(Footprint(THREAD, ("gc-to-space", index, worker), to_space, True))
        return Segment(ins, tuple(fps), label="gc-evacuate")

    def _gc_thread(self, t):
        while True:
            seg = self.work.pop(t, None)
            if seg is None:
                self.idle_gc.append(t)
                t.syscall("futex_wait")          # the GC workers' gang waits on a monitor
                yield t.park()
                continue
            if seg.instructions:
                yield t.run(seg)
            self.busy -= 1
            if self.busy == 0:
                self._end_pause(t)

    def _end_pause(self, t) -> None:
        self.stats["pause_s"] += self.ctx.env.now - self.pause_t0
        if self.queued:                          # the eden filled again meanwhile
            self._start_pause(t)
            return
        self.paused = False
        stopped, self.stopped = self.stopped, []
        for th in stopped:
            self.kernel.wake(th, t)
