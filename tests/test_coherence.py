"""Coherence: topology latencies, the ownership directory, contended lines."""

from __future__ import annotations

import math

import pytest

from warmcore.models.coherence import ContendedLines, Directory, Topology
from warmcore.models.presets import Preset

ZEN = Preset(name="test-zen", description="2 sockets x 8 cores x 2 threads, 2 CCX per socket",
             sockets=2, cores_per_socket=8, threads_per_core=2, llc_domains_per_socket=2,
             c2c_smt_ns=7.0, c2c_llc_ns=20.0, c2c_cross_llc_ns=90.0, c2c_socket_ns=150.0,
             smt_throughput=(1.0, 1.25))   # a valid preset needs a total per thread count
QUAD = Preset(name="test-quad", description="4 cores, one LLC", cores_per_socket=4,
              c2c_llc_ns=40.0)
HIT = 4 / 3e9


def test_cpu_numbering_follows_linux():
    t = Topology(ZEN)
    assert t.n_cpus == 32 and t.n_cores == 16 and t.n_llc == 4
    # one thread of every core first, then the SMT siblings: cpu N's sibling is N + 16
    assert t.cpu_core[:4] == [0, 1, 2, 3]
    assert t.cpu_core[16:20] == [0, 1, 2, 3]
    assert t.cpu_thread[15] == 0 and t.cpu_thread[16] == 1
    assert t.cpu_socket[7] == 0 and t.cpu_socket[8] == 1
    assert t.cpu_socket[23] == 0 and t.cpu_socket[24] == 1
    # 8 cores per socket in 2 CCX of 4 cores (8 hardware threads each)
    assert t.cpu_llc[:4] == [0] * 4 and t.cpu_llc[16:20] == [0] * 4
    assert t.cpu_llc[4:8] == [1] * 4 and t.cpu_llc[20:24] == [1] * 4
    assert t.cpu_llc[8] == 2 and t.cpu_llc[15] == 3
    assert t.cpu_llc[24] == 2 and t.cpu_llc[31] == 3


def test_transfer_latency_by_relation():
    t = Topology(ZEN)
    assert t.transfer_ns(0, 0) == 0.0
    assert t.transfer_ns(0, 16) == 7.0      # SMT sibling
    assert t.transfer_ns(0, 1) == 20.0      # same CCX
    assert t.transfer_ns(0, 4) == 90.0      # other CCX, same socket
    assert t.transfer_ns(0, 8) == 150.0     # other socket


def test_directory_versions_and_dirty_flag():
    d = Directory()
    assert d.entry("k") is None
    v1 = d.write("k", 3)
    assert d.entry("k") == [3, v1, True]
    v2 = d.write("k", 5)
    assert v2 > v1 and d.entry("k") == [5, v2, True]


def test_directory_is_bounded():
    d = Directory(max_entries=100)
    for i in range(1000):
        d.write(("task", i), 0)
        assert len(d) <= 100
    assert d.entry(("task", 999)) is not None and d.entry(("task", 0)) is None


def test_directory_trims_in_place_so_a_held_table_stays_current():
    """Hierarchy.touch holds ``entries`` across the writes of one segment."""
    d = Directory(max_entries=10)
    held = d.entries
    for i in range(25):                         # trims twice
        d.write(i, 0)
    assert d.entries is held and held.get(24) is not None and 0 not in held


def test_lone_cpu_pays_only_l1_hits():
    cl = ContendedLines(Topology(QUAD), hit_s=HIT)
    total = 0.0
    for i in range(100):
        stall, transfers, _ = cl.ops("lock", 0, 10, i * 1e-6, 1e-8)
        assert transfers == 0.0
        total += stall
    assert total == pytest.approx(1000 * HIT)


def test_first_op_after_another_owner_is_a_transfer():
    cl = ContendedLines(Topology(QUAD), hit_s=HIT)
    cl.ops("c", 0, 1, 0.0, 0.0)
    stall, transfers, t_ns = cl.ops("c", 1, 1, 1.0, 0.0)   # long after: no queueing
    assert transfers == 1.0 and t_ns == 40.0
    assert stall == pytest.approx(40e-9, rel=1e-6)
    stall, transfers, _ = cl.ops("c", 1, 1, 2.0, 0.0)      # still the owner: a hit
    assert transfers == 0.0 and stall == pytest.approx(HIT)


