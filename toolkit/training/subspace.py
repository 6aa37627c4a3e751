"""DP-SGD in a gradient subspace found on public data: PDP-SGD (``*_dp_pdp``) and GEP (``*_dp_gep``) (methods.md §3).

DP-SGD's noise has one coordinate per weight, so its norm ``σ·C·√P`` (P = 941,568 on the CPU profile's GPT-2) dwarfs a
clipped signal of norm ``≤ C``. Both methods below spend the noise in a ``k``-dimensional subspace instead, ``k ≪ P``,
spanned by the gradients of *public* examples — the public reserve (``corpus.public_reserve``: public patients held
back from the base model) when the corpus has one, else the public split the base was pre-trained on; never a
member's data — so the subspace costs no privacy. Which public data matters: the base's own pre-training patients'
gradients at its weights are what it still gets wrong on text it was trained on, and hold almost none of what
fine-tuning on new patients teaches; patients it has not seen do (docs/results.md, "PDP-SGD's subspace").

**The subspace.** At the current weights θ, the per-example gradients ``a_1 … a_m ∈ R^P`` of ``m`` fixed public
anchor examples (:func:`anchor_gradients`: Opacus' per-sample gradients of the same per-example loss as training,
``example_mean_loss``, dropout off) form ``G ∈ R^{m×P}``; the basis ``V ∈ R^{P×k}`` holds the top-k eigenvectors of
the (non-centred) second-moment matrix ``M = (1/m)·GᵀG`` — the top-k right singular vectors of ``G``
(:func:`top_subspace`). With ``m`` a few hundred it is computed exactly through the ``m×m`` Gram matrix,
``G·Gᵀ = U·Λ·Uᵀ``, ``V = Gᵀ·U_k·Λ_k^{-1/2}``, where the authors use one power iteration from a random start (GEP) or
Lanczos (PDP-SGD), both approximations of the same ``V``; exact, the basis is a deterministic function of θ and the
public anchors. Both papers recompute it at every step; here every ``Strategy.subspace_every`` steps (default 1, the
papers' choice; the registered rows: 10, because on the CPU profile one basis costs ~12 s — 9 s for the anchors'
per-sample gradients, 3 s for the Gram matrix and QR — against ~1.2 s for a training step, measured on the 2-core
machine, one thread). ``m = 2k`` anchors (:data:`ANCHORS_PER_RANK`: the authors use 2,000 anchors for k = 1,000
(GEP) and 100 for k = 50–70 (PDP-SGD)), drawn once from the public split's chunks with the run's seed.

**PDP-SGD** (Zhou, Wu & Banerjee, ICLR 2021), ``subspace = "pdp"``: each example's gradient is clipped to ``C`` in the
ambient space (Opacus' clipping, unchanged), and the noisy sum is projected,

    g̃ = V·(Vᵀ·Σ_{i∈B} clip_C(g_i) + z),      z ~ N(0, σ²C²·I_k),

which is the authors' code's ``V·Vᵀ·(Σ clip_C(g_i) + N(0, σ²C²·I_P))`` in distribution (``Vᵀ`` of isotropic noise is
isotropic in k dimensions). The noise has k coordinates. The release ``Vᵀ·Σ clip_C(g_i) + z`` is the Gaussian
mechanism of sensitivity ``C`` (``‖Vᵀ·clip_C(g)‖ ≤ C``) with noise multiplier σ: the accounting is DP-SGD's.

**GEP** (Yu, Zhang, Chen & Liu, ICLR 2021), ``subspace = "gep"``: each gradient is split into its embedding
``w_i = Vᵀ·g_i ∈ R^k`` and its residual ``r_i = g_i − V·w_i ∈ R^P``, each clipped on its own (``C₀ = C``,
``C₁ = GEP_RESIDUAL_CLIP · C``), and two noisy sums are released,

    ŵ = Σ clip_{C₀}(w_i) + N(0, σ_r²C₀²·I_k),     r̂ = Σ clip_{C₁}(r_i) + N(0, σ_r²C₁²·I_P),     g̃ = V·ŵ + r̂

(the unbiased GEP; the residual noise keeps all P coordinates, scaled by ``C₁/C₀``: ``"noised_parameters"`` = k + P).
**Its accounting**: scaled by ``1/C₀`` and ``1/C₁`` (invertible post-processing) the two releases are one vector
``Σ_i u_i + N(0, σ_r²·I_{k+P})`` with ``u_i = (clip(w_i)/C₀, clip(r_i)/C₁)``, ``‖u_i‖ ≤ √2`` — the Gaussian mechanism of
sensitivity √2, i.e. of noise multiplier ``σ_r/√2``, on the same Poisson sample of individuals as DP-SGD. So

    σ_r = √2 · σ,     σ = the noise multiplier Opacus calibrates for (ε, δ, q, steps) (``make_private_with_epsilon``),

and the RDP accountant, fed σ, reports the run's ε (``"noise_multiplier"`` = σ, ``"release_noise_multiplier"`` = σ_r
in the ``"dp"`` block). GEP's code (``utils.py``, ``get_sigma(..., rgp=True)``: "when using residual gradients, the
sensitivity is sqrt(2)") doubles the RDP of one release instead, which equals this at q = 1 but is smaller under
subsampling (ε 8.7 against 11.7 at q = 1/7, 56 steps, σ_r = 1.2): the two releases share one sample, so they are one
subsampled mechanism, not two independently subsampled ones; the joint mechanism is the one accounted here.

Why the accounting is otherwise DP-SGD's: V depends on the public anchors and on θ_t, itself a post-processing of the
releases before step t (adaptive composition); no member's data reaches V. The sampler (``UnitSampler``, individuals
Poisson-sampled), the per-example loss, σ's calibration and the accountant are :mod:`toolkit.training.dp`'s.

**Size.** V is ``P × k`` float32 (k = 64 on the CPU profile: 241 MB; the anchors' ``G`` 482 MB while a basis is
computed), so k is kept in the tens (the rows' ``subspace_rank``): PDP-SGD's noise norm ``σ·C·√k`` is then
``√(P/k)`` ≈ 121× smaller than DP-SGD's ``σ·C·√P``. GEP's parameter groups (a basis per group, to save
memory at P = 0.27M and k = 1,000) are not used: one basis over every trained weight.

Reference code read: ``dayu11/Gradient-Embedding-Perturbation`` — ``models/basis_matching.py`` (``get_bases``: power
iteration, ``GEP.forward``: embedding and residual clipping), ``main.py`` (the anchor space recomputed every batch,
noise ``σ·clip0`` and ``σ·clip1``, ``--clip0 5 --clip1 2 --num_bases 1000 --aux_data_size 2000``), ``utils.py``
(``get_sigma``); ``YingxueZhou0877/Priavte-SGD-with-subspace-identification`` — ``fashion-mnist-cnn/
run_cnn_fmnist_sgd_proj.py`` (``train_per_sample_clip``: ambient clipping and noise, then the projection
``V_k·V_kᵀ·g`` recomputed at every step from 100 public examples) and ``fashion-mnist-cnn/lanczos.py``
(``eval_Mt_vec_prod``: ``M_t = (1/m)·Σ g_j g_jᵀ`` of the public per-example gradients).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.strategies import SUBSPACE_METHODS as METHODS

#: public anchors per basis dimension: m = 2k (GEP: 2,000 anchors for k = 1,000; PDP-SGD: 100 for k = 50-70)
ANCHORS_PER_RANK = 2
#: GEP's residual clipping threshold as a fraction of the embedding's, C₁ = 0.4·C₀ (the authors' clip0 = 5, clip1 = 2)
GEP_RESIDUAL_CLIP = 0.4
#: anchors per forward/backward pass while a basis is computed (memory: chunk × P per-sample gradients)
ANCHOR_CHUNK = 16


def flat_grads(per_param) -> Any:
    """``[n, P]``: each example's gradient over every parameter, flattened and concatenated in ``per_param``'s order
    (``per_param``: one ``[n, *shape]`` tensor per parameter, as Opacus' ``grad_sample``)."""
    import torch

    return torch.cat([g.reshape(g.shape[0], math.prod(g.shape[1:])) for g in per_param], dim=1)


def anchor_gradients(module, batches: Sequence[dict], loss_fn: Callable, params: Sequence) -> Any:
    """``G ∈ R^{m×P}``: the per-example gradients of the public anchor ``batches`` at the current weights, from the
    per-sample gradients Opacus' ``GradSampleModule`` ``module`` computes for ``loss_fn(module, batch)``; dropout off
    (the layers holding ``params`` stay in training mode: Opacus records activations only there). Leaves every
    ``grad_sample`` and ``grad`` empty and the modules' modes as they were."""
    import torch

    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    for m in module.modules():
        if any(p.requires_grad for p in m.parameters(recurse=False)):
            m.train()
    rows = []
    try:
        for batch in batches:
            for p in params:
                p.grad_sample, p.grad = None, None
            with warnings.catch_warnings():  # no input of the first hooked module (the embedding) needs a gradient
                warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
                loss_fn(module, batch).backward()
            rows.append(flat_grads([p.grad_sample for p in params]).detach().clone())
    finally:
        for p in params:
            p.grad_sample, p.grad = None, None
        for m, mode in modes:
            m.train(mode)
    return torch.cat(rows)


def top_subspace(grads, rank: int):
    """``V ∈ R^{P×k}`` with orthonormal columns spanning the top-``rank`` eigenvectors of ``(1/m)·GᵀG`` (``grads`` =
    ``G``, ``m × P``): ``G·Gᵀ = U·Λ·Uᵀ`` (float64), ``V = Gᵀ·U_k·Λ_k^{-1/2}``, re-orthonormalised (QR). A
    :class:`ToolkitError` when the anchors span fewer than ``rank`` directions."""
    import torch

    m = grads.shape[0]
    if rank > m:
        raise ToolkitError(f"a rank-{rank} gradient subspace needs at least {rank} public anchors, got {m}")
    vals, vecs = torch.linalg.eigh((grads @ grads.T).double())
    vals, vecs = vals.flip(0)[:rank], vecs.flip(1)[:, :rank]
    if not float(vals[-1]) > 1e-10 * max(float(vals[0]), 1e-300):
        raise ToolkitError(f"the public anchors' gradients span fewer than {rank} directions")
    basis, _ = torch.linalg.qr(grads.T @ (vecs / vals.sqrt()).to(grads.dtype))
    return basis


def _noise(std: float, size: int, like, generator):
    import torch

    if std == 0:
        return torch.zeros(size, device=like.device, dtype=like.dtype)
    return torch.randn(size, device=like.device, dtype=like.dtype, generator=generator) * std


def subspace_optimizer_class():
    """:class:`opacus.optimizers.DPOptimizer` with clipping and noise in the subspace (built lazily: Opacus imports
    torch)."""
    import torch
    from opacus.optimizers import DPOptimizer

    class SubspaceDPOptimizer(DPOptimizer):
        """Opacus' DP optimizer whose ``clip_and_accumulate`` / ``add_noise`` are PDP-SGD's or GEP's (module
        docstring); ``basis`` (``P × k``, set by :class:`PublicSubspace`) over ``self.params`` in order.
        ``noise_multiplier`` stays the accounted σ (the accountant's step hook reads it)."""

        def __init__(self, optimizer, *, method: str, residual_clip: float = GEP_RESIDUAL_CLIP, **kwargs):
            if method not in METHODS:
                raise ToolkitError(f"subspace method must be one of {', '.join(METHODS)}, got {method!r}")
            super().__init__(optimizer, **kwargs)
            self.method, self.residual_clip = method, float(residual_clip)
            self.basis, self.summed_embedding = None, None

        @property
        def release_noise_multiplier(self) -> float:
            """σ_r: σ for PDP-SGD, √2·σ for GEP's two releases (module docstring)."""
            return self.noise_multiplier * (math.sqrt(2) if self.method == "gep" else 1.0)

        def _flat(self, attr: str):
            return torch.cat([getattr(p, attr).reshape(-1) for p in self.params])

        def _scatter(self, flat, attr: str) -> None:
            offset = 0
            for p in self.params:
                setattr(p, attr, flat[offset:offset + p.numel()].view_as(p).to(p.dtype))
                offset += p.numel()

        def clip_and_accumulate(self):
            if self.basis is None:
                raise ToolkitError("the gradient subspace has no basis yet (PublicSubspace.refresh before a step)")
            if self.method == "pdp":  # ambient clipping to C, Opacus' own
                return super().clip_and_accumulate()
            grads = flat_grads(self.grad_samples).to(self.basis.dtype)
            emb = grads @ self.basis
            res = grads - emb @ self.basis.T
            c0, c1 = self.max_grad_norm, self.residual_clip * self.max_grad_norm
            f0 = (c0 / (emb.norm(dim=1) + 1e-6)).clamp(max=1.0)
            f1 = (c1 / (res.norm(dim=1) + 1e-6)).clamp(max=1.0)
            self.summed_embedding = f0 @ emb
            self._scatter(f1 @ res, "summed_grad")

        def add_noise(self):
            std = self.release_noise_multiplier * self.max_grad_norm
            summed = self._flat("summed_grad")
            if self.method == "pdp":
                flat = self.basis @ (self.basis.T @ summed + _noise(std, self.basis.shape[1], summed, self.generator))
            else:
                emb = self.summed_embedding + _noise(std, self.basis.shape[1], summed, self.generator)
                flat = self.basis @ emb + summed + _noise(std * self.residual_clip, summed.numel(), summed,
                                                          self.generator)
            self._scatter(flat, "grad")

        def zero_grad(self, set_to_none: bool = False):
            super().zero_grad(set_to_none)
            self.summed_embedding = None

    return SubspaceDPOptimizer


def subspace_optimizer(dp_optimizer, accountant, sample_rate: float, method: str):
    """The :func:`subspace_optimizer_class` optimizer taking over ``dp_optimizer`` (the one
    ``make_private_with_epsilon`` returned: its inner optimizer, σ, C, expected batch size, generator), its steps
    recorded by ``accountant`` at ``sample_rate`` as Opacus' own hook does."""
    optimizer = subspace_optimizer_class()(
        dp_optimizer.original_optimizer, method=method, noise_multiplier=dp_optimizer.noise_multiplier,
        max_grad_norm=dp_optimizer.max_grad_norm, expected_batch_size=dp_optimizer.expected_batch_size,
        loss_reduction=dp_optimizer.loss_reduction, generator=dp_optimizer.generator,
        secure_mode=dp_optimizer.secure_mode)
    optimizer.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=sample_rate))
    return optimizer


