"""The Voilà review app end to end in a real headless Chromium (Debian's ``chromium`` + ``chromedriver``).

``python -m toolkit review`` serves ``apps/review.ipynb`` with Voilà on a free localhost port behind a random token
that it prints once; Selenium drives the system browser (``Service`` with the system chromedriver, so
selenium-manager never downloads anything). The test marks three candidates (a keyboard shortcut before any click,
a button, a shortcut), reloads the page, and checks that the decisions are still there — in the page (a new kernel replays the review file)
and in the reviewer's own file. Without the token, the page and the kernel API are refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from _browser import attr, browser, click, free_port, needs_chromium, text, wait_text  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[1]
TOKENS = ["okafor", "Bowers", "nurse", "lindqvist", "Mrs", "patient"]
pytestmark = [pytest.mark.slow, needs_chromium]


def _candidates(path: Path) -> None:
    from toolkit.scrub.candidates import save_candidates

    rows = [{"token": t, "score": round(0.9 - 0.1 * i, 2), "n_sentences": 10 - i, "best_rank": i + 1,
             "ner_share": 0.5, "capitalised": t[0].isupper(), "common_word": t in ("nurse", "patient"),
             "examples": ["seen by nurse <mask>.", "plan d/w dr. <mask>, pt agrees."]} for i, t in enumerate(TOKENS)]
    save_candidates(pd.DataFrame(rows), path)


@pytest.fixture
def app(tmp_path):
    """``python -m toolkit review`` for reviewer ``tester``: yields the printed address (with its token) and the
    reviewer's review file."""
    from toolkit.review.widget import review_file_for

    cand = tmp_path / "candidates.parquet"
    _candidates(cand)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REVIEW_FILE", "REVIEWER", "JUPYTER_TOKEN")}
    out, log = tmp_path / "review.out", open(tmp_path / "voila.log", "wb")
    with open(out, "wb") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "toolkit", "review", str(cand), "--reviewer", "tester",
                                 f"--port={port}"], env=env, stdout=stdout, stderr=log, cwd=ROOT)
    try:
        deadline = time.monotonic() + 90
        while "token=" not in out.read_text():
            if proc.poll() is not None:
                raise RuntimeError(f"toolkit review exited: {(tmp_path / 'voila.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("toolkit review did not start in 90 s")
            time.sleep(0.2)
        url = next(w for w in out.read_text().split() if "token=" in w)
        assert url.startswith(f"http://127.0.0.1:{port}/?token=") and out.read_text().count("token=") == 1
        yield url, review_file_for(cand, "tester")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_mark_three_reload_keeps_decisions(app, browser):
    from selenium.webdriver.common.action_chains import ActionChains

    url, review = app
    browser.get(url)
    wait_text(browser, ".review-progress", f"0 / {len(TOKENS)} decided", timeout=90)
    assert TOKENS[0] in text(browser, ".review-token")

    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 60).until(lambda d: d.find_element("css selector", "body").get_attribute(
        "data-review-shortcuts"))
    assert browser.find_element("css selector", "body").get_attribute("data-review-shortcuts") == "page"  # Voilà
    ActionChains(browser).send_keys("n").perform()                 # okafor -> name, a shortcut before any click
    wait_text(browser, ".review-progress", f"1 / {len(TOKENS)} decided")
    assert TOKENS[1] in wait_text(browser, ".review-token", TOKENS[1])
    click(browser, "button.review-not-name")                      # Bowers -> not a name
    wait_text(browser, ".review-progress", f"2 / {len(TOKENS)} decided")
    wait_text(browser, ".review-token", TOKENS[2])
    ActionChains(browser).send_keys("u").perform()                 # nurse -> unsure, by keyboard shortcut
    wait_text(browser, ".review-progress", f"3 / {len(TOKENS)} decided")

    records = [json.loads(line) for line in review.read_text(encoding="utf-8").splitlines()]
    assert [(r["token"], r["decision"], r["reviewer"]) for r in records] == [
        ("okafor", "name", "tester"), ("Bowers", "not_name", "tester"), ("nurse", "unsure", "tester")]
    assert all(r["format_version"] == 1 and r["context"] == "seen by nurse <mask>." for r in records)

    browser.refresh()                                              # a new kernel replays the review file
    wait_text(browser, ".review-progress", f"3 / {len(TOKENS)} decided", timeout=90)
    assert TOKENS[3] in text(browser, ".review-token")            # resumes at the first pending candidate
    shown = {tok: text(browser, f".review-table tr[data-token='{tok}'] .review-row-decision") for tok in TOKENS}
    assert shown == {"okafor": "name", "Bowers": "not a name", "nurse": "unsure", "lindqvist": "pending",
                     "Mrs": "pending", "patient": "pending"}
    assert len(review.read_text(encoding="utf-8").splitlines()) == 3  # reloading wrote nothing

    click(browser, ".jupyter-widgets.widget-tab .lm-TabBar-tab:nth-child(2)")  # the table tab
    click(browser, ".review-table th[data-sort='token']")        # a header click sorts by that column, A→Z
    wait_text(browser, ".review-table thead", "token ▲")
    first = WebDriverWait(browser, 30, poll_frequency=0.2).until(
        lambda d: attr(d, ".review-table tbody tr", "data-token"))
    assert first == sorted(TOKENS)[0]


def test_requests_without_the_token_are_refused(app, browser):
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    url, review = app
    base = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    for path in ("/", "/?reviewer=tester", "/?token=wrong&reviewer=tester", "/api/kernels", "/voila/render/review.ipynb"):
        try:
            status, location = opener.open(base + path, timeout=30).status, ""
        except urllib.error.HTTPError as exc:
            status, location = exc.code, exc.headers.get("Location", "")
        assert status in (302, 403, 404) and (status != 302 or "/login" in location), (path, status, location)
    assert opener.open(url, timeout=60).status == 200  # the same request with the token is served

    browser.get(base + "/?reviewer=tester")        # in a browser: the login page, never the review panel
    wait_text(browser, "body", "assword", timeout=60)
    assert "/login" in browser.current_url and not text(browser, ".review-progress")
    assert not review.exists()
