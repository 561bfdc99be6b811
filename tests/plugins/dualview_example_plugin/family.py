"""``model.kind: frozen_embeddings_bi_encoder``: a bi-encoder whose token embeddings are not
trained (a common choice when a small training set would otherwise drift rare tokens)."""

from __future__ import annotations

from torch import nn

from dualview.models.config import ModelConfig
from dualview.train.families import BiEncoderFamily


class FrozenEmbeddingsFamily(BiEncoderFamily):
    """`BiEncoderFamily` with the backbone's input embeddings frozen."""

    def build(self, config: ModelConfig) -> nn.Module:
        model = super().build(config)
        for param in model.backbone.get_input_embeddings().parameters():
            param.requires_grad_(False)
        return model


FAMILY = FrozenEmbeddingsFamily("frozen_embeddings_bi_encoder")
