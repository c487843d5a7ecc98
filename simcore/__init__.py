"""warmcore's engine core: work, the machine interface, the simulated OS (kernel),
the recorder and histogram, random streams, scenario configuration and the context
that strategies and workloads see. It imports nothing above it (tests/test_layers.py)."""
