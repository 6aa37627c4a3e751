"""The privacy–utility frontier: ``frontier`` (issue 27, :mod:`toolkit.pipelines.frontier`)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from toolkit.cli.common import add_quiet

TITLE = "privacy-utility"


def generated_corpus(out_dir: Path, n_members: int, n_public: int, seed: int) -> Path:
    """``OUT/corpus/notes.jsonl``: the sample generator's clinical notes of ``n_public`` public patients (the base
    model's pre-training data, then the public reserve held back from it, ``corpus.public_reserve``) and
    ``n_members`` patients in each of ``train`` (members) and ``heldout`` (non-members), written once per (sizes,
    seed, generator pools) and reused. Generated for exactly these splits:
    past a few thousand patients the generator's rare terms are made-up drug names (its deep reserve), so no
    patient more than needed is drawn. A corpus written before the deep reserve (``generated.json`` without
    ``"pools"``) is generated again: its members' terms were reused ones past ~1,800 patients."""
    from toolkit.io import atomic_write_json
    from toolkit.samples import generate_clinical
    from toolkit.samples.text import write_records

    folder = out_dir / "corpus"
    path, spec_path = folder / "notes.jsonl", folder / "generated.json"
    n = n_public + 2 * n_members
    splits = (("public", n_public / n), ("train", n_members / n), ("heldout", n_members / n))
    spec = {"generator": "toolkit.samples.generate_clinical", "pools": "deep-reserve", "n_individuals": n,
            "seed": seed,
            "splits": [[name, round(share * n)] for name, share in splits]}
    if path.is_file() and spec_path.is_file() and json.loads(spec_path.read_text(encoding="utf-8")) == spec:
        return path
    write_records(generate_clinical(n_individuals=n, seed=seed, splits=splits), path)
    atomic_write_json(spec, spec_path)
    return path


