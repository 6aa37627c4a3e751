"""The sections of the audit report (methods.md §2–§7), one function per section, each returning the blocks the template
draws (``{"kind": "p" | "h" | "table" | "figure" | "pre" | "absent", "body", "caption", "appendix"}``).

Sections per run: the attacks (:mod:`toolkit.report.attack_sections`), corpus and identifier statistics (methods.md §2),
the gold identifiers the detector missed (:mod:`toolkit.report.missed`, §2.1),
strategies compared (§3), privacy–utility trade-off (§4), membership inference by the papers' attack (§5),
regurgitation (§4), e-mail extraction with MaxTER/AURC (§6) and the vocabulary review and anonymity test (§7) when
present. Technical material goes to the appendix (:data:`APPENDIX`): the manifest, and every block marked
``appendix=True`` (tables of hashed identifiers).

Raw identifiers never appear unless ``show_identifiers=True``: identifier types, leaked e-mail addresses and
reviewed vocabulary tokens are counted, or shown as ``hash_term`` of the normalised word under the run's key (a keyed
hash, HMAC-SHA-256, 12 hex digits; the key stays in the run directory: without it the tokens cannot be matched to
names); person ids, document text and review contexts are never shown. Regurgitation examples hashed without a key
(``regurgitation.json`` of an older version) are not shown.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.plots import runs as figures
from toolkit.report.appendix import manifest_section
from toolkit.report.attack_sections import attacks_section
from toolkit.report.coverage import coverage_blocks
from toolkit.report.missed import missed_section
from toolkit.results.collect import RunData
from toolkit.results.layout import epoch_text
from toolkit.report.formatting import Identifiers, as_int, block, figure, fmt, fmt_lr, pct, table

SECTIONS = [("attacks", "Attacks: can the model give away who was in its training data?"),
            ("corpus", "Corpus and identifier statistics"),
            ("missed", "Gold identifiers the detector missed: did the model learn them?"),
            ("strategies", "Strategies compared"),
            ("tradeoff", "Privacy–utility trade-off"),
            ("mia", "Membership inference by predicted rare words (the attack of the papers)"),
            ("regurgitation", "Regurgitation"), ("extraction", "E-mail extraction, MaxTER and AURC"),
            ("vocabulary", "Vocabulary review and anonymity test")]
#: per run, at the end of the report: technical material
APPENDIX = [("manifest", "Manifest, package versions and data fingerprints")]


def _corpus_section(run: RunData) -> list[dict]:
    from toolkit import plots

    if not run.ids_summary:
        return [block("absent", "No identifier analysis in this run (identifiers_members/ missing).")]
    rows = {"documents": "n_documents", "individuals": "n_individuals", "words": "n_words",
            "distinct words": "n_distinct_words", "direct-identifier positions": "n_direct_positions",
            "indirect-identifier positions": "n_indirect_positions", "protected positions": "n_protected_positions",
            "share of positions protected": "share_protected_positions", "|I_direct| (direct identifier types)":
            "n_I_direct", "|I_indirect| (indirect identifier types)": "n_I_indirect",
            "share of distinct words used by fewer than k individuals": "share_distinct_words_below_k",
            "share of word occurrences they make up": "share_occurrences_below_k"}
    names = {"members": "members (fine-tuning data)", "all": "members + non-members (attack graph)"}
    counts = pd.DataFrame({names[p]: {label: fmt(s.get(key)) if not key.startswith("share") else pct(s.get(key))
                                      for label, key in rows.items()} for p, s in run.ids_summary.items()})
    cfg = next(iter(run.ids_summary.values())).get("config", {})
    blocks = [block("p", f"Identifiers as methods.md §2 defines them: direct identifiers are words inside PII spans from "
                         f"the '{cfg.get('detector', '?')}' detector; indirect identifiers are terms (word m-grams, "
                         f"m ≤ n = {cfg.get('n', '?')}) used by fewer than k = {cfg.get('k', '?')} individuals. "
                         "Only counts are shown."),
              *coverage_blocks(cfg.get("detector"), missed_listed=bool(run.missed)), block("table", table(counts))]
    by_cat = (run.ids_summary.get("members") or {}).get("direct_positions_by_category") or {}
    if by_cat:
        blocks.append(block("table", table(pd.Series(by_cat, name="direct-identifier positions")
                                           .rename_axis("PII category").to_frame()),
                            "Direct-identifier positions of the members' documents by PII category."))
    if run.individuals is not None and len(run.individuals):
        blocks.append(block("figure", figure(plots.identifier_cdfs(run.individuals)),
                            "Per individual (members): how many words, direct and indirect identifier types they "
                            "have (000 Fig. 2)."))
    if run.terms is not None and len(run.terms):
        blocks.append(block("figure", figure(plots.term_sharing_cdf(run.terms, n=1, k=cfg.get("k"))),
                            "How many individuals share each word, over distinct words and over occurrences "
                            "(000 Fig. 3): most distinct words belong to one individual but make up few "
                            "occurrences."))
    return blocks


def _strategies_section(run: RunData) -> list[dict]:
    from toolkit.strategies import STRATEGIES

    strategies = run.strategies or list(run.train_runs)
    if not strategies:
        return [block("absent", "No fine-tuned strategy in this run.")]
    rows = {}
    for s in strategies:
        info = run.train_runs.get(s, {})
        cfg = info.get("config") or {}
        rows[s] = {"what it does": STRATEGIES[s].description if s in STRATEGIES else "",
                   "checkpoint epochs audited": ", ".join("unknown" if e is None else str(e) for e in run.epochs(s))
                                                or "none",
                   "batch": fmt(cfg.get("batch_size")), "learning rate": fmt_lr(cfg.get("learning_rate")),
                   "training s": fmt(info.get("seconds"), 1), "tokens/s": fmt(as_int(info.get("tokens_per_second"))),
                   "spent ε (DP)": fmt((info.get("dp") or {}).get("spent_epsilon"))
                   if STRATEGIES.get(s) is not None and STRATEGIES[s].dp else "not DP"}
    frame = pd.DataFrame(rows).T.rename_axis("strategy")
    return [block("p", "Every strategy shares one trainer, data pipeline and schedule; only the training text or "
                       "the words allowed as prediction targets differ (methods.md §3)."),
            block("table", table(frame))]


def audit_results(run: RunData) -> pd.DataFrame | None:
    from toolkit.results.tables import results_table

    if not run.audits:
        return None
    order = {s: i for i, s in enumerate(["base", *run.strategies])}
    res = results_table(run.audits)
    return res.sort_values(["strategy", "epoch"], key=lambda c: c.map(order) if c.name == "strategy" else c,
                           kind="stable").reset_index(drop=True)


def _tradeoff_section(run: RunData, results: pd.DataFrame | None) -> list[dict]:
    from toolkit import plots

    if results is None:
        return [block("absent", "No audit results in this run (audit/ missing).")]
    blocks = [block("p", "Utility = accuracy of the model's predictions on ordinary (non-protected) words of the "
                         "training documents; privacy = 1 − share of identifier types the model predicts anywhere "
                         "when every word is probed once (methods.md §4). Novel privacy counts only identifiers absent "
                         "from the base model's own training data. Epoch 0 is the base model before fine-tuning."),
              block("table", table(results.assign(epoch=["unknown" if pd.isna(e) else int(e)
                                                         for e in results["epoch"]]), index=False))]
    points = results[results["strategy"] != "base"]
    if len(points):
        blocks.append(block("figure", figure(plots.privacy_utility(points)),
                            "One line per strategy, a point per checkpoint (label: epoch); up and right is "
                            "better (000 Fig. 4)."))
        blocks.append(block("figure", figure(plots.privacy_variants(points)),
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
        reports[f"{s} ({epoch_text(e)})"] = a["roc"]
    if not reports:
        return [block("absent", "No membership inference results in this run.")]
    any_roc = next(iter(reports.values()))
    n_non = any_roc.get("n_nonmembers")
    blocks = [block("p", "The attacker knows the training data (the auditor's position, 000 §3). For each "
                         "individual it counts how many of their indirect identifiers the model predicts on their "
                         "own documents; members (trained on) should not score higher than non-members (held "
                         f"out). Members: {fmt(any_roc.get('n_members'))}, non-members: {fmt(n_non)}."),
              block("figure", figure(plots.roc_curves(reports)),
                    "ROC of the count-based attack at each strategy's last checkpoint, log-log axes; the dashed "
                    "line is chance (000 Fig. 6)."),
              block("table", table(plots.tpr_table(reports, with_ci=True)),
                    "True-positive rate at fixed false-positive rates, with 95% bootstrap intervals (000 Table 2). "
                    + (f"n/r: an FPR below 1/{n_non} cannot be resolved with {n_non} non-members." if n_non else ""))]
    return blocks


def _regurgitation_section(run: RunData, ids: Identifiers) -> list[dict]:
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
            name = "base" if s == "base" else f"{s} ({epoch_text(e)})"
            tables[name] = t
            leaked = t[t["n_predicted"] > 0]
            for r in leaked.head(15).itertuples():
                leaked_rows.append({"model": name, ids.column: ids(r.term), "category": cats.get(r.term, "?"),
                                    "training occurrences": int(r.train_frequency),
                                    "times predicted": int(r.n_predicted),
                                    "at its own position": int(r.n_predicted_correct)})
            by_cat[name] = {c: f"{v['n_leaked']} of {v['n_identifiers']}"
                               + (f" ({pct(v['n_leaked'] / v['n_identifiers'])})" if v.get("n_identifiers") else "")
                            for c, v in (run.audits[(s, e)]["metrics"].get("leaked_by_category") or {}).items()}
        if tables:
            blocks.append(block("p", "Teacher-forced / fill-mask regurgitation (methods.md §4, 000 Fig. 5): how often "
                                     "each leaked identifier type was predicted, against how often it occurs in the "
                                     "training data. A curve that rises late means the regurgitated identifiers "
                                     "are the frequently repeated ones."))
            blocks.append(block("figure", figure(plots.regurgitation_cdf(tables))))
            if by_cat:
                blocks.append(block("table", table(pd.DataFrame(by_cat).fillna("0").rename_axis("category")),
                                    "Leaked identifier types by category: leaked of all types of the category "
                                    "(share)."))
            if leaked_rows:
                blocks.append(block("table", table(pd.DataFrame(leaked_rows), index=False),
                                    "The most often predicted leaked identifier types (up to 15 per model)"
                                    + ("." if ids.show else ", hashed."), appendix=True))
    if run.regurgitation:
        rows, examples = {}, {}
        for name, r in run.regurgitation.items():
            label = name if r.get("epoch") is None else f"{name} (epoch {r['epoch']})"
            rows[label] = {
                "documents prompted": r.get("n_prompted"), "later identifiers": r.get("n_identifier_occurrences"),
                "reproduced": r.get("n_reproduced"), "share reproduced": pct(r.get("share_reproduced")),
                "prompt tokens": r.get("prefix_tokens"), "new tokens": r.get("max_new_tokens")}
            examples[label] = {"examples (keyed hash)": _regurgitation_examples(r)}
        blocks.append(block("p", "Free-running regurgitation (causal LM): the model continues the first tokens of "
                                 "each member note greedily; the share of the note's later identifiers it writes "
                                 "out verbatim (identifiers already in the prompt are not counted)."))
        blocks.append(block("table", table(pd.DataFrame(rows).T.rename_axis("model"))))
        if any(v["examples (keyed hash)"] for v in examples.values()):
            blocks.append(block("table", table(pd.DataFrame(examples).T.rename_axis("model")),
                                "Free-running regurgitation: identifiers reproduced (examples).", appendix=True))
    return blocks or [block("absent", "No regurgitation results in this run.")]


def _regurgitation_examples(r: dict) -> str:
    """The hashed examples of a ``regurgitation.json`` when hashed with the run's key; older files hashed the words
    without a key (reversible with a word list): those are not shown."""
    if not r.get("examples_hashed"):
        return ""
    if "run's key" not in str(r.get("examples_hash") or ""):
        return "not shown (hashed without the run's key; re-run the step)"
    return ", ".join(r["examples_hashed"])


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


def _extraction_section(run: RunData, ids: Identifiers) -> list[dict]:
    blocks: list[dict] = []
    ex = run.extraction
    if ex is not None and len(ex):
        blocks.append(block("p", "E-mail extraction (methods.md §6, paper 002): prompts from the training data are "
                                 "continued greedily and the addresses written out are matched against the "
                                 "training set. TER = leaked / all training addresses; SER = leaked / addresses "
                                 "seen up to the checkpoint (both in %)."))
        blocks.append(block("figure", figure(figures.extraction_figure(ex))))
        show = ex.drop(columns=_leaked_cols(ex)).copy()
        blocks.append(block("table", table(show, index=False)))
        if _leaked_cols(ex):
            keys = [c for c in dict.fromkeys((figures.group_column(ex), "source", "checkpoint", "name")) if c in ex]
            leaked = ex[keys].copy()
            for c in _leaked_cols(ex):
                leaked[f"{c} ({'in clear' if ids.show else 'hashed'}, first 5)"] = ex[c].map(_as_list).map(
                    lambda xs: ", ".join(ids(x) for x in xs[:5]))
            blocks.append(block("table", table(leaked, index=False), "E-mail extraction: leaked addresses per "
                                                                     "checkpoint.", appendix=True))
    aurc = figures.aurc_by_group(run.aurc)
    mx = run.maxter
    if mx is not None and len(mx):
        fig = figures.maxter_figure(mx, aurc)
        if fig is not None:
            blocks.append(block("figure", figure(fig),
                                "MaxTER_t(τ) = the largest TER drop over checkpoints whose held-out perplexity "
                                "rose by at most τ% (gaps: infeasible, no checkpoint qualifies); AURC = area under "
                                "the curve in %² (methods.md §6)."))
        else:
            blocks.append(block("table", table(mx, index=False)))
    if run.aurc:
        rows = [{"source": item["source"], "key": k, "value": v} for item in run.aurc for k, v in _flatten(item["data"])]
        if rows:
            blocks.append(block("table", table(pd.DataFrame(rows), index=False), "AURC and its settings (methods.md §6)."))
    return blocks or [block("absent", "No e-mail extraction results in this run (no extraction.parquet, "
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


def _vocabulary_section(run: RunData, ids: Identifiers) -> list[dict]:
    blocks: list[dict] = []
    if run.reviews:
        blocks.append(block("p", "Vocabulary scrubbing (methods.md §7, paper 003): the tokens a model predicts for a masked "
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
            rows[f"log {i}" + ("" if folder in ("", ".") else f" ({folder})")] = {k: fmt(v) for k, v in row.items()}
            if len(cur):
                names |= set(cur.loc[cur["decision"].astype(str) == "name", "token"].astype(str))
        blocks.append(block("table", table(pd.DataFrame(rows).rename_axis("review log")),
                            "One column per review log file (file and reviewer names are not shown, only their number)."))
        if names:
            shown = sorted({ids(t) for t in names})  # case variants of one word hash alike: listed once
            blocks.append(block("p", f"Tokens judged names by at least one reviewer: {len(names)}"
                                     + (" (in clear" if ids.show else " (hashed") + ", first 40): "
                                     + ", ".join(shown[:40]), appendix=True))
    for item in run.anonymity:
        a = item["data"]
        known = {"n_predictions": "predictions", "n_name_like": "name-like predictions",
                 "share_name_like": "share name-like", "best_rank": "best rank of a name",
                 "n_sentences": "test sentences", "n_sentences_with_name": "sentences with a name among the predictions",
                 "n_original_name_predicted": "sentences whose original name was predicted",
                 "n_scrubbed_predicted": "predictions of scrubbed tokens"}
        rows = {label: (pct(a[k], 2) if k.startswith("share") else fmt(a[k])) for k, label in known.items()
                if k in a}
        for k, v in a.items():
            if k in known or isinstance(v, bool):
                continue
            if isinstance(v, (int, float)) or v is None and k.startswith("n_"):
                rows[k] = fmt(v)
            elif isinstance(v, dict) and k.endswith("_by_source"):
                for src, x in v.items():
                    if isinstance(x, (int, float)) or x is None:
                        rows[f"{k[:-len('_by_source')]} ({src})"] = fmt(x)
        blocks.append(block("p", f"Anonymity test ({item['source']}, methods.md §7.6): the top predictions for masked names "
                                 "in test sentences disjoint from the reviewed ones; paper 003 found 8 of 4,000 "
                                 "predictions name-like (0.2%)."))
        blocks.append(block("table", table(pd.Series(rows, name="").to_frame())))
    return blocks or [block("absent", "No vocabulary review log or anonymity test in this run.")]


def run_sections(run: RunData, results: pd.DataFrame | None, ids: Identifiers) -> list[dict[str, Any]]:
    """Every section of :data:`SECTIONS` then of :data:`APPENDIX` for one run: ``{"id", "title", "blocks",
    "appendix"}`` in report order (blocks marked ``appendix`` stay in their section: the renderer moves them)."""
    builders = {"attacks": lambda: attacks_section(run),
                "corpus": lambda: _corpus_section(run), "missed": lambda: missed_section(run), "strategies": lambda: _strategies_section(run),
                "tradeoff": lambda: _tradeoff_section(run, results), "mia": lambda: _mia_section(run),
                "regurgitation": lambda: _regurgitation_section(run, ids),
                "extraction": lambda: _extraction_section(run, ids),
                "vocabulary": lambda: _vocabulary_section(run, ids), "manifest": lambda: manifest_section(run)}
    return [{"id": sid, "title": title, "blocks": builders[sid](), "appendix": part == "appendix"}
            for part, entries in (("main", SECTIONS), ("appendix", APPENDIX)) for sid, title in entries]


__all__ = ["APPENDIX", "SECTIONS", "audit_results", "run_sections"]
