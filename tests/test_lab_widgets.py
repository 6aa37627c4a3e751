"""The notebooks' widgets in JupyterLab, in a real headless Chromium (issue 55, "a real browser"): notebook 01 run in
Lab, its k slider moved, the read-out beside it changes; notebook 05 run in Lab up to its review widget, three names
judged, the page reloaded and the review cell run again: the decisions are kept (in the widget, replayed from the
review file, and in the file). The real notebooks, each a copy with small parameters injected as papermill injects
them (papermill's own ``parameterize_notebook``, nothing executed before Lab runs it), so their cells run in seconds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _browser import browser, click, jupyter, lab_command, needs_chromium, text, wait_text  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, needs_chromium]


def _notebook_copy(root: Path, name: str, parameters: dict) -> str:
    """``notebooks/NAME.ipynb`` into ``root/notebooks`` with ``parameters`` injected; returns its Lab path."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    nb = load_notebook_node(str(ROOT / "notebooks" / f"{name}.ipynb"))  # as papermill reads it (tags added)
    nb = parameterize_notebook(nb, parameters, kernel_name="python3", language="python")
    (root / "notebooks").mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, root / "notebooks" / f"{name}.ipynb")
    return f"notebooks/{name}.ipynb"


def _open(browser, base: str, path: str) -> None:
    """Open ``path`` in Lab and wait until its kernel is idle (the server's own kernel list says so)."""
    import urllib.error
    import urllib.request

    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{base}/lab/tree/{path}?token=t&reset")

    def idle(_):
        try:
            with urllib.request.urlopen(f"{base}/api/kernels?token=t", timeout=10) as r:
                kernels = json.loads(r.read())
        except urllib.error.HTTPError:  # a kernel still starting (jupyter_server answers 500 meanwhile)
            return False
        return bool(kernels) and all(k["execution_state"] == "idle" for k in kernels)

    WebDriverWait(browser, 180, poll_frequency=0.5).until(
        lambda d: d.find_elements("css selector", ".jp-Notebook .jp-CodeCell") and idle(d))


def _lab(tmp_path):
    """Lab on a folder of its own, with its own settings: every cell in the page (no windowing: a cell far down is
    otherwise not in the DOM until scrolled to), no news or update checks."""
    root = tmp_path / "root"
    root.mkdir()
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}), encoding="utf-8")
    return root, jupyter("lab", [f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
                                 "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                         tmp_path / "lab.log", env={"JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings")})


def test_notebook_01_k_slider_changes_the_read_out(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    root, server = _lab(tmp_path)
    path = _notebook_copy(root, "01_identifier_analysis", {
        "corpus_path": str(ROOT / "data_samples" / "clinical" / "notes.jsonl"), "max_documents": 40,
        "detectors": ["oracle", "patterns"], "main_detector": "patterns", "ks": [2, 3, 4], "ns": [1, 2],
        "out_dir": str(tmp_path / "identifiers")})
    with server as base:
        _open(browser, base, path)
        lab_command(browser, "Run", "Run All Cells")
        readout = ".widget-vbox .widget-html b"
        before = wait_text(browser, readout, "k=2, n=1", timeout=240)
        share = text(browser, ".widget-vbox .widget-html")
        slider = next(s for s in browser.find_elements(By.CSS_SELECTOR, ".widget-hslider")
                      if s.find_element(By.CSS_SELECTOR, ".widget-label").text.strip() == "k")
        handle = slider.find_element(By.CSS_SELECTOR, ".noUi-handle")
        handle.click()
        handle.send_keys(Keys.ARROW_RIGHT)  # k: 2 → 3
        after = wait_text(browser, readout, "k=3, n=1", timeout=60)
        assert before != after
        moved = text(browser, ".widget-vbox .widget-html")
        assert re.search(r"[\d.]+% of word occurrences", moved) and moved != share  # the share itself changed


def test_notebook_05_three_judgements_survive_a_reload(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    root, server = _lab(tmp_path)
    work = tmp_path / "work05"
    path = _notebook_copy(root, "05_vocabulary_scrubbing", {
        "corpus_path": str(ROOT / "data_samples" / "clinical" / "notes.jsonl"), "n_documents": 40,
        "pretrain_epochs": 1, "n_seen": 12, "n_unseen": 12, "scripted_review": None, "reviewer": "tester",
        "medroberta_sentences": str(ROOT / "data_external" / "medroberta_anonymization_testset.csv"),
        "work_dir": str(work)})

    def review_cell(d):
        # textContent, not the rendered text: Lab renders cells out of view lazily (content-visibility)
        return next((c for c in d.find_elements(By.CSS_SELECTOR, ".jp-CodeCell")
                     if "widget.widget" in (c.find_element(By.CSS_SELECTOR, ".jp-InputArea")
                                            .get_attribute("textContent") or "")), False)

    def run_review_cell():
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        cell = WebDriverWait(browser, 120, poll_frequency=0.5, ignored_exceptions=(
            StaleElementReferenceException, NoSuchElementException)).until(review_cell)  # the notebook's cells load
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
        cell.find_element(By.CSS_SELECTOR, ".jp-InputPrompt").click()  # select it (command mode)
        return cell

    browser.set_page_load_timeout(240)  # Lab with a notebook's outputs, on a loaded machine
    with server as base:
        _open(browser, base, path)
        cell = run_review_cell()
        lab_command(browser, "Run", "Run All Above Selected Cell")  # every cell before the review, then the review
        cell = run_review_cell()
        ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
        progress = wait_text(browser, ".review-progress", " decided", timeout=300)
        total = int(re.search(r"0 / (\d+) decided", progress).group(1))
        for button in ("button.review-name", "button.review-not-name", "button.review-unsure"):
            done = int(re.search(r"(\d+) / ", text(browser, ".review-progress")).group(1))
            click(browser, button)
            wait_text(browser, ".review-progress", f"{done + 1} / {total} decided")
        review = work / "review.jsonl"
        records = [json.loads(line) for line in review.read_text(encoding="utf-8").splitlines()]
        assert [r["decision"] for r in records] == ["name", "not_name", "unsure"]
        assert {r["reviewer"] for r in records} == {"tester"}

        _open(browser, base, path)  # the page loaded again; the review cell run again: a new session replays the file
        cell = run_review_cell()
        ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
        wait_text(browser, ".review-progress", f"3 / {total} decided", timeout=120)
        shown = {t.get_attribute("data-token"): t.find_element(By.CSS_SELECTOR, ".review-row-decision")
                 .get_attribute("textContent") for t in cell.find_elements(By.CSS_SELECTOR, ".review-table tr[data-token]")}
        assert [shown[r["token"]] for r in records] == ["name", "not a name", "unsure"]
        assert len(review.read_text(encoding="utf-8").splitlines()) == 3  # replaying wrote nothing
