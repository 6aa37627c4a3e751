"""The attack registry (methods.md §10, issue 57): an attack declares what it needs and one loop runs every entry
whose needs are met. A toy attack registered here — and nowhere else — is scored by the battery, written to
``attacks.json``, shown in the report's attack table and judged in the verdict's family; an entry whose need is not
met is not run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolkit.audit.attacks import (ATTACKS, REGISTRY, AttackEntry, AttackInputs, applicable, register, run_battery,
                                   unregister)
from toolkit.audit.verdict import verdict
from toolkit.corpus import Corpus

from _attack_fixtures import identifiers, tiny_clm, write_model

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TOY = AttackEntry("toy_attack", frozenset({"token_losses", "persons"}),
                  lambda x: -x.losses.mean_loss() + np.array([0.0 if p else 1.0 for p in x.persons]))
UNMET = AttackEntry("needs_public", frozenset({"token_losses", "public"}), lambda x: np.zeros(len(x.losses)))


@pytest.fixture
def toy():
    register(TOY)
    register(UNMET)
    yield TOY
    unregister(TOY.name)
    unregister(UNMET.name)


@pytest.fixture(scope="module")
def model():
    return tiny_clm(16, 8)


def test_the_shipped_entries_declare_their_needs():
    assert list(REGISTRY)[:6] == ["loss", "zlib", "min_k", "min_k_plus_plus", "reference", "rmia"]
    assert REGISTRY["min_k_plus_plus"].needs == {"token_losses", "moments"}
    assert REGISTRY["reference"].needs == {"token_losses", "reference_losses"} and REGISTRY["reference"].calibrated
    assert set(ATTACKS) >= {"loss", "zlib", "min_k", "min_k_plus_plus", "reference", "rmia"}
    with pytest.raises(ValueError, match="unknown need"):
        AttackEntry("x", frozenset({"telepathy"}), lambda x: None)
    with pytest.raises(ValueError, match="already registered"):
        register(AttackEntry("loss", frozenset({"token_losses"}), lambda x: None))


def test_a_toy_attack_reaches_attacks_json_the_report_and_the_verdict(toy, model, tmp_path):
    from toolkit.report import build_report

    f, tok, docs = model
    members = Corpus([d for d in docs if int(d.person_id[1:]) < 4])
    nonmembers = Corpus([d for d in docs if int(d.person_id[1:]) >= 4])
    res = run_battery(f, tok, members, nonmembers, window=64, n_bootstrap=20, progress=False)
    # needs met: run; the unmet one (no public split given) is not
    assert "toy_attack" in res.reports and "needs_public" not in res.reports
    assert "toy_attack" not in [e.name for e in applicable(AttackInputs(texts=["a"], persons=["p"]))]  # no losses
    # its score is what the entry computes: minus the mean loss, plus 0 per member here (persons are all non-empty)
    doc = res.doc_scores.set_index("doc_id")
    np.testing.assert_allclose(doc["toy_attack"].to_numpy(), doc["loss"].to_numpy(), rtol=0, atol=1e-12)
    att = res.to_json()
    assert att["attacks"]["toy_attack"]["auc"] == pytest.approx(att["attacks"]["loss"]["auc"])
    # the verdict's family holds its AUC test (and its TPR tests where resolvable)
    v = verdict(attacks=res, pii=identifiers(0.05)["pii_inference"])
    assert any(t["attack"] == "toy_attack" and t["rule"].startswith("membership_auc") for t in v.tests)
    # attacks.json on disk and the report's attack table
    out = tmp_path / "audit"
    write_model(out / "attacks" / "toy-model", res, identifiers(0.05), novel_privacy=None, regurgitation=None)
    (out / "verdicts.json").write_text(json.dumps({"toy-model": v.to_dict()}), encoding="utf-8")
    on_disk = json.loads((out / "attacks" / "toy-model" / "attacks.json").read_text(encoding="utf-8"))
    assert "toy_attack" in on_disk["attacks"]
    page = build_report(out, tmp_path / "report.html").read_text(encoding="utf-8")
    assert "toy_attack" in page


def test_a_model_free_entry_is_not_run_on_the_reference_model(model):
    """The split check's battery on the reference model runs the model's attacks, not the text-only ones."""
    f, tok, docs = model
    free = AttackEntry("text_only", frozenset({"texts"}), lambda x: np.array([len(t) for t in x.texts], float),
                       model_free=True)
    register(free)
    try:
        members = Corpus([d for d in docs if int(d.person_id[1:]) < 4])
        nonmembers = Corpus([d for d in docs if int(d.person_id[1:]) >= 4])
        res = run_battery(f, tok, members, nonmembers, reference=(f, tok), window=64, n_bootstrap=0,
                          progress=False)
        assert "text_only" in res.reports and "text_only" not in res.meta["reference_model_attacks"]
        assert "loss" in res.meta["reference_model_attacks"]
    finally:
        unregister("text_only")
