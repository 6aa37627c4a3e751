"""Whole experiments and their reports: ``run`` (a YAML-configured experiment, cached steps), ``report`` (one
offline HTML file) and ``demo`` (the notebooks, headless)."""

from __future__ import annotations

import argparse
from pathlib import Path

from toolkit.cli.common import add_quiet

TITLE = "run & report"


def cmd_run(args: argparse.Namespace) -> int:
    from toolkit.config.experiment import load_experiment, parse_overrides
    from toolkit.pipelines.lm_experiment import results_lines, run_experiment
    from toolkit.threads import use_cores

    use_cores()  # every core (TOOLKIT_THREADS overrides); the manifest records the count in effect
    cfg = load_experiment(args.config, parse_overrides(args.set or []))
    out = Path(args.out) if args.out else Path("runs") / cfg.name
    result = run_experiment(cfg, out, progress=not args.quiet, echo=not args.quiet)
    if not result.main:  # another process of a multi-process launch: the main one prints
        return 0
    ran, cached = result.steps("ran"), result.steps("cached") + result.steps("prebuilt")
    print(f"{cfg.name}: {len(ran)} steps ran, {len(cached)} up to date; report: python -m toolkit report {out}")
    print("\n".join(results_lines(result)))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from toolkit.report import build_report

    out = args.out if args.out else Path(args.run_dirs[0]) / "report.html"
    out = build_report(args.run_dirs, out, show_identifiers=args.show_identifiers, title=args.title)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, self-contained)"
          + (" — it contains raw identifiers: handle it as personal data" if args.show_identifiers else ""))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from toolkit.pipelines.notebooks import read_demo_parameters, run_notebooks

    shipped: set[str] = set()
    only = args.only
    if args.workshop:  # the shipped results copied into the work folders first; those notebooks only read them
        from toolkit.pipelines.workshop import prepare_workshop

        plan = prepare_workshop(Path(args.notebooks), only=args.only, force=args.force, parameters=args.parameters)
        print("\n".join(plan.lines), flush=True)
        if not plan.run:
            return 1
        shipped, only, args.parameters = plan.shipped, plan.run, str(plan.parameters)
    own = read_demo_parameters(args.parameters) if args.parameters else None
    results = run_notebooks(Path(args.notebooks), Path(args.out), only=only, profile=args.profile,
                            per_notebook=own, require_cached=shipped)
    # a traceback in an executed copy fails the demo even where the notebook went on (a caught, printed error)
    return 0 if all(r.ok and not r.traceback for r in results) else 1


def register(sub) -> None:
    s = sub.add_parser("run", help="run a whole experiment from a YAML config (cached steps, manifest)",
                       description="Identifier analysis, training of every strategy and audits as CONFIG says "
                                   "(see configs/). Steps whose outputs are up to date are skipped; a changed "
                                   "parameter re-runs only the steps that depend on it. Writes RUN_DIR/manifest.json. "
                                   "Several GPUs: accelerate launch -m toolkit run CONFIG --out RUN_DIR.")
    s.add_argument("config", help="experiment YAML, or the name of one in configs/ (cpu_masked, cpu_causal, ...)")
    s.add_argument("--out", help="run directory (default runs/NAME)")
    s.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config value, e.g. --set training.epochs=[2,4] --set corpus.n_individuals=20")
    add_quiet(s, "no progress bars and no line per step: only the results table")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("report", help="self-contained offline HTML audit report of finished runs",
                       description="One HTML file (plots embedded, works offline) from one or more run directories "
                                   "(`run` outputs or notebook work directories). Identifiers are counted or hashed "
                                   "unless --show-identifiers.")
    s.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="run directories (`run` or notebook outputs); a `frontier` output directory adds the "
                        "privacy-utility frontier section")
    s.add_argument("--out", help="the HTML file to write (default: report.html in the first RUN_DIR)")
    s.add_argument("--show-identifiers", action="store_true",
                   help="print leaked identifiers, addresses and reviewed tokens in clear (the report is then "
                        "personal data)")
    s.add_argument("--title", help="report title")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("demo", help="run the notebooks headless (papermill) and write outputs/ with an HTML summary")
    s.add_argument("--notebooks", default="notebooks", help="folder of the notebooks (default notebooks)")
    s.add_argument("--out", default="outputs", help="folder for the executed notebooks and the summary "
                                                     "(default outputs)")
    s.add_argument("--only", nargs="*", help="notebook name prefixes to run (default: all)")
    s.add_argument("--profile", default="cpu", help="profile parameter passed to every notebook")
    s.add_argument("--parameters", metavar="YAML",
                   help="parameters per notebook over its defaults (make demo: notebooks/demo.yaml)")
    s.add_argument("--workshop", action="store_true",
                   help="workshop mode (make workshop): copy the shipped results (prebuilt/notebooks/) into the "
                        "notebooks' work folders first, run those notebooks with every step required cached, "
                        "parameters notebooks/workshop.yaml unless --parameters")
    s.add_argument("--force", action="store_true",
                   help="with --workshop: replace a work folder that holds another run's results")
    s.set_defaults(func=cmd_demo)
