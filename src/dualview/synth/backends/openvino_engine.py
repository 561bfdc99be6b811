"""The default local engine: OpenVINO GenAI on a GGUF file, installed from binary wheels.

``openvino-genai`` ships manylinux_2_28 wheels (glibc 2.28 and later), so ``pip install``
needs no compiler, unlike llama-cpp-python. It reads GGUF files itself; weights of a type it
cannot read (the embedded model's Q5_0) are re-quantized to Q8_0 once into the cache
(`dualview.synth.backends.gguf_requant`). The chat template and the tokenizer come from the
GGUF metadata, as with llama.cpp.

Sampling follows `SamplingParams` only: temperature 0 = greedy; otherwise temperature and
top-p with the request's seed; top-k, min-p and repetition penalties stay off (OpenVINO's
defaults). ``params.regex`` constrains the answer to the regular expression (OpenVINO GenAI's
structured output, xgrammar), so a constrained task's answers always follow its format.
Each request runs on its own (no prefix reuse between requests), so an answer
depends on its own request only, which the content-addressed synthesis cache relies on.
"""

from __future__ import annotations

import re
import time
from typing import Any

from dualview.errors import DualviewError
from dualview.synth.backends.base import AnswerScore, Completion, Message, SamplingParams
from dualview.synth.backends.gguf import sha256_file
from dualview.synth.backends.gguf_requant import openvino_gguf
from dualview.synth.backends.local_engines import ModelFile, cut_at_stop

OPENVINO_INSTALL = "pip install 'dualview[models]'"


class OpenVINOEngine:
    """OpenVINO GenAI's `LLMPipeline` on a GGUF file (re-quantized copy where needed)."""

    name = "openvino"

    def __init__(
        self, model: ModelFile, n_ctx: int, n_threads: int | None, sha256: str | None = None
    ) -> None:
        if not model.is_gguf:
            raise DualviewError(
                f"{model.path}: the openvino engine needs a .gguf file; use "
                "engine: transformers for a Hugging Face folder"
            )
        try:
            import openvino_genai
        except ImportError as exc:
            raise DualviewError(
                f"openvino-genai is not installed: {OPENVINO_INSTALL}, or use engine: transformers"
            ) from exc
        path = openvino_gguf(model.path, sha256 or sha256_file(model.path))
        properties: dict[str, Any] = {}
        if n_threads:
            properties["INFERENCE_NUM_THREADS"] = n_threads
        self._ov = openvino_genai
        self._n_ctx = n_ctx
        self._pipe = openvino_genai.LLMPipeline(str(path), "CPU", **properties)
        self._tokenizer = self._pipe.get_tokenizer()

    def _config(self, params: SamplingParams, max_new: int) -> Any:
        config = self._ov.GenerationConfig()
        config.max_new_tokens = max_new
        config.apply_chat_template = False  # applied in generate(), to count the tokens
        config.repetition_penalty = 1.0
        if params.stop:
            config.stop_strings = set(params.stop)
            config.include_stop_str_in_output = False
        if params.temperature <= 0:
            config.do_sample = False
        else:
            config.do_sample = True
            config.temperature = params.temperature
            config.top_p = params.top_p
            config.rng_seed = params.seed or 0
        if params.regex:
            config.structured_output_config = self._ov.StructuredOutputConfig(regex=params.regex)
        return config

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        started = time.perf_counter()
        prompt = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        n_in = int(self._tokenizer.encode(prompt, add_special_tokens=False).input_ids.shape[1])
        max_new = min(params.max_tokens, self._n_ctx - n_in)
        if max_new <= 0:
            raise ValueError(f"prompt of {n_in} tokens does not fit n_ctx={self._n_ctx}")
        result = self._pipe.generate([prompt], self._config(params, max_new))
        raw = result.texts[0]
        n_out = int(result.perf_metrics.get_num_generated_tokens())
        text = cut_at_stop(raw, params.stop)
        truncated = n_out >= max_new and text == raw
        return Completion(
            text=text,
            tokens_in=n_in,
            tokens_out=n_out,
            latency_s=time.perf_counter() - started,
            extra={"finish_reason": "length" if truncated else "stop"},
        )

    def _forced_logprob(self, prompt: str, answer: str) -> float:
        """log p(``answer``) as the one token generated after ``prompt``: a generation forced
        to ``answer`` by structured output, whose score is the raw log-probability of the
        token (the constraint masks the choice, not the probabilities it reports)."""
        config = self._ov.GenerationConfig()
        config.max_new_tokens = 1
        config.apply_chat_template = False
        config.do_sample = False
        config.logprobs = 1  # without it the score is 0
        config.structured_output_config = self._ov.StructuredOutputConfig(regex=re.escape(answer))
        result = self._pipe.generate([prompt], config)
        if result.texts[0] != answer:
            raise DualviewError(
                f"answer {answer!r} is not one token of this model (forced, it began "
                f"{result.texts[0]!r}); choose one-token answers"
            )
        return float(result.scores[0])

    def score_answers(
        self, messages: list[Message], prefix: str, answers: tuple[str, str]
    ) -> AnswerScore:
        """The log-odds of ``answers[0]`` against ``answers[1]`` as the reply's first token
        after ``prefix``: two one-token generations forced to each answer (OpenVINO GenAI
        gives log-probabilities of generated tokens only). The second reuses the first's
        prompt in the pipeline's KV cache, so the pair costs about one prompt pass."""
        started = time.perf_counter()
        prompt = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        prompt += prefix
        n_in = int(self._tokenizer.encode(prompt, add_special_tokens=False).input_ids.shape[1])
        first, second = (self._forced_logprob(prompt, answer) for answer in answers)
        return AnswerScore(
            logodds=first - second, tokens_in=n_in, latency_s=time.perf_counter() - started
        )

    def close(self) -> None:
        del self._pipe
