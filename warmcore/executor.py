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
import re
import socket
import struct
import time
from concurrent.futures import CancelledError, Executor, ProcessPoolExecutor

from warmcore.simcore.config import ConfigError, short_repr

SCHEDULER_ENV = "WARMCORE_SCHEDULER"
CONNECT_TIMEOUT_S = 10
# Local workers: at most this many per CPU the process may use, and never more than
# MAX_WORKERS (each is a process holding the engine: about 150 MB).
WORKERS_PER_CPU = 4
MAX_WORKERS = 256
# A scheduler's first message (its handshake: compression, Python version, pickle
# protocol) is about a hundred bytes; a peer announcing more is not a Dask scheduler.
MAX_HANDSHAKE_BYTES = 64 * 1024
_ADDRESS = re.compile(r"^(?:(?P<scheme>[a-z][a-z0-9+.-]*)://)?"
                      r"(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})/?$")


def max_workers() -> int:
    return min(MAX_WORKERS, WORKERS_PER_CPU * len(os.sched_getaffinity(0)))


def check_workers(workers: int | None) -> None:
    """``--workers``: 1 .. max_workers() (ConfigError otherwise)."""
    if workers is None:
        return
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError("--workers", f"must be at least 1 (got {short_repr(workers)})")
    cap = max_workers()
    if workers > cap:
        raise ConfigError("--workers", f"at most {cap} ({WORKERS_PER_CPU} per CPU this "
                          f"process may use, at most {MAX_WORKERS}); got {workers}")


def parse_scheduler(address: str) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT`` (or ``HOST:PORT``); ConfigError otherwise."""
    m = _ADDRESS.match(address.strip()) if isinstance(address, str) else None
    if m is None:
        raise ConfigError("--scheduler", f"{short_repr(address)} is not an address like "
                          "tcp://HOST:PORT")
    if (m["scheme"] or "tcp") != "tcp":
        raise ConfigError("--scheduler", f"{short_repr(address)}: warmcore connects to a Dask "
                          "scheduler over tcp:// only (tls:// and others need a security "
                          "setup it does not take)")
    port = int(m["port"])
    if not 0 < port < 65536:
        raise ConfigError("--scheduler", f"{short_repr(address)}: port {port} is not a TCP "
                          "port (1 to 65535)")
    return m["host"].strip("[]"), port


def check_scheduler(address: str, timeout: float | None = None) -> None:
    """The scheduler at ``address`` answers as a Dask scheduler within ``timeout``
    seconds (CONNECT_TIMEOUT_S), before a Client is made: a TCP connection, then the
    scheduler's handshake, read with a size cap and a deadline. A peer that accepts and
    says nothing, or answers something else (a web server, garbage announcing a frame
    of exabytes), is one line, never a hang or a MemoryError."""
    host, port = parse_scheduler(address)
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            size = struct.unpack("<Q", _recv_exactly(sock, 8, deadline))[0]
            if not 0 < size <= MAX_HANDSHAKE_BYTES:
                raise ConfigError("--scheduler", f"{address} is not a Dask scheduler (its "
                                  f"first message announces {size:,} bytes)")
            frames = _recv_exactly(sock, size, deadline)
    except TimeoutError:
        raise ConfigError("--scheduler", f"no Dask scheduler answers at {address} within "
                          f"{timeout:g} s") from None
    except OSError as e:
        raise ConfigError("--scheduler", f"no Dask scheduler answers at {address} "
                          f"({e.strerror or type(e).__name__})") from None
    if not _is_handshake(frames):
        raise ConfigError("--scheduler", f"{address} is not a Dask scheduler (its first "
                          "message is not a Dask handshake)")


def _recv_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 16))
        if not chunk:
            raise ConnectionResetError(0, "closed the connection")
        buf += chunk
    return bytes(buf)


def _is_handshake(data: bytes) -> bool:
    """Dask's framing (distributed.comm.tcp): frame count, frame lengths, frames; the
    message a dict with the handshake's keys."""
    try:
        from distributed.protocol import loads
        from distributed.protocol.utils import unpack_frames

        msg = loads(unpack_frames(data), deserialize=False)
    except Exception:  # noqa: BLE001  (any garbage: not a scheduler)
        return False
    return isinstance(msg, dict) and "pickle-protocol" in msg


@contextlib.contextmanager
def make_executor(workers: int | None = None, scheduler: str | None = None):
    """A local pool of ``workers`` processes (default: the CPUs available), or the
    Dask cluster at ``scheduler`` (or $WARMCORE_SCHEDULER)."""
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV)
    if scheduler:
        with _dask_executor(scheduler) as ex:
            yield ex
        return
    check_workers(workers)
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
    check_scheduler(address)
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, MemoryError, ValueError, TypeError) as e:
        # (the handshake was checked just now: a peer that changed its mind)
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
