"""virtual-threads: one Loom virtual thread per request, mounted on a carrier pool.

Model (sources: JDK 21 java.lang.VirtualThread, java.util.concurrent.ForkJoinPool,
JEP 444):

* Carriers: a ForkJoinPool of ``carriers`` kernel threads (default: one per
  server CPU, jdk.virtualThreadScheduler.parallelism = availableProcessors) in
  async (FIFO) mode. Each carrier has a local FIFO queue; tasks submitted from
  outside the pool go to submission queues chosen by the submitting thread:
  one for the acceptor that starts virtual threads, one for the I/O poller
  that resumes them.
* A virtual thread is a task, not a kernel thread. Each arrival starts one: its
  first mount runs a start segment (``start_us``, ~10 us: docs/design/STRATEGIES.md), then
  the request's produce and the compute part of its consume segment.
* Blocking (the consume segment's ``block_s``, a backend call) unmounts the
  virtual thread (the continuation's freeze): the carrier goes on with other
  work. When the call completes, the I/O poller (a platform thread, not
  modelled as CPU) unparks it: its continuation goes to the poller's
  submission queue; when it is mounted again (the thaw) it releases its permit
  and finishes the request.
* Freeze and thaw are work, not constants (``ContinuationCosts``; JDK 21
  src/hotspot/share/runtime/continuationFreezeThaw.cpp): ``freeze_fast`` copies
  the frames from the continuation's entry to ``Continuation.yield`` into the
  tail stack chunk, a heap object (``copy_to_chunk``); ``thaw_fast`` copies a
  chunk under 500 words back whole (``threshold = 500; // words``, after
  ``prefetch_chunk_pd``), a larger one a frame at a time. Each is its path's
  instructions plus one per word moved, and touches the stack's lines twice: the
  carrier's stack and the virtual thread's own chunk (a THREAD footprint keyed
  by the virtual thread: cold again once thousands of others have run, as the
  cache model decides). The stack is ``stack_frames`` x ``frame_bytes``.
* The carrier pool's queues are shared lines: a take is a CAS on the queue's
  slot (``ForkJoinPool.WorkQueue.poll``, contended when carriers steal from the
  same queue), a push onto a carrier's own queue writes its slot
  (``WorkQueue.push``), and waking an idle carrier is a CAS on the pool's ``ctl``
  (``signalWork``) besides the futex wake.
* A virtual thread that parks on a semaphore enqueues an AQS node
  (java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire: a new node, a
  CAS on ``tail``); a release reads the first waiter's node (``signalNext``:
  written when it queued, behind thousands of others' since) and moves ``head``
  (a CAS contended by the releasing carriers).
* ``permits``: a bounded resource (a connection-pool Semaphore, FIFO hand-off)
  held around the blocking call. A virtual thread that finds none parks
  unmounted; the releasing virtual thread unparks the first waiter, whose
  continuation goes to the releasing carrier's local queue (ForkJoinPool.execute
  from a virtual thread uses JLA.currentCarrierThread(), so it is a local push).
* Scheduling (ForkJoinPool in asyncMode): a carrier takes its own queue FIFO,
  else scans the other carriers' queues and the submission queues from a random
  start (stream "vthreads-scan") and takes one task from the base of the first
  non-empty one; if that queue still holds work it signals another idle carrier
  (signalWork propagation). A push onto an empty queue signals one idle carrier
  (the most recently idle: the pool's idle stack). Idle carriers park.
* ``pinned``: the blocking call is made while pinned (inside ``synchronized``
  in JDK 21): the carrier itself blocks and cannot run anything else.
* ``kernel_threads``: the same requests on platform threads, one new kernel
  thread per request (start ``kernel_start_us`` = 140 us, docs/design/STRATEGIES.md,
  charged as CPU to its first segment), blocking in the kernel; at most
  ``max_kernel_threads`` live at once (beyond it, arrivals wait for one to
  exit, as a server at its thread limit would).

* The JVM heap (``ctx.heap``, when the scenario's ``[jvm]`` is on: models/jvm_heap.py):
  a virtual thread allocates its objects at its start (VTHREAD_BYTES), a stack chunk
  at a freeze whose tail chunk is missing or no longer young (finalize_freeze's
  ``requires_barriers`` test) and an AQS node per park on a semaphore, all live
  until it ends (the node until it is dequeued); a pool's queued task is live
  until a worker takes it. Carriers and pool workers poll the safepoint before
  taking work. The young collections copy what is live (docs/model.md "A JVM's
  young collections").

Simplified: the poller's CPU, ForkJoinPool's compensation threads for pinned
Object.wait, and non-fair Semaphore barging are not modelled; start and
mount/unmount costs are charged on the carrier that mounts the thread; a thaw of
a promoted chunk (thaw_slow) costs what thaw_fast does, and G1's card marking and
refinement of the old Continuations' stores of new chunks are not charged
(docs/model.md "Known departures").
"""

