"""Machine physics, CPU presets and workload generators."""

from warmcore.simcore.compiled import refuse_stale

# The compiled hot path runs only while it matches its sources (simcore/compiled.py):
# module name -> why its extension was refused, empty when all match.
STALE = refuse_stale(__name__, __path__)
