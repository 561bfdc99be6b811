"""Hugging Face Hub artifacts: dataset and model cards, the dataset export and the upload.

- `dualview.hub.provenance`: what built a training file (mix manifest, synthesis and
  verification stats, human review), gathered from the files beside it.
- `dualview.hub.dataset`: ``dualview export --to hub-dataset OUT``, a folder that
  ``datasets.load_dataset(OUT)`` loads, with a dataset card.
- `dualview.hub.model_card`: the sentence-transformers model card of a saved model.
- `dualview.hub.card_results`: the eval results a card may show (the model's own, by
  fingerprint) and their ``model-index`` entries (Hub dataset ids, mteb metric keys).
- `dualview.hub.push`: ``dualview push``, an upload through ``huggingface_hub``.
"""
