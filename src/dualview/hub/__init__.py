"""Hugging Face Hub artifacts: dataset and model cards, the dataset export and the upload.

- `dualview.hub.provenance`: what built a training file (mix manifest, synthesis and
  verification stats, human review), gathered from the files beside it.
- `dualview.hub.dataset`: ``dualview export --to hub-dataset OUT``, a folder that
  ``datasets.load_dataset(OUT)`` loads, with a dataset card.
- `dualview.hub.model_card`: the sentence-transformers model card of a saved model.
- `dualview.hub.push`: ``dualview push``, an upload through ``huggingface_hub``.
"""
