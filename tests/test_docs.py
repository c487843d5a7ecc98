"""The documentation's examples run: docs/api.md is a doctest."""

from __future__ import annotations

import doctest
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_api_examples_run_as_written():
    result = doctest.testfile(str(DOCS / "api.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 20
    assert result.failed == 0
