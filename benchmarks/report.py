"""Report size and build time: plotly.js inlined once in the page head (the toolkit) vs plotly's default
``fig.to_html(include_plotlyjs=True)`` per figure (the bundle repeated in every figure), same run, same figures.

    python benchmarks/report.py RUN_DIR [RUN_DIR ...]        # e.g. runs/quickstart (make quickstart)

Prints the two sizes and build times and their ratios. Both files are self-contained and offline; the per-figure one
repeats the ~4.7 MB bundle for every figure.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from unittest import mock


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+")
    args = ap.parse_args()

    from toolkit.report import build_report, sections

    out = Path(tempfile.mkdtemp(prefix="report-bench-"))
    t0 = time.perf_counter()
    once = build_report(args.run_dirs, out / "once.html")
    t_once = time.perf_counter() - t0

    def per_figure(fig):
        fig.update_layout(height=fig.layout.height or 430, margin=dict(t=60, l=60, r=20, b=50))
        return fig.to_html(full_html=False, include_plotlyjs=True, config={"displaylogo": False})

    with mock.patch.object(sections, "figure", per_figure), \
            mock.patch("plotly.offline.get_plotlyjs", return_value=""):  # no bundle in the head
        t0 = time.perf_counter()
        each = build_report(args.run_dirs, out / "per_figure.html")
        t_each = time.perf_counter() - t0
    n_fig = once.read_text(encoding="utf-8").count("Plotly.newPlot")
    s_once, s_each = once.stat().st_size, each.stat().st_size
    print(f"{n_fig} figures")
    print(f"toolkit (plotly.js inlined once): {s_once / 1e6:7.1f} MB  {t_once:5.1f} s")
    print(f"plotly default (bundle per figure): {s_each / 1e6:5.1f} MB  {t_each:5.1f} s")
    print(f"ratio: {s_each / s_once:.1f}x the size, {t_each / t_once:.2f}x the time")


if __name__ == "__main__":
    main()
