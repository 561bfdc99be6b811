"""Encoding, search and document text: what training, mining and evaluation share.

This package sits below both :mod:`dualview.data` (mining) and :mod:`dualview.eval`, so
neither imports the other for these:

- :mod:`dualview.retrieval.text`: the text a model reads for a document (``title text``);
- :mod:`dualview.retrieval.encode`: :class:`~dualview.retrieval.encode.Encoder`, batched and
  cached encoding with any sentence-transformers model;
- :mod:`dualview.retrieval.search`: exact top-k and reranking over embeddings.
"""
