"""Every adapter reads a ``datasets`` source (Parquet/Arrow folder, file) streamed, giving the
records its JSONL input gives; ``dualview data convert`` takes such a source directly."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dualview.cli import app
from dualview.data import formats
from dualview.data.formats import parquet, st, tevatron
from dualview.data.formats.source import is_dataset_source, normalize
from dualview.data.jsonl import iter_records
from dualview.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures" / "formats"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _parquet_folder(rows: list[dict], folder: Path) -> Path:
    """Rows split over two Parquet files in a nested folder (read back in path order)."""
    (folder / "data").mkdir(parents=True)
    half = max(1, len(rows) // 2)
    pq.write_table(pa.Table.from_pylist(rows[:half]), folder / "data" / "part-0.parquet")
    if rows[half:]:
        pq.write_table(pa.Table.from_pylist(rows[half:]), folder / "data" / "part-1.parquet")
    return folder


@pytest.mark.parametrize("name", ["promptriever", "tevatron", "infir"])
def test_adapter_reads_parquet_folder_like_jsonl(name: str, tmp_path: Path) -> None:
    source = FIXTURES / f"{name}.jsonl"
    folder = _parquet_folder(_rows(source), tmp_path / "src")
    expected = list(formats.get_reader(name)(source))
    got = list(formats.get_reader(name)(folder))
    assert len(got) == len(expected) > 0
    assert [r.model_dump() for r in got] == [r.model_dump() for r in expected]


def test_st_and_parquet_adapters_read_dataset_sources(tmp_path: Path) -> None:
    records = list(tevatron.read(FIXTURES / "tevatron.jsonl"))
    st_rows = [st.to_row(r) for r in records]
    st_rows[0] = {k: v for k, v in st_rows[0].items() if k != "negative_2"}  # ragged: null
    (tmp_path / "st.jsonl").write_text("".join(json.dumps(r) + "\n" for r in st_rows))
    folder = _parquet_folder(st_rows, tmp_path / "st")
    assert list(st.read(folder)) == list(st.read(tmp_path / "st.jsonl"))

    parquet.write(records, tmp_path / "records.parquet")
    assert list(formats.get_reader("parquet")(tmp_path / "records.parquet")) == records


def test_arrow_save_to_disk_folder_is_streamed(tmp_path: Path) -> None:
    import datasets

    rows = _rows(FIXTURES / "promptriever.jsonl")
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "arrow"))
    got = list(formats.get_reader("promptriever")(tmp_path / "arrow"))
    assert got == list(formats.get_reader("promptriever")(FIXTURES / "promptriever.jsonl"))


def test_bad_row_is_located_by_row_number(tmp_path: Path) -> None:
    rows = _rows(FIXTURES / "tevatron.jsonl")
    rows[1]["query"] = ""
    folder = _parquet_folder(rows, tmp_path / "bad")
    with pytest.raises(DataError) as err:
        list(tevatron.read(folder))
    assert (err.value.line, err.value.field) == (2, "query")
    assert str(folder) in str(err.value)


def test_source_kinds(tmp_path: Path) -> None:
    assert normalize(Path("hf://datasets/org/name")) == "hf://datasets/org/name"
    assert is_dataset_source("hf://datasets/org/name")
    assert is_dataset_source("samaya-ai/msmarco-w-instructions")  # not a local path: Hub id
    assert not is_dataset_source("missing/file.jsonl")
    assert not is_dataset_source(FIXTURES / "tevatron.jsonl")
    assert not is_dataset_source(FIXTURES)  # a folder without Parquet/Arrow files


def test_cli_convert_takes_a_parquet_folder(tmp_path: Path) -> None:
    folder = _parquet_folder(_rows(FIXTURES / "promptriever.jsonl"), tmp_path / "src")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["data", "convert", str(folder), str(out), "--from", "promptriever"]
    )
    assert result.exit_code == 0, result.output
    expected = list(formats.get_reader("promptriever")(FIXTURES / "promptriever.jsonl"))
    assert list(iter_records(out)) == expected


def test_cli_synth_takes_a_parquet_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dualview.synth.testing import StubReply, StubServer
    from tests.test_synth_stub import GOOD

    monkeypatch.setenv("DUALVIEW_LLM_KEY", "unused")
    rows = _rows(FIXTURES / "promptriever.jsonl")
    folder = _parquet_folder(rows, tmp_path / "src")
    (tmp_path / "src.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    outputs = []
    with StubServer(lambda request: StubReply(GOOD)) as server:
        for name, source in (("jsonl", tmp_path / "src.jsonl"), ("parquet", folder)):
            out = tmp_path / f"{name}.out.jsonl"
            args = ["synth", str(source), str(out), "--from", "promptriever"]
            args += ["--backend", "openai", "--base-url", server.base_url]
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, result.output
            outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert b'"view":"dv"' in outputs[0].replace(b" ", b"")
