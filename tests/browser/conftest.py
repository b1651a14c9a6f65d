"""A real browser for the catalog's pages: Debian's chromium, headless, driven by Selenium
through Debian's chromedriver (docs/testing.md, "The browser tests").

- ``browser``: one Chromium for the whole session, with a fresh profile directory, every
  background connection off (the machine reaches no network), and its console log kept. Before
  any page's own script runs, ``window.alert``, ``confirm`` and ``prompt`` are replaced by ones
  that record their calls in ``window.__dialogs`` (a dialog opened by injected code is then
  seen, not only dismissed).
- ``axe``: the text of axe-core's ``axe.min.js`` (``scripts/axe-core`` installs it).
- ``screenshots``: the folder the tests save pictures into, ``.ci-artifacts/screenshots/``
  (``SLURM_IMAGE_SCREENSHOTS`` overrides it); CI keeps it.

Without chromium, chromedriver, selenium or axe-core the tests skip locally and fail under
``CI=true`` (``support.unavailable``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import unavailable

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parents[2]
AXE = (
    Path(os.environ.get("SLURM_IMAGE_NPM_CACHE", str(Path.home() / ".cache/slurm-image/npm")))
    / "node_modules/axe-core/axe.min.js"
)
FLAGS = (
    "--headless=new",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--window-size=1280,900",
)
RECORD_DIALOGS = """
window.__dialogs = [];
for (const name of ["alert", "confirm", "prompt"]) {
  window[name] = (...args) => { window.__dialogs.push([name, String(args[0])]); };
}
"""


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).exists():
            unavailable(f"the browser tests need Debian's {package} ({path})")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        unavailable("the browser tests need selenium (the test extra)")
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_DIALOGS})
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def axe() -> str:
    if not AXE.is_file():
        unavailable(f"the accessibility checks need axe-core ({AXE}: scripts/axe-core)")
    return AXE.read_text()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    folder = Path(
        os.environ.get("SLURM_IMAGE_SCREENSHOTS", str(ROOT / ".ci-artifacts" / "screenshots"))
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder
