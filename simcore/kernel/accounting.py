"""Accounting: what a segment costs the thread that runs it, and where a request's
time went.

Two ledgers are kept as a segment runs:

* the thread's *counters* (``Thread.ctr``, perf-stat names, ``CTR_FIELDS``):
  task-clock, cycles, instructions, L1d and LLC loads and misses, and the system
  time within the task-clock;
* the request's *breakdown* (``Request.bd``, ``simcore.work.CAUSES`` order): queue
  wait, dispatch, compute, cache reload, coherence, contention, blocked I/O.

``run_segment`` is ``Thread.run``, the hot path of every run. It prices a segment
(the ideal machine's seconds per instruction, or the machine model's
``execute``), books the request's breakdown and, when the segment needs no
scheduling (no time slice to cut, nobody waiting for the CPU, no blocking wait, no
trace), credits the thread's counters itself and returns one timeout. Those
credits are ``credit`` written out inline, once for each machine kind, to spare a
Python call per segment; the copies sit here side by side, each marked
``INLINE COPY``, and tests/test_kernel.py checks that they touch the same counters
and causes as the tables below and that a run gives the same numbers with the
slow path forced.
"""

from __future__ import annotations

from simpy.events import Event

from warmcore.simcore.kernel.fastpath import ALREADY_DONE, clock, segment_done
from warmcore.simcore.work import (
    C_COHER,
    C_COMPUTE,
    C_CONTEND,
    C_CYC,
    C_INS,
    C_L1L,
    C_L1M,
    C_LLCL,
    C_LLCM,
    C_LLCS,
    C_LLCSM,
    C_RELOAD,
    CAUSES,
    Continuation,
    Program,
)

# Per-thread counters (perf-stat names). sys_s is the part of task_clock_s spent in
# kernel work (perf's :k, time's "sys"): everything charged through
# Thread.charge_kernel (context switches, futex syscalls, thread starts); user time
# is task_clock_s - sys_s.
CTR_FIELDS = ("task_clock_s", "cycles", "instructions", "l1d_loads", "l1d_misses",
              "llc_loads", "llc_misses", "sys_s", "llc_stores", "llc_store_misses")
(K_TASK, K_CYC, K_INS, K_L1L, K_L1M, K_LLCL, K_LLCM, K_SYS, K_LLCS,
 K_LLCSM) = range(len(CTR_FIELDS))

# Breakdown indices, derived from the one list of causes.
B_QUEUE, B_DISPATCH, B_COMPUTE, B_RELOAD, B_COHER, B_CONTEND, B_IO = (
    CAUSES.index(c) for c in ("queue_wait", "dispatch", "compute", "cache_reload",
                              "coherence", "contention", "blocked_io"))

# The counters a segment's cost credits, each from its SegmentCost field (task-clock
# and system time come from the segment's duration and its kernel work).
COST_COUNTERS = ((K_CYC, C_CYC), (K_INS, C_INS), (K_L1L, C_L1L), (K_L1M, C_L1M),
                 (K_LLCL, C_LLCL), (K_LLCM, C_LLCM), (K_LLCS, C_LLCS), (K_LLCSM, C_LLCSM))
# The causes a segment's cost splits its duration into, each from its field (the
# dispatch cause is the thread's kernel work and wake-up latency; blocked I/O the
# segment's blocking wait; queue wait what is left of the latency at the end).
COST_CAUSES = ((B_COMPUTE, C_COMPUTE), (B_RELOAD, C_RELOAD), (B_COHER, C_COHER),
               (B_CONTEND, C_CONTEND))


