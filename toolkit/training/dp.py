"""DP-SGD training for ``mlm_dp`` / ``clm_dp`` and DP-LoRA (``*_dp_lora*``) with Opacus (methods.md §3: ε = 8,
δ = 1e-5, C = 10).

DP-SGD (Abadi et al., 2016) clips every example's gradient to norm ``C``, adds Gaussian noise of standard deviation
``σ·C`` to their sum and lets a Rényi-DP accountant bound the privacy loss of the whole run. Two conditions make the
bound true of the toolkit's training, and both are enforced here.

**Each example's gradient depends on that example only.** Hugging Face's ``.loss`` is the mean over *all* target
tokens of the batch, so example *i*'s part of it, ``Σ_t ce_{i,t} / T_batch``, and with it Opacus' per-sample
gradient, changes with the number of targets of the *other* examples. The loss here is Opacus' expectation for
``loss_reduction="mean"``: each example's mean over its own targets, then the mean over the batch,

    ℓ_i = (1 / T_i) · Σ_{t ∈ targets(i)} ce_{i,t}   (0 when T_i = 0),     L = (1 / |B|) · Σ_{i ∈ B} ℓ_i,

whose per-sample gradient (Opacus multiplies by ``|B|``) is exactly ``∇ℓ_i`` (:func:`example_mean_loss`).

**The privacy unit is what the accountant counts** (``DPConfig.unit``). With ``"individual"`` (default) every step
draws each *individual* (``person_id``) independently with probability ``q`` (Poisson sampling) and trains on one
chunk, drawn uniformly, of each drawn individual (:class:`UnitSampler`). An individual then contributes to a step one
clipped gradient (sensitivity ``C``), present with probability ``q``: the subsampled Gaussian mechanism the RDP
accountant analyses, with individuals as its records, so the reported ε bounds what the model reveals about a
patient, however many notes they have. With ``"chunk"`` the records are the chunks (a patient with ``m`` chunks is
protected at about ``m·ε`` only). ``q = 1 / ⌈N / B⌉`` for ``N`` units and batch size ``B``: an epoch is ``⌈N/B⌉``
steps, the expected batch ``N·q ≤ B``, and Opacus' accountant, which takes ``1 / steps per epoch`` as the sample rate,
uses exactly this ``q``. Per individual, an epoch thus trains on about one chunk of each patient (drawn afresh every
step), not on all their chunks. A draw with no unit is a noise-only step, counted by the accountant (skipping it
would no longer be the analysed mechanism).

**Several chunks per drawn individual** (``Strategy.unit_examples = m``, user-level sampling: DP-SGD-ULS of
Charles, Ganesh, McKenna, McMahan, Mitchell, Pillutla & Rush, "Fine-Tuning Large Language Models with User-Level
Differential Privacy", 2024; "user-wise DP-SGD" in Chua et al., "Mind the Privacy Unit!", 2024). A drawn individual
contributes up to ``m`` of their chunks (``0``: all), drawn uniformly without replacement, and its gradient is their
*mean*, clipped as one (:func:`pool_unit_gradients`):

    g_u = clip_C( (1 / |S_u|) · Σ_{i ∈ S_u} ∇ℓ_i ),     S_u ⊆ chunks(u),  |S_u| = min(m, |chunks(u)|),

so the individual's contribution to a step is still one vector of norm ≤ ``C``, present with probability ``q``: the
mechanism, σ and the accountant are the ones above, unchanged. What changes is how much of the individual's text a
step's vector averages over (one chunk at ``m = 1``, where ``g_u`` is the one-chunk gradient above, bit for bit).

``PrivacyEngine.make_private_with_epsilon`` calibrates the noise multiplier for the target ε over the whole run; the
spent ε reported at every checkpoint (``training_log.json`` and ``run.json``: ``"dp": {"unit", "spent_epsilon",
"delta", ...}``) is the accountant's, not the target.

**DP-LoRA** (``Strategy.lora_rank = r > 0``, :mod:`toolkit.training.lora`): the base weights are frozen and rank-r
adapters of the attention and MLP projections are the only parameters; the sampler, the per-example loss, the
clipping, the noise multiplier and the accountant are the ones above, and the noise has as many coordinates as the
adapters (``"noised_parameters"`` in the ``"dp"`` block). The checkpoints hold the merged model.

**Gradient subspace from public data** (``Strategy.subspace`` = ``"pdp"`` / ``"gep"``,
:mod:`toolkit.training.subspace`): the same loop, sampler, loss, calibration and accountant; the optimizer Opacus
returns is taken over by one that clips and noises in the top-k subspace of the public split's per-example gradients,
recomputed from the public anchors (``public``, never a member's example) every ``subspace_every`` steps.

Two fixes make Hugging Face models work with per-sample gradients (measured on this stack): BERT's MLM output bias
is one ``Parameter`` registered on two modules (``cls.predictions.bias`` and ``decoder.bias``): it is untied for
training and tied back before saving; ``position_ids`` (and ``token_type_ids``) are passed per sample
([batch, length]) so the embedding layers see a batch dimension Opacus can split.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.strategies import Strategy


def untie_mlm_bias(model) -> object | None:
    """Unregister BERT's ``cls.predictions.bias`` (the same Parameter stays as ``decoder.bias``); returns the head."""
    head = getattr(getattr(model, "cls", None), "predictions", None)
    if head is None or getattr(head, "bias", None) is None or head.decoder.bias is not head.bias:
        return None
    del head.bias
    return head


