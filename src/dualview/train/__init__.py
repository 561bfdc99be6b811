"""Bi-encoder training: model, batching, losses, trainer (see docs/architecture/train.md)."""