from __future__ import annotations

from collections import deque

from pydantic import Field

from warmcore.simcore.config import ConfigError
from warmcore.simcore.rng import block_sampler
from warmcore.simcore.work import (SHARED, STEP_ACQUIRE, STEP_CALL, STEP_RUN, THREAD,
                                   Footprint, Segment, compute_part)
from warmcore.strategies.base import StrategyParams, Strategy, register
from warmcore.strategies.pools import lock_segment

START, CALL, AFTER = 0, 1, 2
PROGRAM = 3          # a request program: VThread.pc is the next step

# Instructions per 8-byte word that freeze and thaw copy: copy_to_chunk and
# copy_from_chunk are memcpy of the frames, one load and one store per 16 bytes on
# x86-64 (glibc's SSE2 memcpy).
COPY_INS_PER_WORD = 1.0
WORD_BYTES = 8.0
# thaw_fast copies a chunk under 500 words whole; above, one frame, and the return
# barrier thaws each further frame the thread returns into (continuationFreezeThaw.cpp
# "threshold = 500; // words"); the next freeze copies only the frames thawed since.
THAW_WHOLE_WORDS = 500.0
# Frames a parked virtual thread returns through before it parks again when its
# stack is too big to thaw whole: from doYield back to the task's body (the 14
# frames of Params.stack_frames' count less the entry's three and the task's run).
RETURN_FRAMES = 10

# Heap objects, for the JVM heap model (ctx.heap, ``[jvm]``): bytes with compressed
# references (4 bytes) and class pointers (a 12-byte header), 8-byte aligned.
# An AQS node (JDK 21 AbstractQueuedSynchronizer.Node: prev, next, waiter, status):
# 12 + 4 x 4 = 28 -> 32 bytes; a park on a semaphore allocates one (acquire's ``new
# SharedNode()``).
AQS_NODE_BYTES = 32.0
# A virtual thread's objects from its start to its end: the VirtualThread (Thread's
# fields, about 24 of them, and VirtualThread's own: scheduler, cont, runContinuation,
# state, parkPermit, carrierThread, termination), Thread's interruptLock Object, its
# Continuation (scope, target, parent, child, tail and flags), the runContinuation
# Runnable and the task's own lambda: ~152 + 16 + 48 + 16 + 16 bytes, an estimate
# from the JDK 21 classes' fields (not measured with JOL).
VTHREAD_BYTES = 248.0
# A stack chunk (jdk.internal.vm.StackChunk, allocated by freeze's allocate_chunk):
# its header and fields (parent, size, sp, bottom, and HotSpot's injected pc, flags,
# argsize, maxThawingSize, cont: ~56 bytes), the frames, frame::metadata_words (2
# words on x86-64) and the oop bitmap reserved with it
# (InstanceStackChunkKlass::instance_size: 2 bits a word with compressed oops).
CHUNK_HEADER_BYTES = 56.0
CHUNK_METADATA_BYTES = 16.0
CHUNK_BITMAP_PER_BYTE = 2.0 / 64.0       # 2 bits per 8-byte word
# A task queued on ThreadPoolExecutor(LinkedBlockingQueue): its LinkedBlockingQueue.Node
# (item, next: 12 + 8 -> 24 bytes) and the task lambda (16 bytes).
QUEUED_TASK_BYTES = 40.0


