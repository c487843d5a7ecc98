"""The kernel: processes, threads and per-CPU run queues; dispatching a thread onto
a CPU and taking it off. ``Kernel`` is the front door of the simulated OS; its
other parts are mixed in from their own modules:

  placement.Placement     wake-ups, CPU selection (CFS), idle balancing
  timeslices.TimeSlices   chunks of long segments, time slices, preemption
  fluid.FluidRates        re-rating a segment whose CPU's rates change
  spin.Spinning           spin waits on a cache line (Thread.spin)

Strategies never call these: they use the thread API (simcore.kernel.threads)
and ``Kernel.spawn``, ``Kernel.process`` and ``Kernel.wake``.
"""

from __future__ import annotations

import math

from simpy.events import Event

from warmcore.simcore.kernel.accounting import counters_now
from warmcore.simcore.kernel.fastpath import clock, drive, fast_timeout, trigger_after
from warmcore.simcore.kernel.fluid import FluidRates
from warmcore.simcore.kernel.placement import Placement
from warmcore.simcore.kernel.records import DEAD, RUNNING, Cpu, Process, TraceBuffer
from warmcore.simcore.kernel.spin import Spinning
from warmcore.simcore.kernel.sync import Semaphore
from warmcore.simcore.kernel.threads import Thread
from warmcore.simcore.kernel.timeslices import TimeSlices

SCHED_LATENCY_S = 6e-3          # sysctl_sched_latency (kernel/sched/fair.c)
SCHED_MIN_GRANULARITY_S = 0.75e-3
SCHED_MIGRATION_COST_S = 500e-6  # sysctl_sched_migration_cost
SCHED_WAKEUP_GRANULARITY_S = 1e-3  # sysctl_sched_wakeup_granularity


