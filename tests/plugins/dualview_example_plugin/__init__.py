"""An example plugin: a model family and an objective registered through entry points."""
