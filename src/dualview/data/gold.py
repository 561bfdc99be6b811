"""The hand-written gold dual-view set: authoring format, validation, records and split.

Writers author one instance per line in ``dualview/data/gold/source/<domain>.jsonl`` (format
and writing rules: ``dualview/data/gold/CARD.md``). `load_instances` validates every
line and raises `dualview.errors.DataError` naming file, line and field for any rule
violation. `build_records` turns an instance into its ``orig`` record and its ``dv``
record (the dual view under the gold reversed instruction):

- ``orig``: query, instruction, positive P+, instruction negatives (N* and the other N_i),
  hard negatives;
- ``dv``: same query, reversed instruction, positive N*, instruction negatives P+ and the
  other N_i, the same hard negatives, ``parent_id`` = the orig id.

Each record gets ``n_hard`` hard negatives: the two written ones plus deterministic extras
drawn from other instances of the same domain (their hard negatives or positives, never a
document of the instance itself). The train/test split is fixed by instance: each domain
gives ``ceil(test_fraction * n)`` instances to test, chosen by hash so that constraint types
are balanced over the test split (`assign_splits`). `build` writes
``train.jsonl``, ``test.jsonl``, ``counts.json`` and the counts table of ``CARD.md``;
`load_gold` reads a split back as records.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dualview.data.gold_card import compute_counts, update_card
from dualview.data.jsonl import iter_records, validation_error_to_data_error
from dualview.data.schema import Document, Record
from dualview.errors import ConfigError, DataError
from dualview.io.atomic import atomic_write_text, write_jsonl
from dualview.io.files import iter_json_lines

GOLD_DIR = Path(__file__).resolve().parent / "gold"
SOURCE_DIR = GOLD_DIR / "source"
SPLITS: tuple[str, ...] = ("train", "test")
ConstraintType = Literal[
    "audience",
    "date_period",
    "numeric_threshold",
    "geography",
    "format_genre",
    "source_type",
    "length",
    "keyword_inclusion",
    "exclusion_negation",
    "stance_polarity",
]
CONSTRAINT_TYPES: tuple[str, ...] = get_args(ConstraintType)
MIN_WORDS, MAX_WORDS = 40, 150
DEFAULT_N_HARD = 6
DEFAULT_TEST_FRACTION = 0.25
_INSTANCE_ID = re.compile(r"^([a-z][a-z_]*)-(\d{3})$")


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


def normalize_text(text: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed: for equality checks."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


class GoldPassage(BaseModel):
    """A written passage: title, text (40-150 words), and the N* mark for instruction negatives."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str
    text: str
    n_star: bool = False

    @field_validator("text")
    @classmethod
    def _length_in_range(cls, value: str) -> str:
        words = word_count(value)
        if not MIN_WORDS <= words <= MAX_WORDS:
            raise ValueError(f"passage has {words} words; it must have {MIN_WORDS}-{MAX_WORDS}")
        return value

    def document(self) -> Document:
        """The passage as a schema document with its content id."""
        return Document.from_text(self.text, self.title)


