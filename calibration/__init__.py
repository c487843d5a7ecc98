"""Calibration: fit model parameters to perf stat and load-generator figures."""
