"""warmcore's engine core: work, the machine interface, the simulated OS (kernel),
the recorder and histogram, random streams, scenario configuration and the context
that strategies and workloads see. It imports nothing above it (tests/test_layers.py)."""

from warmcore.simcore.compiled import refuse_stale

# Its compiled modules run only while they match their sources (simcore/compiled.py);
# checked before any of them is imported. Module name -> why refused, empty when all match.
STALE = refuse_stale(__name__, __path__)
