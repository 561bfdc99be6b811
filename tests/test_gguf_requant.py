"""The OpenVINO-readable GGUF copy: weights re-quantized to Q8_0, the rest kept, made once."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")  # in dualview[models]; the requant module needs it

from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFReader, GGUFWriter, quants  # noqa: E402

from dualview.synth.backends.gguf_requant import (  # noqa: E402
    REQUANT_VERSION,
    openvino_gguf,
    openvino_gguf_path,
    requantize_gguf,
)

RNG = np.random.default_rng(0)
WEIGHTS = {
    "w.q5_0": (Q.Q5_0, RNG.standard_normal((4, 64)).astype(np.float32)),
    "w.q4_1": (Q.Q4_1, RNG.standard_normal((2, 96)).astype(np.float32)),
    "w.q8_0": (Q.Q8_0, RNG.standard_normal((3, 32)).astype(np.float32)),
}
NORM = RNG.standard_normal(64).astype(np.float32)


def _write_model(path: Path) -> Path:
    writer = GGUFWriter(path, "llama")
    writer.add_name("tiny")
    writer.add_uint32("llama.context_length", 128)
    writer.add_float32("llama.rope.freq_base", 10000.0)
    writer.add_string("tokenizer.chat_template", "{{ messages[0]['content'] }}")
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b"])
    writer.add_array("tokenizer.ggml.scores", [0.0, -1.5, -2.5])
    writer.add_array("tokenizer.ggml.token_type", [3, 1, 1])
    writer.add_file_type(8)
    writer.add_tensor("norm", NORM)
    for name, (kind, values) in WEIGHTS.items():
        packed = quants.quantize(values, kind)
        writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _fields(reader: GGUFReader) -> dict:
    skip = ("GGUF.", "general.file_type")
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith(skip)}


def test_weights_become_q8_and_everything_else_is_kept(tmp_path: Path) -> None:
    source = _write_model(tmp_path / "tiny.gguf")
    target = requantize_gguf(source, tmp_path / "tiny.q8.gguf")
    before, after = GGUFReader(source), GGUFReader(target)

    assert _fields(after) == _fields(before)
    assert after.fields["general.file_type"].contents() == 7  # mostly Q8_0
    old = {t.name: t for t in before.tensors}
    new = {t.name: t for t in after.tensors}
    assert list(new) == list(old)  # same tensors, same order
    assert {n: t.tensor_type for n, t in new.items()} == {
        "norm": Q.F32,
        "w.q5_0": Q.Q8_0,
        "w.q4_1": Q.Q8_0,
        "w.q8_0": Q.Q8_0,
    }
    np.testing.assert_array_equal(new["norm"].data, old["norm"].data)
    np.testing.assert_array_equal(new["w.q8_0"].data, old["w.q8_0"].data)  # bytes untouched
    for name in ("w.q5_0", "w.q4_1"):
        shape = WEIGHTS[name][1].shape
        source_values = quants.dequantize(old[name].data, old[name].tensor_type).reshape(shape)
        copy_values = quants.dequantize(new[name].data, Q.Q8_0).reshape(shape)
        # Q8_0's step is 1/127 of each block's largest magnitude (a 5-bit step is 1/16): the
        # error is half a step plus the f16 rounding of the block scale (127 * 2**-11 steps).
        step = np.abs(source_values).reshape(-1, 32).max(axis=1) / 127
        error = np.abs(copy_values - source_values).reshape(-1, 32)
        assert (error <= step[:, None] * (0.5 + 127 * 2**-11) + 1e-7).all()
        assert error.max() > 0  # values were really re-quantized
        assert not np.array_equal(new[name].data, old[name].data)


def test_the_copy_is_made_once_and_named_by_the_source_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    source = _write_model(tmp_path / "tiny.gguf")
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    first = openvino_gguf(source, sha)
    assert first == openvino_gguf_path(sha, "tiny")
    assert first.name == f"tiny.{sha[:16]}.ov{REQUANT_VERSION}-q8_0.gguf"
    stamp = first.stat().st_mtime_ns
    assert openvino_gguf(source, sha) == first and first.stat().st_mtime_ns == stamp
    leftovers = [p.name for p in first.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_broken_source_leaves_no_copy_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "broken.gguf"
    source.write_bytes(b"GGUF" + b"\x00" * 20)
    with pytest.raises(Exception):  # noqa: B017 - gguf's own error for a truncated header
        openvino_gguf(source, "ab" * 32)
    folder = openvino_gguf_path("ab" * 32, "broken").parent
    assert [p.name for p in folder.iterdir() if not p.name.endswith(".lock")] == []
