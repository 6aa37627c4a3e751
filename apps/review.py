# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Vocabulary review
#
# Is each token below a **name**? The tokens are what the language model predicted where a name had been removed
# from a sentence (paper 003, methods.md §7). Names you confirm are removed from the model's vocabulary afterwards.
#
# Click **Name**, **Not a name** or **Unsure** (or press `n`, `x`, `u`; `z` undoes the last decision, `j`/`k` move
# on and back). Every decision is saved at once: you can close this page at any time and continue later from where
# you stopped.
#
# Start the app with `python -m toolkit review CANDIDATES --reviewer "Your Name"` (or `make review REVIEWER="Your
# Name"`): it serves this page on this machine only, behind a random token it prints once with the address; a request
# without the token is refused. Your name is fixed for the session, and your decisions go to a file of your own
# beside the candidates. The page shows candidate tokens and sentences of the corpus: treat it like the corpus.

# %%
from toolkit.review.widget import review_app

review_app()
