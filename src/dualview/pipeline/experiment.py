"""An experiment file (``dualview run EXPERIMENT.yaml``): data, synthesis, mixes, training,
evaluation, in one strict YAML document.

```yaml
name: demo
run_dir: runs/demo
seed: 13
instructions: {path: gold:train, limit: 48}   # orig (and plain) records; or `seeding:`
synthesis: {job: {backend: {kind: local}, task: {n_star: first}}, limit: 24}
verification: {enabled: false}
mixes: [{name: Ins-orig, preset: ins-orig, size: 32}, {name: Ins-DV, preset: ins-dv, size: 32}]
training: {base: configs/train/minilm-cpu.yaml, overrides: {max_steps: 40}}
evaluation: {benchmarks: ["followir=src/dualview/demo/data/eval/followir"]}
```

``path: gold:train`` (or ``gold:test``, a leave-domains-out fold's ``gold:ldo-K-train`` /
``gold:ldo-K-test``, see `dualview.data.gold_folds`, or the validation split's ``gold:fit`` /
``gold:val``, see `dualview.data.gold_validation`) reads the bundled gold set; any
other path is read with ``format`` (``dualview``, ``promptriever``, ``beir``, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from dualview.config import StrictModel, load_config
from dualview.data.mix import PRESETS
from dualview.data.negatives import NegativeConfig
from dualview.data.pairing import ExtraDv
from dualview.eval.benchmarks import parse_spec
from dualview.models.config import QueryTemplate

GOLD_PREFIX = "gold:"


class SourceSpec(StrictModel):
    """Records to start from: a file or folder in ``format``, or ``gold:<split>``."""

    path: str
    format: str = "dualview"
    limit: int | None = Field(None, gt=0, description="keep the first N records")
    views: list[Literal["orig", "dv", "plain"]] = Field(
        default_factory=lambda: ["orig", "plain"],
        description="views kept from the source; dv records are used when synthesis is off",
    )

    def input_files(self) -> list[Path]:
        """Files whose content the stage key must hash."""
        if self.path.startswith(GOLD_PREFIX):
            from dualview.data.gold_folds import gold_source_files

            return gold_source_files(self.path[len(GOLD_PREFIX) :])
        return [Path(self.path)]


class JobSpec(StrictModel):
    """A synthesis job (see ``dualview.synth.jobs``): backend, sampling, runner, task."""

    job: dict[str, Any] = Field(default_factory=dict)
    limit: int | None = Field(None, gt=0, description="process the first N input records")


class SynthesisSpec(JobSpec):
    """Polarity reversal by the LLM; disabled, the dv records come from the source."""

    enabled: bool = True


class SeedingSpec(JobSpec):
    """Seed instruction data from plain qrels with an LLM (Promptriever's recipe)."""

    source: SourceSpec


class VerificationSpec(JobSpec):
    enabled: bool = False


class MixSpec(StrictModel):
    """One training mix: a paper preset at ``size``, or a custom ``config`` (MixConfig)."""

    name: str = Field(pattern=r"^[A-Za-z0-9._+-]+$")
    preset: str | None = None
    # An even number, or "auto": twice the number of dual-view records available (capped
    # by max_size), the same for every mix of the experiment, so mixes stay size-matched.
    size: int | Literal["auto"] | None = None
    max_size: int | None = Field(None, gt=0)
    config: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _preset_or_config(self) -> MixSpec:
        if (self.preset is None) == (self.config is None):
            raise ValueError("give either preset (+ size) or config")
        if self.preset is not None:
            if self.preset not in PRESETS:
                raise ValueError(f"preset: unknown {self.preset!r}; choose from {sorted(PRESETS)}")
            if self.size is None:
                raise ValueError("size: a preset needs a size")
        return self


def size_mismatch(additive: MixSpec, controls: list[MixSpec]) -> str | None:
    """Why the additive mix ``additive`` (``orig+dv``: size/2 orig instances plus their dual
    views) is not size-matched with any of the ``ins-orig`` mixes ``controls`` (size orig
    instances); None when one matches or there is none. ``size: auto`` (every orig instance
    with a dual view) is never shown to match: give the size."""
    if not controls:
        return None
    sizes = [c.size for c in controls if isinstance(c.size, int)]
    if isinstance(additive.size, int) and additive.size // 2 in sizes:
        return None
    theirs = ", ".join(f"{c.name} {c.size}" for c in controls)
    fix = (
        f"give size {2 * sizes[0]} ({sizes[0]} orig + their dual views)"
        if sizes
        else ("give the ins-orig mix a fixed size N and this one 2N")
    )
    ours = (
        "size auto (every orig instance with a dual view)"
        if additive.size == "auto"
        else (
            f"{additive.size // 2} orig instances (size {additive.size})"  # type: ignore[operator]
        )
    )
    return f"trains on {ours}, not as many as an ins-orig mix ({theirs}): {fix}"


class TrainingSpec(StrictModel):
    """Training: a TrainConfig (YAML file ``base`` or inline ``config``) plus overrides, run
    once per mix and backbone. ``data.train_file`` and ``output_dir`` are set by the run."""

    base: Path | None = None
    config: dict[str, Any] | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    # label -> model name or path; default: the base config's model
    backbones: dict[str, str] = Field(default_factory=dict)


class RerankSpec(StrictModel):
    """How a trained reranker (``model.kind: cross_encoder | llm_reranker``) is evaluated:
    it rescores the ``top_k`` documents of ``first_stage`` (a bi-encoder's name or path,
    ``bm25`` (`bm25s`, stemmed) or ``bm25-builtin``); FollowIR reranks its own candidates
    (`dualview.eval.two_stage`). ``interpolate`` below 1 ranks the top k by that share of the
    reranker's scores and the rest of the first stage's (`dualview.retrieval.fusion`); choose
    it on a validation set (`dualview.eval.interpolation.choose_weight`). ``precision``: the
    reranker's weights while it scores (``dualview eval --reranker-precision``; auto: bf16
    on a GPU, fp32 on CPU)."""

    first_stage: str = "embedded:minilm"
    top_k: int = Field(20, ge=1)
    interpolate: float = Field(1.0, gt=0, le=1)
    precision: Literal["auto", "fp32", "fp16", "bf16"] = "auto"


class EvaluationSpec(StrictModel):
    benchmarks: list[str] = Field(min_length=1)
    include_base: bool = True
    batch_size: int = Field(32, gt=0)
    query_template: QueryTemplate = "{query} {instruction}"
    rerank: RerankSpec = Field(default_factory=RerankSpec)
    # auto: bf16/fp16 on a GPU, fp32 on CPU (`dualview.retrieval.inference.resolve_precision`)
    precision: Literal["auto", "fp32", "fp16", "bf16"] = "auto"

    @field_validator("benchmarks")
    @classmethod
    def _valid_specs(cls, specs: list[str]) -> list[str]:
        for spec in specs:
            parse_spec(spec)
        return specs


class Experiment(StrictModel):
    """The whole experiment (see module docstring)."""

    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    run_dir: Path | None = None
    seed: int = 13
    instructions: SourceSpec | None = None
    seeding: SeedingSpec | None = None
    synthesis: SynthesisSpec = Field(default_factory=SynthesisSpec)
    verification: VerificationSpec = Field(default_factory=VerificationSpec)
    negatives: NegativeConfig = Field(default_factory=NegativeConfig)
    # A second dv record for one orig (verify units, mixes): an error naming both lines, or
    # which one to keep (`dualview.data.pairing`).
    extra_dv: ExtraDv = "error"
    mixes: list[MixSpec] = Field(min_length=1)
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    evaluation: EvaluationSpec

    @model_validator(mode="after")
    def _one_source(self) -> Experiment:
        if (self.instructions is None) == (self.seeding is None):
            raise ValueError("give exactly one of instructions (records) or seeding (qrels)")
        names = [m.name for m in self.mixes]
        if len(set(names)) != len(names):
            raise ValueError(f"mixes: duplicate names in {names}")
        return self

    @model_validator(mode="after")
    def _additive_mix_size_matched(self) -> Experiment:
        """An ``orig+dv`` mix beside an ``ins-orig`` one trains on as many orig instances as
        one of them (the same ones: both take the first instances of the seeded order), so
        their comparison is size-matched in orig instances (`dualview.data.mix`)."""
        controls = [m for m in self.mixes if m.preset == "ins-orig"]
        for mix in (m for m in self.mixes if m.preset == "orig+dv"):
            problem = size_mismatch(mix, controls)
            if problem is not None:
                raise ValueError(f"mixes: {mix.name}: {problem}")
        return self

    @model_validator(mode="after")
    def _one_training_config(self) -> Experiment:
        if self.training.base is not None and self.training.config is not None:
            raise ValueError("training: give base (a YAML file) or config (inline), not both")
        return self

    # Where the experiment was read (its file, a sweep arm): the prefix of the errors its
    # stages' configs give (`dualview.pipeline.build.resolve_stages`). Not a setting.
    _source: str = PrivateAttr("experiment")

    @property
    def source(self) -> str:
        return self._source

    def located(self, source: str) -> Experiment:
        """This experiment, its stage errors named by ``source`` (a file, a sweep arm)."""
        self._source = source
        return self

    def resolved_run_dir(self) -> Path:
        return self.run_dir or Path("runs") / self.name


#: Mappings of an experiment whose keys are dotted paths themselves (``training.overrides``):
#: ``--set`` and sweep keys below one name a single key of it (`dualview.config.set_dotted`).
FLAT_MAPS = ("overrides",)


def load_experiment(path: str | Path, overrides: list[str] | None = None) -> Experiment:
    return load_config(Experiment, path, overrides, FLAT_MAPS).located(str(path))
