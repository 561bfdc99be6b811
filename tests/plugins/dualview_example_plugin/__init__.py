"""An example plugin: a model family, an objective, an LLM backend, a synthesis task and a
benchmark, registered through entry points."""
