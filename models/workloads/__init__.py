"""Load generators: where requests come from and what each one asks of the CPU.

One module per workload kind, each defining its [workload] table's model and its
generator and registering both (``register_workload``, simcore/config/kinds.py):

    open_loop     open (a rate or a trace, over connections), connections
    closed_loop   closed (clients with think time)
    saturating    saturating (pipelined connections, or the EWYK benchmark's batches)
    batch         batch (jobs released at once; the makespan)
    stream        stream (producer -> server -> consumer processes)

``base`` holds what they share: connections, the request factory (a request's
produce and consume segments from the scenario's work shape) and the Workload base.
A new kind is a new module here (or one named in WARMCORE_PLUGINS, simcore/plugins.py).
"""

from __future__ import annotations

import importlib
import pkgutil

from warmcore.simcore.compiled import refuse_stale
from warmcore.simcore.config import WORKLOADS

# Its compiled modules run only while they match their sources (simcore/compiled.py);
# checked before any of them is imported. Module name -> why refused, empty when all match.
STALE = refuse_stale(__name__, __path__)


def discover() -> None:
    """Import every workload kind's module (each registers itself)."""
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{mod.name}")


def build_workload(ctx):
    """The load generator of the scenario's workload kind."""
    return WORKLOADS.get(ctx.cfg.workload.kind).factory(ctx)
