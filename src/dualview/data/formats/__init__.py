"""Format adapters: other projects' training/eval layouts in and out of `Record`.

Each adapter module exposes ``read(path, **options) -> Iterator[Record]`` and/or
``write(records, path, **options) -> int``. `READERS` and `WRITERS` map the
format names the CLI accepts to those functions (`dualview.registry.Registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from dualview.data import jsonl
from dualview.data.formats import beir, infir, parquet, promptriever, st, tevatron
from dualview.data.schema import Record
from dualview.io.atomic import write_jsonl
from dualview.registry import Registry

Reader = Callable[..., Iterator[Record]]
Writer = Callable[..., int]


def _read_native(path: str | Path, **options: Any) -> Iterator[Record]:
    return jsonl.iter_records(path, **options)


def _write_native(records: Iterable[Record], path: str | Path) -> int:
    return write_jsonl(path, records)


#: ``--from`` format name -> reader; plugins: entry-point group ``dualview.readers``.
READERS: Registry[Reader] = Registry(
    "input format",
    field="--from",
    group="dualview.readers",
    entries={
        "dualview": _read_native,
        "promptriever": promptriever.read,
        "tevatron": tevatron.read,
        "beir": beir.read,
        "infir": infir.read,
        "st": st.read,
        "parquet": parquet.read,
    },
)

#: ``--to`` format name -> writer; plugins: entry-point group ``dualview.writers``.
WRITERS: Registry[Writer] = Registry(
    "output format",
    field="--to",
    group="dualview.writers",
    entries={
        "dualview": _write_native,
        "tevatron": tevatron.write,
        "st": st.write,
        "parquet": parquet.write,
    },
)


def get_reader(name: str) -> Reader:
    return READERS.get(name)


def get_writer(name: str) -> Writer:
    return WRITERS.get(name)
