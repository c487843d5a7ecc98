"""Fluid rates: a running segment whose CPU's rates change mid-way (an SMT sibling
starts or stops, the clock changes, its memory-bus share changes) goes on at the
new rate from then on, as in SimGrid's fluid model (docs/engine.md "Fluid rates").

``FluidRates`` is a part of ``Kernel`` (simcore.kernel.core); a thread's fluid
state is its ``fl`` record (simcore.kernel.threads.FluidState).
"""

from __future__ import annotations

from warmcore.simcore.kernel.accounting import K_CYC, K_TASK, recredit
from warmcore.simcore.kernel.fastpath import fast_timeout
from warmcore.simcore.kernel.records import Cpu
from warmcore.simcore.kernel.threads import Thread
from warmcore.simcore.work import C_COMPUTE, C_CYC, C_DUR


class FluidRates:
    """Re-rating a segment in flight, and adopting a preempted one (a part of Kernel)."""

    def _with_kernel_work(self, new, old_total, oldx, cid, now):
        """(kernel work, whole duration, cost) of a segment re-rated to ``new``: the
        kernel work charged at its start (switches, syscalls) keeps its time and runs
        cycles at the CPU's clock now."""
        extra = old_total - oldx[C_DUR]
        if extra < 0.0:
            extra = 0.0
        newx = new
        if extra:
            newx = (new[C_DUR], new[C_CYC] + extra * self.machine.current_ghz(cid, now) * 1e9,
                    *new[2:])
        return extra, new[C_DUR] + extra, newx

    def rerate(self, cid: int, when: float | None = None) -> None:
        """What the segment running on CPU ``cid`` shares has changed (an SMT sibling
        started or stopped, the clock changed, its memory-bus share changed): the
        rest of its work goes on at the new rate from now (SimGrid's fluid model).

        The work left is a fraction of the whole segment, w = (time left of the piece
        in flight + later chunks) / whole duration at the old rates. Its counters and
        the request's breakdown were credited at the old rates when the piece started;
        the part not yet done is re-credited at the new ones (piecewise crediting), the
        piece now ends w_piece x the new whole duration from now, and the event that
        ends it is moved there. No rate change, no event and no arithmetic."""
        cpu = self.cpus[cid]
        t = cpu.current
        if t is None or t.fl.parts is not True:
            return
        fl = t.fl
        env = self.env
        now = env.now
        t1 = t.seg_t1
        ev = fl.ev
        if t1 <= now or ev is None or ev.callbacks is None:
            return                     # between segments, or its end is being processed
        m = self.machine
        cont = t.cont
        if cont is not None:                 # chunks: the whole segment is in cont
            old_total, oldx = cont.total_s, cont.cost
        else:                                # the whole segment, or as re-rated before
            old_total, oldx = fl.total, fl.costx
        new = m.cost_now(cid, now)
        if new[C_DUR] == oldx[C_DUR] and new[C_COMPUTE] == oldx[C_COMPUTE]:
            return
        self.rerates += 1
        extra, new_total, newx = self._with_kernel_work(new, old_total, oldx, cid, now)
        old = oldx
        w_piece = (t1 - now) / old_total
        w_rest = cont.remaining_s / old_total if cont is not None else 0.0
        # counters of the piece in flight: its undone part at the new rates
        ctr = t.ctr
        span_new = w_piece * new_total
        ctr[K_TASK] += span_new - (t1 - now)
        ctr[K_CYC] += w_piece * (newx[C_CYC] - oldx[C_CYC])
        cpu.busy_s += span_new - (t1 - now)
        t.seg_t0 = now
        t.seg_t1 = now + span_new
        t.seg_cost = tuple(w_piece * x for x in newx)
        t.seg_sys = w_piece * extra
        if fl.req is not None:
            recredit(fl.req, w_piece + w_rest, new, old, new_total - old_total)
        if cont is not None:
            t.cont = cont._replace(remaining_s=w_rest * new_total, total_s=new_total, cost=newx)
        fl.costx = newx
        fl.total = new_total
        m.flow_end(cid, now + span_new + w_rest * new_total)
        if self.trace is not None:
            self._trace_piece_end(cid, t.tid, now + span_new)
        nev = fast_timeout(env, span_new)
        nev.callbacks = ev.callbacks
        ev.callbacks = []
        fl.ev = nev

    def _trace_piece_end(self, cid: int, tid: int, end: float) -> None:
        """The trace's row of the piece in flight on ``cid`` (its latest "run" row for
        thread ``tid``) was written with the piece's planned length: it now ends at
        ``end``, so that the CPU's slices still add up to its task-clock."""
        tr = self.trace
        for i in range(len(tr) - 1, -1, -1):
            row = tr[i]
            if row[1] == cid and row[3] == "run":
                if row[2] == tid:
                    tr[i] = (*row[:5], end - row[0], *row[6:])
                return

    def _adopt(self, t: Thread, cpu: Cpu, now: float) -> None:
        """``t`` resumes on ``cpu`` the segment it was preempted in: the machine takes the
        segment's parts on ``cpu`` (its fills not yet made become a flow on ``cpu``'s
        socket) and the rest of the work goes on at ``cpu``'s rates of now, as
        ``rerate`` would do it (nothing is in flight: the work left is the fraction
        ``w = remaining / whole duration`` at the old rates; later chunks are credited
        at the new rates, the request's breakdown gets ``w (new - old)``). From then
        on ``cpu``'s rate changes re-rate it as usual."""
        cont = t.cont
        fl = t.fl
        parts = fl.parts
        fl.parts = True
        self.moves += 1
        old_total = cont.total_s
        w = cont.remaining_s / old_total if old_total > 0.0 else 0.0
        m = self.machine
        cid = cpu.id
        new = m.adopt_parts(cid, parts, now, w)
        oldx = cont.cost
        if new[C_DUR] != oldx[C_DUR] or new[C_COMPUTE] != oldx[C_COMPUTE]:
            self.rerates += 1
            extra, new_total, newx = self._with_kernel_work(new, old_total, oldx, cid, now)
            if fl.req is not None:
                recredit(fl.req, w, new, oldx, new_total - old_total)
            cont = t.cont = cont._replace(remaining_s=w * new_total, total_s=new_total,
                                          cost=newx)
        m.flow_end(cid, now + cont.remaining_s)

