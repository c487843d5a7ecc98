"""Where simulations run: a local process pool by default, a dask.distributed
cluster by address. Sweeps (and later calibration) submit plain functions of
picklable arguments and take the results as they complete.

    with make_executor(workers=2) as ex:                 # local processes
    with make_executor(scheduler="tcp://10.0.0.5:8786")  # an existing Dask cluster

Both are ``concurrent.futures.Executor``s (Dask's ``Client.get_executor()``), so
callers use ``submit`` and ``concurrent.futures.as_completed``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import CancelledError, Executor, ProcessPoolExecutor

from warmcore.simcore.config import ConfigError

SCHEDULER_ENV = "WARMCORE_SCHEDULER"
CONNECT_TIMEOUT_S = 10


@contextlib.contextmanager
def make_executor(workers: int | None = None, scheduler: str | None = None):
    """A local pool of ``workers`` processes (default: the CPUs available), or the
    Dask cluster at ``scheduler`` (or $WARMCORE_SCHEDULER)."""
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV)
    if scheduler:
        with _dask_executor(scheduler) as ex:
            yield ex
        return
    if workers is not None and workers < 1:
        raise ConfigError("--workers", "must be at least 1")
    n = workers or len(os.sched_getaffinity(0))
    with ProcessPoolExecutor(max_workers=n, initializer=_ignore_interrupts) as ex:
        yield ex


def _ignore_interrupts() -> None:
    """Pool workers leave Ctrl-C to the driver: a terminal sends SIGINT to the whole
    process group, and each worker would otherwise die printing a traceback. The
    driver stops submitting, lets the batches in flight finish and be written, and
    exits with 130 (warmcore.cli)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _dask_executor(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("--scheduler", "needs dask.distributed: pip install "
                          "'warmcore[dist]'") from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise ConfigError("--scheduler", f"no Dask scheduler answers at {address} "
                          f"({type(e).__name__})") from None
    # While the sweep runs, distributed's own error logging (reconnect attempts,
    # closed streams) would print tracebacks: a lost scheduler is reported as one line.
    # (distributed's config gives some child loggers levels of their own: all of them,
    # and those of tornado and asyncio, whose event loop reports the closed streams.)
    logs = [logging.getLogger(n)
            for n in ["distributed", "tornado", "asyncio", *logging.root.manager.loggerDict]
            if n.split(".")[0] in ("distributed", "tornado", "asyncio")]
    levels = [lg.level for lg in logs]
    for lg in logs:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        ex: Executor = client.get_executor()
        yield ex
    except (OSError, TimeoutError, CancelledError) as e:   # CommClosedError is an OSError
        raise ConfigError("--scheduler", f"lost the Dask scheduler at {address} "
                          f"({type(e).__name__}); the finished parts are kept: rerun the "
                          "same command to go on") from None
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=CONNECT_TIMEOUT_S)
        for lg, level in zip(logs, levels, strict=True):
            lg.setLevel(level)


def capacity(ex: Executor) -> int:
    """How many tasks ``ex`` runs at once: a local pool's processes, or the threads
    of the Dask cluster's workers now (at least 1, so a sweep waits for workers)."""
    client = getattr(ex, "_client", None)          # distributed's ClientExecutor
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    return max(1, getattr(ex, "_max_workers", 1))
