"""Spinning: a thread that waits for a cache line by reading it in a loop.

A busy-spin wait (LMAX ``BusySpinWaitStrategy``, a ``while (cursor.get() < seq)``
loop, with ``Thread.onSpinWait()``/PAUSE or without) never leaves its CPU: the
CPU stays busy for its clock governor, its power meter and its SMT sibling, and
the thread sees a write to the line as soon as the line reaches its core, one
coherence transfer after the store (MESI: the spinner's shared copy is
invalidated by the writer's store and its next load misses and fetches the new
line from the writer's core; Intel 64 and IA-32 Optimization Reference Manual,
"Spin-wait and idle loops"). A yielding spin (``YieldingWaitStrategy``'s
``Thread.yield()`` loop) is the same loop with a ``sched_yield`` each turn: it
gives its CPU at once to a thread queued there, and reads the line between its
``sched_yield`` calls, so it sees a write at the end of the call in progress.

``Thread.spin(line, ipc, yielding, timeout)`` returns an event that fires when

* ``line.written(by)`` was called and the line has since travelled from the
  writer's CPU to the spinner's (``machine.line_transfer_s``, 0 on the same CPU
  or the ideal machine), or
* ``timeout`` seconds have passed since it started (a bounded loop), or
* the spinner was taken off its CPU (its CFS slice used up while another thread
  waits there, or, yielding, any thread queued there) and has been dispatched
  again.

The caller re-reads what it waits for and spins again if it is not there yet.
There is no granularity: a spin costs exactly the time it lasted, credited when
it ends as user time (system time for a yielding spin: its turns are
``sched_yield`` calls), cycles at the CPU's clock at its end, and ``ipc``
instructions per cycle (the loop's: a load, a compare, a branch and, with PAUSE,
a pause of ~10 cycles before Skylake). Nothing in this module runs for a thread
that does not spin, so other runs are unchanged.

A line may name the lines it is in the cache model (``footprint``, the owners a
segment reading it would touch). When a write reaches a spinner, the spinner's
load has brought that version of the line into its core's caches: the model's
caches are told so (``Hierarchy.touch``, free: the spin waited for the
transfer), and a segment of the spinner's that then reads the line hits in L1
instead of paying the coherence miss a second time (the line the spin loaded is
the line it reads: one transfer per write, MESI). A line without ``footprint``
is not in the cache model (a flag only the spin reads), as before.

``Spinning`` is a part of ``Kernel`` (simcore.kernel.core).
"""

from __future__ import annotations

import math

from simpy.events import Event

from warmcore.simcore.kernel.accounting import K_CYC, K_INS, K_SYS, K_TASK
from warmcore.simcore.kernel.records import RUNNABLE


class SpinLine:
    """A cache line that threads spin on (a sequence, a cursor, a flag)."""

    __slots__ = ("footprint", "kernel", "name", "spinners")

    def __init__(self, kernel, name: str, footprint: tuple | None = None):
        self.kernel = kernel
        self.name = name
        self.footprint = footprint    # its owners in the cache model (reads), or None
        self.spinners: list = []

    def written(self, by) -> None:
        """Thread ``by`` stored to the line: each spinner sees it once the line has
        reached its CPU."""
        if self.spinners:
            self.kernel._line_written(self, by)


class SpinState:
    """One spin in progress: the line, when it started (after any kernel work the
    thread owed), its loop's instructions per cycle, whether it yields, the event
    its thread waits on."""

    __slots__ = ("due", "ev", "ipc", "line", "pending", "t0", "turn", "yielding")

    def __init__(self, line: SpinLine, t0: float, ipc: float, yielding: bool, ev: Event,
                 turn: float = 0.0):
        self.due = -1.0                   # when its slice check is armed for (-1: none)
        self.turn = turn                  # a yielding loop's turn: one sched_yield call
        self.pending = False              # a write is on its way to the spinner
        self.line = line
        self.t0 = t0
        self.ipc = ipc
        self.yielding = yielding
        self.ev = ev


def spin(self, line: SpinLine, ipc: float = 0.25, yielding: bool = False,
         timeout: float | None = None) -> Event:
    """``Thread.spin``: read ``line`` in a loop on this thread's CPU (see the module);
    with ``timeout`` (seconds), a bounded loop: it also ends that long after it starts
    (SleepingWaitStrategy's 100 spins, then 100 yields)."""
    k = self.kernel
    cpu = self.cpu
    now = k.env.now
    t0 = now
    if self.pending_busy or self.pending_stall:   # kernel work owed: it runs first
        self.pending_dispatch = 0.0
        t0 = now + self.book_owed(now)
    ev = Event(k.env)
    self.wait_ev = ev
    self.cont = None
    # A yielding loop reads the line between sched_yield calls: it sees a write at the
    # end of the call in progress when the line arrives (the call's cost: the machine's)
    turn = k.machine.syscall_cost("sched_yield") if yielding else 0.0
    st = self.spin_st = SpinState(line, t0, ipc, yielding, ev, turn)
    line.spinners.append(self)
    if timeout is not None:
        k.env.timeout(t0 - now + timeout).callbacks.append(
            lambda _e: k._spin_timeout(self, st))
    if cpu.rq:
        if yielding:
            k._spin_off(self, st, RUNNABLE)
        else:
            k._arm_slice(self, st)
    else:
        k._arm_slice(self, st)
    return ev