def _restricted(cfg, key: str, text: str, parse, shown, extra_ok=lambda chosen: True):
    """``cfg`` with its ``key`` (``sizes`` / ``epsilons``) restricted to the comma-separated ``text`` of the flag
    ``--key``: every value parsed by ``parse``, one of the config's, and ``extra_ok`` of the chosen; else a
    :class:`ToolkitError` naming the flag and the config's values (``shown`` writes them)."""
    import dataclasses

    from toolkit.errors import ToolkitError

    try:
        chosen = tuple(sorted({parse(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        chosen = ()
    if not chosen or set(chosen) - set(getattr(cfg, key)) or not extra_ok(chosen):
        raise ToolkitError(shown(text))
    return dataclasses.replace(cfg, **{key: chosen})


def with_sizes(cfg, sizes: str):
    """``cfg`` restricted to the comma-separated ``--sizes`` (each one of the config's sizes)."""
    return _restricted(cfg, "sizes", sizes, int,
                       lambda text: f"--sizes {text!r}: give sizes of {cfg.source} separated by commas "
                                    f"({', '.join(map(str, cfg.sizes))})")


def with_epsilons(cfg, epsilons: str):
    """``cfg`` restricted to the comma-separated ``--epsilons`` (each one of the config's; ``inf`` for ∞)."""
    return _restricted(cfg, "epsilons", epsilons, float,
                       lambda text: f"--epsilons {text!r}: give ε's of {cfg.source} separated by commas, inf among "
                                    f"them (the plain models every ratio divides by): "
                                    f"{', '.join('inf' if math.isinf(e) else f'{e:g}' for e in cfg.epsilons)}",
                       extra_ok=lambda chosen: any(math.isinf(e) for e in chosen))


def _cell(value, spec: str, unit: str = "") -> str:
    """A figure of the summary lines, "-" where missing (None or nan)."""
    return "-" if value is None or value != value else f"{value:{spec}}{unit}"


def with_bases(cfg, bases: str):
    """``cfg`` restricted to the comma-separated ``--bases`` (each one of the config's ``bases``)."""
    from toolkit.errors import ToolkitError

    if not cfg.bases:
        raise ToolkitError(f"--bases {bases!r}: {cfg.source} has no bases (the public split's sizes of the base)")
    return _restricted(cfg, "bases", bases, int,
                       lambda text: f"--bases {text!r}: give bases of {cfg.source} separated by commas "
                                    f"({', '.join(map(str, cfg.bases))})")


def cmd_frontier(args: argparse.Namespace) -> int:
    from toolkit.pipelines.frontier import base_dir_name, load_frontier, with_base
    from toolkit.results.frontier import bases_table, save_bases_table
    from toolkit.threads import use_cores

    use_cores()
    full = load_frontier(args.config)
    cfg = with_sizes(full, args.sizes) if args.sizes else full
    cfg = with_epsilons(cfg, args.epsilons) if args.epsilons else cfg
    cfg = with_bases(cfg, args.bases) if args.bases else cfg
    out = Path(args.out) if args.out else Path("runs") / cfg.name
    corpus = cfg.corpus_path
    if corpus is None and not args.table_only:  # members and non-members of the largest size, and the public split
        template = cfg.experiment.get("corpus") or {}
        n_public = max(full.bases) if full.bases else int(template.get("n_public") or max(full.sizes))
        # the public reserve (corpus.public_reserve): public patients after the base's, held back from it
        start = max(n_public, int(template.get("public_reserve_start") or 0))  # the reserve's first patient
        corpus = generated_corpus(out, max(full.sizes), start + int(template.get("public_reserve") or 0),
                                  int(cfg.generate_seed or 0))
    if not cfg.bases:
        _one_frontier(cfg, out, corpus, args)
        return 0
    tables = {}
    for n_public in cfg.bases:  # one whole frontier per base strength, from the same corpus
        print(f"base pre-trained on {n_public} public patients: {out / base_dir_name(n_public)}")
        tables[n_public] = _one_frontier(with_base(cfg, n_public), out / base_dir_name(n_public), corpus, args).table
    table = bases_table(tables, cfg.plain)
    save_bases_table(table, out)
    print(f"bases side by side: {out / 'bases.csv'}, bases.json")
    for r in table.itertuples(index=False):
        best = "-" if r.best_private is None else \
            f"{r.best_private} (ε={_cell(r.best_epsilon, 'g')}, {'green' if r.best_green else 'no green'})"
        gain = _cell(r.best_gain_retained, ".0%")
        gain = "undefined (plain did not beat the base significantly)" if gain == "-" and best != "-" else gain
        print(f"  base {r.n_public:>5}  size {r.size:>5}  base {_cell(r.base_heldout_utility, '.3f')}  plain "
              f"{_cell(r.plain_heldout_utility, '.3f')}  best private {best}: gain retained {gain}, "
              f"{_cell(r.best_vs_plain, '.2f', '×')} plain")
    return 0


def _one_frontier(cfg, out: Path, corpus, args):
    """Run (or, with ``--table-only``, collect) one frontier into ``out``, write its figure, print its lines."""
    from toolkit.pipelines.frontier import best_recipes, collect_frontier, run_frontier
    from toolkit.results.frontier import GAIN_GOAL
    from toolkit.plots.frontier import frontier_figure
    from toolkit.results.frontier import epsilon_text

    result = collect_frontier(cfg, out) if args.table_only else \
        run_frontier(cfg, out, corpus_path=corpus, progress=not args.quiet, echo=not args.quiet)
    fig = frontier_figure(result.table)
    fig.write_html(out / "frontier.html", include_plotlyjs=True)
    t = result.table
    print(f"{cfg.name}: {len(result.runs)} runs, {len(t)} models in {sum(result.seconds.values()):.0f} s; "
          f"wrote {out / 'frontier.csv'}, frontier.json, frontier.html")
    if not len(t) and ((cfg.experiment.get("audit") or {}).get("attacks") or {}).get("enabled") is False:
        print("  no model in the table: its rows are models with a verdict, and experiment.audit.attacks.enabled is "
              "false (each run's audit/<model>/metrics.json holds the model's utility)")
    for r in t.itertuples(index=False):
        eps = epsilon_text(r.epsilon)
        ratio, gain = _cell(r.heldout_utility_vs_plain, ".2f", "×"), _cell(r.heldout_gain_retained, ".0%")
        auc = _cell(r.attack_auc, ".3f")
        print(f"  {r.size:>6}  {r.strategy:<22} ε={eps:<4} held-out {ratio:<6} gain retained {gain:<5} AUC {auc:<6} "
              f"{r.verdict or '-'}")
    for size, best in best_recipes(t).items() if len(t) else ():
        kept = _cell(best["heldout_gain_retained"], ".1%") if best["gain_defined"] else "undefined"
        found = (f"green, reaches the goal of {GAIN_GOAL:.0%}" if best["found"] else
                 f"green, short of the goal of {GAIN_GOAL:.0%}" if best["verdict"] == "green" else
                 f"no green model (this one: {best['verdict']})")
        print(f"  best at {size}: {best['strategy']} (ε={best['epsilon']:g}): gain retained {kept}, {found}")
    searched = out / "hp_search.json"
    if cfg.hp_search is not None and searched.is_file():  # the DP runs' values, chosen on public individuals
        data = "public reserve" if (cfg.experiment.get("corpus") or {}).get("public_reserve") else "public split"
        for size, found in json.loads(searched.read_text(encoding="utf-8"))["sizes"].items():
            chosen = ", ".join(f"{n} {' '.join(f'{k}={v:g}' for k, v in r['chosen'].items())}"
                               for n, r in found.items())
            print(f"  hp_search at {size} ({data} only): {chosen}")
            for n, r in found.items():
                for k, side in (r.get("at_edge") or {}).items():
                    print(f"  hp_search at {size}: {n}'s {k} is the {side} of the grid — the best may lie beyond it")
    return result


def register(sub) -> None:
    s = sub.add_parser("frontier", help="the privacy-utility frontier: every strategy per corpus size and ε",
                       description="One experiment per corpus size and DP target ε from configs/frontier.yaml "
                                   "(cached, resumable); writes DIR/frontier.csv, frontier.json and frontier.html "
                                   "(held-out utility vs strongest membership attack).")
    s.add_argument("config", help="frontier YAML (configs/frontier.yaml)")
    s.add_argument("--out", help="output directory (default runs/NAME)")
    s.add_argument("--sizes", help="run only these of the config's sizes (comma-separated, e.g. 100); the corpus is "
                                   "still generated for the config's largest size, so the runs equal the full "
                                   "frontier's")
    s.add_argument("--epsilons", help="run only these of the config's ε (comma-separated, inf among them, e.g. "
                                      "8,inf): a slice of the frontier, when the whole does not fit the time")
    s.add_argument("--bases", help="with a config's bases: run only these base strengths (public patients the base "
                                   "is pre-trained on, comma-separated, e.g. 100,1000); each into OUT/base-N")
    s.add_argument("--table-only", action="store_true",
                   help="train nothing: write the table and figure of the models the runs in DIR have finished so "
                        "far (an interrupted or partial frontier)")
    add_quiet(s, "no progress bars and no line per step: only the table")
    s.set_defaults(func=cmd_frontier)
