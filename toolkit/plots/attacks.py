"""Figures and tables of the attack battery (``toolkit.audit.attacks``): inputs are the files an audit writes.

* ``attacks.json`` (:meth:`BatteryResult.to_json`): per attack ``auc``, ``auc_ci`` and ``tpr_at_fpr``;
* ``roc.json`` (:meth:`BatteryResult.save`): per attack ``{"fpr", "tpr", "auc"}``;
* ``identifiers.json``: ``{"pii_inference", "memorisation", "canaries"}`` as :func:`~toolkit.audit.attacks.pii_inference`,
  :func:`~toolkit.audit.attacks.memorisation_scores` and :func:`~toolkit.audit.attacks.exposure_summary` return them.

Every attack has one colour and one plain-language name in every figure (:data:`ATTACK_NAMES`, :data:`ATTACK_COLORS`);
models are coloured by their strategy (:func:`toolkit.plots.audit.strategy_color`). Nothing here computes a metric.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from toolkit.plots.audit import TEMPLATE, axes_toggle, roc_curves, strategy_color, tpr_table

#: short plain-language names of the attacks (legends and tables)
ATTACK_NAMES = {
    "loss": "Loss",
    "zlib": "Loss ÷ zlib size",
    "min_k": "Min-K%",
    "min_k_plus_plus": "Min-K%++",
    "reference": "Reference model",
    "rmia": "RMIA (reference models)",
    "identifier_count": "Predicted rare words (papers' attack)",
    "pii_inference": "PII inference",
    "canaries": "Canaries",
    "memorisation": "Memorisation score",
    "ez": "EZ-MIA (error zones)",
    "recall": "ReCaLL (public prefix)",
    "dc_pdd": "DC-PDD (frequency-calibrated)",
    "blind": "Blind baseline (text only)",
}
#: what each attack does, in plain words (the report's glossary)
ATTACK_GLOSSARY = {
    "loss": "how well the model predicts a person's notes; notes it was trained on are predicted better "
            "(Yeom et al. 2018)",
    "zlib": "the same, divided by how well the text compresses, so that plainly predictable text does not look "
            "remembered (Carlini et al. 2021)",
    "min_k": "only the 20% of words the model finds least likely: trained-on notes have fewer surprising words "
             "(Shi et al. 2024)",
    "min_k_plus_plus": "Min-K% with each word's likelihood compared with what the model expected at that place "
                       "(Zhang et al. 2024; causal models only)",
    "reference": "how much better the audited model predicts the notes than the base model it started from "
                 "(Carlini et al. 2021)",
    "rmia": "how much better the audited model predicts a person's notes than models trained on other people's notes "
            "do, compared note by note with many notes of people nobody trained on (Zarifzadeh et al. 2024)",
    "identifier_count": "how many of a person's rare words (indirect identifiers) the model predicts on their own "
                        "notes: the count-based attack of the papers",
    "pii_inference": "an attacker who knows a note with one identifier blanked out ranks candidate identifiers by "
                     "the model's likelihood and picks the best (Lukas et al. 2023); top-1 = share guessed right",
    "canaries": "made-up records inserted into the training notes 1, 4 or 16 times; exposure (bits) measures how "
                "much more likely the model finds the real record number than random ones (Carlini et al. 2019)",
    "memorisation": "per identifier, how much more likely the audited model finds it in its place than the base "
                    "model does (log-likelihood ratio; > 0: learnt in fine-tuning)",
    "ez": "where the model's first guess is wrong, how much more it favours the true word than the base model does, "
          "positive shifts over negative ones (Ilić et al. 2026)",
    "recall": "how much a note's likelihood drops when a public note is put before it: remembered notes lose more "
              "(Xie et al. 2024)",
    "dc_pdd": "each word's probability calibrated by how frequent the word is in public text, so that common words do "
              "not look remembered (Zhang et al. 2024)",
    "blind": "no model at all: a classifier on the texts alone (word n-grams, lengths, years), fitted on other "
             "patients; if it separates the groups, they differ as texts and a model's attack cannot be read as "
             "memorisation (Das et al. 2024)",
}
ATTACK_COLORS = {"loss": "#1f77b4", "zlib": "#ff7f0e", "min_k": "#2ca02c", "min_k_plus_plus": "#9467bd",
                 "reference": "#d62728", "identifier_count": "#8c564b", "rmia": "#393b79",
                 "ez": "#17becf", "recall": "#bcbd22", "dc_pdd": "#e377c2", "blind": "#7f7f7f"}
_OTHER = ("#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def attack_name(attack: str) -> str:
    return ATTACK_NAMES.get(attack, attack)


def attack_color(attack: str) -> str:
    import zlib

    return ATTACK_COLORS.get(attack) or _OTHER[zlib.crc32(attack.encode("utf-8")) % len(_OTHER)]


def _rocs(roc: Mapping[str, dict], attacks: Mapping | None) -> dict[str, dict]:
    """Plain-name keyed ROC curves with the sample sizes of ``attacks.json`` (for the clipping of zeros)."""
    n = {k: (attacks or {}).get(k) for k in ("n_members", "n_nonmembers")}
    return {attack_name(a): {**c, **{k: v for k, v in n.items() if v}} for a, c in roc.items()}


def attack_roc(roc: Mapping[str, dict], title: str, *, attacks: Mapping | None = None,
               log: bool = True) -> go.Figure:
    """Every attack on one model: ROC curves on log-log axes (``log=False``: linear; buttons switch, as
    :func:`toolkit.plots.audit.roc_curves`) with the chance line (``roc``: a ``roc.json``).

    ``attacks`` (the model's ``attacks.json``, optional) gives the numbers of members and non-members, so that a
    rate of 0 is drawn at half the smallest resolvable one (as :func:`toolkit.plots.audit.roc_curves`).
    """
    colors = {attack_name(a): attack_color(a) for a in roc}
    fig = roc_curves(_rocs(roc, attacks), title=title, colors=colors, log=log)
    # one style per attack in every figure (not per position in this one): width and marker by the attack's rank
    order = list(dict.fromkeys([*ATTACK_COLORS, *roc]))
    symbols = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star", "hexagon")
    for tr, a in zip(fig.data, roc):
        i = order.index(a)
        width = 2.0 + 3.0 * (len(order) - 1 - i) / max(1, len(order) - 1)
        tr.update(line_width=width, marker=dict(size=width + 4, symbol=symbols[i % len(symbols)]))
    fig.update_layout(legend_title="attack")
    return fig


def attack_roc_grid(models: Mapping[str, Mapping], *, title: str = "Every attack on every model (ROC, log-log)",
                    cols: int = 3, log: bool = True) -> go.Figure:
    """One panel per model (``label → {"roc", "attacks"}``), every attack in each, same axes; one legend entry per
    attack (clicking it toggles the attack in every panel). ``log=False``: linear axes; buttons switch every panel
    (:func:`toolkit.plots.audit.axes_toggle`)."""
    from plotly.subplots import make_subplots

    labels = [m for m in models if models[m].get("roc")]
    cols = max(1, min(cols, len(labels)))
    rows = max(1, -(-len(labels) // cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=labels, shared_xaxes=True, shared_yaxes=True,
                        horizontal_spacing=0.04, vertical_spacing=0.12 if rows > 1 else 0.1)
    shown: set[str] = set()
    for i, label in enumerate(labels):
        r, c = divmod(i, cols)
        single = attack_roc(models[label]["roc"], label, attacks=models[label].get("attacks"))
        for tr in single.data:
            full = tr.name
            group = full.rsplit(" (AUC", 1)[0]
            if tr.customdata is not None:  # the AUC differs per panel: it goes into the hover, not the legend
                tr.update(hovertemplate=f"{label}<br>{full}<br>FPR %{{customdata[0]:.4f}}<br>"
                                        "TPR %{customdata[1]:.4f}<extra></extra>")
            tr.update(name=group, legendgroup=group, showlegend=group not in shown)
            shown.add(group)
            fig.add_trace(tr, row=r + 1, col=c + 1)
    fig.update_xaxes(title_text="false-positive rate", row=rows)
    fig.update_yaxes(title_text="true-positive rate", col=1)
    fig.update_layout(template=TEMPLATE, title=title, height=330 * rows + 90, legend_title="attack (AUC: hover)")
    return axes_toggle(fig, log=log)


def attacks_table(attacks: Mapping) -> pd.DataFrame:
    """One row per attack of an ``attacks.json``: AUC with its 95% CI and TPR at FPR 0.1% / 1% / 10% (``n/r``: not
    resolvable with this many non-members), the strongest attack marked."""
    reports = {a: {"auc": r["auc"], "auc_ci": r.get("auc_ci"), "tpr_at_fpr": r.get("tpr_at_fpr") or {}}
               for a, r in attacks["attacks"].items()}
    t = tpr_table(reports, with_ci=True)
    t = t[["AUC", *[c for c in t.columns if c != "AUC"]]].rename(columns={"AUC": "AUC [95% CI]"})
    strongest = attacks.get("strongest")
    t.insert(0, "strongest", ["◀ strongest" if a == strongest else "" for a in t.index])
    t.index = [attack_name(a) for a in t.index]
    t.index.name = "attack"
    return t


def auc_matrix(models: Mapping[str, Mapping]) -> pd.DataFrame:
    """Models × attacks: the AUC of every attack on every model (``label → {"attacks"}``), as text with the 95% CI;
    ``—`` where the attack did not run on that model (e.g. the reference attack on the base model itself)."""
    rows, order = {}, []
    for label, m in models.items():
        att = (m.get("attacks") or {}).get("attacks") or {}
        for a in att:
            if a not in order:
                order.append(a)
        rows[label] = {a: (f"{r['auc']:.3f}" + (f" [{r['auc_ci'][0]:.2f}, {r['auc_ci'][1]:.2f}]"
                                                  if r.get("auc_ci") else "")) for a, r in att.items()}
        if att:
            rows[label]["strongest"] = attack_name((m["attacks"].get("strongest")
                                                    or max(att, key=lambda a: att[a]["auc"])))
    t = pd.DataFrame.from_dict(rows, orient="index", columns=[*order, "strongest"]).fillna("—")
    t.columns = [attack_name(c) if c != "strongest" else c for c in t.columns]
    t.index.name = "model"
    return t


def strongest_auc_figure(models: Mapping[str, Mapping], *, detectable: Mapping[str, float] | None = None) -> go.Figure:
    """The strongest attack's AUC per model with its 95% CI, a bar per model in its strategy's colour; the chance
    level (0.5) dashed and, per model, the smallest AUC these sample sizes could detect (``detectable``) as a tick.
    Each model's ``strategy`` (default: its label) picks the colour."""
    fig = go.Figure()
    for label, m in models.items():
        att = m.get("attacks") or {}
        reps = att.get("attacks") or {}
        if not reps:
            continue
        best = att.get("strongest") or max(reps, key=lambda a: reps[a]["auc"])
        r = reps[best]
        lo, hi = (r.get("auc_ci") or [r["auc"], r["auc"]])
        fig.add_trace(go.Bar(x=[label], y=[r["auc"]], name=label, legendgroup=label,
                             marker_color=strategy_color(m.get("strategy") or label),
                             error_y=dict(type="data", symmetric=False, array=[hi - r["auc"]],
                                          arrayminus=[r["auc"] - lo]),
                             text=[attack_name(best)], textposition="inside",
                             hovertemplate=f"{label}<br>{attack_name(best)}: AUC %{{y:.3f}} [{lo:.3f}, {hi:.3f}]"
                                           "<extra></extra>"))
        d = (detectable or {}).get(label)
        if d is not None:
            fig.add_trace(go.Scatter(x=[label], y=[d], mode="markers", showlegend=False,
                                     marker=dict(symbol="line-ew-open", size=34, color="#333", line_width=2),
                                     hovertemplate=f"smallest detectable AUC {d:.3f}<extra></extra>"))
    fig.add_hline(y=0.5, line_dash="dash", line_color="#b0b0b0", annotation_text="chance",
                  annotation_position="bottom right")
    fig.update_layout(template=TEMPLATE, title="Strongest membership attack per model (bar: AUC, whisker: 95% CI, "
                                               "black tick: smallest AUC detectable at this sample size)",
                      yaxis_title="AUC", yaxis_range=[0, 1.02], showlegend=False, bargap=0.35)
    return fig


def protection_figure(table: pd.DataFrame) -> go.Figure:
    """What each strategy protects (:func:`toolkit.results.tables.protection_table`), four panels sharing the
    models: the papers' privacy (novel identifiers where measured), the strongest membership attack's AUC (chance
    0.5 dashed), PII inference top-1 (the chance level as a black tick, the base model's top-1 as a grey one), and
    what it costs: utility on the training notes (bar) and on held-out notes (diamond), methods.md §4.
    A strategy that hides identifiers keeps privacy high and PII inference near chance; membership is a separate
    question that only DP-SGD addresses."""
    from plotly.subplots import make_subplots

    panels = ["identifiers never written out (privacy)", "members told apart (strongest attack AUC)",
              "identifier guessed from context (PII inference top-1)",
              "utility (bar: training notes; diamond: held-out)"]
    fig = make_subplots(rows=1, cols=4, subplot_titles=panels, horizontal_spacing=0.05)
    for label, r in table.iterrows():
        colour = strategy_color(str(r.get("strategy") or label))
        priv = r.get("novel privacy") if pd.notna(r.get("novel privacy")) else r.get("privacy")
        for col, value in ((1, priv), (2, r.get("membership AUC")), (3, r.get("PII inference top-1")),
                           (4, r.get("utility"))):
            if value is not None and pd.notna(value):
                fig.add_trace(go.Bar(x=[label], y=[value], marker_color=colour, showlegend=False,
                                     hovertemplate=f"{label}: %{{y:.3f}}<extra></extra>"), row=1, col=col)
        for value, tick in ((r.get("PII chance"), "#333"), (r.get("PII reference top-1"), "#9e9e9e")):
            if value is not None and pd.notna(value):
                fig.add_trace(go.Scatter(x=[label], y=[value], mode="markers", showlegend=False,
                                         marker=dict(symbol="line-ew-open", size=30, color=tick, line_width=2),
                                         hovertemplate=("chance" if tick == "#333" else "base model")
                                         + " %{y:.3f}<extra></extra>"), row=1, col=3)
        held = r.get("held-out utility")
        if held is not None and pd.notna(held):
            fig.add_trace(go.Scatter(x=[label], y=[held], mode="markers", showlegend=False,
                                     marker=dict(symbol="diamond", size=11, color="#333"),
                                     hovertemplate="held-out notes %{y:.3f}<extra></extra>"), row=1, col=4)
    fig.add_hline(y=0.5, line_dash="dash", line_color="#b0b0b0", row=1, col=2)
    fig.update_yaxes(range=[0, 1.02])
    fig.update_layout(template=TEMPLATE, title="What each strategy protects (black tick: chance; grey tick: the base "
                                               "model's PII inference)", bargap=0.3, height=430)
    return fig


def pii_table(pii: Mapping) -> pd.DataFrame | None:
    """PII inference per category (and overall): occurrences attacked, top-1 accuracy, chance (1/candidates), the
    reference (base) model's top-1, and top-1 ÷ chance; None without a measured occurrence."""
    if not pii or not (pii.get("overall") or {}).get("n"):
        return None
    parts = {**(pii.get("by_category") or {}), "all categories": pii["overall"]}
    rows = {c: {"occurrences": int(v.get("n") or 0), "top-1": v.get("top1"), "chance": v.get("chance"),
                "reference model top-1": "not measured" if v.get("reference_top1") is None else v["reference_top1"],
                "top-1 ÷ chance": v.get("ratio_to_chance")}
            for c, v in parts.items()}
    t = pd.DataFrame.from_dict(rows, orient="index")
    t.index.name = "category"
    return t


def pii_advantage_table(pii: Mapping) -> pd.DataFrame | None:
    """PII inference of members against non-members per scope (overall, each category, identifiers private to one
    individual, shared by several; public ones left out): occurrences and top-1 of each group, chance and the
    permutation p-value over individuals (the verdict's test, methods.md §11); None where the non-members were not
    attacked (files before 2026-11-28)."""
    adv = (pii or {}).get("member_advantage")
    if not adv:
        return None
    rows = {scope: {"members": f"{v.get('n_trials_members', 0)} occ. / {v.get('n_members', 0)} people",
                    "members' top-1": v.get("members_rate"),
                    "non-members": f"{v.get('n_trials_nonmembers', 0)} occ. / {v.get('n_nonmembers', 0)} people",
                    "non-members' top-1": v.get("nonmembers_rate"), "chance": v.get("chance"),
                    "p (members > non-members)": v.get("p_value")}
            for scope, v in adv.items()}
    t = pd.DataFrame.from_dict(rows, orient="index")
    t.index.name = "scope"
    return t


def canary_table(canaries: Mapping) -> pd.DataFrame | None:
    """Canary exposure per number of insertions (bits; the maximum possible is log2 |R|); None without canaries."""
    by = (canaries or {}).get("by_repeats") or {}
    if not by:
        return None
    t = pd.DataFrame.from_dict({int(k) if str(k).isdigit() else k: v for k, v in by.items()}, orient="index")
    t = t.sort_index().rename(columns={"n": "canaries", "mean": "mean exposure", "median": "median exposure",
                                       "max": "max exposure"})
    t["max possible (log2 |R|)"] = float(canaries.get("log2_space", np.nan))
    t.index.name = "times inserted"
    return t


def memorisation_table(summary: Mapping) -> pd.DataFrame | None:
    """Memorisation score of identifier types per category (``memorisation`` of ``identifiers.json``): types
    measured, median and max log-likelihood ratio, share of types the audited model prefers to the base model."""
    if not summary or not (summary.get("overall") or {}).get("n_types"):
        return None
    parts = {**(summary.get("by_category") or {}), "all categories": summary["overall"]}
    t = pd.DataFrame.from_dict({c: {"identifier types": v.get("n_types"), "median score": v.get("median"),
                                    "max score": v.get("max"), "share > 0": v.get("share_positive")}
                                for c, v in parts.items()}, orient="index")
    t.index.name = "category"
    return t


__all__ = ["ATTACK_COLORS", "ATTACK_GLOSSARY", "ATTACK_NAMES", "attack_color", "attack_name", "attack_roc",
           "attack_roc_grid", "attacks_table", "auc_matrix", "canary_table", "memorisation_table", "pii_advantage_table", "pii_table",
           "protection_figure", "strongest_auc_figure"]
