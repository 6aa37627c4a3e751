"""toolkit.heap: every scoring pass hands the heap it freed back to the system (glibc), harmless elsewhere."""

from __future__ import annotations

import platform

import pytest

from toolkit import heap
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

TEXTS = [f"Note {i}: patient seen by the nurse in the morning, aspirin given, knee pain at rest." for i in range(6)]
TINY = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_length=64)


def test_release_heap_is_a_bool_and_resolves_on_glibc():
    assert isinstance(heap.release_heap(), bool)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert heap._trim() is not None


@pytest.mark.parametrize("kind", ["mlm", "clm"])
def test_every_scoring_pass_releases_the_heap(kind, monkeypatch):
    """The masked (pseudo-log-likelihood) and the causal pass each release it once at their end: without it the
    process kept ~1 MB per scored text (toolkit.heap's docstring)."""
    from toolkit.audit import losses, pll

    calls = []
    monkeypatch.setattr(pll, "release_heap", lambda: calls.append("mlm") or True)
    monkeypatch.setattr(losses, "release_heap", lambda: calls.append("clm") or True)
    tok = train_tokenizer(TEXTS * 3, kind, 200)
    model = init_model(tok, TinyModelConfig(kind=kind, **TINY), seed=0).eval()
    losses.sequence_log_likelihoods(model, tok, TEXTS, progress=False, pll_copies=4 if kind == "mlm" else None)
    assert calls == [kind]


def test_release_heap_often_is_throttled(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "release_heap", lambda: calls.append(1) or True)
    monkeypatch.setattr(heap, "_last", [0.0])
    assert heap.release_heap_often(seconds=60) is True
    assert heap.release_heap_often(seconds=60) is False and calls == [1]  # within the minute: not again
    assert heap.release_heap_often(seconds=0) is True and calls == [1, 1]
