"""Build the self-contained HTML audit report (``python -m toolkit report``) from finished run directories.

One HTML file, readable offline: the plotly.js bundle is inlined once in the page head and every figure is a
``<div>`` drawn by it (no CDN, no external file). Sections per run: corpus and identifier statistics (SPEC §2),
strategies compared (§3), privacy–utility trade-off (§4), membership inference ROC and TPR@FPR (§5),
regurgitation (§4), e-mail extraction with MaxTER/AURC (§6) and the vocabulary review and anonymity test (§7) when
present, the manifest; then a plain-language reading of what the figures show and do not show, with the EDPB
framing of paper 000 §6.

Raw identifiers never appear unless ``show_identifiers=True``: identifier types, leaked e-mail addresses and
reviewed vocabulary tokens are counted, or shown as ``hash_term`` (first 12 hex digits of the SHA-256 of the
normalised word); person ids, document text and review contexts are never shown.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.io import atomic_write_text
from toolkit.plots import runs as figures
from toolkit.report.collect import RunData, collect_run

SECTIONS = [("corpus", "Corpus and identifier statistics"), ("strategies", "Strategies compared"),
            ("tradeoff", "Privacy–utility trade-off"), ("mia", "Membership inference: ROC and TPR at fixed FPR"),
            ("regurgitation", "Regurgitation"), ("extraction", "E-mail extraction, MaxTER and AURC"),
            ("vocabulary", "Vocabulary review and anonymity test"), ("manifest", "Manifest")]


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}f}"
    return str(v)


def _fmt_lr(v: Any) -> str:
    """A learning rate as written in the config (0.002, 2e-05), not rounded to a fixed number of decimals."""
    return f"{float(v):g}" if isinstance(v, (int, float, np.integer, np.floating)) else _fmt(v)


def _int(v: Any) -> Any:
    return int(round(float(v))) if isinstance(v, (int, float, np.integer, np.floating)) and not math.isnan(v) else v


def _pct(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * float(v):.{digits}f}%"


def _table(frame: pd.DataFrame, *, index: bool = True, digits: int = 3) -> str:
    fmt = {c: (lambda x, d=digits: _fmt(x, d)) for c in frame.columns}
    return frame.to_html(classes="tbl", border=0, escape=True, index=index, na_rep="n/a", formatters=fmt)


def _figure(fig) -> str:
    fig.update_layout(height=fig.layout.height or 430, margin=dict(t=60, l=60, r=20, b=50))
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})


class _Ids:
    """How identifiers are written: hashed (default) or in clear (``--show-identifiers``)."""

    def __init__(self, show: bool):
        self.show = show

    def __call__(self, term: Any) -> str:
        from toolkit.audit.probe_causal import hash_term
        from toolkit.identifiers.words import normalize_term

        t = str(term)
        return t if self.show else hash_term(normalize_term(t))

    @property
    def column(self) -> str:
        return "identifier" if self.show else "identifier (SHA-256, 12 hex)"


# ---------------------------------------------------------------------------------------------------------------------
# sections


def _block(kind: str, body: Any, caption: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "body": body, "caption": caption}


def _corpus_section(run: RunData) -> list[dict]:
    from toolkit import plots

    if not run.ids_summary:
        return [_block("absent", "No identifier analysis in this run (identifiers_members/ missing).")]
    rows = {"documents": "n_documents", "individuals": "n_individuals", "words": "n_words",
            "distinct words": "n_distinct_words", "direct-identifier positions": "n_direct_positions",
            "indirect-identifier positions": "n_indirect_positions", "protected positions": "n_protected_positions",
            "share of positions protected": "share_protected_positions", "|I_direct| (direct identifier types)":
            "n_I_direct", "|I_indirect| (indirect identifier types)": "n_I_indirect",
            "share of distinct words used by fewer than k individuals": "share_distinct_words_below_k",
            "share of word occurrences they make up": "share_occurrences_below_k"}
    names = {"members": "members (fine-tuning data)", "all": "members + non-members (attack graph)"}
    table = pd.DataFrame({names[p]: {label: _fmt(s.get(key)) if not key.startswith("share") else _pct(s.get(key))
                                     for label, key in rows.items()} for p, s in run.ids_summary.items()})
    cfg = next(iter(run.ids_summary.values())).get("config", {})
    blocks = [_block("p", f"Identifiers as SPEC §2 defines them: direct identifiers are words inside PII spans from "
                          f"the '{cfg.get('detector', '?')}' detector; indirect identifiers are terms (word m-grams, "
                          f"m ≤ n = {cfg.get('n', '?')}) used by fewer than k = {cfg.get('k', '?')} individuals. "
                          "Only counts are shown."),
              _block("table", _table(table))]
    by_cat = (run.ids_summary.get("members") or {}).get("direct_positions_by_category") or {}
    if by_cat:
        blocks.append(_block("table", _table(pd.Series(by_cat, name="direct-identifier positions")
                                             .rename_axis("PII category").to_frame()),
                             "Direct-identifier positions of the members' documents by PII category."))
    if run.individuals is not None and len(run.individuals):
        blocks.append(_block("figure", _figure(plots.identifier_cdfs(run.individuals)),
                             "Per individual (members): how many words, direct and indirect identifier types they "
                             "have (000 Fig. 2)."))
    if run.terms is not None and len(run.terms):
        blocks.append(_block("figure", _figure(plots.term_sharing_cdf(run.terms, n=1, k=cfg.get("k"))),
                             "How many individuals share each word, over distinct words and over occurrences "
                             "(000 Fig. 3): most distinct words belong to one individual but make up few "
                             "occurrences."))
    return blocks


def _strategies_section(run: RunData) -> list[dict]:
    from toolkit.strategies import STRATEGIES

    strategies = run.strategies or list(run.train_runs)
    if not strategies:
        return [_block("absent", "No fine-tuned strategy in this run.")]
    rows = {}
    for s in strategies:
        info = run.train_runs.get(s, {})
        cfg = info.get("config") or {}
        rows[s] = {"what it does": STRATEGIES[s].description if s in STRATEGIES else "",
                   "checkpoint epochs audited": ", ".join(map(str, run.epochs(s))) or "none",
                   "batch": _fmt(cfg.get("batch_size")), "learning rate": _fmt_lr(cfg.get("learning_rate")),
                   "training s": _fmt(info.get("seconds"), 1), "tokens/s": _fmt(_int(info.get("tokens_per_second"))),
                   "spent ε (DP)": _fmt((info.get("dp") or {}).get("spent_epsilon"))
                   if STRATEGIES.get(s) is not None and STRATEGIES[s].dp else "not DP"}
    frame = pd.DataFrame(rows).T.rename_axis("strategy")
    return [_block("p", "Every strategy shares one trainer, data pipeline and schedule; only the training text or "
                        "the words allowed as prediction targets differ (SPEC §3)."),
            _block("table", _table(frame))]


def _results(run: RunData) -> pd.DataFrame | None:
    from toolkit.pipelines.steps import results_table

    if not run.audits:
        return None
    order = {s: i for i, s in enumerate(["base", *run.strategies])}
    res = results_table(run.audits)
    return res.sort_values(["strategy", "epoch"], key=lambda c: c.map(order) if c.name == "strategy" else c,
                           kind="stable").reset_index(drop=True)


def _tradeoff_section(run: RunData, results: pd.DataFrame | None) -> list[dict]:
    from toolkit import plots

    if results is None:
        return [_block("absent", "No audit results in this run (audit/ missing).")]
    blocks = [_block("p", "Utility = accuracy of the model's predictions on ordinary (non-protected) words of the "
                          "training documents; privacy = 1 − share of identifier types the model predicts anywhere "
                          "when every word is probed once (SPEC §4). Novel privacy counts only identifiers absent "
                          "from the base model's own training data. Epoch 0 is the base model before fine-tuning."),
              _block("table", _table(results, index=False))]
    points = results[results["strategy"] != "base"]
    if len(points):
        blocks.append(_block("figure", _figure(plots.privacy_utility(points)),
                             "One line per strategy, a point per checkpoint (label: epoch); up and right is "
                             "better (000 Fig. 4)."))
        blocks.append(_block("figure", _figure(plots.privacy_variants(points)),
                             "Privacy over all identifiers, direct identifiers only, indirect identifiers only "
                             "(000 Fig. 7, 001 Fig. 12–13)."))
    return blocks


def _mia_section(run: RunData) -> list[dict]:
    from toolkit import plots

    reports = {}
    if ("base", 0) in run.audits:
        reports["base (epoch 0)"] = run.audits[("base", 0)]["roc"]
    for s in run.strategies:
        e, a = run.last(s)
        reports[f"{s} (epoch {e})"] = a["roc"]
    if not reports:
        return [_block("absent", "No membership inference results in this run.")]
    any_roc = next(iter(reports.values()))
    n_non = any_roc.get("n_nonmembers")
    blocks = [_block("p", "The attacker knows the training data (the auditor's position, 000 §3). For each "
                          "individual it counts how many of their indirect identifiers the model predicts on their "
                          "own documents; members (trained on) should not score higher than non-members (held "
                          f"out). Members: {_fmt(any_roc.get('n_members'))}, non-members: {_fmt(n_non)}."),
              _block("figure", _figure(plots.roc_curves(reports)),
                     "ROC of the count-based attack at each strategy's last checkpoint, log-log axes; the dashed "
                     "line is chance (000 Fig. 6)."),
              _block("table", _table(plots.tpr_table(reports, with_ci=True)),
                     "True-positive rate at fixed false-positive rates, with 95% bootstrap intervals (000 Table 2). "
                     + (f"n/r: an FPR below 1/{n_non} cannot be resolved with {n_non} non-members." if n_non else ""))]
    return blocks


def _regurgitation_section(run: RunData, ids: _Ids) -> list[dict]:
    from toolkit import plots
    from toolkit.audit.evaluate import identifier_sets, regurgitation

    blocks: list[dict] = []
    ids_train = run.identifiers("members")
    if ids_train is not None and run.audits:
        members = set(ids_train["individuals"]["person_id"].astype(str))
        cats = identifier_sets(ids_train)["categories"]
        tables, leaked_rows, by_cat = {}, [], {}
        targets = ([("base", 0)] if ("base", 0) in run.audits else []) + \
                  [(s, run.last(s)[0]) for s in run.strategies]
        for s, e in targets:
            preds = run.predictions(s, e)
            if preds is None:
                continue
            t = regurgitation(preds[preds["person_id"].astype(str).isin(members)], ids_train)
            name = "base" if s == "base" else f"{s} (epoch {e})"
            tables[name] = t
            leaked = t[t["n_predicted"] > 0]
            for r in leaked.head(15).itertuples():
                leaked_rows.append({"model": name, ids.column: ids(r.term), "category": cats.get(r.term, "?"),
                                    "training occurrences": int(r.train_frequency),
                                    "times predicted": int(r.n_predicted),
                                    "at its own position": int(r.n_predicted_correct)})
            by_cat[name] = {c: v["n_leaked"] for c, v in (run.audits[(s, e)]["metrics"].get("leaked_by_category")
                                                          or {}).items()}
        if tables:
            blocks.append(_block("p", "Teacher-forced / fill-mask regurgitation (SPEC §4, 000 Fig. 5): how often "
                                      "each leaked identifier type was predicted, against how often it occurs in the "
                                      "training data. A curve that rises late means the regurgitated identifiers "
                                      "are the frequently repeated ones."))
            blocks.append(_block("figure", _figure(plots.regurgitation_cdf(tables))))
            if by_cat:
                blocks.append(_block("table", _table(pd.DataFrame(by_cat).fillna(0).astype(int)
                                                     .rename_axis("category")),
                                     "Leaked identifier types by category (counts)."))
            if leaked_rows:
                blocks.append(_block("table", _table(pd.DataFrame(leaked_rows), index=False),
                                     "The most often predicted leaked identifier types (up to 15 per model)"
                                     + ("." if ids.show else ", hashed.")))
    if run.regurgitation:
        rows = {}
        for name, r in run.regurgitation.items():
            rows[name if r.get("epoch") is None else f"{name} (epoch {r['epoch']})"] = {
                "documents prompted": r.get("n_prompted"), "later identifiers": r.get("n_identifier_occurrences"),
                "reproduced": r.get("n_reproduced"), "share reproduced": _pct(r.get("share_reproduced")),
                "prompt tokens": r.get("prefix_tokens"), "new tokens": r.get("max_new_tokens"),
                "examples (hashed)": ", ".join(r.get("examples_hashed") or [])}
        blocks.append(_block("p", "Free-running regurgitation (causal LM): the model continues the first tokens of "
                                  "each member note greedily; the share of the note's later identifiers it writes "
                                  "out verbatim (identifiers already in the prompt are not counted)."))
        blocks.append(_block("table", _table(pd.DataFrame(rows).T.rename_axis("model"))))
    return blocks or [_block("absent", "No regurgitation results in this run.")]


def _leaked_cols(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.lower().startswith("leaked")]


def _as_list(v: Any) -> list[str]:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return []
    if isinstance(v, str):
        return [x for x in v.split(";") if x]
    try:
        return [str(x) for x in list(v)]
    except TypeError:
        return [str(v)]


def _extraction_section(run: RunData, ids: _Ids) -> list[dict]:
    blocks: list[dict] = []
    ex = run.extraction
    if ex is not None and len(ex):
        blocks.append(_block("p", "E-mail extraction (SPEC §6, paper 002): prompts from the training data are "
                                  "continued greedily and the addresses written out are matched against the "
                                  "training set. TER = leaked / all training addresses; SER = leaked / addresses "
                                  "seen up to the checkpoint (both in %)."))
        blocks.append(_block("figure", _figure(figures.extraction_figure(ex))))
        show = ex.drop(columns=_leaked_cols(ex)).copy()
        for c in _leaked_cols(ex):
            show[f"{c} ({'in clear' if ids.show else 'hashed'}, first 5)"] = ex[c].map(_as_list).map(
                lambda xs: ", ".join(ids(x) for x in xs[:5]))
        blocks.append(_block("table", _table(show, index=False)))
    aurc = figures.aurc_by_group(run.aurc)
    mx = run.maxter
    if mx is not None and len(mx):
        fig = figures.maxter_figure(mx, aurc)
        if fig is not None:
            blocks.append(_block("figure", _figure(fig),
                                 "MaxTER_t(τ) = the largest TER drop over checkpoints whose held-out perplexity "
                                 "rose by at most τ% (gaps: infeasible, no checkpoint qualifies); AURC = area under "
                                 "the curve in %² (SPEC §6)."))
        else:
            blocks.append(_block("table", _table(mx, index=False)))
    if run.aurc:
        rows = [{"source": item["source"], "key": k, "value": v} for item in run.aurc for k, v in _flatten(item["data"])]
        if rows:
            blocks.append(_block("table", _table(pd.DataFrame(rows), index=False), "AURC and its settings (SPEC §6)."))
    return blocks or [_block("absent", "No e-mail extraction results in this run (no extraction.parquet, "
                                       "maxter.parquet or aurc.json).")]


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(obj, (int, float)) or obj is None:
        return [(prefix or "value", obj)]
    return []  # lists / strings: not summary numbers


def _vocabulary_section(run: RunData, ids: _Ids) -> list[dict]:
    blocks: list[dict] = []
    if run.reviews:
        blocks.append(_block("p", "Vocabulary scrubbing (SPEC §7, paper 003): the tokens a model predicts for a masked "
                                  "name were judged by a person (name / not a name / unsure); tokens judged names are "
                                  "renamed in the vocabulary so that the model can never write them. Each decision "
                                  "is logged with reviewer and time; the sentence contexts are never shown here."))
        rows, names = {}, set()
        for i, log in enumerate(run.reviews, 1):
            rec, cur = log["records"], log["current"]
            counts = cur["decision"].astype(str).value_counts() if len(cur) else pd.Series(dtype=int)
            row = {"decisions logged": len(rec), "undone": int((rec["decision"] == "undo").sum()),
                   "tokens decided": len(cur)}
            for d in ("name", "not_name", "unsure"):
                row[f"now {d}"] = int(counts.get(d, 0))
            if "reviewer" in rec.columns:
                row["reviewers"] = int(rec["reviewer"].nunique())
            if "session" in rec.columns:
                row["sessions"] = int(rec["session"].nunique())
            if "timestamp" in rec.columns and len(rec):
                ts = rec["timestamp"].astype(str).sort_values()
                row["first decision"], row["last decision"] = ts.iloc[0], ts.iloc[-1]
            vcol = next((c for c in ("format_version", "version") if c in rec.columns), None)
            if vcol:
                row["format version"] = ", ".join(sorted(map(str, rec[vcol].dropna().unique())))
            folder = str(Path(log["file"]).parent)
            rows[f"log {i}" + ("" if folder in ("", ".") else f" ({folder})")] = {k: _fmt(v) for k, v in row.items()}
            if len(cur):
                names |= set(cur.loc[cur["decision"].astype(str) == "name", "token"].astype(str))
        blocks.append(_block("table", _table(pd.DataFrame(rows).rename_axis("review log")),
                             "One column per review log file (file and reviewer names are not shown, only their number)."))
        if names:
            shown = sorted({ids(t) for t in names})  # case variants of one word hash alike: listed once
            blocks.append(_block("p", f"Tokens judged names by at least one reviewer: {len(names)}"
                                      + (" (in clear" if ids.show else " (hashed") + ", first 40): "
                                      + ", ".join(shown[:40])))
    for item in run.anonymity:
        a = item["data"]
        known = {"n_predictions": "predictions", "n_name_like": "name-like predictions",
                 "share_name_like": "share name-like", "best_rank": "best rank of a name",
                 "n_sentences": "test sentences", "n_sentences_with_name": "sentences with a name among the predictions",
                 "n_original_name_predicted": "sentences whose original name was predicted",
                 "n_scrubbed_predicted": "predictions of scrubbed tokens"}
        rows = {label: (_pct(a[k], 2) if k.startswith("share") else _fmt(a[k])) for k, label in known.items()
                if k in a}
        for k, v in a.items():
            if k in known or isinstance(v, bool):
                continue
            if isinstance(v, (int, float)) or v is None and k.startswith("n_"):
                rows[k] = _fmt(v)
            elif isinstance(v, dict) and k.endswith("_by_source"):
                for src, x in v.items():
                    if isinstance(x, (int, float)) or x is None:
                        rows[f"{k[:-len('_by_source')]} ({src})"] = _fmt(x)
        blocks.append(_block("p", f"Anonymity test ({item['source']}, SPEC §7.6): the top predictions for masked names "
                                  "in test sentences disjoint from the reviewed ones; paper 003 found 8 of 4,000 "
                                  "predictions name-like (0.2%)."))
        blocks.append(_block("table", _table(pd.Series(rows, name="").to_frame())))
    return blocks or [_block("absent", "No vocabulary review log or anonymity test in this run.")]


def _manifest_section(run: RunData) -> list[dict]:
    m = run.manifest
    if not m:
        return [_block("absent", "No manifest.json in this directory (a notebook work directory): the package "
                                 "versions and parameters are in the executed notebook.")]
    env = m.get("environment") or {}
    git = env.get("git") or {}
    hw = env.get("hardware") or {}
    facts = {"experiment": m.get("name"), "status": m.get("status"), "started": m.get("started"),
             "finished": m.get("finished"), "total seconds (this invocation)": m.get("total_seconds"),
             "config file": m.get("config_file"), "config SHA-256": (m.get("config_sha256") or "")[:16],
             "git commit": (git.get("commit") or "n/a")[:12] + (" (uncommitted changes)" if git.get("dirty") else ""),
             "python": env.get("python"), "hardware": f"{hw.get('cpu_count')} CPUs, "
             + (", ".join(hw.get("gpus") or []) or "no GPU") + f", {hw.get('world_size', 1)} process(es)",
             "seeds": ", ".join(f"{k} {v}" for k, v in (m.get("seeds") or {}).items() if v is not None)}
    blocks = [_block("table", _table(pd.Series({k: _fmt(v) for k, v in facts.items()}, name="").to_frame()))]
    pk = {k: v for k, v in (env.get("packages") or {}).items() if v}
    if pk:
        blocks.append(_block("table", _table(pd.Series(pk, name="version").rename_axis("package").to_frame()),
                             "Package versions."))
    ds = m.get("datasets") or {}
    rows = {}
    for role, f in ds.items():
        if role == "corpus_files":
            for i, cf in enumerate(f):
                rows[f"corpus file {i + 1}"] = {"documents": "—", "individuals": "—", "bytes": _fmt(cf.get("bytes")),
                                                "SHA-256 (16 hex)": cf.get("sha256", "")[:16]}
        elif isinstance(f, dict):
            rows[role] = {"documents": _fmt(f.get("n_documents")), "individuals": _fmt(f.get("n_individuals")), "bytes": "—",
                          "SHA-256 (16 hex)": f.get("sha256", "")[:16]}
    if rows:
        blocks.append(_block("table", _table(pd.DataFrame(rows).T.rename_axis("data")),
                             "Dataset fingerprints: SHA-256 over document ids and texts (never the text itself)."))
    steps = pd.DataFrame(m.get("steps") or [])
    if len(steps):
        cols = [c for c in ("name", "status", "seconds", "original_seconds") if c in steps.columns]
        blocks.append(_block("table", _table(steps[cols], index=False),
                             "Steps of this invocation: ran, cached (up to date: output kept; original_seconds is "
                             "what it took when it ran) or external (a pre-trained base)."))
    blocks.append(_block("pre", json.dumps(m, indent=2, ensure_ascii=False), "Full manifest.json"))
    return blocks


# ---------------------------------------------------------------------------------------------------------------------
# plain-language text


def run_findings(run: RunData, results: pd.DataFrame | None) -> list[str]:
    """Plain-language sentences computed from a run's numbers (nothing written in advance)."""
    out = []
    s = run.ids_summary.get("members")
    if s:
        out.append(f"The fine-tuning data hold {_fmt(s.get('n_documents'))} documents about "
                   f"{_fmt(s.get('n_individuals'))} individuals ({_fmt(s.get('n_words'))} words) with "
                   f"{_fmt(s.get('n_I_direct'))} direct and {_fmt(s.get('n_I_indirect'))} indirect identifier types; "
                   f"{_pct(s.get('share_protected_positions'))} of the word positions are identifiers.")
    if results is not None and len(results):
        base = results[results["strategy"] == "base"]
        if len(base):
            b = base.iloc[0]
            if int(b["n_leaked"]):
                out.append(f"Before fine-tuning, the base model already predicts {int(b['n_leaked'])} identifier types "
                           f"(privacy {b['privacy']:.3f}): those come from its own training data, not from the "
                           "audited documents.")
            else:
                out.append("Before fine-tuning, the base model predicts none of these identifier types.")
        for strat in run.strategies:
            e, a = run.last(strat)
            m, r = a["metrics"], a["roc"]
            text = (f"{strat} after {e} epochs: privacy {m['privacy']:.3f} ({m['n_leaked']} of "
                    f"{m['n_identifiers']} identifier types predicted"
                    + (f"; novel identifiers {m['novel_privacy']:.3f}" if m.get("novel_privacy") is not None else "")
                    + f"), utility {m['utility']:.3f}; membership attack AUC {r['auc']:.2f}")
            ci = r.get("auc_ci")
            if ci:
                text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
                if ci[0] > 0.5:
                    text += ": members are told apart from non-members more often than chance"
                else:
                    text += ": not distinguishable from chance with this attack and this many individuals"
            tpr10 = (r.get("tpr_at_fpr") or {}).get("0.1")
            if tpr10 is not None:
                text += f"; at 10% false positives it finds {_pct(tpr10, 0)} of members"
            out.append(text + ".")
        last = {st: run.last(st)[1]["metrics"]["privacy"] for st in run.strategies}
        if len(last) > 1 and max(last.values()) == min(last.values()):
            out.append(f"At the last checkpoints every strategy has the same privacy ({max(last.values()):.3f}).")
        elif len(last) > 1:
            best, worst = max(last, key=last.get), min(last, key=last.get)
            out.append(f"At the last checkpoints, {best} keeps the most identifiers private ({last[best]:.3f}) and "
                       f"{worst} the fewest ({last[worst]:.3f}).")
    for name, r in run.regurgitation.items():
        if r.get("share_reproduced") is not None:
            out.append(f"Writing freely from the first tokens of each note, {name} reproduced {r['n_reproduced']} of "
                       f"{r['n_identifier_occurrences']} later identifiers ({_pct(r['share_reproduced'])}).")
    if run.extraction is not None and "ter" in run.extraction.columns and len(run.extraction):
        g = figures.group_column(run.extraction)
        parts = []
        for name, sub in run.extraction.groupby(g, sort=False):
            if "checkpoint" in sub.columns:
                sub = sub[sub["checkpoint"].astype(float) > 0].sort_values("checkpoint")
            if len(sub):
                last = sub.iloc[-1]
                parts.append(f"{str(name).rsplit('/', 1)[-1]} {float(last['ter']):.2f}%"
                             + (f" ({int(last['n_leaked'])} of {int(last['n_original'])} training addresses)"
                                if {"n_leaked", "n_original"} <= set(sub.columns) else ""))
        if parts:
            out.append("E-mail extraction, TER at the last checkpoint: " + "; ".join(parts) + ".")
    for item in run.aurc:
        rep = item["data"] or {}
        for name, a in (rep.get("aurc") or {}).items():
            t0 = (rep.get("infeasible_below") or {}).get(name)
            out.append(f"{name}: AURC {float(a):,.0f} %² over τ ≤ {rep.get('tau_max', float('nan')):g}% (the larger, the "
                       f"more extraction it removes for a given perplexity cost)"
                       + ("; no checkpoint within any τ" if t0 is None else
                          f"; no checkpoint costs less than {t0:.1f}% perplexity" if t0 > 0 else "") + ".")
    for item in run.anonymity:
        a = item["data"]
        if "n_name_like" in a and "n_predictions" in a:
            out.append(f"Anonymity test ({item['source']}): {a['n_name_like']} of {a['n_predictions']} predictions "
                       f"for masked names are name-like"
                       + (f" ({_pct(a.get('share_name_like'), 2)})" if a.get("share_name_like") is not None else "")
                       + (f"; an original name was predicted in {a['n_original_name_predicted']} sentences"
                          if a.get("n_original_name_predicted") is not None else "") + ".")
    return out


