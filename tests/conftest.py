"""Test configuration: Hypothesis runs derandomized under CI (the same examples on
every run, so a landing never depends on luck); locally it explores at random."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