# ForkJoinPool's MAX_CAP: its constructor throws IllegalArgumentException for a
# parallelism above 0x7fff (java.util.concurrent.ForkJoinPool, JDK 21), so no virtual
# thread scheduler has more carriers.
FJP_MAX_CAP = 0x7FFF


class Params(StrategyParams):
    carriers: int | None = Field(default=None, gt=0, le=FJP_MAX_CAP, description=(
        "default: one per server CPU (server.threads if set); at most ForkJoinPool's "
        "MAX_CAP, 32,767"))
    permits: int | None = Field(default=None, gt=0, description='None: no bounded resource')
    kernel_threads: bool = False
    start_us: float = Field(default=10.0, ge=0, description='virtual thread start')
    kernel_start_us: float = Field(default=140.0, ge=0, description='platform thread start')
    stack_frames: int = Field(default=16, ge=0, description=(
        "frames from the continuation's entry to Continuation.yield when a virtual thread "
        "parks: 14 on a Semaphore.acquire in JDK 21 (Continuation.enter, enter0, "
        "VirtualThread.run, the task's run and body, Semaphore.acquire, "
        "AQS.acquireSharedInterruptibly, AQS.acquire, LockSupport.park, "
        "VirtualThread.park, yieldContinuation, Continuation.yield, yield0, doYield), "
        "a few more in a driver's blocking read"))
    frame_bytes: float = Field(default=96.0, ge=8, description=(
        "bytes per frame: a compiled x86-64 frame's return address, saved rbp, spills "
        "and outgoing arguments, 12 words (an estimate, not measured)"))
    freeze_ins: float = Field(default=500.0, ge=0, description=(
        "instructions of the freeze path besides the copy (VirtualThread.yieldContinuation "
        "and afterYield's state CASes, unmount's carrier fields, freeze_fast's checks and "
        "chunk bookkeeping): an estimate from the code paths, not measured"))
    thaw_ins: float = Field(default=500.0, ge=0, description=(
        "instructions of the thaw path besides the copy (VirtualThread.runContinuation's "
        "mount and state CAS, thaw_fast's checks, the return barrier): an estimate"))
    queue_op_ins: float = Field(default=50.0, ge=0, description=(
        "instructions of a ForkJoinPool queue push or poll, or an AQS enqueue or "
        "signalNext, besides its CAS (an estimate)"))
    pinned: bool = False
    max_kernel_threads: int = Field(default=10_000, gt=0)
    pool: int | None = Field(default=None, gt=0,
                             description='with kernel_threads: a fixed pool of this many '
                                         'platform threads (Executors.newFixedThreadPool) '
                                         'instead of a new thread per task')
    lock_us: float = Field(default=0.05, ge=0, description="pool queue's lock per take")


