"""SMT: hardware threads of one core share its issue width.

A preset's ``smt_throughput`` curve holds the core's TOTAL throughput with k
busy hardware threads that never wait on memory, relative to one lone thread
(curve[0] == 1.0). Beyond the curve's length the total stays at its last value.
How the threads share the core is the preset's ``smt_policy``:

"simultaneous" (Intel Hyper-Threading): each thread runs at

    s(k) = curve[k-1] / k

of a lone thread whatever it runs (docs/design/MODEL.md "SMT"): (1.0, 1.25) on the
big cores, Marr et al., "Hyper-Threading Technology Architecture and
Microarchitecture", Intel Technology Journal 6(1), 2002: up to 30% on server
benchmarks. That the gain depends on the work's stalls and on the halves of the
partitioned queues each thread keeps is not modeled (docs/model.md "Known
departures").

"fine-grained" (Sun UltraSPARC T1; Kongetira, Aingaran, Olukotun, "Niagara: a
32-way multithreaded Sparc processor", IEEE Micro 25(2), 2005): the core's one
pipe issues from one thread each cycle, switching every cycle and skipping the
threads that wait on a miss, so other threads can use only the cycles in which a
thread waits. A thread that alone would take c seconds of compute (its
instructions at the pipe's rate, ``base_ipc``) and m seconds waiting on memory
(cache reloads, DRAM, coherence, contended lines) keeps the pipe busy a share

    d = c / (c + m)

of its time. With the core's busy threads' shares adding to U = sum(d), the pipe
can give them what it has, C = curve[k-1] lone compute-bound threads' worth (1.0
on a single pipe): while U <= C every thread runs as it would alone; above, each
runs U / C times slower (fluid round robin over the issue slots). For k identical
threads with stall share s = m / (c + m) the core delivers

    min(k (1 - s), C)

lone threads' worth: a compute-bound thread (s ~ 0) gains nothing from its
siblings, four 50%-stalled ones deliver 2x (tests/test_smt.py, by hand).
"""

from __future__ import annotations

from collections.abc import Sequence


def smt_speed(k: int, curve: Sequence[float]) -> float:
    """Per-thread speed factor with ``k`` busy threads on the core (k < 1 counts as 1)."""
    if not curve:
        return 1.0
    if k < 1:
        k = 1
    i = k if k <= len(curve) else len(curve)
    return curve[i - 1] / k


def smt_total(k: int, curve: Sequence[float]) -> float:
    """Total core throughput with ``k`` busy threads: k * s(k)."""
    if k <= 0:
        return 0.0
    return k * smt_speed(k, curve)


def speed_table(curve: Sequence[float], threads: int) -> list[float]:
    """[s(0)=1, s(1), ..., s(threads)] for O(1) lookups on the hot path."""
    return [1.0] + [smt_speed(k, curve) for k in range(1, max(1, threads) + 1)]


def pipe_share(compute_s: float, stall_s: float) -> float:
    """The share of its time a lone thread keeps a fine-grained core's pipe busy:
    c / (c + m) (module docstring); 1.0 for a thread that never stalls or does
    nothing."""
    total = compute_s + stall_s
    if total <= 0.0:
        return 1.0
    return compute_s / total


def fine_grained_factor(shares: float, capacity: float) -> float:
    """How many times slower than alone each busy thread of a fine-grained core
    runs when their pipe shares add to ``shares`` and the pipe gives ``capacity``
    lone compute-bound threads' worth: max(1, U / C) (module docstring)."""
    f = shares / capacity
    return f if f > 1.0 else 1.0
