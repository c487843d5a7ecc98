"""The documentation's examples run (docs/api.md is a doctest), the docs it names exist,
and no two files' names differ only by case."""

from __future__ import annotations

import doctest
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_api_examples_run_as_written():
    result = doctest.testfile(str(DOCS / "api.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 20
    assert result.failed == 0


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return out.splitlines()


def test_no_two_files_differ_only_by_case():
    """MODEL.md and model.md, both in docs/, were one file on a case-insensitive file
    system (macOS, Windows): a checkout there lost one of them."""
    seen: dict[str, str] = {}
    clashes = []
    for name in tracked_files():
        if name.lower() in seen:
            clashes.append((seen[name.lower()], name))
        seen[name.lower()] = name
    assert clashes == []


def test_every_doc_the_sources_name_exists():
    """Each Markdown file under docs/ that a source file, doc, test or scenario names by
    its path is there (the design references moved to docs/design/)."""
    named = set()
    for name in tracked_files():
        if name.endswith((".py", ".md", ".toml", ".txt")) and (ROOT / name).is_file():
            named.update((m, name) for m in
                         re.findall(r"docs/[\w./-]*?\.md", (ROOT / name).read_text()))
    assert named, "no doc references found"
    assert sorted((doc, where) for doc, where in named if not (ROOT / doc).is_file()) == []