class ContinuationCosts:
    """The segments a virtual thread's freeze and thaw, the carrier pool's queue
    operations and the semaphore's AQS queue cost (module docstring), as work:
    instructions and the lines they touch. Freeze and thaw copy ``stack_frames`` x
    ``frame_bytes`` between the carrier's stack (the running thread's THREAD
    footprint) and the virtual thread's stack chunk (a THREAD footprint keyed by
    it, so the cache model finds it warm or cold); a stack of 500 words or more is
    thawed lazily, so only the RETURN_FRAMES frames a park returns through move."""

    def __init__(self, p, machine):
        preset = getattr(machine, "preset", None)
        line = preset.line_bytes if preset is not None else 64
        frames = p.stack_frames
        if frames * p.frame_bytes / WORD_BYTES >= THAW_WHOLE_WORDS:
            frames = min(frames, RETURN_FRAMES)          # lazily, frame by frame
        stack = frames * p.frame_bytes                   # copied each way per park
        self.lines = stack / line
        copy = stack / WORD_BYTES * COPY_INS_PER_WORD
        self.freeze_ins = p.freeze_ins + copy
        self.thaw_ins = p.thaw_ins + copy
        self.op_ins = p.queue_op_ins
        self.ctl = self._cas(("fjp", "ctl"), "fjp-signal")     # signalWork's CAS on ctl
        chunk_stack = p.stack_frames * p.frame_bytes + CHUNK_METADATA_BYTES
        self.chunk_bytes = CHUNK_HEADER_BYTES + chunk_stack * (1 + CHUNK_BITMAP_PER_BYTE)
        self.chunk_frames = p.stack_frames
        self.polls: dict = {}

    def _cas(self, line, label, *more):
        return Segment(self.op_ins, (*more, Footprint(SHARED, line, 1.0, True)),
                       contended_ops=1, contended_line=line, label=label)

    def freeze(self, vt, parks_on=None) -> Segment:
        """Unmount: copy the frames into the chunk; parking on semaphore ``parks_on``
        also enqueues its AQS node (a new node, the CAS on the tail)."""
        fp = (Footprint(THREAD, None, self.lines),
              Footprint(THREAD, ("vstack", vt.req.id), self.lines, True))
        if parks_on is None:
            return Segment(self.freeze_ins, fp, label="vthread-unmount")
        tail = ("aqs-tail", parks_on)
        return Segment(self.freeze_ins + self.op_ins,
                       (*fp, Footprint(THREAD, ("aqs", vt.req.id), 1.0, True),
                        Footprint(SHARED, tail, 1.0, True)),
                       contended_ops=1, contended_line=tail, label="vthread-unmount")

    def thaw(self, vt) -> Segment:
        """Mount: copy the chunk's frames back onto the carrier's stack (a chunk under
        thaw_fast's 500 words whole)."""
        return Segment(self.thaw_ins,
                       (Footprint(THREAD, ("vstack", vt.req.id), self.lines),
                        Footprint(THREAD, None, self.lines, True)), label="vthread-mount")

    def poll(self, queue: int) -> Segment:
        """A take from the carrier pool's queue ``queue``: a CAS on its slot."""
        seg = self.polls.get(queue)
        if seg is None:
            seg = self.polls[queue] = self._cas(("fjp", queue), "fjp-poll")
        return seg

    def signal_next(self, vt, sem) -> Segment:
        """A release hands on to waiter ``vt``: read its node, CAS the head."""
        return self._cas(("aqs-head", sem), "aqs-signal",
                         Footprint(THREAD, ("aqs", vt.req.id), 1.0))


class VThread:
    __slots__ = ("pc", "req", "step")

    def __init__(self, req):
        self.req = req
        self.step = START
        self.pc = 0


class Carrier:
    __slots__ = ("current", "idle", "index", "queue", "thread")

    def __init__(self, index: int):
        self.index = index
        self.queue: deque[VThread] = deque()
        self.idle = False
        self.current: VThread | None = None
        self.thread = None


