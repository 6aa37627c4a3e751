"""A headless Chromium for the browser tests (Debian's ``chromium`` + ``chromedriver``; the system driver, so
selenium-manager never downloads anything) and waits that treat a re-rendered element as "not yet"."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1600"]

needs_chromium = pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                                    reason="needs Debian's chromium and chromium-driver: "
                                           "sudo apt-get install -y chromium chromium-driver (.ci/run installs them)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'chrome-profile'}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    except BaseException:
        raise
    finally:
        try:  # what the page showed last, for a failing test (under the test's tmp_path)
            driver.save_screenshot(str(tmp_path / "last-page.png"))
        except Exception:  # noqa: BLE001 — a browser already gone
            pass
        driver.quit()


def attr(driver, css: str, name: str) -> str:
    """The attribute of the first match, or "" while there is none or it was just replaced.

    The widgets re-render their HTML on every change (a sort, a decision), so an element found a moment
    ago can be gone by the time it is read: that is "not yet", and the caller's wait polls again.
    """
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        els = driver.find_elements(By.CSS_SELECTOR, css)
        return (els[0].get_attribute(name) or "") if els else ""
    except StaleElementReferenceException:
        return ""


def text(driver, css: str) -> str:
    return attr(driver, css, "textContent")


def wait_text(driver, css: str, fragment: str, timeout: float = 60) -> str:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda d: fragment in text(d, css))
    return text(driver, css)


def click(driver, css: str, timeout: float = 30) -> None:
    """Click the first match, finding it again if a re-render replaced it between find and click."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def press(d):
        d.find_element(By.CSS_SELECTOR, css).click()
        return True

    WebDriverWait(driver, timeout, poll_frequency=0.2,
                  ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(press)


@contextlib.contextmanager
def jupyter(app: str, options: list[str], log: Path, env: dict[str, str] | None = None, *, start_within: float = 90):
    """``jupyter APP`` (``lab``, ``server``) with ``options`` on a free port behind token ``t``, in its own process
    group (Lab and the kernels it starts), ``env`` added to the environment; yields its base URL once it answers
    (within ``start_within`` seconds), then stops it (a minute to shut a kernel down, as that is slow on a loaded machine, then killed)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "jupyter", app, *options, f"--port={port}", "--no-browser",
                             "--IdentityProvider.token=t", "--allow-root"], env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=open(log, "wb"), cwd=log.parent, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + start_within
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token=t", timeout=5).close()
                break
            except (ConnectionError, urllib.error.URLError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(log.read_text()[-2000:]) from None
                time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def lab_command(driver, menu: str, item: str, timeout: float = 60) -> None:
    """Run a JupyterLab command from its menu bar: open ``menu`` ("Run"), click its item labelled ``item``
    ("Run All Cells")."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def press(d, css, label):
        for el in d.find_elements(By.CSS_SELECTOR, css):
            if el.text.strip() == label:
                el.click()
                return True
        return False

    WebDriverWait(driver, timeout, poll_frequency=0.3, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: press(d, ".lm-MenuBar-item", menu))
    WebDriverWait(driver, timeout, poll_frequency=0.3, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: press(d, ".lm-Menu .lm-Menu-item", item))
