"""The thread API: the calls a strategy makes on a simulated kernel thread.

Threads are long-lived generators that a strategy writes, driven by SimPy events.
They talk to the kernel through these calls, each returning one event to yield:

    yield thread.run(segment, request)   # compute on the CPU the thread holds
    yield thread.park(timeout=None)      # sleep until kernel.wake(thread)
    yield thread.block(seconds)          # leave the CPU for a blocking wait
    yield thread.yield_cpu()             # sched_yield: let a queued thread run first
    yield thread.spin(line, ipc, yielding)  # read a line in a loop until it is written
    yield from thread.take_permit(sem)   # a Semaphore's permit, parking while none
    thread.give_permit(sem)              # release it, waking a waiter

and charge kernel work without leaving the CPU (``syscall``, ``charge_kernel``,
``charge_io``). A thread *holds* a CPU from the moment it is dispatched until it
parks, blocks or is preempted; the scheduling behind these calls is the kernel's
(simcore.kernel.core), the pricing of a segment the accounting's
(simcore.kernel.accounting).
"""

from __future__ import annotations

from simpy.events import Event

from warmcore.simcore.kernel import accounting, spin, sync
from warmcore.simcore.kernel.accounting import CTR_FIELDS
from warmcore.simcore.kernel.fastpath import new_event
from warmcore.simcore.kernel.records import BLOCKED, PARKED, RUNNABLE

# System calls that hand work between threads (Thread.syscall): their time is the
# request's dispatch; the others (reads, writes, epoll) count in its compute.
HANDOFF_CALLS = frozenset(("futex_wait", "futex_wake", "sched_yield"))


class FluidState:
    """A thread's segment under fluid rates (Kernel.rerate, simcore.kernel.fluid).

    ``parts`` is True while the machine holds the running segment's
    rate-independent parts for the CPU the thread runs on, and the parts themselves
    (a tuple: MachineModel.parts_of) while the segment is preempted (Kernel._adopt
    gives them to the CPU it resumes on); ``req`` its request, ``ev`` the event that
    ends the piece in flight (None when the clock ran ahead over it); ``total`` and
    ``costx`` the whole segment's exact duration and cost (at the new rates after a
    re-rating) while a segment run whole is in flight (a segment run in chunks keeps
    them in its continuation)."""

    __slots__ = ("costx", "ev", "parts", "req", "total")

    def __init__(self):
        self.parts = None
        self.costx = None
        self.total = 0.0
        self.req = None
        self.ev = None