def run_segment(self, seg, req=None):
    """Run ``seg`` on the CPU this thread holds; the event fires when it is done
    (including any blocking wait ``seg.block_s``). ``seg`` may be a request
    program (simcore.work.Program): its steps run in order on this thread.
    (``Thread.run``.)"""
    # (a type test rather than reading the class attribute ``seg.program``, which
    # CPython 3.11 does not specialise on an instance: a generic lookup a segment)
    if type(seg) is Program:
        return self.run_program(seg, req)
    k = self.kernel
    cpu = self.cpu
    env = k.env
    now = clock(env)
    if not k.ideal_spi:
        return _run_model(self, seg, req, cpu, env, now)
    # Ideal machine: time is instructions x seconds per instruction, nothing else
    # (cycles are derived in counters_now). Kept inline, not a call: this is the hot
    # path of every queueing-theory run.
    ins = seg.instructions
    sys_s = self.pending_busy          # kernel work: system time
    total = ins * k.ideal_spi + sys_s
    self.pending_busy = 0.0
    self.pending_io = 0.0
    if req is not None:
        # INLINE COPY of the request bookkeeping in _run_model (ideal: all compute)
        if req.t_start < 0.0:
            req.t_start = now
        if seg is req.consume:
            req.consumed_by = self.tid
        elif seg is req.produce:
            req.produced_by = self.tid
        bd = req.bd
        bd[B_COMPUTE] += total
        if self.pending_dispatch:
            bd[B_DISPATCH] += self.pending_dispatch
            self.pending_dispatch = 0.0
        if seg.block_s:
            bd[B_IO] += seg.block_s
    if total <= k.slice_max and not cpu.rq and not seg.block_s and k.trace is None:
        # INLINE COPY of credit(None, total, 1.0, now, total, sys_s)
        ctr = self.ctr
        ctr[K_TASK] += total
        ctr[K_INS] += ins
        if sys_s:
            ctr[K_SYS] += sys_s
        self.seg_sys = sys_s
        self.seg_t0 = now
        self.seg_t1 = now + total    # (seg_cost stays None on the ideal machine)
        cpu.busy_s += total
        return segment_done(env, total)
    return run_slow(self, seg, total, None, req, sys_s)


def _run_model(self, seg, req, cpu, env, now):
    """run() on a machine model: its cost, counters and breakdown."""
    k = self.kernel
    m = k.machine
    cost = m.execute(cpu.id, seg, self.tid, now)
    (dur, cyc, ins, l1l, l1m, llcl, llcm, compute_s, reload_s, coher_s,
     contend_s, llcs, llcsm) = cost              # one unpack: COST_FIELDS order
    extra = self.pending_busy
    stall = self.pending_stall
    total = dur
    fluid = k.fluid
    if fluid:
        fl = self.fl
        fl.parts = True
        fl.req = req
    io = self.pending_io
    if extra or stall:
        self.pending_busy = 0.0
        self.pending_io = 0.0
        self.pending_stall = 0.0
        if extra:
            # Kernel paths are instructions: stated at the nominal rate, they run at
            # this CPU's clock and SMT share now (MachineModel.kernel_slowdown); the
            # lines they wait for (stall) take their nanoseconds at any clock.
            r = m.kernel_slowdown(cpu.id, now)
            extra *= r
            io *= r
        extra += stall
        total = dur + extra
        # Kernel work (switches, syscalls) runs cycles too, as perf counts them.
        cyc += extra * m.current_ghz(cpu.id, now) * 1e9
        cost = (dur, cyc, ins, l1l, l1m, llcl, llcm, compute_s, reload_s, coher_s,
                contend_s, llcs, llcsm)
    if req is not None:
        if req.t_start < 0.0:
            req.t_start = now
        if seg is req.consume:
            req.consumed_by = self.tid
        elif seg is req.produce:
            req.produced_by = self.tid
        bd = req.bd
        pd = self.pending_dispatch
        if pd:
            # Wake-up latency counts for this request only for the part of it that
            # came after the request's earlier work (or its arrival): a thread
            # woken before the request arrived, or while another thread was
            # still working on it, did not make it wait that long.
            self.pending_dispatch = 0.0
            room = self.run_since - req.t_acc
            if pd > room:
                pd = room if room > 0.0 else 0.0
        # INLINE COPY of COST_CAUSES (recredit books the same causes)
        bd[B_DISPATCH] += pd + extra - io      # the server's I/O is the request's work
        bd[B_COMPUTE] += compute_s + io
        bd[B_RELOAD] += reload_s
        bd[B_COHER] += coher_s
        bd[B_CONTEND] += contend_s
        if seg.block_s:
            bd[B_IO] += seg.block_s
        req.t_acc = now + total + seg.block_s
    if total <= k.slice_max and not cpu.rq and not seg.block_s and k.trace is None:
        # INLINE COPY of credit(cost, total, 1.0, now, total, extra) (x * 1.0 == x)
        ctr = self.ctr
        ctr[K_TASK] += total
        ctr[K_CYC] += cyc
        ctr[K_INS] += ins
        ctr[K_L1L] += l1l
        ctr[K_L1M] += l1m
        ctr[K_LLCL] += llcl
        ctr[K_LLCM] += llcm
        if llcs:
            ctr[K_LLCS] += llcs
            ctr[K_LLCSM] += llcsm
        if extra:
            ctr[K_SYS] += extra
        self.seg_sys = extra
        self.seg_t0 = now
        self.seg_t1 = now + total
        self.seg_cost = cost
        cpu.busy_s += total
        if fluid:
            ev = segment_done(env, total)
            if ev is ALREADY_DONE:
                fl.ev = None
            else:
                # the whole segment as rerate reads it: its exact duration and cost
                # ((now + total) - now need not equal total in floating point, and a
                # segment run in chunks keeps its exact total in its continuation)
                fl.ev = ev
                fl.total = total
                fl.costx = cost
            return ev
        return segment_done(env, total)
    return run_slow(self, seg, total, cost, req, extra)


