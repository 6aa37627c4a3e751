"""DP-SGD training for ``mlm_dp`` / ``clm_dp`` with Opacus (SPEC §3: ε = 8, δ = 1e-5, C = 10).

Opacus' ``PrivacyEngine.make_private_with_epsilon`` calibrates the noise multiplier for the target ε over the whole
run; batches are drawn by Poisson sampling (Opacus' ``UniformWithReplacementSampler``, sample rate = batch / N); the
spent ε reported at every checkpoint is the accountant's, not the target. Three fixes make Hugging Face models work
with per-sample gradients (measured on this stack):

* BERT's MLM output bias is one ``Parameter`` registered on two modules (``cls.predictions.bias`` and
  ``decoder.bias``): it is untied for training and tied back before saving;
* ``position_ids`` (and ``token_type_ids``) are passed per sample ([batch, length]) so the embedding layers see a
  batch dimension Opacus can split;
* Poisson sampling can draw an empty batch: it is skipped (no data, nothing to clip) and counted in the log.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from toolkit.strategies import Strategy


def _untie_mlm_bias(model) -> object | None:
    """Unregister BERT's ``cls.predictions.bias`` (the same Parameter stays as ``decoder.bias``); returns the head."""
    head = getattr(getattr(model, "cls", None), "predictions", None)
    if head is None or getattr(head, "bias", None) is None or head.decoder.bias is not head.bias:
        return None
    del head.bias
    return head


def _retie_mlm_bias(head) -> None:
    """Register the decoder's bias as ``cls.predictions.bias`` again (the saved layout Hugging Face expects)."""
    if head is not None:
        head.bias = head.decoder.bias


def train_dp(model, tokenizer, examples: list[dict], strat: Strategy, cfg, run: Path, *,
             progress: bool = True) -> dict[str, Any]:
    import torch
    from opacus import PrivacyEngine
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler
    from tqdm.auto import tqdm

    from toolkit.training import save_checkpoint, make_collator

    torch.manual_seed(cfg.seed)
    collator = make_collator(tokenizer, strat, cfg)

    def collate(batch: list[dict]):
        if not batch:
            return None
        out = collator([dict(b) for b in batch])
        n, length = out["input_ids"].shape
        out["position_ids"] = torch.arange(length).unsqueeze(0).expand(n, length).clone()
        if strat.kind == "mlm":
            out["token_type_ids"] = torch.zeros(n, length, dtype=torch.long)
        return out

    n = len(examples)
    rate = min(1.0, cfg.batch_size / n)
    sampler = UniformWithReplacementSampler(num_samples=n, sample_rate=rate,
                                            generator=torch.Generator().manual_seed(cfg.seed))
    loader = torch.utils.data.DataLoader(examples, batch_sampler=sampler, collate_fn=collate)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # as the Trainer of the other strategies
    model.to(device)
    head = _untie_mlm_bias(model)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.learning_rate,
                                  weight_decay=cfg.weight_decay)
    engine = PrivacyEngine(accountant="rdp")
    epochs = max(cfg.epochs)
    private, optimizer, loader = engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, target_epsilon=cfg.dp.epsilon,
        target_delta=cfg.dp.delta, epochs=epochs, max_grad_norm=cfg.dp.max_grad_norm, poisson_sampling=False)
    steps_per_epoch = len(loader)
    total = steps_per_epoch * epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, (lambda s: max(0.0, 1 - s / total)) if cfg.lr_schedule == "linear" else (lambda s: 1.0))
    history: list[dict[str, Any]] = []
    skipped, tokens, t0, step = 0, 0, time.perf_counter(), 0
    bar = tqdm(total=total, desc=f"{strat.name} (DP-SGD)", unit="step", disable=not progress)
    for epoch in range(1, epochs + 1):
        losses = []
        for batch in loader:
            bar.update(1)
            if batch is None:
                skipped += 1
                continue
            batch = {k: v.to(device) for k, v in batch.items()}
            optimizer.zero_grad(set_to_none=True)
            loss = private(**batch).loss
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            losses.append(float(loss.detach()))
            tokens += int(batch["attention_mask"].sum())
        eps = float(engine.get_epsilon(cfg.dp.delta))
        history.append({"epoch": epoch, "step": step, "loss": float(sum(losses) / max(len(losses), 1)),
                        "epsilon": eps, "delta": cfg.dp.delta, "empty_batches_skipped": skipped})
        if epoch in cfg.epochs:
            _retie_mlm_bias(head)
            save_checkpoint(private._module, tokenizer, run / f"epoch-{epoch}",
                             {"strategy": strat.name, "epoch": epoch, "global_step": step, "log_history": history,
                              "dp": {"target_epsilon": cfg.dp.epsilon, "spent_epsilon": eps, "delta": cfg.dp.delta,
                                     "max_grad_norm": cfg.dp.max_grad_norm,
                                     "noise_multiplier": optimizer.noise_multiplier, "sample_rate": rate}})
            if head is not None:
                del head.bias
    bar.close()
    _retie_mlm_bias(head)
    seconds = time.perf_counter() - t0
    return {"steps": step, "train_seconds": round(seconds, 1), "tokens_per_second": round(tokens / seconds, 1),
            "dp": {"target_epsilon": cfg.dp.epsilon, "spent_epsilon": history[-1]["epsilon"], "delta": cfg.dp.delta,
                   "max_grad_norm": cfg.dp.max_grad_norm, "noise_multiplier": optimizer.noise_multiplier,
                   "empty_batches_skipped": skipped, "steps_per_epoch": steps_per_epoch,
                   "expected_steps": math.ceil(1 / rate) * epochs}}