class Thread:
    """A simulated kernel thread. Strategies create them with Kernel.spawn."""

    __slots__ = (
        # who it is
        "kernel", "tid", "name", "process", "proc", "data",
        # where it may and did run (placement)
        "allowed", "allowed_set", "cpu", "last_cpu", "last_ran", "state",
        # scheduling: its time slice, CFS virtual runtime, time queued, its wait
        "run_since", "vruntime", "rq_since", "wait_ev", "cont",
        # futex: queued before sleeping (prepare_park), a wake-up that beat it there,
        # the CPU of its waker, how its last timed park ended
        "futex_queued", "wake_pending", "woken_from", "timed_out",
        # accounting: kernel work and hand-off time owed by its next segment, its
        # counters, and the segment in flight (counters_now takes off its future)
        "pending_busy", "pending_stall", "pending_dispatch", "pending_io", "ctr", "cs",
        "migrations", "futex_wakes", "seg_t0", "seg_t1", "seg_cost", "seg_sys",
        # fluid rates (simcore.kernel.fluid)
        "fl",
        # the spin wait in progress (simcore.kernel.spin), or None
        "spin_st",
    )

    def __init__(self, kernel, tid: int, name: str, process, allowed: tuple[int, ...]):
        self.kernel = kernel
        self.tid = tid
        self.name = name
        self.process = process
        self.allowed = allowed
        self.allowed_set = frozenset(allowed)
        self.cpu = None
        self.last_cpu = None
        self.state = PARKED
        self.wait_ev: Event | None = None
        self.pending_busy = 0.0       # kernel work owed before the next segment (charge_kernel),
        #                               in seconds at the nominal rate (scaled when it runs)
        self.pending_stall = 0.0      # the kernel's memory stalls owed with it (s at any clock)
        self.pending_dispatch = 0.0   # hand-off time to attribute to the next request run
        self.pending_io = 0.0         # the part of pending_busy that is the request's own I/O
        self.last_ran = -1.0
        self.ctr = [0.0] * len(CTR_FIELDS)
        self.cs = 0
        self.vruntime = 0.0           # CFS virtual runtime: CPU time (one weight: no nice levels)
        self.migrations = 0
        self.futex_wakes = 0
        self.woken_from = -1          # CPU of the thread whose futex wake made it runnable
        self.rq_since = 0.0
        self.cont = None              # remaining work of a preempted or blocking segment
        self.seg_t0 = 0.0
        self.seg_t1 = 0.0
        self.seg_cost = None
        self.seg_sys = 0.0            # system time within the segment in flight
        self.proc = None
        self.data = None              # free slot for the strategy
        self.run_since = 0.0          # when it got its CPU (its time slice counts from here)
        self.timed_out = False        # the last park(timeout) ended by its timeout
        # A futex waiter is queued before it sleeps (prepare_park): a wake-up in
        # between is remembered (wake_pending) and its park() returns at once.
        self.futex_queued = False
        self.wake_pending = False
        self.fl = FluidState()
        self.spin_st = None

    # -- work on the CPU it holds ------------------------------------------------------

    run = accounting.run_segment            # run(seg, req=None) -> Event
    book_owed = accounting.book_owed        # owed kernel work booked now: its seconds
    run_program = sync.run_program          # run(program, req) goes here
    take_permit = sync.take_permit          # yield from take_permit(sem)
    give_permit = sync.give_permit
    settle_owed = sync.settle_owed          # yield from settle_owed(): owed kernel work now
    spin = spin.spin                        # yield t.spin(line): simcore.kernel.spin

    def charge_kernel(self, seconds: float) -> None:
        """Charge ``seconds`` of kernel work (a syscall, a futex operation, a context
        switch, a thread start) to this thread as *system* time. ``seconds`` is the
        work at the machine's nominal rate (a lone thread at the top P-state, as the
        preset's OS costs are stated): it runs as instructions at the start of the
        thread's next segment, at the CPU's clock and SMT share of then
        (MachineModel.kernel_slowdown), and counts in task-clock and cycles, in the
        ``sys_s`` counter (perf's ``:k``, ``time``'s sys) and, if that segment
        serves a request, in the request's ``dispatch`` cause. The one way kernel
        work is charged (the kernel itself adds to ``pending_busy``, the same
        thing, inline on its hot paths)."""
        self.pending_busy += seconds

    def syscall(self, name: str, n: float = 0.0, kib: float = 0.0) -> None:
        """Charge one system call's kernel work as system time (as ``charge_kernel``):
        ``name`` is one of simcore.machine.SYSCALLS (read/recv, write/send on a
        loopback TCP socket with ``kib`` KiB copied; epoll_wait returning ``n`` ready
        events; poll scanning ``n`` descriptors; epoll_ctl, futex_wait, futex_wake,
        sched_yield, null); the cost is the machine's (models/syscalls.py). It does
        not block or switch: a strategy that waits after the call parks as usual.
        Futex and sched_yield calls are hand-off work (the request's ``dispatch``
        cause); the others are the server's I/O (``charge_io``)."""
        s = self.kernel.machine.syscall_cost(name, n, kib)
        if name in HANDOFF_CALLS:
            self.pending_busy += s
        else:
            self.pending_busy += s
            self.pending_io += s

    def charge_io(self, seconds: float) -> None:
        """Charge ``seconds`` of system time for the server's I/O (a system call priced
        by the caller with ``machine.syscall_cost``, such as the response's write): as
        ``charge_kernel``, but counted in the request's ``compute`` cause, since it is
        the request's own work and not a hand-off."""
        self.pending_busy += seconds
        self.pending_io += seconds

    # -- leaving the CPU ---------------------------------------------------------------

    def prepare_park(self) -> None:
        """Queue this thread as a futex waiter while it still runs (FUTEX_WAIT's
        ``futex_wait_setup``, before ``schedule()``): a kernel.wake(thread) from now on
        is not lost if it comes before the thread parks; the next ``park()`` then
        returns at once, as FUTEX_WAIT does when the wake-up beat it to sleep."""
        self.futex_queued = True
        self.wake_pending = False

    def cancel_park(self) -> bool:
        """Leave the futex queue joined with ``prepare_park`` without sleeping (a timed
        wait whose time ran out before it slept: FUTEX_WAIT's ETIMEDOUT). False, and
        still queued, if a wake-up already came: then ``park()`` returns at once."""
        if self.wake_pending:
            return False
        self.futex_queued = False
        return True

    def park(self, timeout: float | None = None) -> Event:
        """Sleep (futex wait) until someone calls kernel.wake(thread), or, with a
        ``timeout`` (seconds), until it expires (``thread.timed_out`` tells which).
        After ``prepare_park``, a wake-up that came first makes it return at once."""
        k = self.kernel
        if self.futex_queued:
            self.futex_queued = False
            if self.wake_pending:
                self.wake_pending = False
                self.timed_out = False
                return k.env.timeout(0.0)
        ev = new_event(k.env)
        self.wait_ev = ev
        self.cont = None
        self.timed_out = False
        k._leave_cpu(self, PARKED)
        if timeout is not None:
            k.env.timeout(timeout).callbacks.append(lambda _e: k._park_timeout(self, ev))
        return ev

    def yield_cpu(self) -> Event:
        """sched_yield(): go to the back of this CPU's run queue if anyone waits there,
        else carry on at once."""
        k = self.kernel
        cpu = self.cpu
        if not cpu.rq:
            return k.env.timeout(0.0)
        ev = Event(k.env)
        self.wait_ev = ev
        self.cont = None
        k._leave_cpu(self, RUNNABLE)      # hands the CPU to the head of the queue
        self.rq_since = k.env.now
        cpu.rq.append(self)
        k.n_queued += 1
        return ev

    def block(self, seconds: float) -> Event:
        """Leave the CPU for a blocking wait of ``seconds`` (I/O); resume after it."""
        k = self.kernel
        ev = Event(k.env)
        self.wait_ev = ev
        self.cont = None
        k._leave_cpu(self, BLOCKED)
        k.env.timeout(seconds).callbacks.append(lambda _e, t=self: k._unblock(t))
        return ev

    # -- questions ---------------------------------------------------------------------

    @property
    def is_parked(self) -> bool:
        """Parked in a futex wait (``park``), not running, runnable or blocked."""
        return self.state is PARKED

    def cpu_has_waiters(self) -> bool:
        """Does another thread wait in this thread's CPU's run queue?"""
        return bool(self.cpu.rq)
