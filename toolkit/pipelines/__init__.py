"""Experiment pipelines: steps chained with one cache rule (a step's key is a hash of its inputs)."""
