"""Carry a model folder (or file) to a GPU machine in parts, over several calls.

A call to the lent GPU machine carries at most 64 MiB with the working tree, and model
weights are larger (the embedded MiniLM is 90 MB, the 0.5B GGUF 491 MB). The machine's
``/tmp`` stays while it is held, so the weights can travel in parts, one or a few per call,
and be put together there:

- ``split SRC --out DIR``: SRC (a folder or a file) as one uncompressed tar stream cut into
  ``part-NNN.bin`` files of at most ``--part-mib`` MiB, with ``manifest.json`` (each part's
  size and sha256, the whole stream's). Here, once.
- ``gather DIR --into DEST``: on the machine, each call: every part of DIR whose sha256
  matches the manifest is kept under ``DEST/parts`` (a part already kept is not copied
  again; a damaged one is an error naming it); it prints what is still missing. Once every
  part is there, the stream is checked against the manifest's sha256 and unpacked into
  ``DEST/SRC-NAME`` (printed on the last line). Running it again after that does nothing.

Exit code 0 when the whole is unpacked, 3 while parts are missing, 2 on bad input. The
commands per call (``.carry`` ignored by git, one part per call beside the wheels)::

    python benchmarks/carry_parts.py split "$(python -c 'import dualview.resources as r; \\
        print(r.embedded_encoder_path())')" --out .carry --part-mib 40
    # call k, carry [".carry/manifest.json", ".carry/part-00k.bin"]:
    python3 benchmarks/carry_parts.py gather .carry --into /tmp/carried
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

MANIFEST = "manifest.json"
PART = "part-{:03d}.bin"
CHUNK = 1 << 20


class CarryError(Exception):
    """Bad input: a missing source, a damaged part, a manifest that does not match."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _tar_bytes(source: Path) -> bytes:
    """SRC as an uncompressed tar stream whose one top-level entry is SRC's name (file
    order and metadata fixed, so the same SRC gives the same bytes)."""
    buffer = io.BytesIO()

    def fixed(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = [source] if source.is_file() else [source, *sorted(source.rglob("*"))]
        for path in paths:
            name = path.relative_to(source.parent).as_posix()
            tar.add(path, arcname=name, recursive=False, filter=fixed)
    return buffer.getvalue()


def _cut(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _apart(output: Path, input_: Path, flag: str) -> None:
    """An output folder may not be the input, lie inside it, or hold it (nothing read is
    written over)."""
    out, src = output.resolve(), input_.resolve()
    if out == src or src in out.parents or out in src.parents:
        raise CarryError(f"{flag} {output}: overlaps the input {input_}; choose another folder")


def split(source: Path, out: Path, part_mib: float) -> dict:
    """Write SRC's parts and manifest into ``out``; the manifest."""
    if not source.exists():
        raise CarryError(f"{source}: no such file or folder")
    _apart(out, source, "--out")
    size = int(part_mib * 2**20)
    if size <= 0:
        raise CarryError(f"--part-mib: must be positive (got {part_mib})")
    data = _tar_bytes(source)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("part-*.bin"):
        stale.unlink()
    parts = []
    for number, piece in enumerate(_cut(data, size)):
        path = out / PART.format(number)
        path.write_bytes(piece)
        parts.append({"file": path.name, "bytes": len(piece), "sha256": _sha256(path)})
    manifest = {
        "name": source.name,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "parts": parts,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _read_manifest(path: Path) -> dict:
    try:
        manifest = json.loads(path.read_text())
        _ = manifest["name"], manifest["sha256"], [p["file"] for p in manifest["parts"]]
    except FileNotFoundError as exc:
        raise CarryError(f"{path}: no manifest (run `split` first and carry it)") from exc
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CarryError(f"{path}: not a carry_parts manifest ({exc})") from exc
    return manifest


def _keep_part(entry: dict, source: Path, kept: Path) -> bool:
    """Copy one carried part into ``kept`` once its sha256 matches; whether it is kept."""
    target = kept / entry["file"]
    if target.exists():
        return True
    if not source.exists():
        return False
    if _sha256(source) != entry["sha256"]:
        raise CarryError(f"{source}: sha256 differs from the manifest's (damaged or stale part)")
    partial = target.with_suffix(".partial")
    shutil.copyfile(source, partial)
    partial.replace(target)  # a killed copy leaves no part that looks whole
    return True


def gather(carried: Path, into: Path) -> tuple[Path | None, list[str]]:
    """Keep the parts carried in ``carried`` under ``into/parts``; ``(unpacked folder or
    file, missing part names)`` (the first is None while parts are missing)."""
    _apart(into, carried, "--into")
    manifest = _read_manifest(carried / MANIFEST)
    result = into / manifest["name"]
    done = into / "unpacked.sha256"
    if done.exists() and done.read_text().strip() == manifest["sha256"] and result.exists():
        return result, []
    kept = into / "parts"
    kept.mkdir(parents=True, exist_ok=True)
    entries = manifest["parts"]
    missing = [e["file"] for e in entries if not _keep_part(e, carried / e["file"], kept)]
    if missing:
        return None, missing
    digest, stream = hashlib.sha256(), io.BytesIO()
    for entry in entries:
        piece = (kept / entry["file"]).read_bytes()
        digest.update(piece)
        stream.write(piece)
    if digest.hexdigest() != manifest["sha256"]:
        raise CarryError(f"{kept}: the parts put together differ from the manifest's sha256")
    if result.exists():
        shutil.rmtree(result) if result.is_dir() else result.unlink()
    stream.seek(0)
    with tarfile.open(fileobj=stream, mode="r") as tar:
        tar.extractall(into, filter="data")
    done.write_text(manifest["sha256"] + "\n")
    return result, []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    cut = verbs.add_parser("split", help="cut SRC into parts and a manifest")
    cut.add_argument("source", type=Path)
    cut.add_argument("--out", type=Path, required=True)
    cut.add_argument("--part-mib", type=float, default=40.0)
    put = verbs.add_parser("gather", help="keep carried parts; unpack when all are there")
    put.add_argument("carried", type=Path)
    put.add_argument("--into", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.verb == "split":
            manifest = split(args.source, args.out, args.part_mib)
            print(f"{len(manifest['parts'])} parts, {manifest['bytes']:,} bytes -> {args.out}")
            return 0
        result, missing = gather(args.carried, args.into)
    except CarryError as exc:
        print(f"carry_parts: {exc}", file=sys.stderr)
        return 2
    if missing:
        print(f"kept; missing {len(missing)}: {' '.join(missing)}")
        return 3
    print(f"complete: {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
