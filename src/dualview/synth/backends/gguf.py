"""The embedded LLM files, as synthesis names them: the one table and its cache live in
`dualview.models.gguf` (below synthesis, so that the LLM reranker loads the same files);
this module re-exports them for the backends and engines."""

from __future__ import annotations

from dualview.models.gguf import (
    EMBEDDED_GGUF_NAME,
    EMBEDDED_GGUF_SHA256,
    EMBEDDED_GGUFS,
    EMBEDDED_LLM,
    EMBEDDED_LLM_LARGE,
    SMOLLM2_GGUF_NAME,
    SMOLLM2_PACKAGE,
    EmbeddedGGUF,
    assemble_gguf,
    embedded_gguf_parts,
    embedded_gguf_path,
    exclusive_lock,
    is_verified,
    sha256_file,
    smollm2_gguf_path,
    writer_tag,
)

__all__ = [
    "EMBEDDED_GGUFS",
    "EMBEDDED_GGUF_NAME",
    "EMBEDDED_GGUF_SHA256",
    "EMBEDDED_LLM",
    "EMBEDDED_LLM_LARGE",
    "SMOLLM2_GGUF_NAME",
    "SMOLLM2_PACKAGE",
    "EmbeddedGGUF",
    "assemble_gguf",
    "embedded_gguf_parts",
    "embedded_gguf_path",
    "exclusive_lock",
    "is_verified",
    "sha256_file",
    "smollm2_gguf_path",
    "writer_tag",
]
