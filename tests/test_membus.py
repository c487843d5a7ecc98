"""Memory bus: bandwidth shares, M/D/1 loaded latency, the per-socket rate estimate."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warmcore.models.membus import MemoryBus, bandwidth_shares, loaded_latency_ns, md1_wait
from warmcore.models.presets import Preset

P = Preset(name="test-mem", description="20 GB/s, 2 channels, 80 ns", dram_ns=80.0,
           mem_bw_gbs=20.0, mem_channels=2, sockets=2)
S_NS = 64 / 10.0   # one 64-byte line on a 10 GB/s channel: 6.4 ns


@settings(max_examples=300, deadline=None)
@given(demands=st.lists(st.floats(0, 1e3), min_size=1, max_size=20),
       cap=st.floats(1e-3, 1e4))
def test_shares_never_exceed_cap_nor_demand(demands, cap):
    shares = bandwidth_shares(demands, cap)
    assert len(shares) == len(demands)
    assert sum(shares) <= cap * (1 + 1e-9) + 1e-12
    for s, d in zip(shares, demands, strict=True):
        assert 0.0 <= s <= d * (1 + 1e-12)
    if sum(demands) <= cap:
        assert shares == pytest.approx(demands)
    else:                          # saturated: all bandwidth used, in proportion
        assert sum(shares) == pytest.approx(cap, rel=1e-9)
        total = sum(demands)
        for s, d in zip(shares, demands, strict=True):
            assert s == pytest.approx(d * cap / total, rel=1e-9, abs=1e-12)


def test_md1_formula():
    assert md1_wait(0.0, S_NS) == 0.0
    assert md1_wait(0.5, S_NS) == pytest.approx(0.5 * S_NS / (2 * 0.5))
    assert md1_wait(0.9, S_NS) == pytest.approx(0.9 * S_NS / 0.2)


def test_loaded_latency_formula_cap_and_overload():
    assert loaded_latency_ns(0.0, 80.0, S_NS) == 80.0
    assert loaded_latency_ns(0.7, 80.0, S_NS) == pytest.approx(80 + 0.7 * S_NS / 0.6)
    capped = 80 + 0.98 * S_NS / (2 * 0.02)
    assert loaded_latency_ns(0.99, 80.0, S_NS) == pytest.approx(capped)
    # over capacity: each requester gets B / sum(d) of its demand -> time stretches by rho
    assert loaded_latency_ns(2.0, 80.0, S_NS) == pytest.approx(capped * 2.0)
    lat = [loaded_latency_ns(r, 80.0, S_NS) for r in (0, .2, .4, .6, .8, .95, 1.0, 1.5)]
    assert lat == sorted(lat)


def test_service_time_from_channel_bandwidth():
    bus = MemoryBus(P)
    assert bus.service_ns == pytest.approx(S_NS)
    assert bus.latency_ns(0, 0.0) == 80.0


def test_steady_stream_gives_its_utilisation_and_md1_latency():
    """Post 100 lines every 1 us (6.4 GB/s = rho 0.32 of 20 GB/s) for 1 ms: the decaying
    utilisation sampled just before a post is u * (dt/tau) e^-dt/tau / (1 - e^-dt/tau),
    and the segment waits lines * M/D/1(rho) / MLP (the bus is far from its cap)."""
    bus = MemoryBus(P, tau_s=100e-6)
    dt = 1e-6
    for i in range(1000):
        extra = bus.access(0, 100, i * dt)
    x = dt / 100e-6
    rho = 100 / dt * 64 / 20e9 * x * math.exp(-x) / (1 - math.exp(-x))
    assert extra == pytest.approx(100 * md1_wait(rho, S_NS) * 1e-9 / P.mlp, rel=2e-3)
    # the other socket's bus is idle
    assert bus.access(1, 100, 1e-3) == 0.0


def test_utilisation_decays_when_the_stream_stops():
    bus = MemoryBus(P, tau_s=100e-6)
    bus.access(0, 100, 0.0)
    r0 = bus.rho(0, 1e-6)
    assert 0 < r0 < 1
    assert bus.rho(0, 101e-6) == pytest.approx(r0 * math.exp(-1))
    assert bus.latency_ns(0, 10e-3) == pytest.approx(80.0, abs=1e-9)


def test_own_burst_does_not_queue_behind_itself():
    bus = MemoryBus(P)
    assert bus.access(0, 1e4, 0.0) == 0.0        # first burst on an idle bus
    assert bus.access(0, 1, 1e-9) > 0.0          # the next request sees the load


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 64), lines=st.floats(1e3, 1e6))
def test_simultaneous_bursts_never_beat_the_bandwidth(n, lines):
    """n cores each fetch ``lines`` at t=0: the last of them cannot be done before
    the bus has moved all n * lines lines at its bandwidth, and none waits for more."""
    bus = MemoryBus(P)
    mem_s = lines * P.dram_ns * 1e-9 / P.mlp
    ends = [mem_s + bus.access(0, lines, 0.0) for _ in range(n)]
    total_s = n * lines * 64 / 20e9
    assert max(ends) >= total_s * (1 - 1e-9)
    assert max(ends) <= max(total_s, mem_s) + mem_s * 10   # no runaway multiplier


def test_a_lone_latency_bound_stream_never_waits_for_bandwidth():
    """One thread fetching one segment after another is latency-bound (80 ns / MLP per
    line >> 3.2 ns of bus time): it sees only the small M/D/1 term of its own load."""
    bus = MemoryBus(P)
    t = 0.0
    lines = 10_000
    for _ in range(200):
        wait = bus.access(0, lines, t)
        assert wait < lines * 0.1 * P.dram_ns * 1e-9     # < 10% of the memory time
        t += lines * P.dram_ns * 1e-9 / P.mlp + wait
