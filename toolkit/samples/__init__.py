"""Synthetic sample corpora shipped in ``data_samples/`` (all names, numbers and addresses are made up).

* :func:`generate_clinical` — clinical notes about patients with gold PHI spans (i2b2 labels), public / train /
  heldout / test splits by patient, rare patient-specific terms and a smoking-status label.
* :func:`generate_email` — Enron-style e-mails with a heavy-tailed address frequency and extraction prompts.
* :func:`toolkit.samples.email.public_email_corpus` — Enron-style e-mails among other people: the public corpus
  the tiny e-mail base model is pre-trained on (notebook 04 passes it to ``ensure_email_base``).

``python -m toolkit.samples [--out data_samples]`` regenerates every file bit for bit (see ``data_samples/README.md``).
"""

from __future__ import annotations

from toolkit.samples.clinical import build_clinical, generate_clinical, write_clinical
from toolkit.samples.email import build_email, generate_email, write_email

__all__ = ["build_clinical", "build_email", "generate_clinical", "generate_email", "write_all", "write_clinical",
           "write_email"]


def write_all(out_dir, seed: int = 0) -> list:
    """Write every sample file under ``out_dir`` (the README is kept in the repository, not generated)."""
    from pathlib import Path

    out = Path(out_dir)
    return write_clinical(out, seed=seed) + write_email(out, seed=seed)
