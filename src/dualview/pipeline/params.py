"""What each stage of an experiment is keyed by (`dualview.pipeline.stages.StageParams`).

One frozen model per stage kind, built from the experiment by `dualview.pipeline.build`.
The fields declared without a default are those every key has held since the stage
existed; a field with a default is keyed only when set to something else, so adding one
(with the default that keeps the old behaviour) keeps every key and finished stage folder.
A nested experiment section is keyed as its whole JSON dump, as it always was, except the
evaluation section, which has its own models: ``extra="forbid"`` makes a field added to
`EvaluationSpec` (or its ``rerank``) an error here until it is declared, with a default.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dualview.data.bm25 import bm25_fingerprint
from dualview.data.pairing import ExtraDv
from dualview.pipeline.experiment import EvaluationSpec
from dualview.pipeline.stages import StageParams


class RecordsParams(StageParams):
    """``data`` read from the experiment's instruction records."""

    instructions: dict[str, Any]
    limit: int | None


class LLMStageParams(StageParams):
    """A stage that runs the LLM task ``TASK`` (`dualview.synth.jobs.TASKS`) with its job as
    written in the experiment (`llm_job`); ``task``: the task's fingerprint (prompt template
    hash, task settings, parser version: `dualview.synth.parser_versions`)."""

    TASK: ClassVar[str]
    task: dict[str, Any]

    def llm_job(self) -> dict[str, Any]:
        raise NotImplementedError


class SeedParams(LLMStageParams):
    """``data`` seeded by the LLM."""

    TASK: ClassVar[str] = "seed"
    seeding: dict[str, Any]
    limit: int | None

    def llm_job(self) -> dict[str, Any]:
        job: dict[str, Any] = self.seeding["job"]
        return job


class SynthParams(LLMStageParams):
    """``synth``: the reverse job."""

    TASK: ClassVar[str] = "reverse"
    job: dict[str, Any]

    def llm_job(self) -> dict[str, Any]:
        return self.job


class VerifyParams(SynthParams):
    """``verify``: the verify job and the pairing policy."""

    TASK: ClassVar[str] = "verify"
    extra_dv: ExtraDv = "error"


class MixParams(StageParams):
    mix: dict[str, Any]
    seed: int
    negatives: dict[str, Any]
    extra_dv: ExtraDv = "error"


class TrainParams(StageParams):
    """The training config with the experiment's overrides (and backbone) applied."""

    train: dict[str, Any]


class RerankKey(StageParams):
    first_stage: str
    top_k: int
    interpolate: float = 1.0  # at 1 not keyed: evaluations from before keep their key
    # a bm25s first stage: the library's version and recipe, so an evaluation from when
    # ``bm25`` was the hand-written one (now ``bm25-builtin``) is rerun, not reused
    bm25: str | None = None
    precision: str = "auto"  # the reranker's weights; at auto not keyed


class EvaluationKey(StageParams):
    benchmarks: list[str]
    include_base: bool
    batch_size: int
    query_template: str
    rerank: RerankKey
    precision: str = "auto"


class EvalParams(StageParams):
    evaluation: EvaluationKey
    bases: dict[str, str]

    @classmethod
    def of(cls, spec: EvaluationSpec, bases: dict[str, str]) -> EvalParams:
        """The evaluation section and the base models (row label -> model)."""
        data = spec.model_dump()
        if spec.rerank.first_stage == "bm25":
            data["rerank"]["bm25"] = bm25_fingerprint("bm25")
        return cls(evaluation=EvaluationKey.model_validate(data), bases=bases)
