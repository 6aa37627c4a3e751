"""Screenshots for the README (``make screenshots``): the report's top (the verdict), one of its figures, and the
review app, taken in headless Chromium (Debian's ``chromium`` + ``chromedriver``, as the browser tests use).

The report is built from a finished run (default: notebook 00's work directory, which ``make demo`` or
``make quickstart`` leaves in ``outputs/``); the review app is started on a small table of made-up candidate tokens.
Everything shown is synthetic sample data, identifiers hashed. Writes ``docs/screenshots/*.png``.

    python docs/make_screenshots.py [--run outputs/work/00_quickstart] [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars"]
TOKENS = ["okafor", "Bowers", "nurse", "lindqvist", "Mrs", "patient"]  # made-up candidates


def browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = str(CHROMIUM)
    for flag in FLAGS + [f"--window-size={width},{height}"]:
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)


def report_shots(run: Path, out: Path) -> list[Path]:
    from selenium.webdriver.common.by import By

    from toolkit.report import build_report

    with tempfile.TemporaryDirectory() as tmp:
        html = build_report(run, Path(tmp) / "report.html")
        driver = browser(1280, 1000)
        try:
            driver.get(html.as_uri())
            time.sleep(2)  # plotly draws the figures
            top = out / "report_top.png"
            driver.save_screenshot(str(top))
            fig = driver.find_elements(By.CSS_SELECTOR, ".figure")[0]
            driver.execute_script("arguments[0].scrollIntoView()", fig)
            time.sleep(1)
            figure = out / "report_figure.png"
            fig.screenshot(str(figure))
        finally:
            driver.quit()
    return [top, figure]


def review_shot(out: Path) -> Path:
    import pandas as pd
    from selenium.webdriver.support.ui import WebDriverWait

    from toolkit.scrub.candidates import save_candidates

    with tempfile.TemporaryDirectory() as tmp:
        cand = Path(tmp) / "candidates.parquet"
        rows = [{"token": t, "score": round(0.9 - 0.1 * i, 2), "n_sentences": 10 - i, "best_rank": i + 1,
                 "ner_share": 0.5, "capitalised": t[0].isupper(), "common_word": t in ("nurse", "patient"),
                 "examples": ["seen by nurse <mask>.", "plan d/w dr. <mask>, pt agrees."]} for i, t in enumerate(TOKENS)]
        save_candidates(pd.DataFrame(rows), cand)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = Path(tmp) / "review.out"
        env = {k: v for k, v in os.environ.items() if k not in ("REVIEW_FILE", "REVIEWER", "JUPYTER_TOKEN")}
        with open(log, "wb") as stdout:
            proc = subprocess.Popen([sys.executable, "-m", "toolkit", "review", str(cand), "--reviewer", "reviewer",
                                     f"--port={port}"], env=env, stdout=stdout, stderr=subprocess.DEVNULL, cwd=ROOT)
        driver = None
        try:
            deadline = time.monotonic() + 90
            while "token=" not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("make_screenshots: the review app did not start")
                time.sleep(0.2)
            url = next(w for w in log.read_text().split() if "token=" in w)
            driver = browser(1100, 900)
            driver.get(url)
            WebDriverWait(driver, 90).until(lambda d: "decided" in d.page_source and d.find_elements(
                "css selector", ".review-token"))
            time.sleep(1)
            shot = out / "review_app.png"
            driver.save_screenshot(str(shot))
        finally:
            if driver is not None:
                driver.quit()
            proc.terminate()
            proc.wait(timeout=10)
    return shot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default=str(ROOT / "outputs" / "work" / "00_quickstart"),
                    help="a finished run directory (default: notebook 00's, after make demo)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = ap.parse_args()
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        raise SystemExit("make_screenshots: needs Debian's chromium and chromium-driver (apt-get install chromium "
                         "chromium-driver)")
    run = Path(args.run)
    if not (run / "manifest.json").is_file():
        raise SystemExit(f"make_screenshots: {run} is not a finished run (no manifest.json): run `make demo` or "
                         "`python -m toolkit run configs/quickstart.yaml --out outputs/work/00_quickstart` first")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in report_shots(run, out) + [review_shot(out)]:
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
