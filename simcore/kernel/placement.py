"""Wake-ups and placement: which CPU a woken thread runs on, as Linux CFS chooses it
(kernel/sched/fair.c), and the idle balancing that pulls queued threads.

  * select_task_rq_fair: ``wake_affine`` chooses the target between the waker's
    CPU and the previous one (``wake_affine_idle``: an idle previous CPU, or the
    waker's CPU for a sync waker alone there; then ``wake_affine_weight``), and
    ``select_idle_sibling`` searches the target's LLC only (the target, an idle
    previous CPU in that LLC, a whole idle core, an idle CPU); with no idle CPU
    there, the shortest queue (the periodic balancer's stand-in);
  * optional CFS wake-up preemption (``place_entity``, ``check_preempt_wakeup``);
  * newidle balance: a CPU going idle pulls a queued thread from another CPU
    unless the thread is cache hot (ran within sched_migration_cost, 500 us).

``Placement`` is a part of ``Kernel`` (simcore.kernel.core): it uses the kernel's
CPUs and run queues (``cpus``, ``llc_cpus``, ``core_cpus``, ``n_idle``,
``n_queued``), the machine's wake costs, and ``_dispatch``.
"""

from __future__ import annotations

from simpy.events import Event

from warmcore.simcore.kernel.accounting import B_IO, K_LLCL, K_LLCM
from warmcore.simcore.kernel.records import BLOCKED, PARKED, RUNNABLE, Cpu
from warmcore.simcore.kernel.threads import Thread
from warmcore.simcore.machine import (WAKE_MIGRATE, WAKE_REMOTE, WAKE_RESUME,
                                      WAKE_RESUME_RQ, WAKE_RQ, WAKE_SCAN, WAKE_WAIT)