class GoldInstance(BaseModel):
    """One authored instance (one line of a source file); see the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance: str
    domain: str = Field(min_length=1)
    constraint_type: ConstraintType
    query: str = Field(min_length=1)
    instruction: str = Field(min_length=1)
    reversed_instruction: str = Field(min_length=1)
    positive: GoldPassage
    instruction_negatives: list[GoldPassage]
    hard_negatives: list[GoldPassage]

    @field_validator("instance")
    @classmethod
    def _instance_id_format(cls, value: str) -> str:
        if not _INSTANCE_ID.match(value):
            raise ValueError(f"instance id {value!r} must look like '<domain>-NNN'")
        return value

    @field_validator("instruction_negatives")
    @classmethod
    def _one_to_three_with_one_n_star(cls, value: list[GoldPassage]) -> list[GoldPassage]:
        if not 1 <= len(value) <= 3:
            raise ValueError(f"needs 1-3 instruction negatives, found {len(value)}")
        marked = sum(p.n_star for p in value)
        if marked != 1:
            raise ValueError(f"exactly one instruction negative must be n_star, found {marked}")
        return value

    @field_validator("hard_negatives")
    @classmethod
    def _exactly_two(cls, value: list[GoldPassage]) -> list[GoldPassage]:
        if len(value) != 2:
            raise ValueError(f"needs exactly 2 written hard negatives, found {len(value)}")
        if any(p.n_star for p in value):
            raise ValueError("n_star may only mark an instruction negative")
        return value

    @field_validator("positive")
    @classmethod
    def _positive_not_n_star(cls, value: GoldPassage) -> GoldPassage:
        if value.n_star:
            raise ValueError("n_star may only mark an instruction negative")
        return value

    @property
    def n_star(self) -> GoldPassage:
        """The instruction negative that is relevant under the reversed instruction."""
        return next(p for p in self.instruction_negatives if p.n_star)

    @property
    def other_negatives(self) -> list[GoldPassage]:
        """Instruction negatives other than N*: negative under both instructions."""
        return [p for p in self.instruction_negatives if not p.n_star]

    def passages(self) -> list[GoldPassage]:
        """All written passages: P+, instruction negatives, hard negatives."""
        return [self.positive, *self.instruction_negatives, *self.hard_negatives]


class SplitUnit(Protocol):
    """What `assign_splits` reads of an instance (a `GoldInstance`, or one read back from
    its records' ``meta``)."""

    @property
    def instance(self) -> str: ...
    @property
    def domain(self) -> str: ...
    @property
    def constraint_type(self) -> str: ...


@dataclass(frozen=True)
class LocatedInstance:
    """An instance with the file and line it was read from (for error messages)."""

    instance: GoldInstance
    path: Path
    line: int


def _check_semantics(inst: GoldInstance, path: Path, line: int) -> None:
    """Rules that span fields: id/domain agreement, a real reversal, distinct passages."""
    if inst.instance.rsplit("-", 1)[0] != inst.domain:
        raise DataError(
            path, line, "instance", f"id {inst.instance!r} does not start with '{inst.domain}-'"
        )
    if normalize_text(inst.reversed_instruction) == normalize_text(inst.instruction):
        raise DataError(path, line, "reversed_instruction", "equals the original instruction")
    seen: set[str] = set()
    for passage in inst.passages():
        doc_id = passage.document().id
        if doc_id in seen:
            raise DataError(path, line, "passages", f"the same passage appears twice ({doc_id})")
        seen.add(doc_id)


def parse_instance(obj: dict, path: Path, line: int) -> GoldInstance:
    """Validate one decoded line; any violation is a `DataError` at ``path:line``."""
    try:
        inst = GoldInstance.model_validate(obj)
    except ValidationError as exc:
        raise validation_error_to_data_error(exc, path, line) from None
    _check_semantics(inst, path, line)
    return inst


def source_files(source_dir: str | Path = SOURCE_DIR) -> list[Path]:
    """The authoring files, sorted by name."""
    source_dir = Path(source_dir)
    if not source_dir.is_dir():
        raise DataError(source_dir, None, "file", "gold source folder does not exist")
    return sorted(source_dir.glob("*.jsonl"))


def load_instances(paths: Iterable[str | Path]) -> list[LocatedInstance]:
    """Read and validate every instance of ``paths``; instance ids must be unique overall."""
    located: list[LocatedInstance] = []
    first_seen: dict[str, str] = {}
    for path in map(Path, paths):
        for line, obj in iter_json_lines(path):
            inst = parse_instance(obj, path, line)
            if inst.instance in first_seen:
                raise DataError(
                    path,
                    line,
                    "instance",
                    f"duplicate instance id {inst.instance!r} "
                    f"(first at {first_seen[inst.instance]})",
                )
            first_seen[inst.instance] = f"{path}:{line}"
            located.append(LocatedInstance(inst, path, line))
    return located


def _rank_key(*parts: str) -> str:
    """A deterministic pseudo-random sort key."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def assign_splits(
    instances: Iterable[SplitUnit],
    test_fraction: float = DEFAULT_TEST_FRACTION,
    salt: str = "gold-split",
    names: tuple[str, str] = ("train", "test"),
) -> dict[str, str]:
    """Instance id -> split: ``ceil(test_fraction * n)`` test instances per domain, chosen so
    that constraint types are as balanced as possible in the whole test split.

    Domains are taken in name order; each test slot goes to the constraint type with the
    fewest test instances so far (among those the domain still has; ties broken by a hash of
    domain and type), and within that type to the instance whose id hashes lowest. The rest
    is train. Deterministic: it depends only on the instance ids, domains, types and ``salt``.
    ``names``: the two sides' names (kept, held out); the validation split of the train
    instances reuses this rule with its own salt (`dualview.data.gold_validation`).
    """
    kept, held = names
    by_domain: dict[str, list[SplitUnit]] = defaultdict(list)
    for inst in instances:
        by_domain[inst.domain].append(inst)
    test_per_type: Counter[str] = Counter()
    split: dict[str, str] = {}
    for domain in sorted(by_domain):
        pending = sorted(by_domain[domain], key=lambda i: _rank_key(salt, i.instance))
        n = len(pending)
        n_test = math.ceil(test_fraction * n) if n > 1 else 0
        for _ in range(n_test):
            ctype = min(
                {i.constraint_type for i in pending},
                key=lambda t: (test_per_type[t], _rank_key(salt, domain, t)),
            )
            chosen = next(i for i in pending if i.constraint_type == ctype)
            pending.remove(chosen)
            test_per_type[ctype] += 1
            split[chosen.instance] = held
        split.update({i.instance: kept for i in pending})
    return split


def pool_of_extras(instances: list[GoldInstance]) -> dict[str, list[Document]]:
    """Per domain, candidate extra hard negatives: every instance's positive and hard negatives."""
    pool: dict[str, list[Document]] = defaultdict(list)
    for inst in instances:
        pool[inst.domain].extend(p.document() for p in (inst.positive, *inst.hard_negatives))
    return pool


def hard_negatives_for(
    inst: GoldInstance, pool: dict[str, list[Document]], n_hard: int
) -> list[Document]:
    """The two written hard negatives plus ``n_hard - 2`` deterministic extras.

    Extras come from the same domain's pool; if that is too small, from the other domains.
    A document of the instance itself is never used.
    """
    written = [p.document() for p in inst.hard_negatives]
    own = {p.document().id for p in inst.passages()}
    same = [d for d in pool.get(inst.domain, []) if d.id not in own]
    other = [
        d
        for dom, docs in sorted(pool.items())
        if dom != inst.domain
        for d in docs
        if d.id not in own
    ]
    chosen: list[Document] = []
    taken = set(own)
    for candidates in (same, other):
        for doc in sorted(candidates, key=lambda d: _rank_key(inst.instance, d.id)):
            if len(written) + len(chosen) >= n_hard:
                break
            if doc.id not in taken:
                chosen.append(doc)
                taken.add(doc.id)
    return written + chosen


def build_records(
    inst: GoldInstance, hard_negatives: list[Document], split: str
) -> tuple[Record, Record]:
    """The ``orig`` record of an instance and its ``dv`` record."""
    positive = inst.positive.document()
    n_star = inst.n_star.document()
    others = [p.document() for p in inst.other_negatives]
    meta = {
        "source": "gold",
        "domain": inst.domain,
        "constraint_type": inst.constraint_type,
        "instance": inst.instance,
        "n_star": n_star.id,
        "split": split,
    }
    orig = Record(
        id=f"gold-{inst.instance}-orig",
        view="orig",
        query=inst.query,
        instruction=inst.instruction,
        positives=[positive],
        instruction_negatives=[p.document() for p in inst.instruction_negatives],
        hard_negatives=hard_negatives,
        meta=meta,
    )
    dv = Record(
        id=f"gold-{inst.instance}-dv",
        parent_id=orig.id,
        view="dv",
        query=inst.query,
        instruction=inst.reversed_instruction,
        positives=[n_star],
        instruction_negatives=[positive, *others],
        hard_negatives=hard_negatives,
        meta=meta,
    )
    return orig, dv


def iter_gold_records(
    instances: list[GoldInstance],
    n_hard: int = DEFAULT_N_HARD,
    test_fraction: float = DEFAULT_TEST_FRACTION,
) -> Iterator[Record]:
    """orig and dv records of every instance, in instance-id order, with ``meta.split`` set."""
    if n_hard < 2:
        raise ConfigError("n_hard must be at least 2 (the written hard negatives)")
    if not 0.0 <= test_fraction < 1.0:
        raise ConfigError("test_fraction must be in [0, 1)")
    splits = assign_splits(instances, test_fraction)
    pool = pool_of_extras(instances)
    for inst in sorted(instances, key=lambda i: i.instance):
        yield from build_records(
            inst, hard_negatives_for(inst, pool, n_hard), splits[inst.instance]
        )


def split_path(split: str, gold_dir: str | Path = GOLD_DIR) -> Path:
    """Where a built split lives."""
    if split not in SPLITS:
        raise ValueError(f"unknown gold split {split!r}; expected one of {SPLITS}")
    return Path(gold_dir) / f"{split}.jsonl"


def load_gold(split: str, gold_dir: str | Path = GOLD_DIR) -> list[Record]:
    """The built gold records (orig and dv) of ``split`` ('train' or 'test')."""
    return list(iter_records(split_path(split, gold_dir)))


@dataclass(frozen=True)
class BuildResult:
    """What `build` wrote."""

    paths: dict[str, Path]
    counts: dict


def build(
    source_dir: str | Path = SOURCE_DIR,
    gold_dir: str | Path = GOLD_DIR,
    n_hard: int = DEFAULT_N_HARD,
    test_fraction: float = DEFAULT_TEST_FRACTION,
) -> BuildResult:
    """Validate the sources and write train/test JSONL, ``counts.json`` and the card's counts."""
    gold_dir = Path(gold_dir)
    instances = [li.instance for li in load_instances(source_files(source_dir))]
    if not instances:
        raise DataError(source_dir, None, "file", "no gold instances found")
    by_split: dict[str, list[Record]] = {s: [] for s in SPLITS}
    for record in iter_gold_records(instances, n_hard, test_fraction):
        by_split[record.meta["split"]].append(record)
    paths = {s: split_path(s, gold_dir) for s in SPLITS}
    for split, records in by_split.items():
        write_jsonl(paths[split], records)
    counts = compute_counts(by_split)
    counts_path = gold_dir / "counts.json"
    atomic_write_text(counts_path, json.dumps(counts, indent=2) + "\n")
    update_card(gold_dir / "CARD.md", counts)
    return BuildResult({**paths, "counts": counts_path, "card": gold_dir / "CARD.md"}, counts)
