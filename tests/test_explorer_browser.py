"""The explorer in a real browser: ``streamlit run`` headless on a loopback port,
driven by Playwright on Debian's chromium (no browser download)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import stop

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"

pytest.importorskip("streamlit")
sync_api = pytest.importorskip("playwright.sync_api")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)",
                allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not come up in {timeout} s")


@contextlib.contextmanager
def served(where: Path):
    """The explorer served by ``streamlit run app.py`` on a free loopback port (stopped
    on exit), and a headless Debian chromium: yields (browser, url)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
         "--server.address", "127.0.0.1", "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_up(url, proc)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True,
                args=["--no-sandbox", "--disable-background-networking"])
            try:
                yield browser, url
            finally:
                browser.close()
    finally:
        stop(proc)


def test_an_upload_naming_a_server_file_is_refused_showing_nothing_of_it(tmp_path):
    """A scenario naming /etc/passwd as its trace: one line saying to upload the file,
    nothing of the file's content on the page, the setup kept."""
    evil = tmp_path / "evil.toml"
    evil.write_text("[workload]\nkind = 'open'\narrival = 'trace'\n"
                    "trace_file = '/etc/passwd'\n[strategy]\nname = 'pc'\n"
                    "[run]\nrequests = 200\n")
    with served(tmp_path) as (browser, url):
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(url, timeout=60_000)
        page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=60_000)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(evil))
        alert = page.get_by_text("evil.toml: workload.trace_file: names a file on the "
                                 "machine that serves the explorer")
        alert.first.wait_for(timeout=60_000)
        page.wait_for_timeout(500)
        page.screenshot(path=str(tmp_path / "explorer-refused.png"), full_page=True)
        text = page.locator("body").inner_text()
        assert "root:" not in text and "/bin/" not in text      # nothing of /etc/passwd
        assert "upload the file together with the scenario" in text
        assert "i7-3770" in text and "saturating" in text         # the setup kept
        assert page.locator('[data-testid="stDataFrame"]').count() >= 1
        assert page.locator('[data-testid="stException"]').count() == 0


def test_explorer_renders_in_chromium(tmp_path):
    with served(tmp_path) as (browser, url):
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.goto(url, timeout=60_000)
        table = page.locator('[data-testid="stDataFrame"]')
        table.first.wait_for(timeout=60_000)
        page.locator('[data-testid="stVegaLiteChart"]').first.wait_for(timeout=60_000)
        # pin the defaults as the baseline: the load curves below overlay them
        page.get_by_role("button", name="Pin as baseline").click()
        page.get_by_role("button", name="Clear baseline").wait_for(timeout=60_000)
        # change a control in the form and apply it
        seed = page.get_by_label("Seed")
        seed.fill("7")
        page.get_by_role("button", name="Apply").click()
        page.get_by_text("seed 7,").first.wait_for(timeout=60_000)
        page.locator('[data-testid="stVegaLiteChart"] canvas, '
                     '[data-testid="stVegaLiteChart"] svg').first.wait_for(
            timeout=60_000)
        page.wait_for_timeout(1000)
        top = tmp_path / "explorer-top.png"
        page.screenshot(path=str(top))
        # the load curves, with their progress bar, then three more charts
        page.get_by_role("button", name="Compute load curves").click()
        page.get_by_text("Knee (dotted)").first.wait_for(timeout=120_000)
        charts = page.locator('[data-testid="stVegaLiteChart"]')
        page.wait_for_function(
            "document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]')"
            ".length >= 4", timeout=60_000)
        # the timeline: one more chart, a Gantt of the run's last kernel events
        page.get_by_role("button", name="Show timeline").click()
        page.wait_for_function(
            "document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]')"
            ".length >= 5", timeout=60_000)
        page.get_by_text("Download as Chrome trace").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        assert page.get_by_text("Load curves: change against the pinned baseline")\
            .count() == 1
        charts.nth(1).scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "explorer-curves.png"))
        charts.last.scroll_into_view_if_needed()
        charts.last.screenshot(path=str(tmp_path / "explorer-timeline.png"))
        shot = tmp_path / "explorer.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        assert page.locator('[data-testid="stException"]').count() == 0
        # the comparison table (one of the data frames) and the chart are there
        assert table.count() >= 2
        assert charts.count() >= 5
        assert page.get_by_text("Comparison").count() >= 1
        # a long run: progress and a Stop button; the click interrupts the
        # page's wait and the next script run stops the runs
        page.get_by_role("spinbutton", name="Requests").fill("3000000")
        page.get_by_role("button", name="Apply").click()
        main = page.get_by_test_id("stMainBlockContainer")   # not the header's Stop
        main.get_by_role("button", name="Stop").click(timeout=60_000)
        page.get_by_text("Stopped: partial result").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        stopped = tmp_path / "explorer-stopped.png"
        page.screenshot(path=str(stopped))
        assert page.locator('[data-testid="stException"]').count() == 0
        assert main.get_by_role("button", name="Stop").count() == 0
        assert page.get_by_role("button", name="Run again").count() == 1
        # load curves of those long runs: their own progress and Stop
        page.get_by_role("button", name="Compute load curves").click()
        main.get_by_role("button", name="Stop").click(timeout=60_000)
        page.get_by_text("Stopped: load curves from 0 of").first.wait_for(
            timeout=60_000)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert main.get_by_role("button", name="Stop").count() == 0
        page.screenshot(path=str(tmp_path / "explorer-curves-stopped.png"),
                        full_page=True)
        if os.environ.get("WARMCORE_SCREENSHOT"):     # for docs/: top and bottom
            copy = Path(os.environ["WARMCORE_SCREENSHOT"])
            copy.write_bytes(top.read_bytes())
            copy.with_name(copy.stem + "-end.png").write_bytes(shot.read_bytes())