def test_md1_wait_on_a_busy_line():
    """Others keep the line busy at utilisation rho: a transfer costs t + rho t/(2(1-rho))
    (with the handover's waiter cost off: it is tested below)."""
    cl = ContendedLines(Topology(QUAD), hit_s=HIT, tau_s=100e-6, waiter_cost=0.0)
    t = 40e-9
    # CPUs 1 and 2 ping-pong the line: 1500 transfers of 40 ns posted in a 100 us window
    for i in range(1501):
        cl.ops("c", 1 + i % 2, 1, 0.0, 0.0)
    lam_o, rho = cl.others("c", 0, 0.0)
    assert rho == pytest.approx(1500 * t / 100e-6)
    stall, transfers, _ = cl.ops("c", 0, 1, 0.0, 0.0)
    assert transfers == 1.0
    assert stall == pytest.approx(t + rho * t / (2 * (1 - rho)), rel=1e-9)
    # the utilisation estimate decays with tau
    _, rho_later = cl.others("c", 0, 100e-6)
    assert rho_later == pytest.approx(rho * math.exp(-1), rel=1e-9)


def _run(n_cpus: int, rounds: int = 300, ops: int = 50, work_s: float = 33e-9,
         waiter_cost: float = 1.0):
    """Segments of `ops` contended ops each, 4 per round; `n_cpus` = 4 runs them in
    parallel (one per core), 1 runs them back to back. Returns (total stall, wall)."""
    cl = ContendedLines(Topology(QUAD), hit_s=HIT, waiter_cost=waiter_cost)
    now = total = 0.0
    for _ in range(rounds):
        durs = []
        for c in range(4):
            cpu = c if n_cpus == 4 else 0
            start = now if n_cpus == 4 else now + sum(durs)
            stall, _, _ = cl.ops("counter", cpu, ops, start, work_s / ops)
            durs.append(work_s + stall)
            total += stall
        now += max(durs) if n_cpus == 4 else sum(durs)
    return total, now


def test_same_ops_on_four_cores_stall_more_and_finish_later_than_on_one():
    stall4, wall4 = _run(4)
    stall1, wall1 = _run(1)
    assert stall4 > 20 * stall1
    assert wall1 < wall4          # docs/design/MODEL.md phenomenon 3: faster on fewer cores


def test_contended_line_throughput_near_one_per_transfer():
    """Dense ops from 4 cores, with a fixed handover (waiter cost 0, docs/design/MODEL.md's
    first-order model): the line serves ~1/t ops per second, not 4x that."""
    rounds, ops = 300, 50
    _, wall = _run(4, rounds, ops, waiter_cost=0.0)
    rate = rounds * 4 * ops / wall
    assert 0.8 / 40e-9 < rate < 1.5 / 40e-9


def test_sparse_ops_rarely_transfer_after_the_first():
    """Other cores touching the line rarely (once per ms): one transfer per segment."""
    cl = ContendedLines(Topology(QUAD), hit_s=HIT)
    for i in range(50):
        cl.ops("q", i % 2, 1, i * 1e-3, 0.0)
    _, transfers, _ = cl.ops("q", 0, 20, 0.0505, 1e-7)
    assert 1.0 <= transfers < 1.01


def test_lines_are_bounded():
    cl = ContendedLines(Topology(QUAD), hit_s=HIT, max_lines=64)
    for i in range(1000):
        cl.ops(("lock", i), i % 4, 2, i * 1e-6, 1e-8)
        assert len(cl.lines) <= 64


def _three_contend(cl, line="w", rounds=600):
    """CPUs 1, 2 and 3 take turns on the line, one op each (equal shares)."""
    for i in range(rounds):
        cl.ops(line, 1 + i % 3, 1, 0.0, 0.0)


def test_handover_grows_with_the_other_waiters():
    """t_w = t (1 + beta w), w = N_o - 1: CPU 0 joining three equal contenders finds
    two waiters besides the one handing over (N_o = 3)."""
    for beta in (0.0, 1.0, 0.5):
        cl = ContendedLines(Topology(QUAD), hit_s=HIT, waiter_cost=beta)
        _three_contend(cl)
        _, rho = cl.others("w", 0, 0.0)
        stall, transfers, t_ns = cl.ops("w", 0, 1, 0.0, 0.0)
        assert transfers == 1.0
        assert t_ns == pytest.approx(40.0 * (1 + beta * 2), rel=1e-5)
        rho, t_w = min(rho, cl.rho_cap), t_ns * 1e-9
        assert stall == pytest.approx(t_w + rho * t_w / (2 * (1 - rho)), rel=1e-9)


