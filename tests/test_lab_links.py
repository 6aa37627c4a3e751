"""`make lab` serves a root from which the notebooks' output links resolve: notebook 00's report link
(``report_path``, relative to the notebook) is fetched from a Jupyter server started with the Makefile's own ``lab``
options, and answers 200 (issue: the link was dead when Lab served ``notebooks/`` only); and in a headless Chromium,
the link JupyterLab renders in the notebook's output is followed to the report."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from _browser import attr, browser, jupyter, needs_chromium, wait_text  # noqa: F401 (browser: a fixture)

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _lab_options() -> list[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = re.search(r"^lab:.*\n\t(.*)$", text, re.M).group(1)
    return [a.replace("$(CURDIR)", str(ROOT)) for a in line.split()[2:]]


def _parameter(notebook: Path, name: str) -> str:
    return re.search(rf'^{name} = "([^"]+)"', notebook.read_text(encoding="utf-8"), re.M).group(1)


def test_notebook_00_report_link_resolves_under_make_lab(tmp_path):
    nb = ROOT / "notebooks" / "00_quickstart.py"
    report = (nb.parent / _parameter(nb, "report_path")).resolve()
    options = _lab_options()
    root = Path(next(o.split("=", 1)[1] for o in options if o.startswith("--ServerApp.root_dir=")))
    assert report.is_relative_to(root), "the report link points outside what `make lab` serves"
    created = not report.exists()
    if created:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text("<html>report</html>", encoding="utf-8")
    try:
        with jupyter("server", [o for o in options if "LabApp" not in o] + ["--ServerApp.disable_check_xsrf=True"],
                     tmp_path / "server.log", start_within=60) as base:
            with urllib.request.urlopen(f"{base}/files/{report.relative_to(root).as_posix()}?token=t",
                                        timeout=30) as r:
                assert r.status == 200 and r.read()
    finally:
        if created:
            report.unlink()


@needs_chromium
def test_report_link_followed_in_jupyterlab(tmp_path, browser):
    """In a browser: notebook 00 opened in JupyterLab (the Makefile's ``lab`` options, on a copy of the layout),
    with the output its report cell writes; the rendered link is followed and the report page comes back (200)."""
    import json

    import nbformat
    from selenium.webdriver.support.ui import WebDriverWait

    root = tmp_path / "root"
    (root / "notebooks").mkdir(parents=True)
    nb_py = ROOT / "notebooks" / "00_quickstart.py"
    report = root / "notebooks" / _parameter(nb_py, "report_path")
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("<html><body><p id='r'>the privacy office's report</p></body></html>", encoding="utf-8")
    nb = nbformat.read(ROOT / "notebooks" / "00_quickstart.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "build_report(" in c.source)
    out = _parameter(nb_py, "report_path")  # build_report returns the path it was given: the cell links to it
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": f"Report: <a href='{out}' target='_blank'>{out}</a> (0.1 MB, opens offline)",
        "text/plain": "<IPython.core.display.HTML object>"})]
    nbformat.write(nb, root / "notebooks" / "00_quickstart.ipynb")
    options = [o for o in _lab_options() if not o.startswith("--ServerApp.root_dir=")]
    with jupyter("lab", [*options, f"--ServerApp.root_dir={root}"], tmp_path / "lab.log", start_within=60) as base:
        browser.get(f"{base}/lab/tree/notebooks/00_quickstart.ipynb?token=t")
        link = "a[href*='00_quickstart_report.html']"
        href = WebDriverWait(browser, 120, poll_frequency=0.5).until(
            lambda d: attr(d, f".jp-OutputArea {link}", "href"))
        with urllib.request.urlopen(href + ("&" if "?" in href else "?") + "token=t", timeout=30) as r:
            assert r.status == 200 and b"the privacy office's report" in r.read()
        browser.get(href)  # and in the browser session itself
        assert wait_text(browser, "#r", "report", timeout=30)
        assert json.loads(urllib.request.urlopen(f"{base}/api/status?token=t", timeout=5).read())