class Spinning:
    """Spin waits (a part of Kernel)."""

    def spin_line(self, name: str, footprint: tuple | None = None) -> SpinLine:
        """A line threads can spin on (``Thread.spin``) and others write; with
        ``footprint`` (Footprints, reads), what it is in the cache model."""
        return SpinLine(self, name, footprint)

    def _line_written(self, line: SpinLine, by) -> None:
        env = self.env
        now = env.now
        src = by.cpu.id if by is not None and by.cpu is not None else -1
        m = self.machine
        spinners = line.spinners
        line.spinners = []
        for t in spinners:
            st = t.spin_st
            if st is None or st.line is not line:
                continue
            delay = m.line_transfer_s(src, t.cpu.id) if src >= 0 else 0.0
            at = max(now + delay, st.t0)
            if st.turn > 0.0:             # the end of the sched_yield call in progress
                at = st.t0 + math.ceil((at - st.t0) / st.turn) * st.turn
            st.pending = True
            env.timeout(at - now).callbacks.append(
                lambda _e, t=t, st=st: self._spin_seen(t, st, loaded=True))

    def _spin_seen(self, t, st: SpinState, loaded: bool = False) -> None:
        """The written line reached the spinner (its load returns the new value:
        ``loaded``), or a bounded spin's time is up."""
        if t.spin_st is not st:
            return                        # taken off its CPU before the line came
        if loaded and st.line.footprint is not None:
            self._spinner_loaded(t, st.line.footprint)
        self._spin_credit(t, st)
        t.spin_st = None
        if t in st.line.spinners:
            st.line.spinners.remove(t)
        st.ev.succeed()

    def _spinner_loaded(self, t, footprint: tuple) -> None:
        """The spinner's load brought the written line into its core: the cache model
        records the read there (the directory's line becomes shared, the spinner's
        L1 holds this version), at no charge, since the spin already waited the
        transfer (machine.line_transfer_s). Nothing without caches and coherence."""
        m = self.machine
        h = getattr(m, "hierarchy", None)
        if h is None or not h.coherence:
            return
        cpu = t.cpu.id
        h.touch(m.cpu_core[cpu], m.cpu_llc[cpu], footprint, t.tid)

    def _spin_timeout(self, t, st: SpinState) -> None:
        """A bounded spin's time is up, unless a write is on its way: the loop's reads
        cannot see it before it arrives, so the spin ends then (_spin_seen)."""
        if not st.pending:
            self._spin_seen(t, st)

    def _arm_slice(self, t, st: SpinState) -> None:
        """When the spinner's time slice ends: at a CFS slice from its dispatch if
        others wait for its CPU, else after ``slice_max`` (the longest piece the
        kernel runs without looking at the run queue, as for a long segment)."""
        cpu = t.cpu
        now = self.env.now
        if cpu.rq:
            due = max(t.run_since + self._slice(cpu), st.t0, now)
        else:
            due = max(now + self.slice_max, st.t0)
        if 0.0 <= st.due <= due and st.due >= now:
            return                        # an earlier check is armed already
        st.due = due
        self.env.timeout(due - now).callbacks.append(lambda _e: self._spin_tick(t, st, due))

    def _spin_tick(self, t, st: SpinState, due: float) -> None:
        if t.spin_st is not st or st.due != due:
            return                        # the spin is over, or re-armed earlier
        st.due = -1.0
        cpu = t.cpu
        if cpu.rq and (cpu.preempt_next or self.env.now >= t.run_since + self._slice(cpu)):
            self._spin_off(t, st, RUNNABLE)
            return
        self._arm_slice(t, st)

    def _spin_queued_behind(self, cpu) -> None:
        """A thread was queued on ``cpu`` while its current thread spins: a yielding
        spinner gives way now, a busy spinner at the end of its slice."""
        t = cpu.current
        st = t.spin_st
        if st.yielding or cpu.preempt_next:
            self._spin_off(t, st, RUNNABLE)
        else:
            self._arm_slice(t, st)

    def _spin_off(self, t, st: SpinState, state) -> None:
        """Take the spinner off its CPU to the back of its run queue (preempted or
        yielding); its spin event fires when it is dispatched again."""
        self._spin_credit(t, st)
        t.spin_st = None
        if t in st.line.spinners:
            st.line.spinners.remove(t)
        t.fl.parts = None                 # no segment of its in flight to carry over
        cpu = t.cpu
        self._leave_cpu(t, state)
        self._requeue(t, cpu, to_idle=not st.yielding)   # a yield gives way where it is

    def _spin_credit(self, t, st: SpinState) -> None:
        """Charge the spin from its start to now: the CPU was busy all along."""
        now = self.env.now
        d = now - st.t0
        if d <= 0.0:
            return
        cpu = t.cpu
        ctr = t.ctr
        ctr[K_TASK] += d
        if st.yielding:
            ctr[K_SYS] += d
        if self.ideal_spi:
            ctr[K_INS] += d / self.ideal_spi
        else:
            cyc = d * self.machine.current_ghz(cpu.id, now) * 1e9
            ctr[K_CYC] += cyc
            ctr[K_INS] += cyc * st.ipc
        cpu.busy_s += d
        t.seg_t0 = st.t0
        t.seg_t1 = now
        t.seg_cost = None
        t.seg_sys = d if st.yielding else 0.0
        if self.trace is not None:
            self.trace.append((st.t0, cpu.id, t.tid, "run",
                               "yield-spin" if st.yielding else "spin", d, -1))
        st.t0 = now

    def spin_elapsed(self, t, now: float) -> float:
        """Seconds of the spin in progress not yet credited (counters_now)."""
        st = t.spin_st
        if st is None or now <= st.t0:
            return 0.0
        return now - st.t0
