"""BEIR folders: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

`load_beir` gives the three parts (used by evaluation and mining);
`read` turns every judged query into a ``plain`` record whose positives are the
documents with a relevance score > 0.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dualview.data.formats.common import build_record, passage_to_document
from dualview.data.schema import Document, Record
from dualview.errors import DataError
from dualview.io.files import decode_text, iter_binary_lines, iter_json_lines


@dataclass
class BeirData:
    corpus: dict[str, Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def unique_id(row: dict, seen: dict, path: Path, line: int, key: str = "_id") -> str:
    """``row[key]`` as a string; a missing or repeated id is a located error."""
    if key not in row:
        raise DataError(path, line, key, "missing")
    value = str(row[key])
    if value in seen:
        raise DataError(path, line, key, f"duplicate id {value!r}")
    return value


def load_corpus(path: Path) -> dict[str, Document]:
    corpus: dict[str, Document] = {}
    for line, row in iter_json_lines(path):
        corpus[unique_id(row, corpus, path, line)] = passage_to_document(row, path, line, "corpus")
    return corpus


def load_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for line, row in iter_json_lines(path):
        key = unique_id(row, queries, path, line)
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise DataError(path, line, "text", "missing or empty query text")
        queries[key] = text
    return queries


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``qid -> {docid: score}``; a header line (``query-id``/``qid``...) is skipped."""
    qrels: dict[str, dict[str, int]] = {}
    for line_number, _, raw in iter_binary_lines(path):
        text = decode_text(raw, path, line_number).rstrip("\r\n")
        for row in csv.reader([text], delimiter="\t"):
            if not "".join(row).strip():
                continue
            if len(row) < 3:
                raise DataError(path, line_number, "qrels", "expected query-id, corpus-id, score")
            try:
                score = int(float(row[-1]))  # NaN and Infinity fail here too
            except (ValueError, OverflowError):
                if line_number == 1:
                    continue  # header
                raise DataError(path, line_number, "score", f"not a number: {row[-1]!r}") from None
            qrels.setdefault(row[0], {})[row[-2]] = score
    return qrels


def load_beir(folder: str | Path, split: str = "test") -> BeirData:
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, None, "folder", "not a BEIR folder (directory expected)")
    return BeirData(
        corpus=load_corpus(folder / "corpus.jsonl"),
        queries=load_queries(folder / "queries.jsonl"),
        qrels=load_qrels(folder / "qrels" / f"{split}.tsv"),
    )


def read(path: str | Path, split: str = "test") -> Iterator[Record]:
    data = load_beir(path, split)
    qrels_path = Path(path) / "qrels" / f"{split}.tsv"
    for qid, judged in data.qrels.items():
        if qid not in data.queries:
            raise DataError(qrels_path, None, "query-id", f"{qid!r} is not in queries.jsonl")
        positive_ids = [d for d, score in judged.items() if score > 0]
        missing = [d for d in positive_ids if d not in data.corpus]
        if missing:
            raise DataError(qrels_path, None, "corpus-id", f"{missing[0]!r} not in corpus.jsonl")
        if not positive_ids:
            continue
        yield build_record(
            qrels_path,
            None,
            id=qid,
            view="plain",
            query=data.queries[qid],
            positives=[data.corpus[d] for d in positive_ids],
            meta={"source": "beir"},
        )
