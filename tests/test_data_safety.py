"""Identifiers stay where they belong: committed notebooks carry no outputs, a full small CLI run prints and logs
no identifier of its corpus, and what the toolkit writes is private to its user (0700 folders, 0600 files)."""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from toolkit.corpus import load_corpus, write_jsonl

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------------------------
# notebooks: stripped and paired
# ------------------------------------------------------------------------------------------------------------------


def tracked_notebooks() -> list[Path]:
    """Every ``.ipynb`` tracked by git (all of ``notebooks/*.ipynb`` when this is not a git checkout)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", "*.ipynb"], cwd=ROOT, capture_output=True, check=True)
        names = [n for n in out.stdout.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb")]
    return [ROOT / n for n in sorted(names) if (ROOT / n).is_file()]


def notebook_problems(path: Path) -> list[str]:
    """What must not be committed: outputs, execution counts, widget state, cell metadata beyond tags, and a
    notebook that differs from its jupytext percent script (``NN_name.py`` beside it; required in ``notebooks/``)."""
    import nbformat  # here, not at collection: its import takes seconds (jsonschema's format checkers)
    import jupytext
    from jupytext.compare import compare_notebooks

    nb = nbformat.read(path, as_version=4)
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.get("outputs"):
            problems.append(f"cell {i} has outputs")
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            problems.append(f"cell {i} has an execution count")
        if cell.get("attachments"):
            problems.append(f"cell {i} has attachments")
        if set(cell.get("metadata", {})) - {"tags"}:
            problems.append(f"cell {i} has metadata {sorted(set(cell.metadata) - {'tags'})}")
    if "widgets" in nb.metadata:
        problems.append("notebook metadata holds widget state")
    script = path.with_suffix(".py")
    if not script.is_file():
        if path.parent.name == "notebooks":  # every notebook of notebooks/ is paired (jupytext.toml)
            problems.append(f"no paired script {script.name}")
    else:
        try:
            compare_notebooks(nb, jupytext.read(script), fmt="py:percent")
        except Exception as exc:  # noqa: BLE001 - jupytext raises its own comparison errors
            problems.append(f"out of sync with {script.name}: {str(exc)[:200]}")
    return problems


def test_committed_notebooks_are_stripped_and_in_sync():
    notebooks = tracked_notebooks()
    assert notebooks, "no notebooks found"
    problems = {p.name: notebook_problems(p) for p in notebooks}
    assert not any(problems.values()), (
        f"{ {k: v for k, v in problems.items() if v} }: run `nbstripout notebooks/*.ipynb` and "
        "`jupytext --sync notebooks/*.ipynb` (or install the pre-commit hooks: pre-commit install)")


def test_the_notebook_check_catches_outputs_and_drift(tmp_path):
    """The check above can fail: a copy with an output, an execution count or an edited cell is flagged."""
    import nbformat  # here, not at collection: its import takes seconds (jsonschema's format checkers)
    src = tracked_notebooks()[0]
    nb = nbformat.read(src, as_version=4)
    code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    dirty = copy.deepcopy(nb)
    dirty.cells[code].outputs = [nbformat.v4.new_output("stream", name="stdout", text="Alma Qorvath\n")]
    dirty.cells[code].execution_count = 3
    dirty.metadata["widgets"] = {"state": {}}
    drifted = copy.deepcopy(nb)
    drifted.cells[code].source += "\nprint('edited in the notebook only')"
    for name, variant in (("dirty", dirty), ("drifted", drifted)):
        target = tmp_path / name / src.name
        target.parent.mkdir()
        nbformat.write(variant, target)
        target.with_suffix(".py").write_text(src.with_suffix(".py").read_text(encoding="utf-8"), encoding="utf-8")
        found = notebook_problems(target)
        assert found, name
    assert any("outputs" in p for p in notebook_problems(tmp_path / "dirty" / src.name))
    assert any("out of sync" in p for p in notebook_problems(tmp_path / "drifted" / src.name))


def test_pre_commit_config_strips_notebooks_locally():
    cfg = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = {h["id"]: h for repo in cfg["repos"] if repo["repo"] == "local" for h in repo["hooks"]}
    assert hooks["nbstripout"]["entry"] == "nbstripout" and hooks["nbstripout"]["types"] == ["jupyter"]
    assert hooks["jupytext-sync"]["entry"].startswith("jupytext --sync")
    from importlib.metadata import version

    pinned = {dep.split("==")[0]: dep.split("==")[1] for h in hooks.values() for dep in h["additional_dependencies"]}
    assert pinned == {"nbstripout": version("nbstripout"), "jupytext": version("jupytext")}, \
        "the hooks pin the versions the project's environment uses"


# ------------------------------------------------------------------------------------------------------------------
# a full small run through the CLI prints no identifier
# ------------------------------------------------------------------------------------------------------------------

#: The CLI commands of a full small run (one process: `python -m toolkit` imports the same `main`; one import of
#: transformers instead of six keeps the test short). Default logging level, progress bars on (no --quiet).
COMMANDS = [
    ["identifiers", "notes.jsonl", "--split", "train", "--detector", "oracle", "--out", "ids_train"],
    ["identifiers", "notes.jsonl", "--split", "train,heldout", "--detector", "spacy+patterns", "--out", "ids_all"],
    ["base", "--kind", "mlm", "--corpus", "notes.jsonl", "--split", "public", "--out", "base", "--epochs", "1"],
    ["train", "--strategy", "ppmlm", "--corpus", "notes.jsonl", "--identifiers", "ids_train", "--base", "base",
     "--out", "run", "--epochs", "1"],
    ["probe", "run/epoch-1", "--corpus", "notes.jsonl", "--identifiers", "ids_train", "--base-corpus", "notes.jsonl",
     "--out", "audit"],
    ["mia", "run/epoch-1", "--corpus", "notes.jsonl", "--identifiers", "ids_all", "--out", "mia", "--bootstrap", "20"],
]
DRIVER = """
import json, sys
from toolkit.cli import main
for argv in json.loads(sys.argv[1]):
    code = main(argv)
    if code:
        sys.exit(code)
