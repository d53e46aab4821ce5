"""The demo's report in a real browser: headless Chromium renders the page a batch of the
demo's tickets wrote (``batch --report``), on a desktop and a phone-sized window, in the
light and the dark scheme; each screenshot must have something on it, and the browser's
console must stay silent (no script error, nothing refused by the page's policy).

Where Chromium is not installed the test is skipped with the reason printed; under CI=true
it fails instead (``.ci/run`` installs Debian's ``chromium``)."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.cli.commands.batch import batch
from orchestrator.demo.run import build_demo

from conftest import ROOT
from support.once import built_once
from support.png_pixels import colours

pytestmark = pytest.mark.slow

CHROMIUM_NAMES = ("chromium", "chromium-browser")
CONSOLE = re.compile(r":CONSOLE[:(]")


def chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    reason = "chromium is not installed (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must render the report in a browser, but {reason}")
    print(f"report screenshot test skipped: {reason}")
    pytest.skip(reason)


def render(binary: str, page: Path, shot: Path, size: str, home: Path, *extra: str) -> str:
    """Screenshot ``page``; return what the browser logged."""
    argv = [
        binary, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
        f"--user-data-dir={home / 'profile'}", "--enable-logging=stderr", "--v=0",
        f"--screenshot={shot}", f"--window-size={size}", *extra, page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=90, env={**os.environ, "HOME": str(home)}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.is_file(), done.stderr[-2000:]
    return done.stderr


def console_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if CONSOLE.search(line)]


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    # The demo's batch and its page, made once per test run (tests/support/once.py), not once per
    # worker that draws one of these tests: the tests only read the page.
    root = built_once(tmp_path_factory, pytestconfig, "demo-report", _publish_the_demo)
    return root / "site" / "report.html"


def _publish_the_demo(root: Path) -> None:
    root.mkdir(parents=True)
    layout = build_demo(root / "demo")
    tickets_dir = next(iter(layout.tickets.values())).parent
    page = root / "site" / "report.html"
    page.parent.mkdir()
    code = batch(
        ROOT / "config.toml", str(root / "state"), tickets_dir, jobs=1, as_json=False,
        worker=False, out=io.StringIO(),
        environ={"PATH": "/usr/bin:/bin", "DRY_RUN": "false", "HOME": str(root)},
        published=(page, None),
    )  # fmt: skip
    assert code == 3  # CARDS-3 needs a person; the other two completed


def test_the_console_check_hears_a_script_error(tmp_path: Path) -> None:
    """The check below can fail: a page that logs an error is caught."""
    binary = chromium()
    canary = tmp_path / "canary.html"
    canary.write_text('<!DOCTYPE html><p>x</p><script>console.error("canary")</script>')
    log = render(binary, canary, tmp_path / "c.png", "200,100", tmp_path)
    assert any('"canary"' in line for line in console_lines(log)), log[-2000:]


@pytest.mark.parametrize(
    ("size", "scheme"),
    [("1280,1600", "light"), ("390,1400", "light"), ("390,1400", "dark")],
)
def test_the_demo_report_renders_with_no_console_errors(
    demo_page: Path, tmp_path: Path, size: str, scheme: str
) -> None:
    binary = chromium()
    shot = tmp_path / "shot.png"
    extra = (
        ("--force-dark-mode", "--blink-settings=preferredColorScheme=0") if scheme == "dark" else ()
    )
    log = render(binary, demo_page, shot, size, tmp_path, *extra)
    assert console_lines(log) == []
    count, corner = colours(shot)
    assert count > 20, f"a nearly blank screenshot ({count} colours)"
    brightness = sum(corner) / 3
    if scheme == "dark":
        assert brightness < 64, corner  # the dark scheme's background
    else:
        assert brightness > 192, corner


def test_the_demo_report_prints(demo_page: Path, tmp_path: Path) -> None:
    """Printed (to PDF, as a person's browser would), it is pages with text on them."""
    binary = chromium()
    pdf = tmp_path / "report.pdf"
    argv = [
        binary, "--headless", "--disable-gpu", "--no-sandbox", "--no-pdf-header-footer",
        f"--user-data-dir={tmp_path / 'profile'}", f"--print-to-pdf={pdf}", demo_page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=90, env={**os.environ, "HOME": str(tmp_path)}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-")
    pages = len(re.findall(rb"/Type\s*/Page[^s]", data))
    assert pages >= 2, pages  # three tickets' timelines, decisions and hand-off do not fit one
