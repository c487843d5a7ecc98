"""The explorer is safe to serve (docs/explorer.md, Security): loopback by default
however it is started, a deliberate --host says what serving it means, and an
upload never reads the server's files (the refusal itself: tests/test_explorer.py; in
a real browser: tests/test_explorer_browser.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import stop
from tests.test_explorer_browser import free_port, wait_up

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("streamlit")


def listening(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on ``port`` (IPv4 and IPv6), from
    /proc/net/tcp*: the kernel's own table, whatever the server says it does."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if state == "0A" and int(p, 16) == port:      # 0A: LISTEN
                found.add(_address(addr, width))
    return found


def _address(hexaddr: str, width: int) -> str:
    raw = bytes.fromhex(hexaddr)
    if width == 8:                                         # little-endian IPv4
        return ".".join(str(b) for b in raw[::-1])
    import ipaddress

    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]  # four little-endian words
    return str(ipaddress.IPv6Address(b"".join(words)))


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc/net")
def test_streamlit_run_from_a_checkout_listens_on_loopback_only():
    """The checkout's .streamlit/config.toml binds 127.0.0.1: `streamlit run app.py`
    with no address of its own (Streamlit's default is every interface)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py",
                             "--server.port", str(port)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_up(f"http://127.0.0.1:{port}/", proc)
        time.sleep(0.5)
        assert listening(port) == {"127.0.0.1"}
    finally:
        stop(proc)


def test_explore_on_another_host_warns_what_serving_it_means(monkeypatch, capsys):
    """--host is the deliberate choice; the command says, before serving, that whoever
    reaches it runs simulations here, and the caps that bound the cost."""
    from warmcore import cli, jobs

    seen = {}
    monkeypatch.setattr(cli.os, "execv", lambda exe, cmd: seen.setdefault("cmd", cmd))
    assert cli.main(["explore", "--host", "0.0.0.0", "--port", "8642"]) == 0
    out, err = capsys.readouterr()
    line = err.strip()
    assert "\n" not in line and line.startswith("warmcore: warning: serving the explorer "
                                                "on 0.0.0.0:8642: anyone who reaches it")
    assert f"at most {jobs.MAX_CONCURRENT_RUNS} at once" in line and "120 s" in line
    cmd = seen["cmd"]
    assert cmd[cmd.index("--server.address") + 1] == "0.0.0.0"
    assert cmd[cmd.index("--client.toolbarMode") + 1] == "minimal"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_explore_on_loopback_says_nothing_more(monkeypatch, capsys, host):
    from warmcore import cli

    monkeypatch.setattr(cli.os, "execv", lambda exe, cmd: None)
    assert cli.main(["explore", "--host", host]) == 0
    assert capsys.readouterr().err == ""


def test_explore_refuses_an_address_that_is_not_one(capsys):
    from warmcore import cli

    assert cli.main(["explore", "--host", "bad host"]) == 2
    assert capsys.readouterr().err.strip() == "warmcore: --host: 'bad host' is not an address"


def test_the_uploaded_files_folder_is_private_and_bounded(monkeypatch, tmp_path):
    from warmcore import uploads

    monkeypatch.setattr(uploads.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(uploads, "MAX_KEPT", 3)
    paths = [uploads.store("t.txt", f"{i}\n".encode()) for i in range(5)]
    assert oct(uploads.folder().stat().st_mode & 0o777) == "0o700"
    assert sum(1 for _ in uploads.folder().iterdir()) == 3
    assert paths[-1].read_text() == "4\n"
    assert uploads.store("t.txt", b"4\n") == paths[-1]       # same content, same copy
    for bad in ("../x", "a/b", ".."):
        with pytest.raises(Exception, match="not a plain file name"):
            uploads.store(bad, b"1\n")
    with pytest.raises(Exception, match="more than the"):
        uploads.store("big.txt", b"0" * (uploads.MAX_FILE_BYTES + 1))


def _fields(model: type, prefix: str = ""):
    """(dotted path, field info) of every field of a pydantic model and its tables."""
    from pydantic import BaseModel

    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _fields(kind, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def test_every_field_that_names_a_file_is_marked_for_the_upload_check():
    """The upload check refuses the fields marked FILE; a field that names a file and is
    not marked would let a served explorer read the server's files. Every workload
    kind's table is walked, and every field named like a file must carry the mark."""
    from warmcore.simcore.config import FILE, Scenario
    from warmcore.simcore.config.kinds import WORKLOADS

    models = [("", Scenario)] + [("workload.", k.config) for k in WORKLOADS]
    named = {(p + path, info.json_schema_extra == FILE)
             for p, m in models for path, info in _fields(m)
             if path.rsplit(".", 1)[-1].endswith(("_file", "_path", "_dir"))}
    assert ("workload.trace_file", True) in named
    assert all(marked for _, marked in named), named
