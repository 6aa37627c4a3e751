"""Spies on the DP hyper-parameter search's entry points that read documents besides training (the identifier
analysis and the validation scoring), shared by the search's tests (test_hp_search, test_public_reserve)."""

from __future__ import annotations


def spy_identifiers_and_scoring(monkeypatch, seen: list) -> None:
    """Record ``("identifiers", people)`` and ``("score", people)`` in ``seen`` for every call, then call through."""
    import toolkit.pipelines.hp_search as hp
    import toolkit.pipelines.steps as steps

    real_ids, real_score = steps.identifiers, hp.validation_utility

    def spy_ids(corpus, *a, **kw):
        seen.append(("identifiers", set(corpus.person_ids)))
        return real_ids(corpus, *a, **kw)

    def spy_score(checkpoint, validation, *a, **kw):
        seen.append(("score", set(validation.person_ids)))
        return real_score(checkpoint, validation, *a, **kw)

    monkeypatch.setattr(steps, "identifiers", spy_ids)
    monkeypatch.setattr(hp, "validation_utility", spy_score)
