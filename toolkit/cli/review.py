"""The vocabulary review app: ``review`` serves ``apps/review.ipynb`` with Voilà on this machine, behind a token."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from toolkit.errors import ToolkitError

TITLE = "review"
APP = Path(__file__).resolve().parents[2] / "apps" / "review.ipynb"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc: subprocess.Popen, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ToolkitError(f"voila exited with status {proc.returncode} before serving on port {port} "
                               "(is the port in use?)")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise ToolkitError(f"voila did not start serving on port {port} within {timeout:.0f} s") from None
            time.sleep(0.2)


def cmd_review(args: argparse.Namespace) -> int:
    from urllib.parse import quote

    from toolkit.review.widget import review_file_for
    from toolkit.scrub.candidates import load_candidates

    cand = Path(args.candidates).resolve()
    load_candidates(cand)  # a missing or unreadable table fails here, with its message, before a server starts
    if not APP.is_file():
        raise ToolkitError(f"{APP}: the review app is not there (it ships with the repository, not the package)")
    reviewer = (args.reviewer or "").strip()
    port = args.port or _free_port()
    token = secrets.token_hex(24)  # as Jupyter's; passed in the environment, never on a command line others can see
    env = {**os.environ, "REVIEW_CANDIDATES": str(cand), "JUPYTER_TOKEN": token}
    env.pop("REVIEWER", None)
    if reviewer:
        env["REVIEWER"] = reviewer  # fixed: the page address cannot name another reviewer
    proc = subprocess.Popen([sys.executable, "-m", "voila", str(APP), "--no-browser", f"--port={port}",
                             "--Voila.ip=127.0.0.1", "--token"], env=env)
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # stop Voilà with us
    try:
        _wait_listening(proc, port, args.timeout)
        url = f"http://127.0.0.1:{port}/?token={token}" + (f"&reviewer={quote(reviewer)}" if reviewer else "")
        print(f"review app (only this machine; the token is printed once, keep it to yourself):\n  {url}", flush=True)
        if reviewer:
            print(f"decisions of {reviewer!r} go to {review_file_for(cand, reviewer)}", flush=True)
        else:
            print("each reviewer adds &reviewer=THEIR_NAME to the address: one file per name, beside the candidates",
                  flush=True)
        print("Ctrl-C stops the app; decisions are saved as they are made.", flush=True)
        return proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def register(sub) -> None:
    s = sub.add_parser("review", help="serve the vocabulary review app (Voilà) on this machine, with a token",
                       description="Start the review app (apps/review.ipynb) on 127.0.0.1 behind a random token, "
                                   "printed once: requests without it are refused. Each reviewer's decisions go to "
                                   "their own file beside CANDIDATES (review-NAME-DIGEST.jsonl).")
    s.add_argument("candidates", metavar="CANDIDATES", help="candidate table (`candidates` output, .parquet)")
    s.add_argument("--reviewer", help="the reviewer this app is for (fixed; default: ?reviewer=NAME of the page "
                                      "address)")
    s.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    s.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for Voilà to start (default 120)")
    s.set_defaults(func=cmd_review)
