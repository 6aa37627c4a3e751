"""The report's verdicts, attack section, colours and appendix, on attack files written by hand in the layouts of a
run directory (``attacks/``) and of a ``toolkit audit`` directory (``attacks/<label>/`` folders and ``verdicts.json``)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from _attack_fixtures import write_audit_dir, write_run_attacks
from _experiment_fixtures import tiny_run

from toolkit.audit.verdict import GREEN_STATEMENT, VerdictThresholds
from toolkit.plots.attacks import ATTACK_NAMES
from toolkit.report import build_report, collect_run, verdicts_frame, verdicts_html
from toolkit.report.attack_sections import ABSENT
from toolkit.report.verdicts import MISSING
from toolkit.strategies import STRATEGIES

pytestmark = pytest.mark.slow  # a tiny experiment is trained (the shared tiny run) for every test


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """A copy of the tiny run with hand-written attack files, a copy without ``attacks/`` (a run made before the
    battery), and an audit directory of two masked models (no Min-K%++, no reference model)."""
    src = tiny_run(tmp_path_factory)
    base = tmp_path_factory.mktemp("attack-report")
    run, old = base / "run", base / "old"
    shutil.copytree(src, run)
    verdicts = write_run_attacks(run)
    shutil.copytree(src, old, ignore=shutil.ignore_patterns("attacks"))
    audit = base / "audit"
    audit_verdicts = write_audit_dir(audit)
    return {"run": run, "old": old, "audit": audit, "verdicts": verdicts, "audit_verdicts": audit_verdicts}


@pytest.fixture(scope="module")
def html(dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("attack-html")
    return {"run": build_report(dirs["run"], out / "run.html").read_text(encoding="utf-8"),
            "old": build_report(dirs["old"], out / "old.html").read_text(encoding="utf-8"),
            "audit": build_report(dirs["audit"], out / "audit.html").read_text(encoding="utf-8")}


def _verdict_section(page: str) -> str:
    start = page.index('<section id="verdict">')
    return page[start:page.index("</section>", start)]


def _text(fragment: str) -> str:
    import html as h

    return h.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)))


def test_verdict_at_the_top(html, dirs):
    page = html["run"]
    top = _verdict_section(page)
    body = page.index("<main>")
    # the verdict is the first thing in the page body: before the identifier note, the summary and every run
    assert page.index('<section id="verdict">') - body < 50
    assert page.index('<section id="verdict">') < page.index('class="privacy-mode') < page.index('id="summary"')
    text = _text(top)
    levels = {label: v["level"] for label, v in dirs["verdicts"].items()}
    # 8 members and 8 non-members: smallest detectable AUC 0.79 ≥ 0.75, so nothing short of red can be judged
    assert levels["clm (epoch 8)"] == "red" and levels["ppclm (epoch 8)"] == levels["base (epoch 0)"] == "incomplete"
    # one badge per audited model (base + each strategy's last checkpoint), the deciding rule, attack and figure
    # (every attack is judged: loss's AUC beyond 0.75 with too few non-members for FPR 1% decides before PII)
    assert re.search(r"RED clm \(epoch 8\) : leakage found Deciding rule: an attacker clearly separates people who "
                     r"were in the training data .* Attack: Loss\. Figure: AUC = 0\.984, 95% interval", text)
    for label in ("ppclm (epoch 8)", "base (epoch 0)"):  # the grey level, with what could not be judged and why
        assert (f"INCOMPLETE {label} : could not be judged: membership not judgeable — 8 members and 8 non-members: "
                "smallest detectable AUC 0.79") in text
    assert "#616161" in top and "GREEN" not in text.split("The rules, with their thresholds")[0]
    assert "clm (epoch 4)" not in text  # earlier checkpoints: in the attack section's table, not at the top
    # the thresholds, printed from VerdictThresholds
    th = VerdictThresholds()
    for value in (th.novel_privacy_amber, th.auc_lower_red_unresolvable, th.alpha):
        assert f"{value:g}" in text
    assert f"[red: by more than {1 - th.novel_privacy_red:.0%}]; without the non-members probed" in text
    assert f"TPR ≥ {th.tpr_red:.0%} at FPR ≤ {th.fpr:.0%}" in text and "(Holm)" in text
    assert f"members − non-members > {th.pii_chance_factor - 1:g} × chance" in text
    # the measured error rates of the rules, from the published benchmark
    assert "Measured error rates of these rules" in top and "False alarms, null world" in text


def test_green_wording_never_anonymous(html, dirs):
    for page, labels in ((html["run"], ()), (html["audit"], ("bert-ppmlm",))):
        text = _text(_verdict_section(page))
        for label in labels:
            green = text[text.index(f"GREEN {label}"):]
            assert green.startswith(f"GREEN {label} : {GREEN_STATEMENT}")
            assert re.match(rf"GREEN {re.escape(label)} : {GREEN_STATEMENT} smallest detectable AUC ≈ 0\.\d{{3}} "
                            r"with \d+ members and \d+ non-members", green)
        assert "anonym" not in text.lower()
    assert "smallest detectable AUC ≈ 0.792 with 8 members and 8 non-members" in _text(_verdict_section(html["run"]))
    # the notebook forms of the verdicts say the same
    run = collect_run(dirs["run"])
    frame = verdicts_frame([run])
    assert set(frame["verdict"]) == {"incomplete", "red"} and len(frame) == 3
    grey = frame[frame["verdict"] == "incomplete"]["statement"]
    assert grey.str.startswith("could not be judged").all() and grey.str.contains("smallest detectable AUC").all()
    green = verdicts_frame([collect_run(dirs["audit"])]).set_index("model").loc["bert-ppmlm"]
    assert green["verdict"] == "green" and green["statement"].startswith(GREEN_STATEMENT)
    assert "smallest detectable AUC ≈ 0.647 with 30 members and 30 non-members" in green["statement"]
    assert not frame.apply(lambda col: col.astype(str).str.contains("anonym", case=False)).any().any()
    assert "anonym" not in verdicts_html([run]).lower()


def _figures(page: str) -> list[list[dict]]:
    """The traces of every plotly figure embedded in the page."""
    dec = json.JSONDecoder()
    out = []
    for m in re.finditer(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*", page):
        data, _ = dec.raw_decode(page, m.end())
        out.append(data)
    return out


def _colour(trace: dict) -> str | None:
    c = (trace.get("line") or {}).get("color") or (trace.get("marker") or {}).get("color")
    return c.lower() if isinstance(c, str) else None


def test_one_colour_per_strategy_and_attack_in_every_figure(html, dirs):
    page = html["run"]
    figures = _figures(page)
    assert len(figures) >= 10  # strongest attack, 3 × attack ROC, 2 identifier CDFs, 2 trade-offs, ROC, regurgitation
    names = sorted(["base", *STRATEGIES], key=len, reverse=True)
    strategy_re = re.compile(rf"^(?:[^:]+: )?({'|'.join(names)})(?=$|[\s(:])")
    attack_re = re.compile(rf"^({'|'.join(re.escape(n) for n in sorted(ATTACK_NAMES.values(), key=len, reverse=True))})"
                           r"(?=$| \()")
    strategies: dict[str, set] = {}
    attacks: dict[str, set] = {}
    in_figures: dict[str, set] = {}
    for i, traces in enumerate(figures):
        for t in traces:
            name, colour = str(t.get("name") or ""), _colour(t)
            if colour is None:
                continue
            if m := strategy_re.match(name):
                strategies.setdefault(m.group(1), set()).add(colour)
                in_figures.setdefault(m.group(1), set()).add(i)
            elif m := attack_re.match(name):
                attacks.setdefault(m.group(1), set()).add(colour)
    assert set(strategies) == {"base", "clm", "ppclm"}
    # each strategy is drawn in several figures (trade-off, variants, ROC, regurgitation, strongest attack) ...
    assert all(len(in_figures[s]) >= 3 for s in ("clm", "ppclm")), in_figures
    # ... always in one colour, and two strategies never share one
    assert all(len(c) == 1 for c in strategies.values()), strategies
    assert len({next(iter(c)) for c in strategies.values()}) == len(strategies)
    assert len(attacks) >= 6 and all(len(c) == 1 for c in attacks.values()), attacks
    # the glossary's colour key shows the same colours
    for s, c in strategies.items():
        assert re.search(rf'background: {next(iter(c))}"></span>{s}', page, re.IGNORECASE), s


def test_attacks_section_with_and_without_min_k_plus_plus_and_reference(html):
    run, audit = html["run"], html["audit"]
    for page in (run, audit):
        sec = page[page.index('id="run1-attacks"'):page.index('id="run1-', page.index('id="run1-attacks"') + 10)]
        text = _text(sec)
        for attack in ("Loss", "Loss ÷ zlib size", "Min-K%", "Predicted rare words (papers' attack)"):
            assert attack in text
        assert "AUC [95% CI]" in text and "TPR @ FPR 0.1%" in text and "TPR @ FPR 10%" in text
        assert "◀ strongest" in text and "Strongest attack:" in text
        assert "PII inference" in text and "top-1 ÷ chance" in text and "times inserted" in text
    run_text, audit_text = _text(run), _text(audit)
    assert "Min-K%++" in run_text and "Reference model" in run_text
    # what each strategy protects: both utilities, and the sentences computed from the table
    assert "held-out utility" in run_text and "Read off the table for this run:" in run_text
    assert re.search(r"ppclm \(epoch 8\): PII inference top-1 \d\.\d{3} = \d+\.\d× chance", run_text)
    sec = audit[audit.index('id="run1-attacks"'):]
    assert "Min-K%++" not in _text(sec[:sec.index('id="reading"')]).replace("Min-K%++ needs", "")
    # 8 non-members cannot resolve 10% FPR: n/r; 30 non-members resolve it
    assert "n/r: a false-positive rate below 1/8 cannot be measured with 8 non-members" in run_text
    assert len(re.findall(r"<td>\d+\.\d\d%</td>", audit)) >= 8 and "n/r" in audit_text  # TPR @ 10%: resolved
    # the ROC figures: log-log, one per model
    assert run.count("every membership attack (ROC)") == 3 and audit.count("every membership attack (ROC)") == 2
    assert '"type":"log"' in run.replace(" ", "")


def test_run_without_attack_files_still_renders(html, dirs):
    run = collect_run(dirs["old"])
    assert run.attacks == {} and run.verdicts == {} and run.has_audits
    page = html["old"]
    assert MISSING in _text(_verdict_section(page))
    assert f"Not in this run: {_text('Attacks: can the model give away who was in its training data?')}" in _text(page)
    assert ABSENT in _text(page) and 'id="run1-attacks"' not in page
    assert 'id="run1-mia"' in page and 'id="run1-manifest"' in page


def test_appendix_holds_the_technical_material(html):
    page = html["run"]
    appendix = page.index('<section id="appendix">')
    assert page.index('id="glossary"') < appendix
    for marker in ('id="run1-manifest"', 'id="run1-regurgitation-identifiers"', "Package versions", "identifier (keyed"):
        assert page.index(marker) > appendix, marker
    regurgitation = page[page.index('id="run1-regurgitation"'):page.index('id="reading"')]
    assert "keyed hash" not in regurgitation  # the hashed tables left the section


def test_collect_audit_directory(dirs, tmp_path):
    run = collect_run(dirs["audit"])
    assert list(run.attack_models()) == ["bert-finetuned", "bert-ppmlm"]
    assert {k: v["level"] for k, v in run.verdicts.items()} == {k: v["level"] for k, v in dirs["audit_verdicts"].items()}
    assert run.attacks["bert-ppmlm"]["scores"].name == "scores.parquet"
    assert "min_k_plus_plus" not in run.attacks["bert-ppmlm"]["attacks"]["attacks"]
    # a folder without verdict.json takes its verdict from verdicts.json
    copy = tmp_path / "audit"
    shutil.copytree(dirs["audit"], copy)
    (copy / "attacks" / "bert-ppmlm" / "verdict.json").unlink()
    assert collect_run(copy).verdicts["bert-ppmlm"]["level"] == "green"


def test_run_directory_checkpoints_and_stale_folders(dirs, tmp_path):
    run = collect_run(dirs["run"])
    assert list(run.attack_models()) == ["base (epoch 0)", "clm (epoch 8)", "ppclm (epoch 8)"]
    # the manifest lists the attack folders of its steps: folders it does not list (here the hand-written epoch 4,
    # as a checkpoint dropped from the config would leave behind) are left out ...
    listed = {s["output"] for s in json.loads((dirs["run"] / "manifest.json").read_text())["steps"]
              if str(s.get("output") or "").startswith("attacks/")}
    assert listed == {"attacks/base", "attacks/clm/epoch-8", "attacks/ppclm/epoch-8"}
    assert list(run.attack_models(last_only=False)) == ["base (epoch 0)", "clm (epoch 8)", "ppclm (epoch 8)"]
    # ... while a notebook work directory (no manifest) shows every checkpoint found, in strategy and epoch order
    copy = tmp_path / "run"
    shutil.copytree(dirs["run"], copy, ignore=shutil.ignore_patterns("runs", "base_clm", "manifest.json"))
    assert list(collect_run(copy).attack_models(last_only=False)) == ["base (epoch 0)", "clm (epoch 4)",
                                                                     "clm (epoch 8)", "ppclm (epoch 4)",
                                                                     "ppclm (epoch 8)"]
