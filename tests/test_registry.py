"""The step registry (toolkit/pipelines/registry.py): every step defined once, its key derived from typed inputs.

1. golden keys: for every step kind the registry's key equals ``step_key(kind, dict)`` of the dict the pipelines
   built by hand before the registry (written out literally here), so cached runs stay valid;
2. no hand-built key: no dict literal (or a name bound to one) is passed as the inputs of ``cached_step``,
   ``StepCache.run``, ``step_key`` or ``.key(`` anywhere in ``toolkit/`` outside the registry and the cache rule;
3. every registered step has a place in the run layout (or a named folder), a description and frozen inputs;
4. ``toolkit probe`` / ``toolkit mia`` are cached steps: a second identical call loads instead of probing.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from toolkit.config.sections import AttacksSection, CanariesSection, RegurgitationSection
from toolkit.identifiers import IdentifierConfig
from toolkit.models import TinyModelConfig
from toolkit.pipelines import registry
from toolkit.pipelines.cache import step_key
from toolkit.pipelines.registry import (ABSENT, STEPS, AnonymizeInputs, AttacksInputs, AuditInputs, BaseInputs,
                                        CanariesInputs, ExternalBase, IdentifiersInputs, MissedInputs, ProbeSettings,
                                        RegurgitationInputs, RmiaReferencesInputs, TrainInputs, identifier_settings)
from toolkit.results.layout import RunLayout
from toolkit.scrub.anonymize import AnonymizeConfig
from toolkit.strategies import get_strategy
from toolkit.training import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
FP = {"n_documents": 8, "n_individuals": 4, "sha256": "a" * 64}
FP2 = {"n_documents": 6, "n_individuals": 3, "sha256": "b" * 64}
K1, K2, K3, K4 = "1" * 64, "2" * 64, "3" * 64, "4" * 64


def _old_identifier_cfg(cfg: IdentifierConfig) -> dict:
    return {**asdict(cfg), "spacy_labels": list(cfg.spacy_labels)}


def _cases():
    """(step kind, name, typed inputs, the dict the old code built) for every step kind and optional-key variant."""
    tiny, pretrain, tcfg = TinyModelConfig(kind="clm", hidden_size=64), TrainConfig(epochs=[1]), TrainConfig()
    canaries, reg, opts = CanariesSection(n=5), RegurgitationSection(), AttacksSection(window=128)
    ids = IdentifierConfig(detector="oracle", k=3)
    id_cfg = _old_identifier_cfg(ids)
    key_cfg = {k: v for k, v in id_cfg.items() if k not in ("cache_dir", "ner_cache")}
    external = ExternalBase("gpt2", None)
    yield ("canaries", "canaries", CanariesInputs(canaries, 3, FP),
           {"canaries": asdict(canaries), "seed": 3, "members": FP})
    # the base step: toolkit run / notebook 04 (pretrained on a public split), notebook 05 (from scratch)
    yield ("base", "base", BaseInputs.pretrained(tiny, pretrain, FP),
           {"architecture": asdict(tiny), "pretrain": asdict(pretrain), "public": FP})
    yield ("base", "base", BaseInputs.from_scratch(FP, tiny, pretrain),
           {"corpus": FP, "tiny": asdict(tiny), "config": asdict(pretrain)})
    for part in ("members", "all"):
        name = f"identifiers_{part}"
        yield ("identifiers", name, IdentifiersInputs.of(id_cfg, FP), {"identifiers": key_cfg, "documents": FP})
        # with canaries: one field more than the hand-built dict had, on purpose — the canary ranges are blanked
        # (every n) since 2026-11-26, so tables cached under the unigram re-flagging are not reused
        yield ("identifiers", name, IdentifiersInputs.of(id_cfg, FP, K1),
               {"identifiers": key_cfg, "documents": FP, "canaries": K1, "canary_exclusion": "blanked"})
        yield ("identifiers", name, IdentifiersInputs.of(id_cfg, FP, with_cache_location=True),  # toolkit audit
               {"identifiers": id_cfg, "documents": FP})
    yield ("train", "train/clm", TrainInputs.of(get_strategy("clm"), tcfg, K1, FP, K2),
           {"strategy": "clm", "train": asdict(tcfg), "base": K1, "members": FP})
    yield ("train", "train/ppclm", TrainInputs.of(get_strategy("ppclm"), tcfg, external, FP, K2),
           {"strategy": "ppclm", "train": asdict(tcfg), "base": {"base": "gpt2", "fingerprint": None},
            "members": FP, "identifiers": K2})
    probe = ProbeSettings(max_length=128, n_bootstrap=20, batch_size=8, seed=0)
    common = {"identifiers_members": K2, "identifiers_all": K3,
              "audit": {"max_length": 128, "n_bootstrap": 20, "batch_size": 8, "seed": 0}}
    # changed on purpose (2026-11-28, second change): the probe's metrics.json holds the non-members' side of novel
    # identifiers (the verdict's member advantage), so audits cached before are not reused
    NOVEL = {"evidence": "novel-member-advantage"}
    yield ("audit", "audit/base", AuditInputs(model=K1, identifiers_members=K2, identifiers_all=K3, audit=probe,
                                              base_vocabulary=None, nonmembers=FP2),
           {"model": K1, **common, "base_vocabulary": None, "nonmembers": FP2, **NOVEL})
    yield ("audit", "audit/clm/epoch-4", AuditInputs(model=K1, epoch=4, identifiers_members=K2, identifiers_all=K3,
                                                     audit=probe, base_vocabulary=FP, nonmembers=FP2),
           {"model": K1, "epoch": 4, **common, "base_vocabulary": FP, "nonmembers": FP2, **NOVEL})
    # changed on purpose (2026-11-28): the attack steps attack the non-members too (the verdict's member advantage)
    # and the reference model on the same split, so attack results cached before are not reused; (later the same
    # day) a masked model's PII inference and canaries follow pll_copies
    EVIDENCE = {"evidence": "member-advantage+split-check+strided-pii"}
    data = {"identifiers_members": K2, "identifiers_all": K3, "members": FP, "nonmembers": FP2, "dtype": None}
    hashed = {**data, "predictions": {"words": "keyed hash", "key": "f" * 16}}
    for shared in (data, hashed):  # toolkit audit: raw predictions, keyed hashes
        settings = ProbeSettings(max_length=64, n_bootstrap=0, batch_size=4, seed=2, base_vocabulary=None)
        yield ("audit", "audit/m", AuditInputs(model="files:x", **shared, audit=settings),
               {"model": "files:x", **shared, "audit": {"max_length": 64, "n_bootstrap": 0, "batch_size": 4,
                                                        "seed": 2, "base_vocabulary": None}, **NOVEL})
        yield ("attacks", "attacks/m", AttacksInputs(model="files:x", reference=None, **shared, audit=K4,
                                                     attacks=opts, n_bootstrap=0, seed=2),
               {"model": "files:x", "reference": None, **shared, "audit": K4, "attacks": asdict(opts),
                "n_bootstrap": 0, "seed": 2, **EVIDENCE})
    yield ("regurgitation", "regurgitation/base", RegurgitationInputs(K1, K2, reg, None),
           {"model": K1, "identifiers_members": K2, "regurgitation": asdict(reg), "epoch": None})
    yield ("regurgitation", "regurgitation/clm", RegurgitationInputs(K1, K2, reg, 8),
           {"model": K1, "identifiers_members": K2, "regurgitation": asdict(reg), "epoch": 8})
    for ref, regs, rmia in ((None, (None, None), None), (external, (K3, K4), K2)):
        yield ("attacks", "attacks/clm/epoch-8", AttacksInputs(
            model=K1, epoch=8, reference=ref, audit=K2, regurgitation=regs[0], regurgitation_reference=regs[1],
            identifiers_members=K3, identifiers_all=K4, members=FP, nonmembers=FP2, canaries=None, attacks=opts,
            n_bootstrap=20, seed=0, rmia_references=rmia),
            {"model": K1, "epoch": 8, "reference": None if ref is None else {"base": "gpt2", "fingerprint": None},
             "audit": K2, "regurgitation": regs[0], "regurgitation_reference": regs[1], "identifiers_members": K3,
             "identifiers_all": K4, "members": FP, "nonmembers": FP2, "canaries": None, "attacks": asdict(opts),
             "n_bootstrap": 20, "seed": 0, "rmia_references": rmia, **EVIDENCE})
    # changed on purpose (2026-11-26): no population held back from the public split any more (RMIA's population is
    # the audited non-members), so reference models trained on the old split are not reused
    yield ("rmia_references", "rmia_references", RmiaReferencesInputs(
        references=4, n_train=8, seed=0, strategy="clm", train=tcfg, base=K1, public=FP),
        {"references": 4, "split": "independent halves of the whole public split", "n_train": 8,
         "seed": 0, "strategy": "clm", "train": asdict(tcfg), "base": K1, "public": FP})
    # new on 2026-12-03 (no earlier key): the missed gold identifiers of one model, planned for a non-oracle detector
    yield ("missed", "missed/clm/epoch-8", MissedInputs(
        model=K1, epoch=8, reference=K2, identifiers_members=K3, identifiers_all=K4, members=FP, nonmembers=FP2,
        gold="g" * 64, attacks=opts, regurgitation=reg, seed=0),
        {"model": K1, "epoch": 8, "reference": K2, "identifiers_members": K3, "identifiers_all": K4, "members": FP,
         "nonmembers": FP2, "gold": "g" * 64, "attacks": asdict(opts), "regurgitation": asdict(reg), "seed": 0})
    anon = AnonymizeConfig()
    yield ("anonymize", "anonymize", AnonymizeInputs(FP, anon), {"corpus": FP, "config": asdict(anon)})


CASES = list(_cases())


@pytest.mark.parametrize("kind, name, inputs, old", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_golden_keys_equal_the_hand_built_ones(kind, name, inputs, old):
    assert registry.key_inputs(inputs) == old
    assert registry.key(kind, inputs, name) == step_key(name, old)


def test_a_plain_fine_tuning_is_keyed_without_the_dp_settings_it_never_reads():
    """A strategy without DP trains the same at every DP setting (the trainer never reads ``dp`` for it), so its
    step's key is the one of the default DPConfig: a change of ε keeps it cached. A DP strategy's key follows them."""
    from toolkit.training import DPConfig

    def train_key(name, dp):
        return step_key("train", TrainInputs.of(get_strategy(name), TrainConfig(dp=dp), K1, FP, K2))

    settings = (DPConfig(), DPConfig(epsilon=1.0), DPConfig(epsilon=16.0, delta=1e-6, max_grad_norm=0.1))
    for plain in ("clm", "ppclm", "mlm_pseudo"):
        assert len({train_key(plain, dp) for dp in settings}) == 1
    assert len({train_key("clm_dp", dp) for dp in settings}) == 3
    moved = step_key("train", TrainInputs.of(get_strategy("clm"), TrainConfig(learning_rate=1e-3), K1, FP, K2))
    assert moved != train_key("clm", DPConfig())  # what it does read still counts


def test_every_pipeline_step_kind_has_a_golden_key():
    assert {c[0] for c in CASES} | {"probe", "mia"} == set(STEPS)  # probe / mia: new steps, no earlier key


def test_optional_inputs_are_omitted_not_none_and_inputs_are_checked():
    base = registry.key_inputs(AuditInputs(model=K1, identifiers_members=K2, identifiers_all=K3, nonmembers=FP,
                                           audit=ProbeSettings(max_length=8, n_bootstrap=0, batch_size=1, seed=0)))
    assert set(base) == {"model", "identifiers_members", "identifiers_all", "nonmembers", "audit", "evidence"}
    assert set(base["audit"]) == {"max_length", "n_bootstrap", "batch_size", "seed"} and ABSENT is not None
    with pytest.raises(ValueError, match="BaseInputs"):
        BaseInputs(architecture=1, pretrain=2, corpus=FP)  # the two spellings mixed
    with pytest.raises(TypeError, match="takes TrainInputs"):
        registry.key("train", CanariesInputs(None, 0, FP), "train/clm")
    with pytest.raises(ValueError, match="not a name of the step"):
        registry.key("canaries", CanariesInputs(None, 0, FP), "train/clm")


# ---------------------------------------------------------------------------------------------------------------------
# no cache key is built by hand outside the registry

KEY_CALLS = {"cached_step": 2, "run": 2, "step_key": 1, "key": 1}  # callee -> position of its inputs argument
ALLOWED = {"toolkit/pipelines/registry.py", "toolkit/pipelines/cache.py"}


def _is_dict(node) -> bool:
    return isinstance(node, ast.Dict) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                                         and node.func.id == "dict")


def hand_built_keys(root: Path = ROOT / "toolkit") -> list[str]:
    """``file:line`` of every call of :data:`KEY_CALLS` whose inputs argument is a dict literal (``{…}``,
    ``dict(…)``) or a name that its function binds to one."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
            dicts = {t.id for n in ast.walk(scope) if isinstance(n, ast.Assign) and _is_dict(n.value)
                     for t in n.targets if isinstance(t, ast.Name)}
            for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call)):
                f = call.func
                callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if callee not in KEY_CALLS:
                    continue
                pos = KEY_CALLS[callee]
                args = [*call.args[pos:pos + 1], *(k.value for k in call.keywords if k.arg == "inputs")]
                if any(_is_dict(a) or (isinstance(a, ast.Name) and a.id in dicts) for a in args):
                    found.append(f"{rel}:{call.lineno}")
    return sorted(set(found))