def retie_mlm_bias(head) -> None:
    """Register the decoder's bias as ``cls.predictions.bias`` again (the saved layout Hugging Face expects)."""
    if head is not None:
        head.bias = head.decoder.bias


def example_mean_loss(model, batch: dict, kind: str):
    """``L = mean_i ℓ_i`` with ``ℓ_i`` example *i*'s mean cross-entropy over its own targets (labels != -100;
    causal LMs predict token t+1 from position t). See the module docstring: the per-sample gradient of ``L`` under
    Opacus' ``loss_reduction="mean"`` is ``∇ℓ_i``, independent of the other examples of the batch."""
    import torch

    labels = batch["labels"]
    logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    if kind == "clm":
        logits, labels = logits[:, :-1], labels[:, 1:]
    ce = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=-100,
                                           reduction="none")
    targets = labels != -100
    per_example = (ce * targets).sum(1) / targets.sum(1).clamp(min=1)
    return per_example.mean()


def privacy_units(individuals: Sequence[str], unit: str) -> list[list[int]]:
    """The example indices of every privacy unit: one list per individual (in order of first appearance), or one
    example each for ``unit="chunk"``."""
    if unit == "chunk":
        return [[i] for i in range(len(individuals))]
    if unit != "individual":
        raise ToolkitError(f"dp.unit must be 'individual' or 'chunk', got {unit!r}")
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(individuals):
        groups.setdefault(p, []).append(i)
    return list(groups.values())


class UnitSampler:
    """Batch sampler of DP-SGD: ``steps`` batches; in each, every unit is drawn independently with probability
    ``sample_rate`` (Poisson sampling of units) and contributes one of its examples, drawn uniformly, or with
    ``per_unit = m ≠ 1`` up to ``m`` of them (``0``: all), drawn uniformly without replacement and yielded next to
    each other."""

    def __init__(self, units: Sequence[Sequence[int]], sample_rate: float, steps: int, generator, per_unit: int = 1):
        import torch

        if not units or any(len(u) == 0 for u in units):
            raise ToolkitError("DP-SGD needs at least one privacy unit and an example for every unit")
        sizes = np.array([len(u) for u in units], dtype=np.int64)
        self.flat = torch.as_tensor(np.concatenate([np.asarray(u, dtype=np.int64) for u in units]))
        self.offset = torch.as_tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]))
        self.size = torch.as_tensor(sizes)
        self.sample_rate, self.steps, self.generator = float(sample_rate), int(steps), generator
        self.per_unit = int(per_unit)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        import torch

        n = len(self.size)
        for _ in range(self.steps):
            drawn = (torch.rand(n, generator=self.generator) < self.sample_rate).nonzero().squeeze(1)
            if self.per_unit == 1:
                pick = (torch.rand(len(drawn), generator=self.generator) * self.size[drawn]).long()
                pick = torch.minimum(pick, self.size[drawn] - 1)
                yield self.flat[self.offset[drawn] + pick].tolist()
                continue
            batch: list[int] = []
            for u in drawn.tolist():
                size = int(self.size[u])
                take = size if self.per_unit == 0 else min(self.per_unit, size)
                order = torch.randperm(size, generator=self.generator)[:take]
                batch += self.flat[self.offset[u] + order].tolist()
            yield batch


def pool_unit_gradients(params, unit_ids) -> None:
    """Replace every parameter's per-example gradients (Opacus' ``grad_sample``, ``[rows, *shape]``) by their mean
    over the rows of each privacy unit (``unit_ids``: the unit of every row), ``[units, *shape]`` in order of the
    units' first rows: the clipping that follows then bounds each unit's mean gradient (user-level sampling, see
    the module docstring)."""
    import torch

    _, first, inverse = np.unique(torch.as_tensor(unit_ids).cpu().numpy(), return_index=True, return_inverse=True)
    inverse = torch.as_tensor(np.argsort(np.argsort(first))[inverse])  # each row's unit, numbered by first appearance
    counts = torch.bincount(inverse, minlength=len(first))
    for p in params:
        rows = p.grad_sample  # one backward per step (train_dp): a tensor
        inv = inverse.to(rows.device)
        pooled = torch.zeros((len(first), *rows.shape[1:]), dtype=rows.dtype, device=rows.device)
        pooled.index_add_(0, inv, rows)
        p.grad_sample = pooled / counts.to(rows.device, rows.dtype).view(-1, *([1] * (rows.dim() - 1)))


