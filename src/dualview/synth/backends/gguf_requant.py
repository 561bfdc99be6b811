"""A copy of a GGUF file whose weights OpenVINO GenAI can read, made once into the cache.

OpenVINO GenAI reads GGUF files directly, but only some weight types (F32, F16, Q8_0 and a
few 4-bit ones); the embedded Qwen2.5-Coder-0.5B stores most of its weights as Q5_0, which it
rejects. `openvino_gguf` writes a copy in which every weight of another type is de-quantized
and re-quantized to Q8_0 (8 bits per weight in blocks of 32, finer than the 5-bit source, so
the copy's weights differ from the source's by less than the source's own rounding step);
F32, F16 and Q8_0 tensors and all metadata (tokenizer, chat template) are copied unchanged.

The copy is named after the source's sha256 and a format version, written to a temporary
file and published with an atomic rename under a lock, so a reader never sees half a file and
two processes never convert at once. Measured on the 2-core machine: ~25 s for the 491 MB
embedded model, 676 MB written (docs/architecture/local_llm.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dualview.errors import DualviewError
from dualview.resources import cache_dir
from dualview.synth.backends.gguf import exclusive_lock, writer_tag

# Bump when the conversion changes: copies made by an older converter are not reused.
REQUANT_VERSION = 1
_FILE_TYPE_MOSTLY_Q8_0 = 7


def openvino_gguf_path(source_sha256: str, stem: str) -> Path:
    """Where the OpenVINO-readable copy of a GGUF with this sha256 lives in the cache."""
    name = f"{stem}.{source_sha256[:16]}.ov{REQUANT_VERSION}-q8_0.gguf"
    return cache_dir() / "models" / "openvino" / name


def _copy_metadata(reader, writer) -> None:  # type: ignore[no-untyped-def]
    from gguf import GGUFValueType

    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue  # written by the writer itself, or set below
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY and len(field.types) > 1 else None
        writer.add_key_value(name, field.contents(), kind, sub_type=sub)
    writer.add_file_type(_FILE_TYPE_MOSTLY_Q8_0)


def _copy_tensors(reader, writer) -> None:  # type: ignore[no-untyped-def]
    from gguf import GGMLQuantizationType, quants

    kept = (GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.Q8_0)
    for tensor in reader.tensors:
        kind = tensor.tensor_type
        if kind in kept:
            writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=kind)
            continue
        # Every quantized type's block is a multiple of Q8_0's 32 weights, so rows fit.
        shape = [int(n) for n in reversed(tensor.shape)]  # GGUF lists dims innermost first
        values = quants.dequantize(tensor.data, kind).reshape(shape).astype(np.float32)
        packed = quants.quantize(values, GGMLQuantizationType.Q8_0)
        writer.add_tensor(
            tensor.name, packed, raw_shape=packed.shape, raw_dtype=GGMLQuantizationType.Q8_0
        )


def requantize_gguf(source: Path, target: Path) -> Path:
    """Write ``target``: ``source`` with every weight OpenVINO cannot read turned into Q8_0."""
    try:
        from gguf import GGUFReader, GGUFWriter
    except ImportError as exc:
        raise DualviewError(
            "the openvino engine needs the `gguf` package: pip install 'dualview[models]'"
        ) from exc
    reader = GGUFReader(source)
    architecture = reader.fields["general.architecture"].contents()
    tmp = target.with_name(f".{target.name}.{writer_tag()}.tmp")
    try:
        writer = GGUFWriter(tmp, architecture)
        _copy_metadata(reader, writer)
        _copy_tensors(reader, writer)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def openvino_gguf(source: Path, source_sha256: str) -> Path:
    """The OpenVINO-readable copy of ``source``, converted on first use and then reused."""
    target = openvino_gguf_path(source_sha256, source.stem)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(target.with_name(target.name + ".lock")):
        if not target.is_file():  # another process may have finished while we waited
            requantize_gguf(source, target)
    return target