def select_anchors(examples: Sequence[dict], n: int, seed: int) -> list[dict]:
    """``n`` of the public ``examples`` (all of them if there are fewer), drawn once with ``seed``, in order."""
    import numpy as np

    if len(examples) <= n:
        return list(examples)
    keep = np.sort(np.random.default_rng(seed).choice(len(examples), size=n, replace=False))
    return [examples[int(i)] for i in keep]


class PublicSubspace:
    """The basis of a subspace strategy's optimizer, recomputed from the public anchors every ``strat.subspace_every``
    steps. ``anchors``: the public split's examples (never a member's); ``collate``: the training collator;
    ``loss_fn(module, batch)``: the training loss."""

    def __init__(self, strat, anchors: Sequence[dict], collate: Callable, loss_fn: Callable, *, device, seed: int):
        import torch

        if strat.subspace not in METHODS or strat.subspace_rank < 1:
            raise ToolkitError(f"strategy {strat.name} is not a gradient-subspace strategy")
        if not anchors:
            raise ToolkitError(f"strategy {strat.name} needs the public split's documents (corpus.public_split)")
        self.method, self.rank, self.every = strat.subspace, strat.subspace_rank, strat.subspace_every
        chosen = select_anchors(anchors, ANCHORS_PER_RANK * self.rank, seed)
        with torch.random.fork_rng(devices=[]):  # MLM masks of the anchors: fixed, the training RNG untouched
            torch.manual_seed(seed)
            self.batches = [collate(list(chosen[i:i + ANCHOR_CHUNK])) for i in range(0, len(chosen), ANCHOR_CHUNK)]
        self.n_anchors, self.loss_fn, self.device, self.refreshes = len(chosen), loss_fn, device, 0

    def refresh(self, module, optimizer, step: int) -> None:
        """A new ``optimizer.basis`` from the anchors' gradients at the current weights, at step 0 and every
        ``every`` steps."""
        if optimizer.basis is not None and step % self.every:
            return
        optimizer.basis = None  # the old basis freed before the anchors' gradients take their memory
        batches = [{k: v.to(self.device) for k, v in b.items()} for b in self.batches]
        optimizer.basis = top_subspace(anchor_gradients(module, batches, self.loss_fn, optimizer.params), self.rank)
        self.refreshes += 1

    def noised_coordinates(self, n_parameters: int) -> int:
        """The noise's coordinates: k (PDP-SGD), k + P (GEP: the embedding and the residual)."""
        return self.rank + (n_parameters if self.method == "gep" else 0)

    def dp_fields(self, optimizer) -> dict[str, Any]:
        """The ``"dp"`` block's subspace entries."""
        return {"subspace": self.method, "subspace_rank": self.rank, "subspace_anchors": self.n_anchors,
                "subspace_every": self.every, "subspace_refreshes": self.refreshes,
                "release_noise_multiplier": optimizer.release_noise_multiplier,
                **({"residual_clip": optimizer.residual_clip * optimizer.max_grad_norm}
                   if self.method == "gep" else {})}


__all__ = ["ANCHORS_PER_RANK", "ANCHOR_CHUNK", "GEP_RESIDUAL_CLIP", "METHODS", "PublicSubspace", "anchor_gradients",
           "flat_grads", "select_anchors", "subspace_optimizer", "subspace_optimizer_class", "top_subspace"]