def book_owed(self, now: float) -> float:
    """Book the kernel work this thread owes (its switch-in, the work of the syscalls
    it made, a wake-up's line transfers) as system time on its CPU from ``now``, at
    the clock and SMT share of now as ``_run_model`` prices it; returns its duration.
    For a thread that must finish that work before its next user instruction (it
    takes a lock, it starts spinning), not at its next segment. (``Thread``.)"""
    k = self.kernel
    cpu = self.cpu
    owed = self.pending_busy
    stall = self.pending_stall
    self.pending_busy = 0.0
    self.pending_io = 0.0
    self.pending_stall = 0.0
    ctr = self.ctr
    if k.ideal_spi:
        cost = None                     # cycles follow from time (counters_now)
    else:
        m = k.machine
        owed = owed * m.kernel_slowdown(cpu.id, now) + stall
        cyc = owed * m.current_ghz(cpu.id, now) * 1e9
        ctr[K_CYC] += cyc
        cost = (owed, cyc) + (0.0,) * 11  # as counters_now reads a piece in flight
    ctr[K_TASK] += owed
    ctr[K_SYS] += owed
    cpu.busy_s += owed
    self.seg_t0 = now
    self.seg_t1 = now + owed
    self.seg_cost = cost
    self.seg_sys = owed
    if k.trace is not None:
        k.trace.append((now, cpu.id, self.tid, "run", "kernel", owed, -1))
    return owed


def run_slow(t, seg, total, cost, req, sys_s=0.0):
    """The kernel drives chunks (time slices), preemption and the blocking wait;
    counters are credited chunk by chunk (``credit``)."""
    done = Event(t.kernel.env)
    t.wait_ev = done
    t.cont = Continuation(total, seg.block_s, total, cost, seg.label,
                          req.id if req is not None else -1, sys_s)
    t.kernel._run_chunk(t)
    return done