def test_no_hand_built_cache_key_outside_the_registry():
    assert hand_built_keys() == []
    # the measure: `grep -c "inputs = {\|inputs={"` outside the registry and the cache rule
    text = {p: p.read_text(encoding="utf-8") for p in (ROOT / "toolkit").rglob("*.py")
            if p.relative_to(ROOT).as_posix() not in ALLOWED}
    assert [str(p) for p, t in text.items() if re.search(r"inputs ?= ?\{", t)] == []


def test_the_key_scan_finds_a_hand_built_key(tmp_path):
    bad = tmp_path / "toolkit" / "pipelines" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("def f(cache, d):\n    inputs = {'a': 1}\n    cache.run('x', d, inputs, print)\n"
                   "    return step_key('x', {'b': 2}), cached_step('y', d, dict(c=3), print)\n", encoding="utf-8")
    assert hand_built_keys(tmp_path / "toolkit") == ["toolkit/pipelines/bad.py:3", "toolkit/pipelines/bad.py:4"]


# ---------------------------------------------------------------------------------------------------------------------
# the registry's records


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_every_step_has_a_place_a_doc_and_frozen_inputs(kind, tmp_path):
    step = STEPS[kind]
    assert step.kind == kind and len(step.doc) > 20 and step.check and "." in step.check
    assert dataclasses.is_dataclass(step.inputs) and step.inputs.__dataclass_params__.frozen
    assert step.place.strip()
    if step.place.startswith("RunLayout."):
        parts = {"base": ("clm",), "identifiers": ("members",), "train": ("clm",), "audit": ("clm", 4),
                 "regurgitation": ("clm",), "attacks": ("clm", 4), "missed": ("clm", 4)}.get(kind, ())
        folder = step.folder(RunLayout(tmp_path), *parts)
        assert folder.is_relative_to(tmp_path) and folder != tmp_path
    else:
        with pytest.raises(ValueError, match="no place in the run layout"):
            step.folder(RunLayout(tmp_path))
    assert step.resumable == (kind in ("train", "rmia_references"))