READING = [
    "What they show: how often this model, probed the way SPEC §4 describes, writes out the identifiers of the "
    "documents it was fine-tuned on (privacy), how well it predicts ordinary words (utility), whether a simple "
    "attacker who knows the data can tell the individuals it was trained on from others (membership inference), "
    "and — where present — how many training e-mail addresses targeted prompts extract and how many names remain "
    "predictable after vocabulary scrubbing.",
    "What they do not show: a privacy of 1.000 means that this probe never produced an identifier, not that no "
    "prompt, decoding method or stronger attack could. The membership attack is a low-cost one (counts of predicted "
    "indirect identifiers, no shadow models); an AUC near 0.5 is no proof that membership cannot be inferred "
    "otherwise. Confidence intervals are wide with few individuals, and a false-positive rate below one over the "
    "number of non-members cannot be measured at all (n/r).",
    "Identifiers are what the detector found (or the corpus' gold annotation) plus words rarer than k: an "
    "identifier missed by the detector is neither protected in training nor counted as a leak (paper 000 §7). "
    "The figures cover the fine-tuning documents only: a pre-trained base model may reproduce personal data from "
    "its own pre-training, which these audits do not measure (the base model's row and novel privacy separate what "
    "fine-tuning added). Synthetic sample data and tiny CPU models show the direction of the effects, not the "
    "papers' absolute values.",
]

