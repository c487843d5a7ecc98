"""Machine physics, CPU presets and workload generators."""
