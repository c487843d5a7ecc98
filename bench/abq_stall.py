"""What LMAX's ArrayBlockingQueue latency tail asks of the simulated pipeline (issue 34).

An experiment, not part of the model: `lmax-latency` with abq's pipeline and the
spinning publisher, one consumer held off its CPU for ``--stall-us`` from
``--at-us`` on (its next ``take`` after that time parks first, woken by nothing but
the time-out), the publisher putting one event a microsecond meanwhile. It prints
how many events the backlog puts beyond the end-to-end bounds of the buckets LMAX
printed (a published hop is a third of an event's interval: 1,048,576, 2,097,152
and 4,194,304 ns a hop are 3,146, 6,291 and 12,583 us end to end), and how many
such stalls a run of LMAX's 30 million events (ThrottledOnePublisherToThreeProcessor-
PipelineLatencyTest at commit 1bbbeea7; the paper says 50 million) must have to
meet "99% < 2,097,152" and "99.99% < 4,194,304". docs/strategies.md, abq's latency.

    python bench/abq_stall.py [--stage 1] [--at-us 20000] [--stall-us 8000]
"""

from __future__ import annotations

import argparse
import math

from warmcore.build import build, finish, run_built
from warmcore.simcore import recorder
from warmcore.simcore.config import Scenario
from warmcore.strategies.abq import BlockingQueue

US = 1e-6
# LMAX's Histogram bounds (ns a hop) as end-to-end microseconds (x 3 / 1000)
BOUNDS_US = (3146, 6291, 12583)
EVENTS = (30_000_000, 50_000_000)


class StalledQueue(BlockingQueue):
    """A queue whose taker, at its first take at or after ``at``, is off its CPU for
    ``stall`` seconds first (a probe: nothing in the model does this)."""

    __slots__ = ()
    at = math.inf
    stall = 0.0

    def take(self, t):
        if t.kernel.env.now >= StalledQueue.at:
            StalledQueue.at = math.inf
            yield t.park(timeout=StalledQueue.stall)
        return (yield from BlockingQueue.take(self, t))


def latencies(stage: int, at_us: float, stall_us: float, requests: int) -> list[float]:
    """End-to-end latencies (us) of the measured events of one run with the stall."""
    out: list[float] = []
    complete = recorder.Recorder.complete

    def noting(self, req, thread=None):
        if self.measuring:
            out.append((recorder.clock(self.env) - req.t_arrive) / US)
        return complete(self, req, thread)

    sc = Scenario.load("lmax-latency").edit(
        {"strategy.params.topology": "pipeline", "strategy.params.producer_idle": "spin"},
        strategy="abq", requests=requests)
    recorder.Recorder.complete = noting
    try:
        ctx = build(sc, 1)
        queue = ctx.strategy.handlers[stage].inputs[0]
        queue.__class__ = StalledQueue
        StalledQueue.at, StalledQueue.stall = at_us * US, stall_us * US
        finish(ctx, run_built(ctx))
    finally:
        recorder.Recorder.complete = complete
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stage", type=int, default=1, help="consumer held off: 0, 1 or 2")
    ap.add_argument("--at-us", type=float, default=20000.0)
    ap.add_argument("--stall-us", type=float, default=8000.0)
    ap.add_argument("--requests", type=int, default=50000)
    a = ap.parse_args()
    lat = latencies(a.stage, a.at_us, a.stall_us, a.requests)
    over = [sum(v > b for v in lat) for b in BOUNDS_US]
    held = [v for v in lat if v > 100]
    print(f"{len(lat)} events, mean {sum(lat) / len(lat):.1f} us, max {max(lat):.1f} us")
    for b, n in zip(BOUNDS_US, over, strict=True):
        print(f"  over {b:>6,} us end to end: {n:,}")
    print(f"  held over 100 us: {len(held):,}, their latencies summed: {sum(held):,.0f} us")
    for events in EVENTS:
        need = math.ceil(events * 0.01 / over[0]) if over[0] else math.inf
        most = math.ceil(events * 0.01 / over[1]) - 1 if over[1] else math.inf
        mean = need * sum(held) / events
        print(f"  {events:,} events: 99% < 2,097,152 a hop takes {need} to {most} such "
              f"stalls; {need} add {mean:.1f} us to the mean end to end")


if __name__ == "__main__":
    main()
