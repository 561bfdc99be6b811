"""Encoding, search and document text: what training, mining and evaluation share.

This package sits below both `dualview.data` (mining) and `dualview.eval`, so
neither imports the other for these:

- `dualview.retrieval.text`: the text a model reads for a document (``title text``);
- `dualview.retrieval.encode`: `dualview.retrieval.encode.Encoder`, batched and
  cached encoding with any sentence-transformers model;
- `dualview.retrieval.search`: exact top-k and reranking over embeddings.
"""