def test_one_other_contender_hands_over_at_the_plain_transfer_cost():
    cl = ContendedLines(Topology(QUAD), hit_s=HIT, waiter_cost=1.0)
    for i in range(300):
        cl.ops("w", 1, 1, i * 1e-9, 0.0)
        cl.ops("w", 2, 1, i * 1e-9, 0.0)
    # from CPU 1's side the others are CPU 2 alone: N_o = 1, no waiters
    cl.ops("w", 2, 1, 1e-6, 0.0)
    _, _, t_ns = cl.ops("w", 1, 1, 1e-6, 0.0)
    assert t_ns == pytest.approx(40.0)


def test_only_cpus_with_ops_in_progress_count_as_waiters():
    """N_o counts the other CPUs whose op loops are in progress at the handover: a
    segment of n ops spaced s apart that stalled `stall` is in its loop from its start
    for (n - 1) s + stall. CPUs 1, 2 and 3 start 10 ops 1 us apart at 0, 2 us and 4 us
    (loops end at ~9, ~11 and ~13 us); CPU 0 at 10 us finds CPUs 2 and 3 in progress
    (N_o = 2, one waiter besides the CPU handing over) and at 12 us only CPU 3 (N_o =
    1, no waiter): a CPU that touched the line long ago, however much, is no waiter."""
    cl = ContendedLines(Topology(QUAD), hit_s=HIT, waiter_cost=1.0)
    ends = {}
    for cpu, start in ((1, 0.0), (2, 2e-6), (3, 4e-6)):
        stall, _, _ = cl.ops("u", cpu, 10, start, 1e-6)
        ends[cpu] = start + 9e-6 + stall
    assert ends[1] < 10e-6 < ends[2] < 12e-6 < ends[3]
    _, transfers, t_ns = cl.ops("u", 0, 1, 10e-6, 0.0)
    assert transfers == 1.0 and t_ns == pytest.approx(40.0 * 2)
    cl.ops("u", 3, 1, 11e-6, 0.0)                     # CPU 3 takes the line back
    _, _, t_ns = cl.ops("u", 0, 1, 12e-6, 0.0)
    assert t_ns == pytest.approx(40.0)


def test_a_cpus_loop_includes_its_waits():
    """The stall is part of the loop: a single op that waited behind a busy line keeps
    its CPU a waiter until its wait is over, and not after."""
    cl = ContendedLines(Topology(QUAD), hit_s=HIT, waiter_cost=1.0)
    for i in range(1501):                     # CPUs 1 and 2 keep the line busy at 0 ...
        cl.ops("v", 1 + i % 2, 1, 0.0, 0.0)
    t1 = 1e-6                                 # ... and their loops are over by 1 us
    stall3, _, _ = cl.ops("v", 3, 1, t1, 0.0)
    stall2, _, _ = cl.ops("v", 2, 1, t1, 0.0)
    assert min(stall3, stall2) > 40e-9        # a transfer and an M/D/1 wait each
    cl.ops("v", 1, 1, t1, 0.0)                # CPU 1 owns the line: 0 takes it from 1
    _, _, during = cl.ops("v", 0, 1, t1 + 0.5 * min(stall3, stall2), 0.0)
    cl.ops("v", 1, 1, t1 + 2e-6, 0.0)
    _, _, after = cl.ops("v", 0, 1, t1 + 2e-6, 0.0)
    assert during == pytest.approx(40.0 * 3)  # CPUs 1, 2, 3 in their loops: 2 waiters
    assert after == pytest.approx(40.0)       # none: the plain transfer


def test_line_throughput_falls_as_contenders_are_added():
    """Dense ops from k cores: the line serves about 1 / (t (1 + beta (k - 2))) ops/s, so
    two cores get ~1/t and four markedly less (docs/design/MODEL.md phenomenon 3)."""
    def rate(k, rounds=400):
        cl = ContendedLines(Topology(QUAD), hit_s=HIT, waiter_cost=1.0)
        now = 0.0
        for _ in range(rounds):
            durs = [40e-9 / 50 * 50 + cl.ops("n", c, 50, now, 40e-9 / 50)[0]
                    for c in range(k)]
            now += max(durs)
        return rounds * k * 50 / now
    two, four = rate(2), rate(4)
    assert two > 1.6 * four
