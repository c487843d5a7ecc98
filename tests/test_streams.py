"""Issue 35 item 1: a core's demand can reach the memory bus (fill buffers, the L2
streamer) and the bus saturates; every figure worked out by hand on the i7-3770
(dram_ns 62, mlp 1.75, 25.6 GB/s on 2 channels, streamer 20 lines ahead, 2
demand misses per 4 KiB page)."""

from __future__ import annotations

import pytest
import simpy

from warmcore.models.hardware import HardwareMachine
from warmcore.models.membus import FluidBus, loaded_latency_ns
from warmcore.models.presets import get_preset, with_overrides
from warmcore.simcore.kernel import Kernel
from warmcore.simcore.work import SHARED, TASK, THREAD, Footprint, Segment

from tests.helpers import run

US = 1e-6
IVB = get_preset("i7-3770")
LINES = 4 * 1024 * 1024 // 64               # 4 MiB: 65,536 lines in 1,024 pages
DEMAND = 2 * 1024                            # the first 2 lines of every page
STREAMED = LINES - DEMAND                    # 63,488
DEMAND_S = DEMAND * 62e-9 / 1.75             # 72.557 us at the workload's MLP
AHEAD_S = STREAMED * 62e-9 / 20              # 196.806 us, 20 lines in flight


def machine(preset=IVB):
    m = HardwareMachine(preset, effects={"dvfs": False, "smt": False, "energy": False,
                                         "switch_costs": False})
    m.bind(simpy.Environment(), None)
    return m


def stream(compute_us, key=0):
    """A segment that computes ``compute_us`` (3.4 GHz, IPC 1.3) over 4 MiB of cold data."""
    return Segment(3.4e9 * 1.3 * compute_us * US, (Footprint(TASK, key, LINES, False),))


def test_the_streamer_hides_its_lines_behind_the_core_s_work():
    """A lone segment: 2,048 demand misses stall it (72.56 us); the 63,488 streamed
    lines take 196.81 us in the background. With 300 us of compute they are hidden
    (300 + 72.56 us); with 10 us the stream is the bound (196.81 us)."""
    long = machine().execute(0, stream(300.0), 1, 0.0)
    assert long[0] == pytest.approx(300 * US + DEMAND_S, rel=1e-9)
    assert long[8] == pytest.approx(DEMAND_S, rel=1e-9)            # reload_s
    short = machine().execute(0, stream(10.0), 1, 0.0)
    assert short[0] == pytest.approx(AHEAD_S, rel=1e-9)
    # one core alone moves 65,536 x 64 B in 196.81 us: 21.3 GB/s (Little's law:
    # 20 x 64 B / 62 ns = 20.6 GB/s, plus the demand lines), below the bus's 25.6
    assert LINES * 64 / short[0] / 1e9 == pytest.approx(21.31, abs=0.01)


def test_without_a_streamer_every_line_waits_at_the_workload_s_mlp():
    """stream_ahead_lines = 0 (every preset but the i7-3770 and the i5-2400): 65,536 x
    62 ns / 1.75 = 2,321.85 us of stall, as before issue 35."""
    off = with_overrides(IVB, extra={"stream_ahead_lines": 0.0})
    cost = machine(off).execute(0, stream(10.0), 1, 0.0)
    assert cost[8] == pytest.approx(LINES * 62e-9 / 1.75, rel=1e-9)


def test_fill_buffers_cap_the_demand_misses_in_flight():
    """An mlp of 16 with 10 fill buffers: the demand misses overlap 10 at a time."""
    p = with_overrides(IVB, mlp=16.0, extra={"stream_ahead_lines": 0.0})
    cost = machine(p).execute(0, stream(10.0), 1, 0.0)
    assert cost[8] == pytest.approx(LINES * 62e-9 / 10, rel=1e-9)