EDPB = [
    "Paper 000 situates these audits in the European Data Protection Board's Opinion 28/2024 on AI models: a model "
    "trained on personal data cannot be considered anonymous in all cases, and the data controller has to show "
    "that the likelihood of extracting personal data from it — including through queries — is insignificant, "
    "taking into account all the means reasonably likely to be used. Paper 000 §3 takes the position of an "
    "auditor who knows the training data and checks that it is not regurgitated.",
    "Paper 000 §6 adds that fine-tuning with privacy-preserving strategies protects the fine-tuning data but does "
    "not by itself make the model anonymous when the foundation model was not anonymised: personal data learnt in "
    "pre-training may still be regurgitated, and the model remains subject to the conditions the EDPB sets for its "
    "re-use.",
    "This report is technical evidence for one part of such an assessment — measured leakage of the fine-tuning "
    "data under the stated probes and attacks. It is not a legal determination that a model is anonymous or that "
    "its use is lawful; that assessment belongs to the controller and, where relevant, the supervisory authority.",
]


# ---------------------------------------------------------------------------------------------------------------------
# assembly


def _run_context(run: RunData, i: int, ids: _Ids) -> dict[str, Any]:
    results = _results(run)
    builders = {"corpus": lambda: _corpus_section(run), "strategies": lambda: _strategies_section(run),
                "tradeoff": lambda: _tradeoff_section(run, results), "mia": lambda: _mia_section(run),
                "regurgitation": lambda: _regurgitation_section(run, ids),
                "extraction": lambda: _extraction_section(run, ids),
                "vocabulary": lambda: _vocabulary_section(run, ids), "manifest": lambda: _manifest_section(run)}
    sections = [{"id": sid, "title": title, "blocks": builders[sid]()} for sid, title in SECTIONS]
    kind_text = {"mlm": "masked LM (fill-mask probe)", "clm": "causal LM (teacher-forced next-word probe)"}
    return {"id": f"run{i + 1}", "label": run.label, "path": str(run.path), "kind": run.kind,
            "kind_text": kind_text.get(run.kind, run.kind), "description": (run.config or {}).get("description"),
            "sections": sections, "findings": run_findings(run, results)}