class Kernel(Placement, TimeSlices, FluidRates, Spinning):
    """Per-CPU run queues, placement, wake-ups, time slices and counters."""

    def __init__(self, env, machine, trace_limit: int = 0, wakeup_preemption: bool = False):
        self.env = env
        self.machine = machine
        n = machine.n_cpus
        self.cpus = [Cpu(i, machine.cpu_core[i], machine.cpu_llc[i]) for i in range(n)]
        self.llc_cpus: dict[int, list[int]] = {}
        for c in self.cpus:
            self.llc_cpus.setdefault(c.llc, []).append(c.id)
        self.core_cpus: dict[int, list[int]] = {}
        for c in self.cpus:
            self.core_cpus.setdefault(c.core, []).append(c.id)
        self.processes: list[Process] = []
        self.threads: list[Thread] = []
        self.n_idle = n
        # CFS tunables scale with 1 + log2(min(ncpus, 8)) (sysctl_sched_tunable_scaling=1).
        factor = 1.0 + math.log2(min(n, 8))
        self.sched_latency = SCHED_LATENCY_S * factor
        self.min_granularity = SCHED_MIN_GRANULARITY_S * factor
        self.slice_max = self.sched_latency
        self.migration_cost = SCHED_MIGRATION_COST_S
        self.wakeup_preemption = wakeup_preemption
        self.wakeup_gran = SCHED_WAKEUP_GRANULARITY_S * factor
        # The CPU whose softirq is delivering socket data now (loopback runs the
        # receive path on the writer's CPU): its wake-ups are sync wake-ups from it.
        self.softirq_cpu: Cpu | None = None
        # A backend on this machine answering blocking calls (a segment's block_s):
        # call(thread, seconds, on_answer); None: the call waits block_s off the machine.
        self.backend = None
        self.trace = None
        if trace_limit:
            # A CPU's clock changes are trace events too (kind "freq", the new GHz in
            # the label's place), recorded by a listener on the machine's DVFS
            # controller; it only records, so the run is the same with or without it.
            self.trace = TraceBuffer(trace_limit, [machine.current_ghz(c, 0.0)
                                                   for c in range(n)])
            dvfs = getattr(machine, "clock", None)
            if hasattr(dvfs, "add_listener"):
                dvfs.add_listener(self._trace_clock)
        # Seconds per instruction when every segment costs just that (the ideal
        # machine): the kernel then prices segments itself (the fast path).
        self.ideal_spi = machine.fixed_seconds_per_instruction()
        # Rates that change during work: the machine calls rerate(cpu, now) when what a
        # running segment shares changes (docs/engine.md "Fluid rates").
        self.fluid = bool(getattr(machine, "fluid", False)) and not self.ideal_spi
        self.rerates = 0
        self.moves = 0                # preempted segments resumed with their parts (_adopt)
        if self.fluid:
            machine.rate_hook = self.rerate
        self.runqueue_max = 0
        self.resources: dict[str, Semaphore] = {}   # named semaphores (request programs)
        self.n_queued = 0             # threads waiting in any run queue
        self.deferred: list | None = None   # zero-delay wake events being collected
        # A futex wake-up moves its lines between the waker's, the sleeper's and the
        # target's cores, part by part (MachineModel.wake_transfer, Placement's
        # _wake_lines_of_waker and _resume_lines); off when 0.
        self.wake_lines = bool(machine.wake_lines)

    def _trace_clock(self, cpu: int, t: float, ghz: float) -> None:
        """DVFS listener: ``cpu``'s clock became ``ghz`` at ``t``."""
        self.trace.append((t, cpu, -1, "freq", ghz, 0.0, -1))

    # -- creation ------------------------------------------------------------------------

    def process(self, name: str, cpus=None) -> Process:
        """A new process; ``cpus`` is its affinity (iterable of CPU ids) or None for all."""
        mask = None
        if cpus is not None:
            mask = frozenset(cpus)
            bad = [c for c in mask if not 0 <= c < len(self.cpus)]
            if bad or not mask:
                raise ValueError(f"affinity of {name} names CPUs {sorted(bad)} that do not "
                                 f"exist (the machine has CPUs 0-{len(self.cpus) - 1})")
        p = Process(len(self.processes), name, mask)
        self.processes.append(p)
        return p

    def spawn(self, process: Process, name: str, body, cpus=None, start_running=False) -> Thread:
        """Create a thread running ``body(thread)`` (a generator function).

        The thread starts parked and is woken at once, so it goes through
        placement like any new task (fork balancing in Linux)."""
        allowed = range(len(self.cpus)) if process.affinity is None else process.affinity
        if cpus is not None:
            allowed = [c for c in cpus if c in set(allowed)]
            if not allowed:
                raise ValueError(f"thread {name}: affinity {sorted(cpus)} shares no CPU with "
                                 f"its process {process.name}")
        t = Thread(self, len(self.threads), name, process, tuple(sorted(allowed)))
        self.threads.append(t)
        process.threads.append(t)
        t.wait_ev = Event(self.env)
        # the body starts at the first dispatch (t.wait_ev); once it returns, the
        # thread leaves its CPU and is reaped
        t.proc = drive(t.wait_ev, lambda: body(t), lambda: self._exit(t))
        self.wake(t)
        return t

    def _exit(self, t: Thread) -> None:
        """``t``'s body has returned: it leaves its CPU for good."""
        self._leave_cpu(t, DEAD)
        self._reap(t)

    def _reap(self, t: Thread) -> None:
        """Fold an exited thread's counters into its process and forget it."""
        p = t.process
        for i, v in enumerate(t.ctr):
            p.dead_ctr[i] += v
        p.dead_events[0] += t.cs
        p.dead_events[1] += t.migrations
        p.dead_events[2] += t.futex_wakes
        p.threads.remove(t)
        self.threads.remove(t)

    # -- dispatching onto a CPU ------------------------------------------------------

    def _dispatch(self, cpu: Cpu, t: Thread, from_idle: bool) -> None:
        """Give ``cpu`` to ``t`` and resume it once the switch has happened."""
        env = self.env
        now = clock(env)
        m = self.machine
        ideal = self.ideal_spi
        if from_idle:
            self.n_idle -= 1
            if ideal:
                delay = 0.0
            else:
                delay = m.wake_latency(cpu.id, cpu.idle_since, now)
                if delay:
                    self._exit_idle_after(cpu, t, now, delay)
                else:
                    m.cpu_busy(cpu.id, now)
        else:
            delay = 0.0     # time spent runnable in the queue is queue wait, not dispatch
        cpu.current = t
        cpu.idle_since = -1.0
        if self.wakeup_preemption:
            cpu.preempt_next = False
            if not cpu.rq and t.vruntime > cpu.min_vruntime:
                cpu.min_vruntime = t.vruntime   # the current thread alone: the queue's minimum
        if not ideal:
            # Every dispatch ends a sleep or a wait in a run queue: a context switch
            # whose halves the thread runs (schedule() as it left, the return from it
            # now), also when the CPU went through its idle task and back to the same
            # thread: perf counts that switch too, and its cost is in the thread's
            # task-clock (docs/model-caches.md "OS costs").
            t.pending_busy += m.switch_cost(cpu.id, cpu.last_tid, t.tid)
        if t.last_cpu is not None and t.last_cpu is not cpu:
            t.migrations += 1
        if t.woken_from >= 0:
            self._resume_lines(t, cpu)      # before last_cpu changes (placement.py)
        t.cpu = cpu
        t.state = RUNNING
        t.run_since = now + delay
        if self.trace is not None:
            self.trace.append((now, cpu.id, t.tid, "dispatch", "", delay, -1))
        if t.cont is not None:
            if delay:
                # the C-state exit's end (_exit_idle_after) was queued first: the machine
                # sees the CPU busy before the chunk is costed
                env.timeout(delay).callbacks.append(lambda _e: self._run_chunk(t))
            else:
                self._run_chunk(t)
            return
        t.pending_dispatch += delay
        trigger_after(env, t.wait_ev, delay, self.deferred)

    def _exit_idle_after(self, cpu: Cpu, t: Thread, now: float, delay: float) -> None:
        """``cpu`` leaves its C-state for ``t``: the machine sees it busy only when the
        exit is over. In Linux the exit latency passes inside cpuidle (the idle task's
        cpuidle_enter returns once the core runs again: drivers/cpuidle/cpuidle.c,
        kernel/sched/idle.c do_idle), before schedule() picks the task: idle time for
        the tick and cpufreq's load (get_cpu_idle_time), no running time for PELT, no
        work for the core's pipeline, so no dynamic power and no share taken from an
        SMT sibling (issue 35 item 5). Queued before the thread's own resumption at
        the same instant, so it is processed first."""
        end = now + delay
        cpu.exit_end = end
        m = self.machine

        def exited(_e):
            if cpu.current is t and cpu.exit_end == end:
                cpu.exit_end = -1.0
                m.cpu_busy(cpu.id, end)

        fast_timeout(self.env, delay).callbacks.append(exited)

    # -- wake-ups issued from outside any thread -----------------------------------------

    def collect_wakes(self) -> None:
        """Start collecting zero-delay wake-ups (see run_collected)."""
        self.deferred = []

    def run_collected(self) -> None:
        """Resume the threads woken since collect_wakes, now.

        A callback that is not a thread (an arrival delivered by the NIC) may wake
        threads; with no wake-up latency, their wake events would be processed at
        this same instant right after the callback returns. Processing them here,
        once the callback has finished, is the same order of effects without a
        trip through the event queue."""
        evs = self.deferred
        self.deferred = None
        for ev in evs:
            cbs = ev.callbacks
            ev.callbacks = None
            for cb in cbs:
                cb(ev)

    # -- leaving a CPU ----------------------------------------------------------------

    def _leave_cpu(self, t: Thread, state: str) -> None:
        cpu = t.cpu
        if cpu is None:            # never dispatched (dead before start)
            t.state = state
            return
        now = clock(self.env)
        t.state = state
        t.cs += 1
        if self.wakeup_preemption and now > t.run_since:
            t.vruntime += now - t.run_since
        t.cpu = None
        t.last_cpu = cpu
        t.last_ran = now
        cpu.last_tid = t.tid
        cpu.current = None
        self._next_on(cpu, now)

    def _next_on(self, cpu: Cpu, now: float) -> None:
        """``cpu`` is free: run the next queued thread, pull one, or go idle."""
        if cpu.rq:
            self.n_queued -= 1
            self._dispatch(cpu, cpu.rq.popleft(), from_idle=False)
            return
        if self.n_queued:
            pulled = self._pull_for(cpu)
            if pulled is not None:
                self._dispatch(cpu, pulled, from_idle=False)
                return
        cpu.idle_since = now
        self.n_idle += 1
        if not self.ideal_spi:
            self.machine.cpu_idle(cpu.id, now)

    # -- accounting ------------------------------------------------------------------------

    def counters_now(self) -> dict:
        """Counters per process and per CPU as of now (accounting.counters_now)."""
        return counters_now(self)