"""


def _identifier_needles(corpus, ids_dir: Path) -> dict[str, str]:
    """Strings whose appearance in the output would be a leak: the gold PHI spans' text and the I_direct and
    I_indirect words (methods.md §2) of the run's documents."""
    needles: dict[str, str] = {}
    for d in corpus:
        for s in d.spans:
            surface = " ".join(d.text[s.start:s.end].split())
            # a span of digits and punctuation shorter than 6 characters ("45" AGE, "3/4" DATE) cannot be told from
            # the counts and figures the CLI prints on purpose; longer ones (dates, phone and record numbers) count
            if len(surface) >= 4 and (any(c.isalpha() for c in surface) or len(surface) >= 6):
                needles[surface.lower()] = f"gold {s.label} span of {d.doc_id}"
    terms = pd.read_parquet(ids_dir / "terms.parquet")
    uni = terms[(terms["n"] == 1) & (terms["direct"] | terms["indirect"])]
    own = toolkit_words()
    for term, direct in zip(uni["term"].astype(str), uni["direct"]):
        # Excluded: words of fewer than 4 characters (rare short tokens such as "mg", "iv" or a hospital's initials
        # also occur in the CLI's own fixed words and paths: "mia", "ids", "run") and words that occur in the
        # toolkit's own source (its messages, progress-bar labels, option names can print them on purpose). On
        # 12 individuals many ordinary English words are used by a single individual and so are I_indirect:
        # "about", "case", "under", "weights", "which" ... — about one term in five here (49 of 241, 56 of 193),
        # none a name or a number; "july" and "hospital" stay covered inside the multi-word gold spans.
        if len(term) >= 4 and any(c.isalpha() for c in term) and term not in own:
            needles.setdefault(term, "I_direct" if direct else "I_indirect")
    return needles


def toolkit_words() -> set[str]:
    """Lower-cased words of the toolkit's source, except the sample-data generator (which holds the sample's
    names and places)."""
    words: set[str] = set()
    for path in (ROOT / "toolkit").rglob("*.py"):
        if "samples" not in path.relative_to(ROOT / "toolkit").parts:
            words |= {w.lower() for w in re.findall(r"[^\W_]+", path.read_text(encoding="utf-8"))}
    return words