def test_two_streaming_cores_share_the_saturated_bus():
    """Two cores each asking 21.3 GB/s (42.6 > 25.6): each gets half the bus, 12.8
    GB/s, and moves its 4 MiB in 65,536 x 64 B / 12.8 GB/s = 327.68 us."""
    env = simpy.Environment()
    m = HardwareMachine(IVB, effects={"dvfs": False, "smt": False, "energy": False,
                                      "switch_costs": False})
    k = Kernel(env, m)
    m.bind(env, None)
    done = {}

    def body(t):
        t0 = env.now
        yield t.run(stream(10.0, key=t.tid))
        done[t.tid] = env.now - t0

    for cpu in (0, 1):
        k.spawn(k.process(f"p{cpu}"), "t", body, cpus=[cpu])
    env.run()
    assert sorted(done.values()) == pytest.approx([LINES * 64 / 12.8e9] * 2, rel=1e-6)


def test_loaded_latency_rises_steeply_as_the_controller_fills():
    """M/D/1 per channel: S = 64 B / 12.8 GB/s = 5 ns; W = rho S / (2 (1 - rho)):
    rho 0.5 -> 2.5 ns, 0.9 -> 22.5 ns, 0.98 -> 122.5 ns over the idle 62 ns."""
    bus = FluidBus(IVB)
    assert bus.service_ns == pytest.approx(5.0)
    assert loaded_latency_ns(0.5, 62.0, 5.0) == pytest.approx(64.5)
    assert loaded_latency_ns(0.9, 62.0, 5.0) == pytest.approx(84.5)
    assert loaded_latency_ns(0.98, 62.0, 5.0) == pytest.approx(184.5)


def test_a_stream_s_bus_wait_is_overlapped_by_its_concurrency():
    """FluidBus.start's M/D/1 wait per line is divided by the core's concurrency:
    1,000 lines at rho 0.5 (2.5 ns each) cost 2.5 us / 20 = 0.125 us streamed, 2.5 us
    / 1.75 = 1.43 us at the MLP."""
    bus = FluidBus(IVB)
    bus.util[0] = 0.5
    assert bus.start(0, 0, 1000.0, 1e-3, 0.0, 1 / 20) == pytest.approx(2.5e-6 / 20)
    bus2 = FluidBus(IVB)
    bus2.util[0] = 0.5
    assert bus2.start(0, 0, 1000.0, 1e-3, 0.0) == pytest.approx(2.5e-6 / 1.75)


def test_a_memory_bound_batch_flattens_where_the_bus_runs_out():
    """`throughput-machine` on the i7-3770, 4 MiB per job: two jobs move nearly twice
    one job's bytes per second; from three jobs on the socket's 25.6 GB/s is the
    limit and more jobs add nothing (Williams et al., Roofline, CACM 2009; STREAM)."""
    def gbs(jobs):
        r = run("throughput-machine", {"machine.preset": "i7-3770", "workload.jobs": jobs})
        return jobs * LINES * 64 / r["makespan_s"] / 1e9

    bw = {n: gbs(n) for n in (1, 2, 3, 4, 8)}
    assert bw[2] > 1.8 * bw[1], bw
    assert bw[1] < 0.6 * 25.6, bw
    for n in (3, 4, 8):
        assert 0.9 * 25.6 < bw[n] <= 25.6 * 1.0001, bw
    assert bw[8] < 1.05 * bw[3], bw


# The streamer follows sequential walks only (TASK footprints); a thread's stack or
# scattered objects are no ascending run of addresses (models.hardware "Streams").

# the i7-3770's streamer follows walks only, as the Sandy Bridge manual says
IVB_WALKS = IVB


def cold(kind, key, compute_us=300.0, lines=LINES):
    """A segment computing ``compute_us`` over ``lines`` cold lines of one owner."""
    return Segment(3.4e9 * 1.3 * compute_us * US, (Footprint(kind, key, lines, True),))


