"""Files uploaded with a scenario to the explorer (a trace of arrival times), and the
rule that keeps a served explorer away from the server's own files.

A scenario uploaded to the explorer may name only files uploaded with it, by their
file names (``warmcore.check(sc, uploads=...)`` refuses any other path before
anything reads it). Each upload is kept under a private folder named by the hash of
its content (``store``), and the scenario the runs see names that copy
(``runnable``): the setup shown and downloaded keeps the upload's own name, the same
content always maps to the same copy (so cached runs stay valid), and different
content never does. Messages about an upload name it as the user did (``as_shown``).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import warmcore
from warmcore.simcore.config import ConfigError, files_named

# An uploaded scenario TOML (or PARAMS.toml): far more than any scenario needs.
MAX_SCENARIO_BYTES = 64 * 1024
# A file uploaded with a scenario: the explorer's server refuses uploads above 1 MB
# (`warmcore explore`'s --server.maxUploadSize, .streamlit/config.toml); a trace of
# about 80,000 arrival times fits.
MAX_FILE_BYTES = 1 << 20
# Upload folders kept at most (the oldest go first): the disk used stays bounded.
MAX_KEPT = 64


def folder() -> Path:
    """Where uploads are kept: a private folder under the system's temporary one."""
    root = Path(tempfile.gettempdir()) / f"warmcore-uploads-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


def store(name: str, data: bytes) -> Path:
    """Keep ``data`` uploaded as ``name``; the path of the kept copy."""
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(name, f"{len(data):,} bytes, more than the {MAX_FILE_BYTES:,} "
                                "allowed for a file uploaded with a scenario")
    if Path(name).name != name or name in ("", ".", ".."):
        raise ConfigError(name, "not a plain file name")
    where = folder() / hashlib.sha256(data).hexdigest()[:32]
    where.mkdir(mode=0o700, exist_ok=True)
    path = where / name
    if not path.exists():
        tmp = where / f".{name}.part"
        tmp.write_bytes(data)
        tmp.replace(path)
    _prune()
    return path


def _prune() -> None:
    kept = sorted((p for p in folder().iterdir() if p.is_dir()),
                  key=lambda p: p.stat().st_mtime)
    for old in kept[:-MAX_KEPT]:
        shutil.rmtree(old, ignore_errors=True)


def runnable(scenario_toml: str, uploads: Mapping[str, bytes]) -> str:
    """The setup as the runs see it: every file field naming an upload names the kept
    copy of it instead (the TOML unchanged when it names none)."""
    if not uploads:
        return scenario_toml
    sc = warmcore.Scenario.from_toml(scenario_toml)
    changes = {path: str(store(value, uploads[value]))
               for path, value in files_named(sc) if value in uploads}
    return sc.edit(changes).to_toml() if changes else scenario_toml


def as_shown(text: str) -> str:
    """``text`` with the kept copies' folders taken out: an upload named as uploaded."""
    root = str(folder())
    while root in text:
        start = text.index(root)
        end = text.find("/", start + len(root) + 1)
        text = text[:start] + (text[end + 1:] if end >= 0 else "")
    return text


def setup_zip(scenario_toml: str, uploads: Mapping[str, bytes], name: str) -> bytes:
    """The setup to download: the scenario TOML and the files uploaded with it, which it
    names by their file names, so ``warmcore run NAME.toml`` in the folder it is
    unzipped into reads them there."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{name}.toml", scenario_toml)
        for n, data in uploads.items():
            z.writestr(n, data)
    return buf.getvalue()