UNIT_KEY = "_dp_unit"  # an example's privacy unit, carried to the batch as "unit_ids" when units pool several rows


class _UnitDataset:
    """The examples, with ``len()`` = the number of privacy units: Opacus reads the expected batch size as
    ``len(dataset) · sample rate``; the sampler yields example indices."""

    def __init__(self, examples: list[dict], n_units: int, unit_of: Sequence[int] | None = None):
        self.examples, self.n_units, self.unit_of = examples, n_units, unit_of

    def __len__(self) -> int:
        return self.n_units

    def __getitem__(self, i: int) -> dict:
        if self.unit_of is None:
            return self.examples[i]
        return {**self.examples[i], UNIT_KEY: int(self.unit_of[i])}


#: the one Opacus warning :func:`privacy_engine` silences (its message starts so; opacus/privacy_engine.py)
SECURE_RNG_WARNING = "Secure RNG turned off"


def privacy_engine():
    """Opacus' ``PrivacyEngine`` (RDP accountant) with ``secure_mode=False``, without the warning Opacus prints for
    it ("Secure RNG turned off …", :data:`SECURE_RNG_WARNING`) — that one warning only, only while the engine is made.

    Why this is safe here: ``secure_mode`` draws the noise from a cryptographically secure generator (torchcsprng)
    so that an adversary who knows the seed cannot subtract it. The toolkit trains DP models to *audit* them — to
    measure what an attacker recovers — on synthetic or local data, and reports the accountant's ε of the mechanism,
    which does not depend on the generator; its runs are seeded so that they reproduce, which ``secure_mode`` would
    not. A model meant for release under a DP guarantee must be retrained with ``secure_mode=True``
    (docs/cheatsheet.md says so beside ε)."""
    from opacus import PrivacyEngine

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SECURE_RNG_WARNING, category=UserWarning)
        return PrivacyEngine(accountant="rdp")


