"""Configuration of ``dualview train`` (YAML, strict: unknown keys are errors).

The model part (`ModelConfig`, `LoraSettings`) lives with the models in
`dualview.models.config`; it is re-exported here because a training YAML nests it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SerializeAsAny, field_validator, model_validator

from dualview.config import StrictModel
from dualview.models.config import LoraSettings, ModelConfig
from dualview.registry import UnknownNameError
from dualview.train.objectives import (
    ObjectiveSettings,
    build_objective,
    objective_settings,
    objectives_needing,
)
from dualview.train.objectives.inf_embed import MarginalSet

ViewPolicy = Literal["together", "separate", "random"]
#: ``loss.temperature`` when the config leaves it out: bi-encoders divide cosine
#: similarities by it, rerankers their logits.
DEFAULT_RERANK_TEMPERATURE = 1.0


class DataConfig(StrictModel):
    """Training file (the output of ``dualview mix``) and how batches are built."""

    train_file: Path
    num_negatives: int = Field(30, ge=0)
    view_policy: ViewPolicy = "together"
    drop_last: bool = True
    # Threads that read, build and tokenize batches ahead of the step ("auto": 2 when
    # training on a GPU, 0 on CPU, where the step itself needs the cores).
    num_workers: int | Literal["auto"] = "auto"
    prefetch_batches: int = Field(2, gt=0)  # per worker

    @field_validator("num_workers")
    @classmethod
    def _workers_not_negative(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 0:
            raise ValueError("must be >= 0 or 'auto'")
        return value


#: The ``loss:`` block: the settings of the objective it names, each objective its own class
#: (`dualview.train.objectives.base`, "Settings by objective"); `TrainConfig` validates the
#: block through `objective_settings`. Constructed directly it is the base class (an
#: objective whose only setting is the temperature).
LossConfig = ObjectiveSettings


class OptimConfig(StrictModel):
    """AdamW with warm-up and a decay schedule."""

    lr: float = Field(2e-5, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_steps: int = Field(0, ge=0)
    warmup_ratio: float = Field(0.0, ge=0, le=1)
    schedule: Literal["linear", "cosine", "constant"] = "linear"
    max_grad_norm: float | None = 1.0
    # The interaction head (model.interaction other than concat) is a fresh module on a
    # pretrained backbone: it gets its own parameter group. Our choice: 50x the backbone's
    # default lr and no weight decay (decay would pull its identity/zero start toward 0).
    head_lr: float = Field(1e-3, gt=0)
    head_weight_decay: float = Field(0.0, ge=0)
    # AdamW's fused kernel (one launch for all parameters): None = on when every parameter is
    # on CUDA (the default since fused AdamW exists); true/false force it (true works on CPU).
    fused: bool | None = None


#: Keys added after runs had been saved whose defaults do exactly what those runs did (issue
#: 33's speed options): a checkpoint's config snapshot without one resumes as unchanged while
#: the key stays at its default. A key whose default changes what a run does is not listed
#: (``optim.head_lr``: older runs trained the head at another lr), so its absence is a change.
NEUTRAL_NEW_KEYS = frozenset(
    {
        "pad_multiple",
        "gradcache_max_tokens",
        "gradcache_retain_last",
        "gradcache_retain_tokens",
        "varlen_kernel",
        "optim.fused",
        "loss.teacher",
    }
)


class TrainConfig(StrictModel):
    """Everything ``dualview train CONFIG.yaml`` needs."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig
    # The objective's own settings class, written with all its fields (SerializeAsAny).
    loss: SerializeAsAny[LossConfig] = Field(default_factory=LossConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    output_dir: Path
    batch_size: int = Field(32, gt=0)  # queries per (global) batch
    grad_accumulation_steps: int = Field(1, gt=0)
    # GradCache: None = off; an int = texts per chunk; "auto" = chunks bounded in tokens by
    # what fits in GPU memory (measured at start-up). Chunks hold length-sorted texts.
    gradcache_chunk_size: int | Literal["auto"] | None = None
    # With gradcache_chunk_size "auto": this many padded tokens per chunk instead of the
    # budget measured at start-up (a chunk-size sweep; None: measured).
    gradcache_max_tokens: int | None = Field(None, gt=0)
    # GradCache: the last chunk keeps its graph from the no-grad pass instead of running twice
    # (same gradient, same peak memory; false: every chunk runs twice, as before).
    gradcache_retain_last: bool = True
    # With retain_last, the chunks before the last keep their graphs too while their padded
    # tokens together fit in this many (each then runs once; peak memory is that of one chunk
    # of this size). None: on a GPU, the tokens the measured memory fits (the uncapped "auto"
    # budget, dualview.train.memory); on CPU, 0 (the last chunk only). Same gradient.
    gradcache_retain_tokens: int | None = Field(None, ge=0)
    # GradCache chunk widths are rounded up to a multiple of this (8: tensor-core friendly;
    # 64 or 128: a few static shapes for compile). Padding is masked: same losses.
    pad_multiple: int = Field(8, gt=0)
    epochs: int = Field(1, gt=0)
    # Optimizer steps of the run; when set it overrides epochs, as in Hugging Face's Trainer
    # (batches cycle over epochs as needed; the schedule is computed from it: train/schedule.py).
    max_steps: int | None = Field(None, gt=0)
    seed: int = 42
    # "auto": bf16 autocast on a GPU that supports it (else fp16), fp32 on CPU.
    mixed_precision: Literal["auto", "no", "fp16", "bf16"] = "auto"
    # torch.compile: true compiles the whole backbone (dynamic shapes); "layers" compiles
    # each transformer layer on its own (one compiled code shared by all layers: far less
    # compile time), best with pad_multiple 64 so chunk widths come in a few shapes.
    compile: bool | Literal["layers"] = False
    # Attention kernel of packed chunks (model.unpadded): "auto" (flash-attn's varlen kernel
    # when installed, else SDPA on nested tensors), "nested", "torch_flash" (PyTorch's own
    # flash-attention varlen kernel; CUDA, bf16/fp16), "flash_attn" (the package).
    varlen_kernel: Literal["auto", "nested", "torch_flash", "flash_attn"] = "auto"
    checkpoint_every: int = Field(500, gt=0)
    keep_checkpoints: int = Field(2, gt=0)
    log_every: int = Field(1, gt=0)
    tracking: Literal["none", "tensorboard", "wandb"] = "none"
    deepspeed_config: Path | None = None

    @field_validator("loss", mode="before")
    @classmethod
    def _objective_settings(cls, value: object) -> object:
        return objective_settings(value)

    @field_validator("gradcache_chunk_size")
    @classmethod
    def _chunk_positive(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value <= 0:
            raise ValueError("must be > 0, 'auto' or null")
        return value

    @model_validator(mode="after")
    def _objective_fits_kind(self) -> TrainConfig:
        # The kind's family says whether it scores pairs (a reranker) or embeds; the
        # objective whether it needs pairs scored. The messages list the registered choices.
        # The families import the models (transformers): loaded when a config is validated,
        # not when the CLI starts.
        from dualview.train.families import FAMILIES, pair_scoring_kinds

        if self.model.kind not in FAMILIES:
            raise ValueError(FAMILIES.unknown_message(self.model.kind))
        family = FAMILIES.get(self.model.kind)
        if self.pad_multiple != 8 and not family.rounds_chunk_widths:
            raise ValueError(f"pad_multiple: a {self.model.kind}'s chunks are rounded to 8 only")
        try:
            reranker = family.scores_pairs
        except UnknownNameError as exc:  # a family whose saved kind nobody registered
            raise ValueError(str(exc)) from None
        scores_pairs = "pairs" in build_objective(self.loss).needs
        if reranker and not scores_pairs:
            raise ValueError(
                f"loss.objective: {self.loss.objective!r} trains bi-encoders; a "
                f"{self.model.kind} needs an objective that scores pairs "
                f"({', '.join(objectives_needing('pairs'))})"
            )
        if scores_pairs and not reranker:
            raise ValueError(
                f"loss.objective: {self.loss.objective!r} trains rerankers; set a reranker "
                f"model.kind ({', '.join(pair_scoring_kinds())}) or choose a bi-encoder objective"
            )
        if reranker and "temperature" not in self.loss.model_fields_set:
            self.loss.temperature = DEFAULT_RERANK_TEMPERATURE
        return self

    @model_validator(mode="after")
    def _speed_options_apply(self) -> TrainConfig:
        # options that only act on GradCache chunks or packed chunks: an error, not a no-op
        if self.gradcache_max_tokens is not None and self.gradcache_chunk_size != "auto":
            raise ValueError(
                "gradcache_max_tokens: needs gradcache_chunk_size: auto "
                f"(it is {self.gradcache_chunk_size!r})"
            )
        if self.pad_multiple != 8 and self.gradcache_chunk_size is None:
            raise ValueError("pad_multiple: rounds GradCache chunks; set gradcache_chunk_size")
        if self.gradcache_retain_tokens is not None and (
            self.gradcache_chunk_size is None or not self.gradcache_retain_last
        ):
            raise ValueError(
                "gradcache_retain_tokens: keeps GradCache chunks' graphs before the last one; "
                "set gradcache_chunk_size and gradcache_retain_last: true"
            )
        if self.varlen_kernel != "auto" and not self.model.unpadded:
            raise ValueError("varlen_kernel: chooses the kernel of model.unpadded; set it to true")
        return self

    @model_validator(mode="after")
    def _gradcache_or_deepspeed(self) -> TrainConfig:
        # GradCache's two passes (embed without graph, then re-encode chunk by chunk with the
        # embedding gradients) call backward once per chunk; DeepSpeed's engine counts every
        # backward as a micro-step, so the two cannot be combined: the config must pick one.
        if self.deepspeed_config is not None and self.gradcache_chunk_size is not None:
            raise ValueError(
                "deepspeed_config: DeepSpeed cannot be combined with GradCache "
                f"(gradcache_chunk_size: {self.gradcache_chunk_size}); "
                "add --set gradcache_chunk_size=null (ZeRO then holds the whole batch's graph)"
            )
        return self


__all__ = [
    "DataConfig",
    "LoraSettings",
    "LossConfig",
    "MarginalSet",
    "ModelConfig",
    "OptimConfig",
    "TrainConfig",
]