def render_report(runs: list[RunData], *, show_identifiers: bool = False, title: str | None = None) -> str:
    """The report's HTML for already collected runs."""
    import jinja2
    from plotly.offline import get_plotlyjs

    from toolkit.pipelines.manifest import package_versions
    from toolkit.report.template import TEMPLATE

    if not runs:
        raise ToolkitError("no run to report on")
    ids = _Ids(show_identifiers)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(TEMPLATE).render(
        title=title or "Language-model anonymity audit report", version=package_versions(["lm-anonymity-toolkit"])["lm-anonymity-toolkit"] or "",
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"), show_identifiers=show_identifiers,
        plotly_js=jinja2.utils.markupsafe.Markup(get_plotlyjs()),
        runs=[_run_context(r, i, ids) for i, r in enumerate(runs)], reading=READING, edpb=EDPB)


def build_report(run_dirs, out: str | Path, *, show_identifiers: bool = False, title: str | None = None,
                 labels: list[str] | None = None) -> Path:
    """Collect ``run_dirs`` (one path or several) and write the report to ``out`` atomically."""
    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs)
    runs = [collect_run(d, labels[i] if labels else None) for i, d in enumerate(dirs)]
    seen: dict[str, int] = {}
    for r in runs:  # distinct labels for the navigation
        seen[r.label] = seen.get(r.label, 0) + 1
        if seen[r.label] > 1:
            r.label = f"{r.label} ({seen[r.label]})"
    return atomic_write_text(render_report(runs, show_identifiers=show_identifiers, title=title), out)


__all__ = ["EDPB", "READING", "SECTIONS", "build_report", "render_report", "run_findings"]