DETERMINISTIC_LINK = ("?scenario=mmc&strategies=pc,shared-queue"
                      "&set=workload.arrival=%22constant%22"
                      "&set=workload.service=%22deterministic%22&set=run.requests=400")


def test_the_answer_leads_and_a_too_short_run_is_flagged_in_chromium(tmp_path):
    """Opened on a link to constant arrivals and 1,000 us of work on four ideal CPUs
    (pc's capacity 1e6/1,001 us = 999 req/s): 'Find the answer' shows the verdict line,
    the throughput-against-offered-load chart and the objective's, with the crossover
    marked and explained, and the table of the curves' values. Then a link to
    hello at 150,000 req/s comparing Tomcat's thread pool with the event loop: the
    pool's run served its warm-up's backlog, and its row says it is in doubt."""
    with served(tmp_path) as (browser, url):
        page = browser.new_page(viewport={"width": 1500, "height": 1300})
        page.goto(url + DETERMINISTIC_LINK, timeout=60_000)
        page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=60_000)
        charts = page.locator('[data-testid="stVegaLiteChart"]')
        before = charts.count()
        page.get_by_role("button", name="Find the answer").click()
        verdict = page.get_by_text("For throughput req/s: no significant difference up to ~")
        verdict.first.wait_for(timeout=300_000)
        text = verdict.first.inner_text()
        assert "shared-queue is best beyond ~" in text
        flip = float(text.split("up to ~")[1].split(" ")[0].replace(",", ""))
        assert 960 <= flip <= 1020
        page.get_by_text("Crossovers: dashed rules").first.wait_for(timeout=60_000)
        page.get_by_text("Why it flips at ~").first.wait_for(timeout=60_000)
        page.wait_for_function(
            "n => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]').length"
            " >= n", arg=before + 2, timeout=60_000)
        page.wait_for_timeout(1500)
        page.get_by_text("Answer: which strategy").first.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "explorer-answer.png"))
        assert page.locator('[data-testid="stException"]').count() == 0
        if os.environ.get("WARMCORE_SCREENSHOT"):
            copy = Path(os.environ["WARMCORE_SCREENSHOT"])
            copy.with_name(copy.stem + "-answer.png").write_bytes(
                (tmp_path / "explorer-answer.png").read_bytes())

        page.goto(url + "?scenario=hello&set=workload.rate_per_s=150000.0"
                  "&strategies=thread-pool,event-loop", timeout=60_000)
        page.get_by_text("thread-pool (in doubt): served").first.wait_for(timeout=120_000)
        assert "window is too short" in page.get_by_text("thread-pool (in doubt): served")\
            .first.inner_text()
        page.screenshot(path=str(tmp_path / "explorer-doubt.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
