"""Benchmark: is the *paper profile* (``toolkit/configs/paper.yaml``) feasible on one GPU? Needs a CUDA GPU.

Measures, in one run, on the sample clinical corpus (``data_samples/clinical/notes.jsonl``, ``train`` split, oracle
identifiers from ``toolkit.identifiers.analyze(..., detector="oracle")``):

1. **training throughput** through the toolkit's own ``toolkit.training.train`` (Hugging Face ``Trainer`` with the
   sparse MLM head, or the Opacus DP-SGD loop) with the paper profile's settings (batch 8 / 16, ``max_length`` 512,
   lr 1e-4, linear decay; read from ``paper.yaml``, only ``epochs`` set to 1) for ``mlm``, ``ppmlm``, ``mlm_dp`` on a
   bert-base-cased-sized masked LM (12 layers x 768, 12 heads, FFN 3072, vocabulary 28,996, 512 positions) and
   ``clm``, ``ppclm``, ``clm_dp`` on a gpt2-sized causal LM (12 x 768, vocabulary 50,257, 1,024 positions), one
   epoch on the first ``--documents`` training notes each. Reported: steady-state seconds per optimizer step and
   tokens/s (non-padding tokens; the first step, the checkpoint save at the end of the epoch and a separate warm-up
   run are excluded), the toolkit's own ``run.json`` figure (which includes the end-of-epoch checkpoint save), peak
   GPU memory, and the projected wall time of the paper profile: 32 epochs over the members of notebooks 02 (35
   patients) / 03 (40 patients), and over the whole ``train`` split; plus the training total of each notebook run
   with the paper profile (its 6 strategies, DP-SGD to the notebook's ``dp_epochs``: 32 for ``mlm_dp``, 8 for
   ``clm_dp``; the strategies not measured here are costed at the rate of the closest one measured:
   ``*_pseudo`` at the plain strategy's, ``dpp*`` / ``ipp*`` at ``pp*``'s). ``--tf32 both`` (default) also measures
   every strategy with TF32 matrix products (``torch.set_float32_matmul_precision("high")``), which the toolkit does
   not switch on itself: the toolkit trains in fp32.
2. the **batched fill-mask probe** (``toolkit.audit.probe_masked``, as the audit runs it: every word masked once,
   ~15% of a document's words per pass, LM head only at masked positions) against the Hugging Face
   ``pipeline("fill-mask")`` called once per masked sentence, on the same GPU and the bert-base-sized model (the
   approach of ``benchmarks/probe.py``): predictions/s and the ratio, and the agreement of their top-5 lists.

The model hubs are not reachable on the GPU machine, so no pre-trained weights are used: the *architectures* of the
paper profile are initialised at random (``toolkit.models`` conventions; the embedding / LM head has the paper
models' full vocabulary size, the tokenizer is trained on the ``public`` split with ``toolkit.models.train_tokenizer``
and uses only its first rows; the unused rows get an output bias of -1e4 so that no prediction lands there), saved
in Hugging Face format and loaded by ``train`` through ``toolkit.models.load_model``, exactly as ``bert-base-cased``
would be. Throughput does not depend on the weights' values; it does depend on the tokenizer, whose tokens per note
may differ from bert-base-cased's / gpt2's.

Usage: ``python benchmarks/gpu_paper_profile.py [--documents 200] [--warmup-documents 16] [--tf32 off|on|both]``.
Without a CUDA GPU it stops with a message; ``--smoke`` runs the whole script on the CPU with a tiny architecture and
a few documents (to check the script itself; its figures mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data_samples" / "clinical" / "notes.jsonl"

#: The paper profile's base architectures (bert-base-cased, gpt2), built at random.
ARCH = {"mlm": dict(name="bert-base-cased", vocab=28996, layers=12, hidden=768, heads=12, inter=3072, positions=512),
        "clm": dict(name="gpt2", vocab=50257, layers=12, hidden=768, heads=12, inter=3072, positions=1024)}
SMOKE_ARCH = {"mlm": dict(name="tiny bert", vocab=3000, layers=2, hidden=64, heads=2, inter=128, positions=512),
              "clm": dict(name="tiny gpt2", vocab=3000, layers=2, hidden=64, heads=2, inter=128, positions=1024)}
STRATEGIES = {"mlm": ["mlm", "ppmlm", "mlm_dp"], "clm": ["clm", "ppclm", "clm_dp"]}
#: Notebook members (first N patients of the train split) and each notebook's strategies -> the measured strategy
#: whose rate they are costed at, and the epochs they train with the paper profile.
NOTEBOOKS = {"mlm": ("02_masked_lm_strategies", 35, {"mlm": "mlm", "mlm_pseudo": "mlm", "ppmlm": "ppmlm",
                                                     "dppmlm": "ppmlm", "ippmlm": "ppmlm", "mlm_dp": "mlm_dp"},
                     {"mlm_dp": 32}),
             "clm": ("03_causal_lm_strategies", 40, {"clm": "clm", "clm_pseudo": "clm", "ppclm": "ppclm",
                                                     "dppclm": "ppclm", "ippclm": "ppclm", "clm_dp": "clm_dp"},
                     {"clm_dp": 8})}
PAPER_EPOCHS = 32


def hms(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@contextlib.contextmanager
def quiet_fd_stdout():
    """Silence file descriptor 1 (the ``tokenizers`` trainer prints its progress from Rust, past ``sys.stdout``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def build_base(texts: list[str], kind: str, arch: dict, out: Path) -> Path:
    """A randomly initialised model of the paper architecture + a tokenizer trained on ``texts``, saved in HF format
    (as ``toolkit.training.build_base`` saves its bases, without pre-training)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    from toolkit.models import train_tokenizer

    tok = train_tokenizer(texts, kind, arch["vocab"])
    if len(tok) > arch["vocab"]:
        raise SystemExit(f"tokenizer of {len(tok)} tokens exceeds the architecture's vocabulary {arch['vocab']}")
    torch.manual_seed(0)
    # toolkit.models.init_model sizes the embedding from len(tokenizer); the paper models' vocabulary is larger than
    # what a tokenizer trained on the sample notes reaches, so the configs are built here with the full size
    if kind == "mlm":
        model = BertForMaskedLM(BertConfig(
            vocab_size=arch["vocab"], hidden_size=arch["hidden"], num_hidden_layers=arch["layers"],
            num_attention_heads=arch["heads"], intermediate_size=arch["inter"],
            max_position_embeddings=arch["positions"], pad_token_id=tok.pad_token_id))
    else:
        model = GPT2LMHeadModel(GPT2Config(
            vocab_size=arch["vocab"], n_embd=arch["hidden"], n_layer=arch["layers"], n_head=arch["heads"],
            n_inner=arch["inter"], n_positions=arch["positions"], bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    bias = getattr(model.get_output_embeddings(), "bias", None)
    if bias is not None:  # ids beyond the tokenizer are never predicted (the probe decodes predictions)
        with torch.no_grad():
            bias[len(tok):] = -1e4
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def corpus_tokens(corpus, tokenizer, strategy: str, max_length: int) -> tuple[int, int]:
    """(examples, non-padding tokens) of one epoch of ``strategy`` on ``corpus`` (no identifiers needed: the
    unprotected strategy has the same tokens as the protected ones)."""
    from toolkit.strategies import training_examples

    ex = training_examples(corpus, tokenizer, strategy, positions=None, max_length=max_length, progress=False)
    return len(ex), sum(len(e["input_ids"]) for e in ex)


def measure_train(docs, base: Path, strategy: str, cfg, ids, work: Path, *, device_sync) -> dict:
    """One epoch of ``toolkit.training.train``; steady-state seconds/step from the Trainer's step ends (HF path) or
    from the DP loop's time minus the checkpoint export (DP path)."""
    import torch
    from transformers import TrainerCallback

    import toolkit.training as tt
    from toolkit.strategies import get_strategy

    stamps: dict[int, float] = {}
    export_s = [0.0]

    class StepTimer(TrainerCallback):
        """Times the steps after the first: the GPU is synchronised at the end of step 1 and of the last step only
        (a sync at every step would stop the data loading from overlapping the GPU work)."""

        def on_step_end(self, args, state, control, **kw):
            if state.global_step in (1, state.max_steps):
                device_sync()
                stamps[state.global_step] = time.perf_counter()

    orig_save = tt.save_checkpoint

    def timed_save(*a, **kw):
        t = time.perf_counter()
        try:
            return orig_save(*a, **kw)
        finally:
            export_s[0] += time.perf_counter() - t

    run = work / f"run-{strategy}-{time.perf_counter_ns()}"
    gc.collect()  # free the previous run's model and optimizer before the peak-memory count starts
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    tt.save_checkpoint = timed_save
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints its log dicts when tqdm is off
            tt.train(docs, base, run, strategy, cfg, positions=ids["positions"], spans=ids["spans"],
                     progress=False, callbacks=[StepTimer()])
    finally:
        tt.save_checkpoint = orig_save
    wall = time.perf_counter() - t0
    meta = json.loads((run / "run.json").read_text())
    shutil.rmtree(run, ignore_errors=True)
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else float("nan")
    steps = int(meta["steps"])
    if get_strategy(strategy).dp:
        sec_step = (float(meta["train_seconds"]) - export_s[0]) / max(steps, 1)
        how = "DP loop time - export, / steps"
    else:
        if steps > 1 and 1 in stamps and steps in stamps:
            sec_step = (stamps[steps] - stamps[1]) / (steps - 1)
            how = f"steps 2-{steps}"
        else:
            sec_step = float(meta["train_seconds"]) / max(steps, 1)
            how = "Trainer runtime / steps"
    return {"steps": steps, "sec_step": sec_step, "run_json_tps": meta.get("tokens_per_second"),
            "peak_gib": peak, "wall": wall, "how": how, "dp": meta.get("dp")}


def probe_vs_pipeline(base: Path, docs, positions, args, device) -> list[str]:
    """``benchmarks/probe.py`` on the GPU: the batched probe against one pipeline call per masked sentence."""
    import numpy as np
    import torch
    from transformers import pipeline

    from toolkit.audit import probe_masked
    from toolkit.corpus import Corpus
    from toolkit.identifiers import normalize_term
    from toolkit.models import load_model

    model, tokenizer = load_model(base, kind="mlm")
    model = model.to(device).eval()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    lines = []
    probe_masked(model, tokenizer, Corpus(list(docs)[:5]), positions=positions, max_length=512, progress=False)
    sync()
    t0 = time.perf_counter()
    df = probe_masked(model, tokenizer, docs, positions=positions, max_length=512, batch_size=args.probe_batch,
                      progress=False, seed=args.seed)
    sync()
    t_probe = time.perf_counter() - t0
    rate_probe = len(df) / t_probe

    sub = Corpus(list(docs)[:args.agreement_docs])
    t0 = time.perf_counter()
    one = probe_masked(model, tokenizer, sub, positions=None, max_length=512, mask_rate=1e-9,
                       batch_size=args.probe_batch, progress=False)
    sync()
    t_one = time.perf_counter() - t0
    rate_one = len(one) / t_one

    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=5,
                    device=device.index if device.type == "cuda" and device.index is not None else
                    (0 if device.type == "cuda" else -1))
    rng = np.random.default_rng(args.seed)
    cand = one.index[one["n_tokens"] == 1].to_numpy()
    pick = np.sort(rng.choice(cand, size=min(args.words, len(cand)), replace=False))
    texts = {d.doc_id: d.text for d in sub}
    inputs = []
    for i in pick:
        r = one.loc[i]
        t = texts[r["doc_id"]]
        inputs.append(t[:r["start"]] + tokenizer.mask_token + t[r["end"]:])
    for x in inputs[:3]:  # warm-up
        fill(x)
    sync()
    t0 = time.perf_counter()
    outs = [fill(x) for x in inputs]
    sync()
    t_pipe = time.perf_counter() - t0
    rate_pipe = len(inputs) / t_pipe

    def norm(s: str) -> str:
        return normalize_term(s.strip())

    top1 = np.mean([norm(o[0]["token_str"]) == (one.loc[i, "predicted"] or "") for o, i in zip(outs, pick)])
    top5 = np.mean([[norm(x["token_str"]) for x in o] == one.loc[i, "top_k"] for o, i in zip(outs, pick)])
    w = 44
    lines.append(f"{'route':<{w}} {'predictions':>11} {'seconds':>8} {'pred/s':>10} {'vs pipeline':>12}")
    lines.append(f"{'probe_masked (audit: 15%/pass, batch ' + str(args.probe_batch) + ')':<{w}} {len(df):>11,} "
                 f"{t_probe:>8.2f} {rate_probe:>10,.0f} {rate_probe / rate_pipe:>11.1f}x")
    lines.append(f"{'probe_masked (1 mask/sequence, pipeline inputs)':<{w}} {len(one):>11,} {t_one:>8.2f} "
                 f"{rate_one:>10,.0f} {rate_one / rate_pipe:>11.1f}x")
    lines.append(f"{'pipeline(fill-mask), 1 sentence per call':<{w}} {len(inputs):>11,} {t_pipe:>8.2f} "
                 f"{rate_pipe:>10,.0f} {1.0:>11.1f}x")
    lines.append(f"probe: {df.attrs['n_sequences']} sequences, head only at masked positions: {df.attrs['head_only']}; "
                 f"pipeline time for the probe's {len(df):,} predictions: {len(df) / rate_pipe:.0f} s")
    lines.append(f"agreement with the pipeline on {len(pick)} single-token words masked alone: arg-max {top1:.1%}, "
                 f"top-5 lists {top5:.1%}")
    del fill, model
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=200, help="training notes per measured epoch (and probed)")
    ap.add_argument("--warmup-documents", type=int, default=16, help="notes of the warm-up run before each strategy")
    ap.add_argument("--strategies", default="mlm,ppmlm,mlm_dp,clm,ppclm,clm_dp")
    ap.add_argument("--tf32", choices=["off", "on", "both"], default="both",
                    help="fp32 matrix products (the toolkit's default), TF32, or both (each strategy twice)")
    ap.add_argument("--words", type=int, default=300, help="pipeline calls (single-token words)")
    ap.add_argument("--agreement-docs", type=int, default=15, help="documents the pipeline's words come from")
    ap.add_argument("--probe-batch", type=int, default=64)
    ap.add_argument("--skip-probe", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true", help="tiny architecture on the CPU: checks the script only")
    args = ap.parse_args()

    import torch

    if args.smoke:
        torch.set_num_threads(1)
        args.documents, args.warmup_documents, args.words, args.agreement_docs = 8, 4, 10, 2
        device = torch.device("cpu")
        arch = SMOKE_ARCH
    else:
        if not torch.cuda.is_available():
            sys.exit("gpu_paper_profile.py measures the paper profile on a CUDA GPU, and torch sees none "
                     f"(torch {torch.__version__}, CUDA build {torch.version.cuda}). Run it on a machine with an "
                     "NVIDIA GPU (or --smoke to check the script on the CPU with a tiny model).")
        device = torch.device("cuda", torch.cuda.current_device())
        arch = ARCH

    from transformers.utils import logging as hf_logging

    from toolkit.config import load_profile
    from toolkit.corpus import Corpus, load_corpus
    from toolkit.identifiers import analyze
    from toolkit.strategies import get_strategy

    import logging
    import warnings

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore")
    logging.getLogger("opacus").setLevel(logging.ERROR)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    import transformers

    try:
        import opacus
        opacus_version = opacus.__version__
    except ImportError:
        opacus_version = "not installed (DP strategies will fail)"
    prof = load_profile("paper")
    corpus = load_corpus(DATA)
    public = corpus.filter(split="public")
    train_split = corpus.filter(split="train")
    docs = Corpus(list(train_split)[:args.documents])
    warm = Corpus(list(train_split)[:args.warmup_documents])
    analysis = analyze(docs, detector="oracle", progress=False)
    ids = {"positions": analysis.positions(), "spans": analysis.span_table()}
    warm_analysis = analyze(warm, detector="oracle", progress=False)
    warm_ids = {"positions": warm_analysis.positions(), "spans": warm_analysis.span_table()}
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (smoke test)"
    print(f"device: {gpu}; torch {torch.__version__} (CUDA {torch.version.cuda}), transformers "
          f"{transformers.__version__}, opacus {opacus_version}")
    print(f"data: {len(docs)} train notes ({len(docs.person_ids)} patients), oracle identifiers: "
          f"{len(ids['positions'])} protected word occurrences; warm-up run on {len(warm)} notes before each strategy")

    wanted = [s.strip() for s in args.strategies.split(",") if s.strip()]
    precisions = {"off": ["fp32"], "on": ["tf32"], "both": ["fp32", "tf32"]}[args.tf32]
    rows, failures, notes = [], [], []
    with tempfile.TemporaryDirectory(prefix="gpu_paper_profile-") as tmp:
        tmp = Path(tmp)
        for kind in ("mlm", "clm"):
            strategies = [s for s in STRATEGIES[kind] if s in wanted]
            if not strategies and not (kind == "mlm" and not args.skip_probe):
                continue
            a = arch[kind]
            cfg = prof.finetune[kind]
            cfg.epochs = [1]
            cfg.__post_init__()
            t0 = time.perf_counter()
            with quiet_fd_stdout():  # no progress bars of the tokenizer trainer (HF's own bars are off above)
                base = build_base([d.text for d in public], kind, a, tmp / f"base-{kind}")
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(base)
            n_params = None
            try:
                from toolkit.models import load_model

                m, _ = load_model(base, kind=kind)
                n_params = sum(p.numel() for p in m.parameters()) / 1e6
                del m
            except Exception as exc:  # noqa: BLE001
                failures.append((f"load {kind} base", f"{type(exc).__name__}: {exc}"))
            max_len = min(cfg.max_length, a["positions"])
            nb_name, n_members, nb_strats, nb_dp_epochs = NOTEBOOKS[kind]
            members = corpus.filter(person_ids=train_split.person_ids[:n_members])
            ex_meas, tok_meas = corpus_tokens(docs, tok, kind, max_len)
            ex_mem, tok_mem = corpus_tokens(members, tok, kind, max_len)
            ex_all, tok_all = corpus_tokens(train_split, tok, kind, max_len)
            print(f"\n[{kind}] {a['name']}-sized: {a['layers']} layers x {a['hidden']}, vocabulary {a['vocab']:,} "
                  f"(tokenizer: {len(tok):,} tokens trained on the public split), {n_params or float('nan'):.1f}M "
                  f"parameters; built in {time.perf_counter() - t0:.1f} s")
            head = f", sparse MLM head {cfg.sparse_mlm_head}" if kind == "mlm" else ""
            print(f"[{kind}] paper profile: batch {cfg.batch_size}, max_length {cfg.max_length}, lr "
                  f"{cfg.learning_rate:g} {cfg.lr_schedule}{head}; measured epoch: "
                  f"{ex_meas} examples / {tok_meas:,} tokens; notebook {nb_name[:2]} members ({n_members} patients, "
                  f"{len(members)} notes): {ex_mem} examples / {tok_mem:,} tokens; whole train split "
                  f"({len(train_split)} notes): {ex_all} examples / {tok_all:,} tokens")
            for strategy in strategies:
                warmed = False
                for prec in precisions:
                    torch.set_float32_matmul_precision("highest" if prec == "fp32" else "high")
                    label = f"{strategy} ({prec})"
                    try:
                        if not warmed:
                            measure_train(warm, base, strategy, cfg, warm_ids, tmp, device_sync=sync)
                            warmed = True
                        r = measure_train(docs, base, strategy, cfg, ids, tmp, device_sync=sync)
                    except Exception as exc:  # noqa: BLE001 - report every failure, go on with the others
                        failures.append((label, f"{type(exc).__name__}: {exc}"))
                        print(f"  FAILED {label}: {type(exc).__name__}: {exc}", flush=True)
                        traceback.print_exc()
                        continue
                    finally:
                        gc.collect()
                        if device.type == "cuda":
                            torch.cuda.empty_cache()
                    tps = tok_meas / (r["steps"] * r["sec_step"]) if r["steps"] else float("nan")
                    dp = get_strategy(strategy).dp
                    rows.append({"kind": kind, "strategy": strategy, "prec": prec, "dp": dp, **r, "tps": tps,
                                 "proj_members": PAPER_EPOCHS * tok_mem / tps,
                                 "proj_train": PAPER_EPOCHS * tok_all / tps, "tok_mem": tok_mem})
                    extra = ""
                    if r["dp"]:
                        extra = (f", noise multiplier {r['dp'].get('noise_multiplier', float('nan')):.3f}, "
                                 f"spent eps {r['dp'].get('spent_epsilon', float('nan')):.3f} (1 epoch)")
                    print(f"  {label:<16} {r['steps']:>4} steps, {r['sec_step'] * 1000:8.1f} ms/step, {tps:>9,.0f} "
                          f"tokens/s, peak {r['peak_gib']:.1f} GiB ({r['how']}){extra}", flush=True)
            torch.set_float32_matmul_precision("highest")
            if kind == "mlm" and not args.skip_probe:
                try:
                    probe_lines = probe_vs_pipeline(base, docs, ids["positions"], args, device)
                except Exception as exc:  # noqa: BLE001
                    failures.append(("probe vs pipeline", f"{type(exc).__name__}: {exc}"))
                    traceback.print_exc()
                    probe_lines = []
                notes.append(probe_lines)
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            shutil.rmtree(base, ignore_errors=True)

    # ---- tables ---------------------------------------------------------------------------------------------------
    print("\n" + "=" * 118)
    print(f"TRAINING THROUGHPUT on {gpu}: 1 epoch of {args.documents} train notes per row, paper profile settings")
    print("=" * 118)
    hdr = (f"{'strategy':<16} {'steps':>5} {'ms/step':>8} {'tokens/s':>9} {'vs plain':>8} {'TF32 x':>7} "
           f"{'run.json':>9} {'peak GiB':>8} {'32 ep, members':>15} {'32 ep, train':>13}")
    print(hdr)
    print("-" * len(hdr))
    by = {(r["strategy"], r["prec"]): r for r in rows}
    for r in rows:
        plain = by.get(("mlm" if r["kind"] == "mlm" else "clm", r["prec"]))
        fp = by.get((r["strategy"], "fp32"))
        vs = f"{r['tps'] / plain['tps']:.2f}x" if plain else "n/a"
        tf = f"{r['tps'] / fp['tps']:.2f}x" if (fp and r["prec"] == "tf32") else ""
        rj = f"{r['run_json_tps']:,.0f}" if r.get("run_json_tps") else "n/a"
        print(f"{r['strategy'] + ' (' + r['prec'] + ')':<16} {r['steps']:>5} {r['sec_step'] * 1000:>8.1f} "
              f"{r['tps']:>9,.0f} {vs:>8} {tf:>7} {rj:>9} {r['peak_gib']:>8.1f} {hms(r['proj_members']):>15} "
              f"{hms(r['proj_train']):>13}")
    print("tokens/s: non-padding tokens of the epoch / (steps x steady-state s/step); 'vs plain': against mlm / clm of "
          "the same precision; 'TF32 x': against the same strategy in fp32; run.json: the toolkit's own figure "
          "(includes the end-of-epoch checkpoint save of this short run); projections: 32 epochs at the measured rate, "
          "over notebook 02's 35 / notebook 03's 40 member patients, and over the whole train split (432 notes).")

    print(f"\nPAPER PROFILE, training only (no audits), notebook runs with their 6 strategies:")
    for kind in ("mlm", "clm"):
        nb_name, n_members, nb_strats, nb_dp_epochs = NOTEBOOKS[kind]
        for prec in precisions:
            parts, total, missing = [], 0.0, []
            for s, measured in nb_strats.items():
                r = by.get((measured, prec))
                if r is None:
                    missing.append(s)
                    continue
                ep = nb_dp_epochs.get(s, PAPER_EPOCHS)
                sec = ep * r["tok_mem"] / r["tps"]
                total += sec
                parts.append(f"{s} {hms(sec)}" + (f" ({ep} ep)" if ep != PAPER_EPOCHS else ""))
            if parts:
                print(f"  {nb_name} ({prec}): {hms(total)} = " + ", ".join(parts) +
                      (f"; not measured: {', '.join(missing)}" if missing else ""))

    for lines in notes:
        if lines:
            print("\n" + "=" * 118)
            print(f"FILL-MASK PROBE vs PIPELINE on {gpu}: bert-base-sized model, fp32, {args.documents} train notes")
            print("=" * 118)
            print("\n".join(lines))
    if failures:
        print("\nFAILURES:")
        for what, msg in failures:
            print(f"  {what}: {msg}")
        sys.exit(1)


if __name__ == "__main__":
    main()
