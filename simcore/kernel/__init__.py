"""The simulated OS: processes, threads, per-CPU run queues, wake-ups and placement.

A package of single-concern modules, with ``Kernel`` as the front door:

  threads     the thread API strategies call (run, park, block, yield_cpu, permits,
              syscalls): docs/engine.md
  core        Kernel: processes, spawning, dispatching onto a CPU and leaving it
  placement   wake-ups and CPU selection as Linux CFS does them, idle balancing
  timeslices  long segments in chunks, time slices, preemption
  fluid       re-rating a segment in flight when its CPU's rates change
  accounting  a segment's price: the thread's counters and the request's breakdown
  sync        semaphores and locks, and the request-program interpreter
  records     thread states, processes, CPUs, the trace buffer
  fastpath    SimPy fast paths: the one module that touches SimPy's internals

Strategies use ``Kernel.process``, ``Kernel.spawn``, ``Kernel.wake`` and the thread
API; everything else here is the kernel's own.
"""

from warmcore.simcore.compiled import refuse_stale

# Its compiled modules run only while they match their sources (simcore/compiled.py);
# checked before any of them is imported. Module name -> why refused, empty when all match.
STALE = refuse_stale(__name__, __path__)

from warmcore.simcore.kernel.accounting import (
    B_COHER,
    B_COMPUTE,
    B_CONTEND,
    B_DISPATCH,
    B_IO,
    B_QUEUE,
    B_RELOAD,
    CTR_FIELDS,
    K_CYC,
    K_INS,
    K_L1L,
    K_L1M,
    K_LLCL,
    K_LLCM,
    K_SYS,
    K_TASK,
)
from warmcore.simcore.kernel.core import (
    SCHED_LATENCY_S,
    SCHED_MIGRATION_COST_S,
    SCHED_MIN_GRANULARITY_S,
    SCHED_WAKEUP_GRANULARITY_S,
    Kernel,
)
from warmcore.simcore.kernel.fastpath import clock, fast_timeout, segment_done
from warmcore.simcore.kernel.records import (
    BLOCKED,
    DEAD,
    PARKED,
    RUNNABLE,
    RUNNING,
    Cpu,
    Process,
    TraceBuffer,
)
from warmcore.simcore.kernel.sync import Semaphore
from warmcore.simcore.kernel.threads import HANDOFF_CALLS, Thread

__all__ = [
    "BLOCKED", "B_COHER", "B_COMPUTE", "B_CONTEND", "B_DISPATCH", "B_IO", "B_QUEUE",
    "B_RELOAD", "CTR_FIELDS", "DEAD", "HANDOFF_CALLS", "K_CYC", "K_INS", "K_L1L", "K_L1M",
    "K_LLCL", "K_LLCM", "K_SYS", "K_TASK", "PARKED", "RUNNABLE", "RUNNING",
    "SCHED_LATENCY_S", "SCHED_MIGRATION_COST_S", "SCHED_MIN_GRANULARITY_S",
    "SCHED_WAKEUP_GRANULARITY_S", "Cpu", "Kernel", "Process", "Semaphore", "Thread",
    "TraceBuffer", "clock", "fast_timeout", "segment_done",
]