class Placement:
    """Wake-ups, CPU selection and idle balancing (a part of Kernel)."""

    def wake(self, t: Thread, waker: Thread | None = None) -> bool:
        """Make a parked thread runnable (futex wake). The waker, if a thread, pays
        the syscall on its next segment. A thread queued as a waiter but not asleep
        yet (``prepare_park``) keeps the wake-up for its ``park()``. Returns False,
        doing nothing, if ``t`` was not waiting: running, runnable, or blocked in
        I/O (a futex wake does not end a read or a sleep; only its own timer does).
        Called with no waker while a socket's receive runs in softirq
        (``softirq_cpu``, see ``deliver_from``), it is that socket's sync wake-up."""
        if t.state is not PARKED:
            if not t.futex_queued or t.wake_pending:
                return False
            t.wake_pending = True          # queued, not asleep yet: its park() returns
            if waker is not None:
                waker.pending_busy += self.machine.futex_wake_cost()
                waker.futex_wakes += 1
            return True
        if waker is None:
            if self.softirq_cpu is not None:
                return self._make_runnable(t, None, self.softirq_cpu)
            prev = t.last_cpu
            if (prev is not None and prev.current is None and self.n_idle
                    and prev.id in t.allowed_set):
                # What _make_runnable(t, None) does here, without its three calls: a
                # wake-up from outside any thread targets the previous CPU
                # (_wake_affine with no waker's CPU), which select_idle_sibling takes
                # as it is idle; the thread is dispatched there at once. The common
                # case of an arrival waking an idle worker (issue 33).
                self._dispatch(prev, t, from_idle=True)
                return True
        return self._make_runnable(t, waker)

    def deliver_from(self, writer: Thread, deliver) -> None:
        """Run ``deliver()`` as the receive softirq of a loopback socket ``writer``
        wrote to: on the writer's CPU, whose wake-ups of the socket's readers are
        *sync* wake-ups (``sock_def_readable`` -> ``wake_up_interruptible_sync_poll``;
        the wake-up's kernel work is in the write's cost, models/syscalls.py)."""
        self.softirq_cpu = writer.cpu
        try:
            deliver()
        finally:
            self.softirq_cpu = None

    def charge_blocked_io(self, req, seconds: float) -> None:
        """``req`` spent ``seconds`` blocked in I/O off any thread (an unmounted
        virtual thread): its breakdown's ``blocked_io``. Making the call is work on the
        request: if nothing ran for it before (a program of acquire, call, release), its
        service starts now."""
        if req.t_start < 0.0:
            req.t_start = self.env.now
        req.bd[B_IO] += seconds

    def _unblock(self, t: Thread) -> None:
        """A blocking wait (I/O, sleep) is over."""
        if t.state is BLOCKED:
            self._make_runnable(t, None)

    def _answer_unblock(self, t: Thread) -> None:
        """A thread blocked on a backend call on this machine (``Kernel.backend``) has
        its answer: the answer's receive softirq (``deliver_from`` the writer) wakes
        it, a sync wake-up from that CPU as ``sock_def_readable``'s."""
        if t.state is BLOCKED:
            t.charge_io(self.backend.answer_read_s)      # its read of the answer
            self._make_runnable(t, None, self.softirq_cpu)

    def _make_runnable(self, t: Thread, waker: Thread | None,
                       sync_cpu: Cpu | None = None) -> bool:
        """``sync_cpu``: a sync wake-up from that CPU (no waker thread to charge)."""
        if waker is not None:
            waker.pending_busy += self.machine.futex_wake_cost()
            waker.futex_wakes += 1
        # the run queues select_task_rq_fair reads, when a waker thread pays for them
        lines = waker is not None and self.wake_lines and waker.cpu is not None
        reads = [] if lines else None
        if sync_cpu is not None:
            cpu = self._select_cpu(t, sync_cpu, sync=True)
        else:
            cpu = self._select_cpu(t, waker.cpu if waker is not None else None, reads=reads)
        if lines:
            self._wake_lines_of_waker(t, waker, cpu, reads)
        if cpu.current is None:
            self._dispatch(cpu, t, from_idle=True)
        else:
            t.state = RUNNABLE
            t.rq_since = self.env.now
            if self.wakeup_preemption and self._wakeup_preempts(t, cpu):
                cpu.rq.appendleft(t)       # runs next, at the current thread's next boundary
                cpu.preempt_next = True
            else:
                cpu.rq.append(t)
            self.n_queued += 1
            self.runqueue_max = max(self.runqueue_max, len(cpu.rq))
            if cpu.current.spin_st is not None:
                self._spin_queued_behind(cpu)     # a spinner sees it (simcore.kernel.spin)
        return True

    def _wakeup_preempts(self, t: Thread, cpu: Cpu) -> bool:
        """CFS's placement of a woken thread on a busy CPU and its wake-up preemption
        (kernel/sched/fair.c, before EEVDF): ``t``'s virtual runtime keeps its lag
        behind the run queue it left (``migrate_task_rq_fair``), is put no further
        than ``sched_latency / 2`` behind this queue's ``min_vruntime``
        (``place_entity``, GENTLE_FAIR_SLEEPERS), and ``t`` preempts the current
        thread if it is more than the wake-up granularity behind it
        (``check_preempt_wakeup``, ``wakeup_preempt_entity``)."""
        cur = cpu.current
        ran = self.env.now - cur.run_since
        cur_v = cur.vruntime + (ran if ran > 0.0 else 0.0)
        low = cur_v
        for q in cpu.rq:
            if q.vruntime < low:
                low = q.vruntime
        if low > cpu.min_vruntime:
            cpu.min_vruntime = low
        prev = t.last_cpu
        if prev is not None and prev is not cpu:
            t.vruntime += cpu.min_vruntime - prev.min_vruntime
        floor = cpu.min_vruntime - self.sched_latency / 2
        if t.vruntime < floor:
            t.vruntime = floor
        return cur_v - t.vruntime > self.wakeup_gran

    def _wake_lines_of_waker(self, t: Thread, waker: Thread, target: Cpu,
                             reads: list) -> None:
        """The waker's side of a futex wake-up whose task goes to ``target``
        (kernel/futex.c ``futex_wake``, kernel/sched/core.c ``try_to_wake_up``, Linux
        3.x): the wait structures the sleeper's core wrote when it queued itself (the
        futex bucket and futex_q, its task_struct, the Parker: WAKE_WAIT), then
        ``ttwu_queue``: a target sharing the waker's LLC is enqueued by the waker under
        that run queue's lock (``ttwu_do_activate``: the target rq's lines, WAKE_RQ); one
        in another LLC gets the task on its ``wake_list`` and an IPI
        (``ttwu_queue_remote``: one line, WAKE_REMOTE) and enqueues it itself. The woken
        thread reads back what the waker wrote where it resumes (``_resume_lines``).
        Before it, ``select_task_rq_fair`` read the run queue of each CPU in ``reads``
        (``idle_cpu``), other than the target: each one's lines from its core
        (WAKE_SCAN)."""
        w = waker.cpu
        t.woken_from = w.id
        if t.last_cpu is not None:
            self._charge_lines(waker, t.last_cpu.id, w.id, WAKE_WAIT)
        seen = set()
        for c in reads:
            if c is not target and c.id not in seen:
                seen.add(c.id)
                self._charge_lines(waker, c.id, w.id, WAKE_SCAN)
        part = WAKE_RQ if target.llc == w.llc else WAKE_REMOTE
        self._charge_lines(waker, target.id, w.id, part)

    def _resume_lines(self, t: Thread, cpu: Cpu) -> None:
        """The woken thread's side, as it is switched in on ``cpu``: the lines the
        waker's core wrote that its return from ``schedule()`` reads (its task_struct,
        futex_q, Parker: WAKE_RESUME), the run queue the waker enqueued it on, read by
        ``cpu``'s ``__schedule`` (WAKE_RESUME_RQ; across LLCs the ``wake_list`` line
        instead, WAKE_REMOTE), and, if it runs on another CPU than the one it slept on,
        its kernel stack's return path and thread state from that CPU's core
        (WAKE_MIGRATE)."""
        w = t.woken_from
        t.woken_from = -1
        self._charge_lines(t, w, cpu.id, WAKE_RESUME)
        part = WAKE_RESUME_RQ if self.cpus[w].llc == cpu.llc else WAKE_REMOTE
        self._charge_lines(t, w, cpu.id, part)
        if t.last_cpu is not None and t.last_cpu is not cpu:
            self._charge_lines(t, t.last_cpu.id, cpu.id, WAKE_MIGRATE)

    def _charge_lines(self, th: Thread, from_cpu: int, on_cpu: int, part: int) -> None:
        """``th``, on ``on_cpu``, pays one part of a wake-up's lines last written on
        ``from_cpu``'s core (MachineModel.wake_transfer): kernel work (system time, the
        hand-off's dispatch cause) and LLC loads."""
        s, loads, misses = self.machine.wake_transfer(from_cpu, on_cpu, part)
        if s:
            th.pending_stall += s       # line transfers: nanoseconds at any clock
            ctr = th.ctr
            ctr[K_LLCL] += loads
            ctr[K_LLCM] += misses

    def _park_timeout(self, t: Thread, ev: Event) -> None:
        if t.wait_ev is ev and t.state is PARKED:    # still in that same park
            t.timed_out = True
            self.wake(t)

    def _select_cpu(self, t: Thread, waker_cpu: Cpu | None, sync: bool = False,
                    reads: list | None = None) -> Cpu:
        """select_task_rq_fair for a wake-up (kernel/sched/fair.c): ``wake_affine``
        picks the target between the waker's CPU and the previous one, then
        ``select_idle_sibling`` looks for an idle CPU in the target's LLC only. With
        none idle there, the shortest queue among the allowed CPUs (standing in for
        the periodic balancer, not simulated). Linux would also kick the nohz idle
        balancer when some CPU is idle elsewhere; that kick is not modelled (a queued
        thread moves when its CPU's current thread is preempted or sleeps, or when a
        CPU going idle pulls it: docs/model.md, Known departures). ``reads``, if a
        list, gets the CPUs whose run queue the search read (``idle_cpu``)."""
        cpus = self.cpus
        allowed = t.allowed_set
        prev = t.last_cpu
        if prev is not None and prev.id not in allowed:
            prev = None
        target = self._wake_affine(t, waker_cpu, prev, sync)
        if self.n_idle:
            found = self._select_idle_sibling(t, prev, target, reads)
            if found is not None:
                return found
        elif reads is not None:
            self._busy_llc_reads(t, prev, target, reads)
        if sync and target is waker_cpu:
            return target
        best = target
        for cid in t.allowed:
            c = cpus[cid]
            if len(c.rq) < len(best.rq):
                best = c
        return best

    def _wake_affine(self, t: Thread, this: Cpu | None, prev: Cpu | None, sync: bool) -> Cpu:
        """The target CPU of a wake-up (``wake_affine``: ``wake_affine_idle`` then
        ``wake_affine_weight``, kernel/sched/fair.c). ``this`` is the waker's CPU
        (None for a timer or an I/O completion: the previous CPU is the target). A
        new thread (no previous CPU) starts from the waker's CPU or its first
        allowed one."""
        allowed = t.allowed_set
        if this is not None and this.id not in allowed:
            this = None
        if prev is None:
            return this if this is not None else self.cpus[t.allowed[0]]
        if this is None or this is prev:
            return prev
        # wake_affine_idle: an idle waker CPU (an interrupt) only pulls within a cache
        if this.current is None and this.llc == prev.llc:
            return prev if prev.current is None else this
        # a sync waker alone on its CPU is about to sleep: the wakee gets its CPU
        if sync and not this.rq:
            return this
        if prev.current is None:
            return prev
        # wake_affine_weight with each CPU's load as its runnable threads (a busy
        # thread's PELT load is about one): this CPU, less the sync waker, plus the
        # wakee, against the previous one with WA_BIAS's imbalance_pct / 2 (117 ->
        # 108%) in its favour
        n_this = (this.current is not None) + len(this.rq) - (1 if sync else 0) + 1
        n_prev = (prev.current is not None) + len(prev.rq)
        return this if n_this * 100 < n_prev * 108 + (1 if sync else 0) else prev

    def _select_idle_sibling(self, t: Thread, prev: Cpu | None, target: Cpu,
                             reads: list | None = None) -> Cpu | None:
        """``select_idle_sibling``: the target if idle; the previous CPU if idle and
        sharing the target's LLC; else an idle CPU of the target's LLC, a whole
        idle core first (``select_idle_core``, ``select_idle_cpu``). None if the
        target's LLC has no idle CPU the thread may use. ``reads`` (a list or None)
        gets each CPU whose idleness it read (``idle_cpu``: ``rq->curr``,
        ``rq->nr_running``)."""
        cpus = self.cpus
        allowed = t.allowed_set
        if reads is not None:
            reads.append(target)
        if target.current is None:
            return target
        if prev is not None and prev.llc == target.llc:
            if reads is not None:
                reads.append(prev)
            if prev.current is None:
                return prev
        idle_cpu = None
        for cid in self.llc_cpus[target.llc]:
            if cid not in allowed:
                continue
            c = cpus[cid]
            if reads is not None:
                reads.append(c)
            if c.current is None:
                if all(cpus[s].current is None for s in self.core_cpus[c.core]):
                    if reads is not None:
                        reads.extend(cpus[s] for s in self.core_cpus[c.core])
                    return c         # a whole idle core (select_idle_core)
                if idle_cpu is None:
                    idle_cpu = c
        return idle_cpu

    def _busy_llc_reads(self, t: Thread, prev: Cpu | None, target: Cpu,
                        reads: list) -> None:
        """What Linux 3.x's ``select_idle_sibling`` reads when no CPU is idle: the
        target's and the previous CPU's ``idle_cpu``, then, in each core's group of
        the target's LLC that the thread may use, the first CPU, found busy (the
        search moves to the next group at the first busy CPU)."""
        reads.append(target)
        if prev is not None and prev.llc == target.llc:
            reads.append(prev)
        allowed = t.allowed_set
        done = set()
        for cid in self.llc_cpus[target.llc]:
            c = self.cpus[cid]
            if cid in allowed and c.core not in done:
                done.add(c.core)
                reads.append(c)

    def _pull_for(self, cpu: Cpu) -> Thread | None:
        """newidle balance: take a queued thread that may run here and is not cache hot
        (ran within sched_migration_cost). If only hot ones wait, retry when the first
        turns cold, as the periodic balancer would (after cache_nice_tries failures)."""
        now = self.env.now
        cold_at = None
        for c in sorted(self.cpus, key=lambda c: -len(c.rq)):
            if not c.rq:
                break
            for t in c.rq:
                if cpu.id not in t.allowed_set:
                    continue
                cold = t.last_ran + self.migration_cost
                if now >= cold:
                    c.rq.remove(t)
                    if not c.rq:
                        c.preempt_next = False
                    self.n_queued -= 1
                    return t
                cold_at = cold if cold_at is None else min(cold_at, cold)
        if cold_at is not None and not cpu.balance_pending:
            cpu.balance_pending = True
            self.env.timeout(cold_at - now).callbacks.append(lambda _e: self._retry_pull(cpu))
        return None

    def _retry_pull(self, cpu: Cpu) -> None:
        cpu.balance_pending = False
        if cpu.current is not None or not self.n_queued:
            return
        t = self._pull_for(cpu)
        if t is not None:
            self._dispatch(cpu, t, from_idle=True)