def credit(t, cost, total, frac, t0, span, sys_s=0.0) -> None:
    """Add ``frac`` of a segment's counters to thread ``t``; the CPU is busy with it
    from ``t0`` for ``span`` seconds (counters_now uses that for runs in flight)."""
    ctr = t.ctr
    ctr[K_TASK] += frac * total
    ctr[K_SYS] += frac * sys_s
    t.seg_sys = frac * sys_s
    t.seg_t0 = t0
    t.seg_t1 = t0 + span
    if cost is None:                       # ideal machine
        # instructions of the user part only, as the fast path counts them (kernel
        # work runs cycles at the same clock: counters_now derives cycles from time)
        ctr[K_INS] += frac * (total - sys_s) / t.kernel.ideal_spi
        t.seg_cost = None
        return
    for k, c in COST_COUNTERS:
        ctr[k] += frac * cost[c]
    t.seg_cost = cost if frac == 1.0 else tuple(frac * x for x in cost)


def recredit(req, w, new, old, d_total) -> None:
    """The request's breakdown and accumulated time for the fraction ``w`` of a segment
    re-rated from cost ``old`` to ``new`` (``d_total``: the change of its duration)."""
    bd = req.bd
    for b, c in COST_CAUSES:
        bd[b] += w * (new[c] - old[c])
    req.t_acc += w * d_total


def counters_now(kernel) -> dict:
    """Counters per process and per CPU as of now, with segments still in flight
    counted only for their elapsed part (so utilisation never exceeds 1)."""
    now = kernel.env.now
    procs = {}
    for p in kernel.processes:
        tot = list(p.dead_ctr)
        cs, mig, fw = p.dead_events
        for t in p.threads:
            ctr = t.ctr
            for i in range(len(CTR_FIELDS)):
                tot[i] += ctr[i]
            if t.seg_t1 > now:
                _take_off_unfinished(kernel, tot, t, now)
            if t.spin_st is not None:
                _add_spinning(kernel, tot, t, now)
            cs += t.cs
            mig += t.migrations
            fw += t.futex_wakes
        if kernel.ideal_spi:
            # every busy second runs at the machine's one clock, kernel work too (as
            # the hardware model charges it): the clock reads its own value exactly
            tot[K_CYC] = tot[K_TASK] * kernel.machine.cpi / kernel.ideal_spi
        d = dict(zip(CTR_FIELDS, tot, strict=True))
        d.update(context_switches=cs, cpu_migrations=mig, futex_wakes=fw)
        procs[p.name] = d
    busy = []
    for c in kernel.cpus:
        b = c.busy_s
        t = c.current       # busy time is credited per chunk at its start: take
        if t is not None and t.seg_t1 > now:   # off the part still to come
            b -= t.seg_t1 - max(now, t.seg_t0)
        if t is not None and t.spin_st is not None:
            b += kernel.spin_elapsed(t, now)
        busy.append(b)
    return {"processes": procs, "cpu_busy_s": busy}


def _add_spinning(kernel, tot: list, t, now: float) -> None:
    """Add the part of ``t``'s spin in progress not yet credited (simcore.kernel.spin
    credits a spin when it ends)."""
    d = kernel.spin_elapsed(t, now)
    if d <= 0.0:
        return
    tot[K_TASK] += d
    if t.spin_st.yielding:
        tot[K_SYS] += d
    if kernel.ideal_spi:
        tot[K_INS] += d / kernel.ideal_spi
        return
    cyc = d * kernel.machine.current_ghz(t.cpu.id, now) * 1e9
    tot[K_CYC] += cyc
    tot[K_INS] += cyc * t.spin_st.ipc


def _take_off_unfinished(kernel, tot: list, t, now: float) -> None:
    """Take the part of ``t``'s segment in flight that lies after ``now`` off the
    process totals ``tot`` (its counters were credited whole at its start)."""
    span = t.seg_t1 - t.seg_t0
    frac = (t.seg_t1 - now) / span
    tot[K_TASK] -= frac * span
    tot[K_SYS] -= frac * t.seg_sys
    c = t.seg_cost
    if c is None:       # ideal machine: instructions = time / spi
        tot[K_INS] -= frac * (span - t.seg_sys) / kernel.ideal_spi
        return
    for k, i in COST_COUNTERS:
        tot[k] -= frac * c[i]