@register
class VirtualThreads(Strategy):
    name = "virtual-threads"
    own_backend_calls = True      # an unmounted virtual thread waits on its own timer
    summary = "a Loom virtual thread per request on a ForkJoinPool of carriers"
    # Each request starts a virtual thread, submitted to the scheduler's ForkJoinPool,
    # whose queues double (WorkQueue.growArray) up to MAXIMUM_QUEUE_CAPACITY = 1 << 26,
    # a guard against runaway programs, not a tunable (JDK 21 ForkJoinPool).
    no_queue_capacity = ("every request starts a virtual thread on a ForkJoinPool, whose "
                         "queues grow (growArray) up to a fixed runaway guard of 1 << 26 "
                         "tasks")
    Params = Params

    def start(self) -> None:
        p = self.p
        ips = self.ctx.machine.nominal_ips
        self.free = p.permits            # permits left (None: unlimited)
        self.stats = {"started": 0, "in_call": 0, "max_in_call": 0, "permit_waits": 0,
                      "steals": 0, "signals": 0, "live_kernel_threads": 0,
                      "max_live_kernel_threads": 0}
        self.start_seg = Segment(p.start_us * 1e-6 * ips, label="vthread-start") \
            if p.start_us else None
        self.cont = ContinuationCosts(p, self.ctx.machine)
        self.heap = self.ctx.heap
        self.task_bytes = self.ctx.cfg.work.task_kib * 1024.0    # what a task allocates
        prog = self.ctx.cfg.work.program or ()
        self.acquires = sum(1 for st in prog if st.acquire is not None)
        if p.kernel_threads:
            self.waiters: deque = deque()     # kernel threads parked on the semaphore
            self.backlog: deque = deque()     # arrivals waiting for a thread slot
            self.n_threads = 0
            if p.pool:
                # ThreadPoolExecutor(n, n, LinkedBlockingQueue): n long-lived workers
                # taking tasks FIFO, idle ones waiting on the queue's condition (FIFO).
                self.pool_idle: deque = deque()
                self.pool_lock = lock_segment(ips, p.lock_us, "vthreads-pool-lock") \
                    if p.lock_us else None
                for i in range(p.pool):
                    self.kernel.spawn(self.ctx.server, f"pool-{i}", self._pool_worker)
            return
        # Virtual threads share the scenario's named semaphores ([resources],
        # simcore.kernel.Semaphore, fair or not): a virtual thread that finds no permit
        # parks unmounted in its FIFO queue; the one a release returns is resumed
        # (fair: holding the permit; nonfair: to try its acquire again). The kernel
        # runs no program in this mode, so the strategy has them to itself.
        self.vsem = self.kernel.resources
        self.sem_waiters: deque[VThread] = deque()
        self.blocked: dict = {}              # unmounted in a blocking call: id -> request
        # External submission queues, one per submitting thread (ForkJoinPool indexes
        # them by the submitter's probe): the acceptor starting new virtual threads,
        # and the I/O poller unparking those whose call completed.
        self.submission: deque[VThread] = deque()
        self.resumed: deque[VThread] = deque()
        self.idle: list[Carrier] = []
        n = p.carriers or self.default_threads()
        if n > FJP_MAX_CAP:
            raise ConfigError("server.threads", (
                f"at most {FJP_MAX_CAP:,} carriers for virtual-threads, ForkJoinPool's "
                f"MAX_CAP (got {n:,}); kernel_threads = true runs a thread per task"))
        self.carriers = [Carrier(i) for i in range(n)]
        self.scan_queues = [c.queue for c in self.carriers] + [self.submission, self.resumed]
        self.scan_start = block_sampler(self.ctx.streams.generator("vthreads-scan"),
                                        lambda g, k: g.integers(0, n + 2, k))
        for c in self.carriers:
            c.thread = self.kernel.spawn(self.ctx.server, f"carrier-{c.index}",
                                         lambda t, c=c: self._carrier(t, c))

    def on_arrival(self, conn) -> None:
        req = conn.take()
        if req is None:           # nothing readable (a serial connection still busy)
            return
        self.stats["started"] += 1
        if self.p.kernel_threads:
            if self.p.pool:
                if self.heap is not None:          # ThreadPoolExecutor.execute queues it
                    self.heap.allocate(("task", req.id), QUEUED_TASK_BYTES)
                self.backlog.append(req)
                if self.pool_idle:
                    self.kernel.wake(self.pool_idle.popleft())
            elif self.n_threads < self.p.max_kernel_threads:
                self._spawn_kernel_thread(req)
            else:
                self.backlog.append(req)
            return
        if self.heap is not None:                  # Thread.startVirtualThread
            self.heap.allocate(("vthread", req.id), VTHREAD_BYTES)
        self._push(self.submission, VThread(req), None)

    # -- the carrier pool (ForkJoinPool, asyncMode) -------------------------------------------

    def _push(self, q: deque, vt: VThread, waker) -> bool:
        """Push ``vt`` on ``q``; True if that woke an idle carrier (signalWork)."""
        q.append(vt)
        if len(q) == 1:
            return self._signal(waker)
        return False

    def _signal(self, waker) -> bool:
        if self.idle:
            c = self.idle.pop()
            c.idle = False
            self.stats["signals"] += 1
            self.kernel.wake(c.thread, waker)
            return True
        return False

    def _find(self, c: Carrier, t):
        """(the next virtual thread for carrier ``c`` or None, the index of the queue it
        came from in scan_queues, whether taking it woke another carrier)."""
        if c.queue:
            return c.queue.popleft(), c.index, False
        queues = self.scan_queues
        n = len(queues)
        start = self.scan_start()
        for i in range(n):
            qi = (start + i) % n
            q = queues[qi]
            if q:
                vt = q.popleft()
                if qi < len(self.carriers):
                    self.stats["steals"] += 1
                woke = bool(q) and self._signal(t)       # signalWork propagation
                return vt, qi, woke
        return None, -1, False

    def _carrier(self, t, c: Carrier):
        cont = self.cont
        heap = self.heap
        while True:
            if heap is not None:
                yield from heap.safepoint(t)
            vt, qi, woke = self._find(c, t)
            if vt is None:
                c.idle = True
                self.idle.append(c)
                t.syscall("futex_wait")      # ForkJoinPool.awaitWork: LockSupport.park
                yield t.park()
                continue
            c.current = vt
            yield t.run(cont.poll(qi))
            if woke:
                yield t.run(cont.ctl)
            yield from self._mount(t, c, vt)
            c.current = None

    def _mount(self, t, c: Carrier, vt: VThread):
        req = vt.req
        step = vt.step
        if step == PROGRAM:
            yield t.run(self.cont.thaw(vt))
            yield from self._program(t, c, vt)
            return
        if step == START:
            self._allocate_task(t)
            if self.start_seg is not None:
                yield t.run(self.start_seg)
            self.read(t)                         # the virtual thread reads its request
            if req.produce is not None:
                yield t.run(req.produce, req)
            if req.consume.program:
                vt.step = PROGRAM
                yield from self._program(t, c, vt)
                return
            blk = req.consume.block_s
            if not blk or (self.p.pinned and self.free is None):
                yield from self._guarded(t.run(req.consume, req), blk)
                self._finish(req, t)
                return
            yield t.run(compute_part(req.consume), req)
            req.consumed_by = t.tid
            if self.free is not None:
                if self.free == 0:            # Semaphore.acquire parks the virtual thread
                    self.stats["permit_waits"] += 1
                    vt.step = CALL
                    self.sem_waiters.append(vt)
                    yield self._freeze(t, vt, "permits")
                    return
                self.free -= 1
        elif step == CALL:
            yield t.run(self.cont.thaw(vt))
        else:   # AFTER: the blocking call has completed
            yield t.run(self.cont.thaw(vt))
            self._release(c, t)
            self._finish(req, t)
            return
        # the blocking call, with a permit if there are permits
        blk = req.consume.block_s
        self.kernel.charge_blocked_io(req, blk)
        if self.p.pinned:
            yield from self._guarded(t.block(blk), blk)
            self._release(c, t)
            self._finish(req, t)
            return
        yield self._freeze(t, vt)
        vt.step = AFTER
        self._enter_call()
        self.blocked[req.id] = req
        self.env.timeout(blk).callbacks.append(lambda _e, vt=vt: self._io_done(vt))

    def _program(self, t, c: Carrier, vt: VThread):
        """Run a request program's steps from ``vt.pc`` on this carrier until the
        virtual thread parks (a blocking call, or no permit: it unmounts and the
        carrier goes on with other work) or finishes."""
        req = vt.req
        steps = req.consume.steps
        while vt.pc < len(steps):
            kind, arg = steps[vt.pc]
            vt.pc += 1
            if kind == STEP_RUN:
                yield t.run(arg, req)
                req.consumed_by = t.tid
            elif kind == STEP_CALL:
                self.kernel.charge_blocked_io(req, arg)
                if self.p.pinned:              # blocks the carrier itself
                    yield from self._guarded(t.block(arg), arg)
                    continue
                yield self._freeze(t, vt)
                self._enter_call()
                self.blocked[req.id] = req
                self.env.timeout(arg).callbacks.append(lambda _e, vt=vt: self._io_done(vt))
                return
            elif kind == STEP_ACQUIRE:
                sem = self.vsem[arg]
                if sem.op is not None:
                    yield t.run(sem.op, req)
                retried = sem.waking is vt
                if retried:                        # woken to retry (nonfair)
                    if sem.retry(vt):
                        continue                   # else first in line again
                elif sem.acquire(vt):
                    continue
                else:
                    self.stats["permit_waits"] += 1   # Semaphore.acquire parks the vthread
                # parks: a new AQS node when it joins the queue (a nonfair waiter that
                # lost its retry parks again on the node it has, at the head)
                yield self._freeze(t, vt, None if retried else arg)
                return
            else:
                sem = self.vsem[arg]
                if sem.op is not None:
                    yield t.run(sem.op, req)
                w = sem.release()
                if w is not None:
                    if not sem.fair:
                        w.pc -= 1                  # back to its acquire step, to retry
                    self._node_dequeued(w)
                    yield t.run(self.cont.signal_next(w, arg))
                    if self._push(c.queue, w, t):
                        yield t.run(self.cont.ctl)
        self._finish(req, t)

    # -- the JVM heap (ctx.heap, when [jvm] is on) -------------------------------------

    def _freeze(self, t, vt: VThread, parks_on=None):
        """Unmount ``vt`` (``ContinuationCosts.freeze``). On the heap: a new stack chunk
        unless its tail chunk is a young one (finalize_freeze: "ALLOCATE NEW CHUNK" when
        the chunk is missing or ``chunk->requires_barriers()``, which G1 answers true for
        a chunk outside the young regions, i.e. promoted), and a new AQS node when it
        parks on a semaphore."""
        heap = self.heap
        if heap is not None:
            rid = vt.req.id
            if not heap.in_young(("vstack", rid)):
                heap.allocate(("vstack", rid), self.cont.chunk_bytes, self.cont.chunk_frames, t)
            if parks_on is not None:
                heap.allocate(("aqs", rid), AQS_NODE_BYTES, 0, t)
        return t.run(self.cont.freeze(vt, parks_on))

    def _node_dequeued(self, vt: VThread) -> None:
        """A release handed ``vt`` the permit: its AQS node leaves the queue."""
        if self.heap is not None:
            self.heap.free(("aqs", vt.req.id))

    def _allocate_task(self, t) -> None:
        """What a task allocates and drops as it runs: ``work.task_kib`` and, on
        platform threads, the AQS nodes of its acquisitions if they park (an upper
        bound; short-lived either way)."""
        heap = self.heap
        if heap is not None:
            extra = self.acquires * AQS_NODE_BYTES if self.p.kernel_threads else 0.0
            if self.task_bytes + extra:
                heap.allocate(None, self.task_bytes + extra, 0, t)

    def _finish(self, req, t) -> None:
        """``req`` is done: its thread's heap objects become garbage."""
        heap = self.heap
        if heap is not None:
            rid = req.id
            heap.free(("vthread", rid))
            heap.free(("vstack", rid))
            heap.free(("aqs", rid))
        self.ctx.done(req, t)

    def _guarded(self, ev, blk):
        """Yield ``ev`` counting it as inside the blocking call if it blocks."""
        if blk:
            self._enter_call()
        yield ev
        if blk:
            self.stats["in_call"] -= 1

    def _enter_call(self) -> None:
        st = self.stats
        st["in_call"] += 1
        if st["in_call"] > st["max_in_call"]:
            st["max_in_call"] = st["in_call"]

    def _io_done(self, vt: VThread) -> None:
        """The backend answered: the poller unparks the virtual thread (an external
        submission)."""
        self.stats["in_call"] -= 1
        del self.blocked[vt.req.id]
        self._push(self.resumed, vt, None)

    def _release(self, c: Carrier, t) -> None:
        if self.free is None:
            return
        if self.sem_waiters:                 # hand the permit to the first waiter
            w = self.sem_waiters.popleft()
            self._node_dequeued(w)
            self._push(c.queue, w, t)
        else:
            self.free += 1

    # -- platform threads, one per request ----------------------------------------------

    def _spawn_kernel_thread(self, req) -> None:
        self.n_threads += 1
        st = self.stats
        st["live_kernel_threads"] = self.n_threads
        st["max_live_kernel_threads"] = max(st["max_live_kernel_threads"], self.n_threads)
        th = self.kernel.spawn(self.ctx.server, f"req-{req.id}",
                               lambda t, req=req: self._kernel_thread(t, req))
        th.data = req             # held from creation (it may wait for a CPU first)

    def _pool_worker(self, t):
        q = self.backlog
        heap = self.heap
        while True:
            if heap is not None:
                yield from heap.safepoint(t)
            if self.pool_lock is not None:
                yield t.run(self.pool_lock)      # take: the queue's lock
            if not q:
                self.pool_idle.append(t)
                t.syscall("futex_wait")
                yield t.park()
                continue
            req = q.popleft()
            if heap is not None:
                heap.free(("task", req.id))      # the queue's node and the task, taken
            if q and self.pool_idle:             # pass the signal on (c > 1)
                self.kernel.wake(self.pool_idle.popleft(), t)
            t.data = req
            yield from self._platform_task(t, req)
            t.data = None
            self._finish(req, t)

    def _kernel_thread(self, t, req):
        t.charge_kernel(self.p.kernel_start_us * 1e-6)       # clone, stack, TLS
        yield from self._platform_task(t, req)
        t.data = None
        self._finish(req, t)
        self.n_threads -= 1
        self.stats["live_kernel_threads"] = self.n_threads
        if self.backlog:
            self._spawn_kernel_thread(self.backlog.popleft())

    def _platform_task(self, t, req):
        """A request on a platform thread: it blocks in the kernel."""
        if self.heap is not None:
            yield from self.heap.safepoint(t)
            self._allocate_task(t)
        self.read(t)
        if req.produce is not None:
            yield t.run(req.produce, req)
        if req.consume.program:                  # the kernel runs the steps (and semaphores)
            yield t.run(req.consume, req)
            return
        blk = req.consume.block_s
        if not blk or self.free is None:
            yield from self._guarded(t.run(req.consume, req), blk)
        else:
            yield t.run(compute_part(req.consume), req)
            req.consumed_by = t.tid
            if self.free == 0:
                self.stats["permit_waits"] += 1
                self.waiters.append(t)
                yield t.park()                 # woken holding the permit (hand-off)
            else:
                self.free -= 1
            self.kernel.charge_blocked_io(req, blk)
            yield from self._guarded(t.block(blk), blk)
            if self.waiters:
                self.kernel.wake(self.waiters.popleft(), t)
            else:
                self.free += 1

    # -- inspection ----------------------------------------------------------------------

    def outstanding(self) -> list:
        if self.p.kernel_threads:
            reqs = list(self.backlog)
            reqs.extend(t.data for t in self.ctx.server.threads if t.data is not None)
            return reqs
        reqs = [vt.req for vt in self.submission]
        reqs.extend(vt.req for vt in self.resumed)
        reqs.extend(vt.req for vt in self.sem_waiters)
        for sem in self.vsem.values():
            reqs.extend(vt.req for vt in sem.waiters)
        for c in self.carriers:
            reqs.extend(vt.req for vt in c.queue)
            if c.current is not None:
                reqs.append(c.current.req)
        reqs.extend(self.blocked.values())
        return reqs