# ---------------------------------------------------------------------------------------------------------------------
# toolkit probe / mia: cached in their --out folder


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """An untrained tiny masked LM, 4 training and 4 held-out sample notes and their oracle identifiers."""
    import torch

    from toolkit.corpus import Corpus, load_corpus, write_jsonl
    from toolkit.identifiers import analyze
    from toolkit.models import init_model, train_tokenizer

    root = tmp_path_factory.mktemp("registry_probe")
    notes = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    docs = Corpus(list(notes.filter(split="train")[:4]) + list(notes.filter(split="heldout")[:4]))
    tok = train_tokenizer((d.text for d in notes.filter(split="public")[:20]), "mlm", 300)
    torch.manual_seed(0)
    init_model(tok, TinyModelConfig(kind="mlm", vocab_size=300, hidden_size=16, num_layers=1, num_heads=2,
                                    intermediate_size=32, max_length=64), seed=0).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    analyze(docs, detector="oracle", k=2, n=1, progress=False).save(root / "ids")
    return {"model": root / "model", "corpus": write_jsonl(docs, root / "notes.jsonl"), "ids": root / "ids"}


@pytest.mark.parametrize("command, output", [("probe", "metrics.json"), ("mia", "roc.json")])
def test_probe_and_mia_are_cached_steps(tiny_checkpoint, command, output, tmp_path, monkeypatch, capsys):
    import toolkit.cli.probe as cli_probe
    from toolkit.cli import main
    from toolkit.errors import ToolkitError

    calls = []
    real = cli_probe.probe_checkpoint

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(cli_probe, "probe_checkpoint", counted)
    out = tmp_path / "out"
    argv = [command, str(tiny_checkpoint["model"]), "--corpus", str(tiny_checkpoint["corpus"]), "--identifiers",
            str(tiny_checkpoint["ids"]), "--out", str(out), "--window", "64", "--quiet"]
    if command == "mia":
        argv += ["--bootstrap", "10"]
    assert main(argv) == 0
    first, printed = json.loads((out / output).read_text()), capsys.readouterr().out
    step = json.loads((out / "step.json").read_text())
    assert len(calls) == 1 and step["step"] == command and step["status"] == "done"
    assert main(argv) == 0  # the same call again: loaded, not probed
    assert len(calls) == 1 and capsys.readouterr().out == printed
    assert json.loads((out / output).read_text()) == first
    old_flag = [a if a != "--window" else "--max-length" for a in argv]  # the flag's former name: the same window
    assert old_flag != argv and main(old_flag) == 0 and len(calls) == 1
    assert main([*argv, "--seed", "1"]) == 0  # another input: computed again, the folder replaced
    assert len(calls) == 2 and json.loads((out / "step.json").read_text())["key"] != step["key"]
    (out / "notes.txt").write_text("not the command's", encoding="utf-8")
    with pytest.raises(ToolkitError, match="did not write"):
        cli_probe._cached(command, out, None, None, None, (output,))
    assert (out / "notes.txt").is_file()  # never removed
