"""Training for every model family (bi-encoders, cross-encoders, LLM rerankers): batching,
objectives, the families, the GradCache step and the trainer (docs/architecture/train.md)."""
