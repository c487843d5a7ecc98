"""adaptive: Jetty's AdaptiveExecutionStrategy (Jetty 10/11/12; EatWhatYouKill in 9.4).

Per selector, state IDLE/PRODUCING/REPRODUCING and a pending flag, exactly as
docs/design/STRATEGIES.md's pseudo-code and ``AdaptiveExecutionStrategy.java``:

    tryProduce(wasPending):
      if wasPending: pending = 0
      IDLE -> PRODUCING (this thread produces); PRODUCING -> REPRODUCING, return;
      REPRODUCING -> return
      nb = this thread is a non-blocking invocation
      loop: t = produce()
        none: PRODUCING -> IDLE, return; REPRODUCING -> PRODUCING, continue
        mode = select(t, nb)
        PC/PIC: run inline (PIC: as a non-blocking invocation); continue
        PEC:    executor.execute(t); continue
        EPC:    t.run(); if state is IDLE: take it back to PRODUCING, continue; else return
    select(t, nb):
      NON_BLOCKING -> PC
      EITHER:   nb -> PC;  tryPending() -> EPC; else -> PIC
      BLOCKING: nb -> PEC; tryPending() -> EPC; else -> PEC
    tryPending(): if pending, or reservedThreads.tryExecute(this) succeeds:
                  pending = 1, state = IDLE, true; else false

``pending`` is Jetty's boolean ``_pending`` (0 or 1): docs/design/STRATEGIES.md's
"pending++" when a pending producer is already on its way cannot be a count,
since only the dispatched thread decrements it (a count would never return to
0 and tryPending would keep succeeding with no thread coming). The pending
producer is this strategy's run() = tryProduce(true), handed to a reserved
thread of the QueuedThreadPool's ReservedThreadExecutor (``QueuedThreadPool.
tryExecute``); PEC tasks go to the pool with ``execute``. A task's invocation
type is the request's (scenario ``work.invocation``). The producing threads are
pool threads, never inside a non-blocking invocation, so nb is False unless a
thread is running a PIC task (``Invocable.isNonBlockingInvocation``). A PIC
task runs the same segments as PC: a real EITHER task invoked non-blocking
would not block, so give EITHER work no ``backend_us``.

Counters: ``modes`` per selector ({"PC", "PIC", "PEC", "EPC"}: Jetty's
_pcMode/_picMode/_pecMode/_epcMode); ``mode_counts()`` sums them; set
``server.mode_log = []`` before running to get (request id, mode) pairs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from warmcore.strategies.base import register
from warmcore.strategies.jetty_pool import JettyParams, JettyServer

IDLE, PRODUCING, REPRODUCING = "IDLE", "PRODUCING", "REPRODUCING"
PC, PIC, PEC, EPC = "PC", "PIC", "PEC", "EPC"
MODES = (PC, PIC, PEC, EPC)


class AdaptiveParams(JettyParams):
    # ReservedThreadExecutor capacity; None: Jetty's heuristic for the version below,
    # 0: no reserved threads (tryExecute always fails)
    reserved_threads: int | None = Field(default=None, ge=0)
    jetty_version: Literal["12", "9.4"] = Field(default="12",
                                                description='which capacity heuristic')


class AdaptiveExecutionStrategy:
    def __init__(self, server, selector):
        self.server = server
        self.selector = selector
        self.state = IDLE
        self.pending = 0
        self.outstanding = 0        # pending producers handed to a thread, not yet running
        self.max_outstanding = 0    # invariant checked by the tests (<= 1)
        self.dispatches = 0
        self.modes = dict.fromkeys(MODES, 0)

    # produce(): the selector's own job; run(): the pending producer
    def produce_job(self, t, _req=None):
        yield from self.try_produce(t, False)

    def run_pending(self, t, _req=None):
        self.outstanding -= 1
        yield from self.try_produce(t, True)

    def try_produce(self, t, was_pending: bool):
        if was_pending:
            self.pending = 0
        state = self.state
        if state == IDLE:
            self.state = PRODUCING
        elif state == PRODUCING:
            self.state = REPRODUCING
            return
        else:
            return
        server = self.server
        sel = self.selector
        nb = t.data.nb
        log = server.mode_log
        modes = self.modes
        while True:
            req = yield from sel.produce(t)
            if req is None:      # a blocking selector never gets here; kept for fidelity
                if self.state == PRODUCING:
                    self.state = IDLE
                    return
                self.state = PRODUCING
                continue
            mode = self.select(req, nb, t)
            modes[mode] += 1
            if log is not None:
                log.append((req.id, mode))
            if mode == PC:
                yield from server.consume(t, req)
            elif mode == PIC:
                st = t.data
                was = st.nb
                st.nb = True
                yield from server.consume(t, req)
                st.nb = was
            elif mode == PEC:
                yield from server.execute(t, server.consume, req)
            else:
                rte = server.rte
                if self._handed and rte is not None and rte.seg is not None:
                    yield t.run(rte.seg, req)
                yield from server.consume(t, req)
                if self.state == IDLE:
                    self.state = PRODUCING
                    continue
                return

    def select(self, req, nb: bool, t=None) -> str:
        """selectSubStrategy: the mode for task ``req`` on a thread that is (nb) or is
        not a non-blocking invocation. May dispatch a pending producer (tryPending)."""
        inv = req.invocation
        if inv == "NON_BLOCKING":
            return PC
        if inv == "EITHER":
            if nb:
                return PC
            return EPC if self.try_pending(t) else PIC
        if nb:
            return PEC
        return EPC if self.try_pending(t) else PEC

    def try_pending(self, t=None) -> bool:
        self._handed = False
        if self.pending:
            self.state = IDLE
            return True
        rte = self.server.rte
        if rte is not None and rte.try_execute(self.run_pending, None, t):
            self._handed = True
            self.pending = 1
            self.dispatches += 1
            self.outstanding += 1
            if self.outstanding > self.max_outstanding:
                self.max_outstanding = self.outstanding
            self.state = IDLE
            return True
        return False

    _handed = False


@register
class Adaptive(JettyServer):
    name = "adaptive"
    summary = ("Jetty AdaptiveExecutionStrategy: PC, PIC, PEC or EPC per task by invocation "
               "type and reserved-thread availability")
    Params = AdaptiveParams

    @property
    def reserved_version(self):
        return self.p.jetty_version

    def start(self) -> None:
        self.mode_log = None
        super().start()

    def make_strategy(self, selector):
        return AdaptiveExecutionStrategy(self, selector)

    def mode_counts(self) -> dict:
        out = dict.fromkeys(MODES, 0)
        for sel in self.selectors:
            for k, v in sel.strategy.modes.items():
                out[k] += v
        return out