@pytest.mark.parametrize("kind,key", [(THREAD, None), (SHARED, "read-mostly"),
                                      (SHARED, ("conn", 0))])
def test_the_streamer_does_not_follow_a_stack_or_scattered_objects(kind, key):
    """4 MiB of a thread's stack or of shared objects, all cold: no stream, every
    line a demand miss at the mlp, 65,536 x 62 ns / 1.75 = 2,321.85 us of stall."""
    cost = machine(IVB_WALKS).execute(0, cold(kind, key), 1, 0.0)
    assert cost[8] == pytest.approx(LINES * 62e-9 / 1.75, rel=1e-9)
    assert cost[8] == pytest.approx(2321.85e-6, abs=0.01e-6)


def test_a_walk_beside_a_cold_stack_streams_only_the_walk():
    """A 4 MiB walk and a cold 64 KiB stack (1,024 lines) in one segment, 300 us of
    compute: the stack's 1,024 lines join the walk's 2,048 trigger lines as demand
    misses, (2,048 + 1,024) x 62 ns / 1.75 = 108.84 us; the 63,488 streamed lines
    (196.81 us) hide behind 300 + 108.84 us."""
    stack = 64 * 1024 // 64
    seg = Segment(3.4e9 * 1.3 * 300 * US, (Footprint(TASK, 0, LINES, False),
                                            Footprint(THREAD, None, stack, True)))
    cost = machine(IVB_WALKS).execute(0, seg, 1, 0.0)
    demand_s = (DEMAND + stack) * 62e-9 / 1.75
    assert demand_s == pytest.approx(108.837e-6, abs=1e-9)
    assert cost[8] == pytest.approx(demand_s, rel=1e-9)
    assert cost[0] == pytest.approx(300 * US + demand_s, rel=1e-9)


def test_the_i5_2400_streams_as_its_sandy_bridge_manual_says():
    """i5-2400 (Sandy Bridge: 20 lines ahead, 65 ns): a lone 4 MiB walk with 10 us of
    compute is bound by its stream, 63,488 x 65 ns / 20 = 206.34 us (20.33 GB/s)."""
    snb = get_preset("i5-2400")
    assert snb.extra.stream_ahead_lines == 20.0 and snb.extra.stream_walks_only
    seg = Segment(3.1e9 * 1.3 * 10 * US, (Footprint(TASK, 0, LINES, False),))
    cost = machine(snb).execute(0, seg, 1, 0.0)
    assert cost[0] == pytest.approx(STREAMED * 65e-9 / 20, rel=1e-9)
    assert cost[0] == pytest.approx(206.34e-6, abs=0.01e-6)
    assert LINES * 64 / cost[0] / 1e9 == pytest.approx(20.33, abs=0.01)


def test_a_thread_s_object_touched_whole_is_a_walk():
    """A THREAD footprint with its own key (a virtual thread's stack chunk, which
    freeze and thaw copy front to back) streams like a task's bytes: 4 MiB behind
    300 us of compute stalls for its 2,048 trigger lines only, 300 + 72.56 us."""
    cost = machine(IVB_WALKS).execute(0, cold(THREAD, ("vstack", 7)), 1, 0.0)
    assert cost[8] == pytest.approx(DEMAND_S, rel=1e-9)
    assert cost[0] == pytest.approx(300 * US + DEMAND_S, rel=1e-9)


def test_the_i7_3770_streams_walks_only():
    assert IVB.extra.stream_walks_only


def test_a_streamer_told_to_follow_every_line_streams_a_stack():
    """``stream_walks_only = false`` (the streamer as first landed): a cold 4 MiB stack
    streams like a walk, 300 + 72.56 us behind 300 us of compute."""
    every_line = with_overrides(IVB, extra={"stream_walks_only": False})
    cost = machine(every_line).execute(0, cold(THREAD, None), 1, 0.0)
    assert cost[0] == pytest.approx(300 * US + DEMAND_S, rel=1e-9)
