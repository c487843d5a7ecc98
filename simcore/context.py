"""What strategies and workloads see of a run: the configuration, the SimPy
environment, the machine, the simulated OS, random streams and the recorder.

The orchestration (warmcore.build) makes one per run and wires the strategy and
the workload into it; strategies and workloads read it, never build it.
"""

from __future__ import annotations

from warmcore.simcore.config import ConfigError, Scenario


class SimContext:
    """What strategies and workloads see of a run."""

    def __init__(self, cfg: Scenario, env, machine, kernel, streams, recorder):
        self.cfg = cfg
        self.env = env
        self.machine = machine
        self.kernel = kernel
        self.streams = streams
        self.recorder = recorder
        self.server_cpus = self.cpu_list(cfg.server.cpus, "server.cpus") or \
            list(range(machine.n_cpus))
        self.server = kernel.process("server", self.server_cpus)
        self.strategy = None
        self.workload = None
        # The server JVM's young generation (models/jvm_heap.JvmHeap, ``[jvm]``) or None:
        # strategies that model a JVM's own objects call heap.allocate(key, bytes,
        # frames, waker), heap.free(key), heap.in_young(key) and, at their threads'
        # safepoint polls, ``yield from heap.safepoint(thread)``.
        self.heap = None
        self.done = None     # done(req, thread): the server handled req (build() sets it)
        self.reject = None   # reject(req): the server refused req, its queue full (build())
        # work.backend_calls as a simcore.work.CallPlan (the request factory builds it),
        # for the strategy that makes the calls; None without a plan
        self.call_plan = None

    @staticmethod
    def arrivals_may_wake() -> None:
        """A thread went idle (replaced by workloads that defer arrivals)."""

    def cpu_list(self, spec, field: str) -> list[int] | None:
        """``server.cpus`` and friends: None (all), N (CPUs 0..N-1) or a list of ids."""
        n = self.machine.n_cpus
        if spec is None:
            return None
        if isinstance(spec, int):
            if spec > n:
                raise ConfigError(field, f"{spec} CPUs asked for but the machine has {n}")
            return list(range(spec))
        bad = [c for c in spec if c >= n]
        if bad:
            raise ConfigError(field, f"names CPU {bad[0]} but the machine has CPUs 0-{n - 1}")
        if not spec:
            raise ConfigError(field, "an empty CPU list")
        return sorted(set(spec))
