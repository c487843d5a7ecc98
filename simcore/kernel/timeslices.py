"""Time slices: a segment that is long, or that runs while others wait for its CPU,
goes in chunks that the kernel drives, each credited as it starts; a thread whose
slice is used up while others wait is preempted at a chunk boundary.

CFS's slice is sched_latency / nr_running, at least min_granularity, both scaled
by 1 + log2(ncpus) up to 8 CPUs (sysctl_sched_tunable_scaling; kernel/sched/fair.c).

``TimeSlices`` is a part of ``Kernel`` (simcore.kernel.core).
"""

from __future__ import annotations

from warmcore.simcore.kernel.accounting import credit
from warmcore.simcore.kernel.records import BLOCKED, RUNNABLE, Cpu
from warmcore.simcore.kernel.threads import Thread
from warmcore.simcore.work import Continuation


class TimeSlices:
    """Chunks of long or contended segments, preemption (a part of Kernel)."""

    def _slice(self, cpu: Cpu) -> float:
        return max(self.min_granularity, self.sched_latency / (1 + len(cpu.rq)))

    def _run_chunk(self, t: Thread) -> None:
        """Run the next chunk of ``t``'s segment: all of it if nobody waits for the CPU
        (split at slice_max), else what is left of its time slice, which counts
        from its dispatch across segments; a thread whose slice is used up while
        others wait is preempted here, at a segment or chunk boundary."""
        remaining, block_s, total, cost, label, rid, sys_s = t.cont
        cpu = t.cpu
        now = self.env.now
        if cpu.rq:
            budget = t.run_since + self._slice(cpu) - now
            if budget <= 0.0 or cpu.preempt_next:
                self._preempt(t)
                return
        fp = t.fl.parts
        if fp is not None and fp is not True:     # resuming a preempted segment here
            self._adopt(t, cpu, now)
            remaining, total, cost = t.cont.remaining_s, t.cont.total_s, t.cont.cost
        if cpu.rq:
            chunk = remaining if remaining < budget else budget
        elif remaining > self.slice_max:
            chunk = self.slice_max
        else:
            chunk = remaining
        credit(t, cost, total, chunk / total if total > 0 else 1.0, now, chunk, sys_s)
        cpu.busy_s += chunk
        if self.trace is not None:
            self.trace.append((now, cpu.id, t.tid, "run", label, chunk, rid))
        t.cont = Continuation(remaining - chunk, block_s, total, cost, label, rid, sys_s)
        ev = self.env.timeout(chunk)
        ev.callbacks.append(lambda _e: self._chunk_end(t))
        if self.fluid:
            t.fl.ev = ev

    def _preempt(self, t: Thread) -> None:
        """Involuntary switch: ``t`` goes to the back of the run queue, or straight to
        an idle CPU it may use (the idle balancer's pull, without waiting a tick)."""
        cpu = t.cpu
        if t.fl.parts is True:
            # The machine's parts of the segment and its bus flow leave the CPU with it
            # (they go to the CPU it resumes on: _adopt); a thread preempted again
            # before it ran anything keeps the parts it has.
            cont = t.cont
            left = cont.remaining_s / cont.total_s if cont.total_s > 0.0 else 0.0
            t.fl.parts = self.machine.parts_of(cpu.id, self.env.now, left)
        self._leave_cpu(t, RUNNABLE)      # hands the CPU to the head of its queue
        self._requeue(t, cpu, to_idle=True)

    def _requeue(self, t: Thread, cpu, to_idle: bool) -> None:
        """``t`` has left ``cpu`` runnable: straight to an idle CPU it may use if
        ``to_idle`` (the idle balancer's pull, without waiting a tick), else to the
        back of ``cpu``'s run queue."""
        t.rq_since = self.env.now
        if to_idle and self.n_idle:
            for cid in t.allowed:
                c = self.cpus[cid]
                if c.current is None:
                    self._dispatch(c, t, from_idle=True)
                    return
        cpu.rq.append(t)
        self.n_queued += 1

    def _chunk_end(self, t: Thread) -> None:
        remaining, block_s = t.cont.remaining_s, t.cont.block_s
        if remaining > 1e-15:
            self._run_chunk(t)
            return
        t.cont = None
        if block_s:
            ev = t.wait_ev
            backend = self.backend
            if backend is not None:        # a call to the backend on this machine:
                # written from the CPU the thread still holds, answered by loopback
                backend.call(t, block_s, lambda: self._answer_unblock(t))
            self._leave_cpu(t, BLOCKED)
            t.wait_ev = ev
            if backend is None:
                self.env.timeout(block_s).callbacks.append(lambda _e: self._unblock(t))
            return
        ev = t.wait_ev
        ev.succeed()