def train_dp(model, tokenizer, examples: list[dict], strat: Strategy, cfg, run: Path, *,
             individuals: Sequence[str] | None = None, public: Sequence[dict] | None = None,
             progress: bool = True) -> dict[str, Any]:
    """DP-SGD over ``examples`` (``individuals``: the person of each example, needed for ``cfg.dp.unit ==
    "individual"``); exports ``epoch-N`` at ``cfg.epochs``; returns the run's figures with the ``"dp"`` block.
    ``public``: the public split's examples, the anchors of a gradient-subspace strategy (``strat.subspace``)."""
    import torch
    from toolkit.progress import progress_bar
    from toolkit.training.checkpoints import save_checkpoint
    from toolkit.training.hf import make_collator

    unit = cfg.dp.unit
    if unit == "individual" and (individuals is None or len(individuals) != len(examples)):
        raise ToolkitError("DP-SGD per individual needs the individual of every training example")
    units = privacy_units(individuals if individuals is not None else [str(i) for i in range(len(examples))], unit)
    torch.manual_seed(cfg.seed)
    collator = make_collator(tokenizer, strat, cfg)

    def collate(batch: list[dict]):
        if not batch:
            return None
        rows = [dict(b) for b in batch]
        unit_ids = [r.pop(UNIT_KEY) for r in rows] if UNIT_KEY in rows[0] else None
        out = collator(rows)
        if unit_ids is not None:
            out["unit_ids"] = torch.as_tensor(unit_ids)
        n, length = out["input_ids"].shape
        out["position_ids"] = torch.arange(length).unsqueeze(0).expand(n, length).clone()
        if strat.kind == "mlm":
            out["token_type_ids"] = torch.zeros(n, length, dtype=torch.long)
        return out

    steps_per_epoch = -(-len(units) // cfg.batch_size)
    rate = 1.0 / steps_per_epoch
    per_unit = strat.unit_examples
    sampler = UnitSampler(units, rate, steps_per_epoch, torch.Generator().manual_seed(cfg.seed), per_unit)
    unit_of = None
    if per_unit != 1:  # the rows of a unit are pooled into one gradient before clipping
        unit_of = np.empty(len(examples), dtype=np.int64)
        for u, members in enumerate(units):
            unit_of[members] = u
    loader = torch.utils.data.DataLoader(_UnitDataset(examples, len(units), unit_of), batch_sampler=sampler,
                                         collate_fn=collate)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # as the Trainer of the other strategies
    base, head = None, None
    if strat.lora_rank:  # DP-LoRA: the frozen base (kept to merge into at every checkpoint) and its adapters
        from toolkit.training.lora import LORA_ALPHA, add_adapters, adapter_parameters, merged_model

        base = copy.deepcopy(model).cpu()
        model = add_adapters(model, strat.lora_rank)
        params = list(adapter_parameters(model).values())
    else:
        head = untie_mlm_bias(model)
        params = [p for p in model.parameters() if p.requires_grad]
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    engine = privacy_engine()
    epochs = max(cfg.epochs)
    private, optimizer, loader = engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, target_epsilon=cfg.dp.epsilon,
        target_delta=cfg.dp.delta, epochs=epochs, max_grad_norm=cfg.dp.max_grad_norm, poisson_sampling=False)
    sub = None
    if strat.subspace:  # PDP-SGD / GEP: clipping and noise in a subspace of the public anchors' gradients
        from toolkit.training.subspace import PublicSubspace, subspace_optimizer

        sub = PublicSubspace(strat, public or [], collate, lambda m, b: example_mean_loss(m, b, strat.kind),
                             device=device, seed=cfg.seed)
        optimizer = subspace_optimizer(optimizer, engine.accountant, rate, strat.subspace)
    total = steps_per_epoch * epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, (lambda s: max(0.0, 1 - s / total)) if cfg.lr_schedule == "linear" else (lambda s: 1.0))

    n_params = sum(p.numel() for p in params)
    noised = n_params if sub is None else sub.noised_coordinates(n_params)

    def dp_block(eps: float) -> dict[str, Any]:
        return {"unit": unit, "spent_epsilon": eps, "delta": cfg.dp.delta, "target_epsilon": cfg.dp.epsilon,
                "max_grad_norm": cfg.dp.max_grad_norm, "noise_multiplier": optimizer.noise_multiplier,
                "sample_rate": rate, "n_units": len(units), "n_examples": len(examples),
                "expected_batch_size": len(units) * rate, "steps_per_epoch": steps_per_epoch,
                "noise_only_steps": empty, "noised_parameters": noised, "unit_examples": per_unit,
                **({"lora_rank": strat.lora_rank, "lora_alpha": LORA_ALPHA} if base is not None else {}),
                **(sub.dp_fields(optimizer) if sub is not None else {})}

    history: list[dict[str, Any]] = []
    empty, tokens, t0, step = 0, 0, time.perf_counter(), 0
    bar = progress_bar(total=total, desc=f"train {strat.name} (DP-SGD)", unit="step", enabled=progress)
    for epoch in range(1, epochs + 1):
        losses = []
        bar.set_description(f"train {strat.name} (DP-SGD) epoch {epoch}/{epochs}", refresh=False)
        for batch in loader:
            bar.update(1)
            if sub is not None:  # the basis from the public anchors' gradients at the current weights
                sub.refresh(private, optimizer, step)
            optimizer.zero_grad(set_to_none=True)
            if batch is None:  # no unit drawn: the mechanism still releases noise, and the accountant counts it
                empty += 1
                for p in optimizer.params:
                    p.grad_sample = torch.zeros((0, *p.shape), device=p.device, dtype=p.dtype)
            else:
                unit_ids = batch.pop("unit_ids", None)
                batch = {k: v.to(device) for k, v in batch.items()}
                loss = example_mean_loss(private, batch, strat.kind)
                with warnings.catch_warnings():  # DP-LoRA: no input of the first hooked module requires a gradient
                    warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
                    loss.backward()
                if unit_ids is not None:  # one gradient per unit: the mean of its rows', clipped next
                    pool_unit_gradients(optimizer.params, unit_ids)
                losses.append(float(loss.detach()))
                tokens += int(batch["attention_mask"].sum())
            optimizer.step()
            scheduler.step()
            step += 1
        eps = float(engine.get_epsilon(cfg.dp.delta))
        history.append({"epoch": epoch, "step": step, "loss": float(sum(losses) / max(len(losses), 1)),
                        "epsilon": eps, "delta": cfg.dp.delta, "unit": unit, "noise_only_steps": empty})
        if epoch in cfg.epochs:
            retie_mlm_bias(head)
            saved = private._module if base is None else merged_model(base, private._module)
            save_checkpoint(saved, tokenizer, run / f"epoch-{epoch}",
                            {"strategy": strat.name, "epoch": epoch, "global_step": step, "log_history": history,
                             "dp": dp_block(eps)})
            if head is not None:
                del head.bias
    bar.close()
    retie_mlm_bias(head)
    seconds = time.perf_counter() - t0
    return {"steps": step, "train_seconds": round(seconds, 1), "tokens_per_second": round(tokens / seconds, 1),
            "dp": dp_block(history[-1]["epsilon"])}


__all__ = ["SECURE_RNG_WARNING", "UnitSampler", "example_mean_loss", "pool_unit_gradients", "privacy_engine",
           "privacy_units", "retie_mlm_bias", "train_dp", "untie_mlm_bias"]
