"""Hard-negative mining on real MS MARCO passages with the embedded MiniLM.

The fast tests use 150 queries and a 350-passage slice of ``msmarco-1743`` (their positives
plus 200 others) so the corpus encodes in seconds; the encoding is cached and shared by the
tests of this module. The full-corpus run is marked slow.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from dualview.data.formats import beir
from dualview.data.formats.common import query_text
from dualview.data.jsonl import iter_records
from dualview.data.manifest import read_manifest
from dualview.data.schema import Document, Record
from dualview.io.atomic import write_jsonl
from dualview.retrieval.encode import Encoder
from dualview.retrieval.mine import MineConfig, margin_threshold, mine_file
from dualview.retrieval.text import doc_text

N_QUERIES, N_OTHER, N_PLANTED = 150, 200, 40


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder("embedded:minilm", batch_size=64, show_progress=False)


@pytest.fixture(scope="module")
def slice_dir(msmarco_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """queries.jsonl-free slice: records file + corpus (positives + others + planted dups)."""
    folder = tmp_path_factory.mktemp("mine")
    records = list(itertools.islice(beir.read(msmarco_dir), N_QUERIES))
    write_jsonl(folder / "records.jsonl", records)
    positive_ids = {d.id for r in records for d in r.positives}
    corpus = beir.load_corpus(msmarco_dir / "corpus.jsonl")
    others = [d for i, d in corpus.items() if i not in positive_ids][:N_OTHER]
    docs = [d for r in records for d in r.positives] + others
    rows = [{"_id": d.id, "title": d.title, "text": d.text} for d in docs]
    write_jsonl(folder / "corpus.jsonl", rows)
    planted = [
        {"_id": f"dup-{r.positives[0].id}", "title": "", "text": r.positives[0].text}
        for r in records[:N_PLANTED]
    ]
    write_jsonl(folder / "corpus_planted.jsonl", rows + planted)
    return folder


def _check_margin(out: Path, encoder: Encoder, margin: float) -> int:
    """Recompute every mined score independently; return how many negatives were checked."""
    checked = 0
    for record in iter_records(out):
        query = encoder.encode([query_text(record)])[0]
        positive = encoder.encode([doc_text(d) for d in record.positives]) @ query
        negatives = encoder.encode([doc_text(d) for d in record.hard_negatives]) @ query
        limit = margin_threshold(float(positive.min()), margin)
        assert np.all(negatives <= limit + 1e-5), record.id
        checked += len(negatives)
    return checked


def test_mined_negatives_are_never_positive_and_below_margin(slice_dir, encoder, msmarco_dir):
    out = slice_dir / "mined.jsonl"
    result = mine_file(
        slice_dir / "records.jsonl", out, MineConfig(), slice_dir / "corpus.jsonl", encoder
    )
    qrels = beir.load_qrels(msmarco_dir / "qrels" / "test.tsv")
    records = list(iter_records(out))
    assert len(records) == N_QUERIES
    for record in records:
        positives = {d for d, s in qrels[record.id].items() if s > 0}
        mined = [d.id for d in record.hard_negatives]
        assert len(mined) == 30 and not positives & set(mined)
        scores = list(record.meta["mined_scores"].values())
        assert scores == sorted(scores, reverse=True)
    assert _check_margin(out, encoder, 0.95) == 30 * N_QUERIES
    assert result.stats["rejected"]["known_positive"] == N_QUERIES
    manifest = read_manifest(out)
    assert manifest["model_fingerprint"] == encoder.fingerprint
    assert manifest["counts"] == {"plain": N_QUERIES}


def test_planted_duplicate_of_the_positive_is_not_mined(slice_dir, encoder):
    records, corpus = slice_dir / "records.jsonl", slice_dir / "corpus_planted.jsonl"
    planted = lambda path: [  # noqa: E731  (a record whose own positive's duplicate is mined)
        r.id
        for r in iter_records(path)
        if f"dup-{r.positives[0].id}" in {d.id for d in r.hard_negatives}
    ]
    default = mine_file(records, slice_dir / "a.jsonl", MineConfig(), corpus, encoder)
    assert planted(slice_dir / "a.jsonl") == []
    assert default.stats["rejected"]["positive_duplicate"] == N_PLANTED
    # the margin alone (no text check) also keeps the duplicate out
    margin_only = MineConfig(skip_positive_duplicates=False)
    result = mine_file(records, slice_dir / "b.jsonl", margin_only, corpus, encoder)
    assert planted(slice_dir / "b.jsonl") == []
    assert result.stats["rejected"]["margin"] >= N_PLANTED
    # without any protection the duplicates are mined: the checks above can fail
    unprotected = MineConfig(skip_positive_duplicates=False, margin=None)
    mine_file(records, slice_dir / "c.jsonl", unprotected, corpus, encoder)
    assert len(planted(slice_dir / "c.jsonl")) == N_PLANTED


def test_rank_window_absolute_threshold_and_append(slice_dir, encoder):
    records = slice_dir / "records.jsonl"
    config = MineConfig(rank_start=10, rank_end=40, max_score=0.5, num_negatives=50, margin=None)
    out = slice_dir / "w.jsonl"
    result = mine_file(records, out, config, slice_dir / "corpus.jsonl", encoder)
    for record in iter_records(out):
        assert all(s <= 0.5 for s in record.meta["mined_scores"].values())
        assert len(record.hard_negatives) <= 31  # ranks 10..40
    assert result.stats["rejected"]["rank_window"] == 9 * N_QUERIES
    appended = mine_file(
        out,
        slice_dir / "app.jsonl",
        MineConfig(mode="append", num_negatives=5, rank_start=10),
        slice_dir / "corpus.jsonl",
        encoder,
    )
    for before, after in zip(iter_records(out), iter_records(slice_dir / "app.jsonl"), strict=True):
        assert after.hard_negatives[: len(before.hard_negatives)] == before.hard_negatives
        assert len(after.hard_negatives) == len(before.hard_negatives) + 5
    assert appended.stats["rejected"]["in_record"] > 0


def _doc(i: str, text: str) -> Document:
    return Document(id=i, text=text)


def test_other_views_positive_is_never_mined_for_orig_dv_pairs(tmp_path, encoder):
    """The dv positive N* is not mined for the orig record, nor P+ for the dv record."""
    p_plus = _doc("P", "Volcanoes in Iceland erupt because the island sits on a rift.")
    n_star = _doc("N", "Icelandic volcanoes erupt as the island lies on a mantle hotspot.")
    others = [_doc(f"o{k}", f"Unrelated note number {k} about cooking pasta.") for k in range(12)]
    orig = Record(
        id="o",
        view="orig",
        query="why do volcanoes in iceland erupt",
        instruction="focus on plate tectonics",
        positives=[p_plus],
    )
    dv = Record(
        id="d",
        parent_id="o",
        view="dv",
        query=orig.query,
        instruction="focus on hotspots",
        positives=[n_star],
        instruction_negatives=[p_plus],
    )
    write_jsonl(tmp_path / "r.jsonl", [orig, dv])
    corpus = [{"_id": d.id, "text": d.text} for d in [p_plus, n_star, *others]]
    write_jsonl(tmp_path / "c.jsonl", corpus)
    config = MineConfig(margin=None, num_negatives=13, skip_positive_duplicates=False)
    mine_file(tmp_path / "r.jsonl", tmp_path / "o.jsonl", config, tmp_path / "c.jsonl", encoder)
    mined = {r.id: [d.id for d in r.hard_negatives] for r in iter_records(tmp_path / "o.jsonl")}
    assert "N" not in mined["o"] and "P" not in mined["o"]
    assert "P" not in mined["d"] and "N" not in mined["d"]
    assert len(mined["o"]) == 12 and len(mined["d"]) == 12


def test_mine_with_selection_writes_a_training_file(slice_dir, encoder):
    config = MineConfig.model_validate({"select": {"total": 7}, "num_negatives": 20})
    out = slice_dir / "sel.jsonl"
    result = mine_file(
        slice_dir / "records.jsonl", out, config, slice_dir / "corpus.jsonl", encoder
    )
    assert {len(r.negatives()) for r in iter_records(out)} == {7}
    assert result.stats["selection"]["kept"] == N_QUERIES


def test_cli_mine_bad_corpus_is_one_line(tmp_path):
    from tests.helpers import run_cli

    write_jsonl(tmp_path / "r.jsonl", [])
    proc = run_cli(
        "mine",
        str(tmp_path / "r.jsonl"),
        "-o",
        str(tmp_path / "o.jsonl"),
        "--corpus",
        str(tmp_path / "nope"),
    )
    assert proc.returncode == 2 and "nope: corpus: does not exist" in proc.stderr


def test_encoding_options_reach_the_encoder():
    from dualview.retrieval.mine import make_encoder

    config = MineConfig(device="cpu", precision="bf16", num_workers=1)
    enc = make_encoder(config)
    assert (enc.precision, enc.num_workers, enc.devices) == ("bf16", 1, ["cpu"])
    assert make_encoder(MineConfig(devices=["cpu", "cpu"])).devices == ["cpu", "cpu"]
    with pytest.raises(ValueError, match="precision"):
        MineConfig(precision="fp8")


@pytest.mark.slow
def test_full_msmarco_corpus_mining(msmarco_dir, tmp_path, encoder):
    records = list(itertools.islice(beir.read(msmarco_dir), 300))
    write_jsonl(tmp_path / "r.jsonl", records)
    mine_file(tmp_path / "r.jsonl", tmp_path / "o.jsonl", MineConfig(), msmarco_dir, encoder)
    for record in iter_records(tmp_path / "o.jsonl"):
        assert record.positives[0].id not in {d.id for d in record.hard_negatives}
    assert _check_margin(tmp_path / "o.jsonl", encoder, 0.95) == 300 * 30
    assert json.loads((tmp_path / "o.jsonl.manifest.json").read_text())["corpus"]["sha256"]
