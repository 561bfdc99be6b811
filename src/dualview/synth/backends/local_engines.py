"""Blocking in-process generation engines behind the local chat backend.

Two of the engines that produce a chat answer from a local model file (the third, the
default OpenVINO engine, is in `dualview.synth.backends.openvino_engine`):

- `LlamaCppEngine` — llama-cpp-python on a GGUF file (quantized kernels; fast on CPU; an
  optional extra because it compiles at install).
- `TransformersEngine` — Hugging Face transformers on a GGUF file (dequantized to
  float32 through ``gguf_file=``) or on any local causal-LM folder.

Both apply the model's own chat template, and both sample only with what
`dualview.synth.backends.base.SamplingParams` says (temperature 0 = greedy; top-k,
min-p and repetition penalties are switched off), so an answer depends on the prompt, the
params and the model file alone. Stop strings are cut from the answer (OpenAI semantics:
the stop string itself is not returned). Engines are not thread-safe: the backend calls them
one at a time.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dualview.errors import DualviewError
from dualview.synth.backends.base import (
    AnswerScore,
    Completion,
    Message,
    SamplingParams,
    constraint_unsupported,
)

if TYPE_CHECKING:
    from transformers import StoppingCriteria

# How to add the optional llama.cpp engine: llama-cpp-python has no CPU wheel on PyPI, so pip
# compiles llama.cpp (5-13 minutes on 2 cores); the portable build avoids a crash seen on AMX
# CPUs. The default engine (OpenVINO, `openvino_engine.py`) installs from binary wheels.
LLAMA_CPP_INSTALL = "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install 'dualview[llamacpp]'"


def default_llama_threads() -> int:
    """Half of the usable cores, at least one (llama.cpp's own rule of thumb).

    llama.cpp's worker threads spin while they wait for each other, so on a busy machine a
    thread per core collapses: on 2 shared cores (load average ~9) one thread decoded
    7.4 tokens/s and two threads 1.5 (``benchmarks/local_llm.py``). Set ``n_threads`` to
    the core count on a quiet machine.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // 2)


def cut_at_stop(text: str, stops: list[str] | None) -> str:
    """Text up to (not including) the earliest stop string."""
    cut = len(text)
    for stop in stops or []:
        if stop and (found := text.find(stop)) != -1:
            cut = min(cut, found)
    return text[:cut]


def stop_on_strings(tokenizer: Any, n_in: int, stops: list[str] | None) -> StoppingCriteria:
    """A transformers stopping criterion: stop once the answer so far contains a stop string.

    transformers' own ``stop_strings`` pre-processes the whole vocabulary on every call
    (tens of seconds for Qwen's 150k tokens on 2 cores); decoding the short answer at each
    step costs far less. ``n_in`` is the prompt length, so only new tokens are decoded.
    """
    import torch
    from transformers import StoppingCriteria

    class StopOnStrings(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            texts = (tokenizer.decode(row[n_in:], skip_special_tokens=True) for row in input_ids)
            done = [any(stop and stop in text for stop in stops or []) for text in texts]
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return StopOnStrings()


@dataclass(frozen=True)
class ModelFile:
    """Where a local model lives: a GGUF file or a Hugging Face model folder."""

    path: Path
    is_gguf: bool


class Engine(Protocol):
    """A loaded model that answers one chat at a time (blocking)."""

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion: ...

    def close(self) -> None: ...


class LlamaCppEngine:
    """llama-cpp-python on a GGUF file; the chat template comes from the GGUF metadata."""

    name = "llama_cpp"

    def __init__(self, model: ModelFile, n_ctx: int, n_threads: int | None) -> None:
        if not model.is_gguf:
            raise DualviewError(
                f"{model.path}: the llama_cpp engine needs a .gguf file; use "
                "engine: transformers for a Hugging Face folder"
            )
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise DualviewError(
                f"llama-cpp-python is not installed: {LLAMA_CPP_INSTALL} (compiles "
                "llama.cpp, 5-13 min), or use engine: transformers (no compile, slower)"
            ) from exc
        threads = n_threads or default_llama_threads()
        self._llm = Llama(
            model_path=str(model.path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        if params.regex:
            raise constraint_unsupported(self.name)
        started = time.perf_counter()
        # Forget the previous prompt: llama-cpp-python reuses a shared prefix of the KV
        # cache, which changes logits slightly and so made seeded samples depend on the
        # request before. An answer must depend on its own request only (cache keys).
        self._llm.reset()
        response = self._llm.create_chat_completion(
            messages=messages,  # type: ignore[arg-type]
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,
            min_p=0.0,
            repeat_penalty=1.0,
            max_tokens=params.max_tokens,
            stop=params.stop or [],
            seed=params.seed,
        )
        choice = response["choices"][0]  # type: ignore[index]
        usage = response["usage"]  # type: ignore[index]
        return Completion(
            text=cut_at_stop(choice["message"]["content"] or "", params.stop),
            tokens_in=usage["prompt_tokens"],
            tokens_out=usage["completion_tokens"],
            latency_s=time.perf_counter() - started,
            extra={"finish_reason": choice.get("finish_reason")},
        )

    def close(self) -> None:
        self._llm.close()


class TransformersEngine:
    """transformers causal LM from a GGUF file (``gguf_file=``) or a local model folder."""

    name = "transformers"

    def __init__(self, model: ModelFile, n_ctx: int, n_threads: int | None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if n_threads:
            torch.set_num_threads(n_threads)
        if model.is_gguf:
            where, extra = str(model.path.parent), {"gguf_file": model.path.name}
        else:
            where, extra = str(model.path), {}
        self._torch = torch
        self._n_ctx = n_ctx
        self._tokenizer = AutoTokenizer.from_pretrained(where, **extra)
        if not self._tokenizer.chat_template:
            raise DualviewError(f"{model.path}: the model has no chat template")
        self._model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32, **extra)
        self._model.eval()

    def _eos_ids(self) -> list[int]:
        ids = {self._tokenizer.eos_token_id}
        configured = self._model.generation_config.eos_token_id
        ids.update(configured if isinstance(configured, list) else [configured])
        return sorted(i for i in ids if i is not None)

    def _sampling_kwargs(self, params: SamplingParams) -> dict:
        if params.temperature <= 0:
            return {"do_sample": False}
        if params.seed is not None:
            self._torch.manual_seed(params.seed)
        return {
            "do_sample": True,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": 0,
        }

    def generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        if params.regex:
            raise constraint_unsupported(self.name)
        started = time.perf_counter()
        inputs = self._tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        n_in = int(inputs["input_ids"].shape[1])
        max_new = min(params.max_tokens, self._n_ctx - n_in)
        if max_new <= 0:
            raise ValueError(f"prompt of {n_in} tokens does not fit n_ctx={self._n_ctx}")
        eos = self._eos_ids()
        stop_kwargs = {"stopping_criteria": [stop_on_strings(self._tokenizer, n_in, params.stop)]}
        with self._torch.inference_mode():
            output = self._model.generate(
                **inputs,
                max_new_tokens=max_new,
                eos_token_id=eos,
                pad_token_id=self._tokenizer.pad_token_id or eos[0],
                repetition_penalty=1.0,
                **self._sampling_kwargs(params),
                **(stop_kwargs if params.stop else {}),
            )
        new_tokens = output[0, n_in:]
        raw = self._tokenizer.decode(new_tokens, skip_special_tokens=True)
        text = cut_at_stop(raw, params.stop)
        truncated = len(new_tokens) >= max_new and int(new_tokens[-1]) not in eos
        return Completion(
            text=text,
            tokens_in=n_in,
            tokens_out=int(new_tokens.shape[0]),
            latency_s=time.perf_counter() - started,
            extra={"finish_reason": "length" if truncated and text == raw else "stop"},
        )

    def score_answers(
        self, messages: list[Message], prefix: str, answers: tuple[str, str]
    ) -> AnswerScore:
        """The log-odds of ``answers[0]`` against ``answers[1]`` as the reply's first token
        after ``prefix``: one forward pass, the LLM reranker's scoring
        (`dualview.models.llm_reranker.answer_log_odds`)."""
        from dualview.models.llm_reranker import answer_log_odds, answer_token_ids

        started = time.perf_counter()
        prompt = self._tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        inputs = self._tokenizer(prompt + prefix, return_tensors="pt", add_special_tokens=False)
        ids = answer_token_ids(self._tokenizer, answers)
        with self._torch.inference_mode():
            logodds = answer_log_odds(
                self._model, inputs["input_ids"], inputs["attention_mask"], ids
            )
        return AnswerScore(
            logodds=float(logodds[0]),
            tokens_in=int(inputs["input_ids"].shape[1]),
            latency_s=time.perf_counter() - started,
        )

    def close(self) -> None:
        del self._model