@pytest.mark.slow
def test_cli_run_prints_and_logs_no_identifiers(tmp_path):
    corpus = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    small = [*corpus.filter(split="public")[:12], *corpus.filter(split="train")[:6],
             *corpus.filter(split="heldout")[:6]]
    write_jsonl(small, tmp_path / "notes.jsonl")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(COMMANDS)], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=900)
    output = proc.stdout + "\n" + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert (tmp_path / "audit" / "metrics.json").is_file() and (tmp_path / "mia" / "roc.json").is_file()
    assert "documents" in proc.stdout and "AUC" in proc.stdout  # the run did print its counts and figures

    needles = _identifier_needles([d for d in small if d.split in ("train", "heldout")], tmp_path / "ids_all")
    needles.update(_identifier_needles([d for d in small if d.split == "train"], tmp_path / "ids_train"))
    assert len(needles) > 100, "the sample must hold identifiers for this test to mean anything"
    haystack = output.lower()
    leaks = {n: why for n, why in needles.items() if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", haystack)}
    assert not leaks, f"identifiers in the CLI's stdout/stderr: {leaks}"

    # everything the run wrote is private to the user (the CLI runs with umask 077)
    for out in ("ids_train", "ids_all", "base", "run", "audit", "mia"):
        for p in [tmp_path / out, *(tmp_path / out).rglob("*")]:
            mode = stat.S_IMODE(p.lstat().st_mode)
            assert mode & 0o077 == 0, f"{p.relative_to(tmp_path)} is {oct(mode)}"


# ------------------------------------------------------------------------------------------------------------------
# owner-only files and folders (library use)
# ------------------------------------------------------------------------------------------------------------------


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_io_creates_private_files_and_folders(tmp_path):
    from toolkit.io import atomic_write_json, atomic_write_parquet, atomic_write_text, make_private_dir

    old = os.umask(0o022)  # a typical umask: without care, folders would be 0755 and files 0644
    try:
        f = atomic_write_json({"a": 1}, tmp_path / "new" / "deeper" / "m.json")
        assert _mode(f) == 0o600
        assert _mode(tmp_path / "new") == 0o700 and _mode(tmp_path / "new" / "deeper") == 0o700
        assert _mode(atomic_write_parquet(pd.DataFrame({"x": [1]}), tmp_path / "t" / "x.parquet")) == 0o600
        shared = tmp_path / "shared"
        shared.mkdir(mode=0o755)
        os.chmod(shared, 0o755)
        make_private_dir(shared)  # an existing folder keeps its permissions
        assert _mode(shared) == 0o755
        existing = shared / "r.txt"
        existing.write_text("x")
        os.chmod(existing, 0o644)
        atomic_write_text("y", existing)  # rewriting keeps an existing file's permissions
        assert _mode(existing) == 0o644 and existing.read_text() == "y"
    finally:
        os.umask(old)


@pytest.mark.slow
def test_identifier_output_and_run_directories_are_private(tmp_path):
    from toolkit.identifiers import analyze
    from toolkit.models import TinyModelConfig, init_model, train_tokenizer
    from toolkit.training import TrainConfig, train

    corpus = load_corpus(ROOT / "data_samples/clinical/notes.jsonl").filter(split="train")[:4]
    old = os.umask(0o022)
    try:
        result = analyze(corpus, detector="oracle", progress=False)
        out = result.save(tmp_path / "ids" / "train")
        assert _mode(tmp_path / "ids") == 0o700 and _mode(out) == 0o700
        assert all(_mode(p) == 0o600 for p in out.iterdir())
        tiny = TinyModelConfig(kind="mlm", vocab_size=200, hidden_size=16, num_layers=1, num_heads=2,
                               intermediate_size=32, max_length=64)
        tok = train_tokenizer((d.text for d in corpus), "mlm", tiny.vocab_size)
        ckpts = train(corpus, "scratch", tmp_path / "runs" / "mlm", "mlm",
                      TrainConfig(epochs=[1], batch_size=8, max_length=64), model=init_model(tok, tiny),
                      tokenizer=tok, progress=False)
        run = tmp_path / "runs" / "mlm"
        assert _mode(tmp_path / "runs") == 0o700 and _mode(run) == 0o700 and _mode(run / "run.json") == 0o600
        epoch_dir = ckpts[0][1]
        assert _mode(epoch_dir) == 0o700 and all(_mode(p) == 0o600 for p in epoch_dir.iterdir())
    finally:
        os.umask(old)
