"""Bi-encoder: pooling, and a saved folder that SentenceTransformer reproduces exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from sentence_transformers import SentenceTransformer

from dualview.data.jsonl import iter_records
from dualview.models.bi_encoder import BiEncoder, record_query_text
from dualview.models.config import ModelConfig
from dualview.models.pooling import pool
from dualview.retrieval.text import doc_text
from tests.train_tiny import make_tiny_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"


def test_pooling_modes_on_known_tensors() -> None:
    hidden = torch.arange(24, dtype=torch.float32).view(2, 3, 4)
    right = torch.tensor([[1, 1, 0], [1, 1, 1]])
    left = torch.tensor([[0, 1, 1], [1, 1, 1]])
    assert torch.equal(pool(hidden, right, "cls"), hidden[:, 0])
    assert torch.equal(pool(hidden, right, "mean")[0], hidden[0, :2].mean(0))
    assert torch.equal(pool(hidden, right, "last_token")[0], hidden[0, 1])
    assert torch.equal(pool(hidden, left, "last_token")[0], hidden[0, 2])
    assert torch.equal(pool(hidden, left, "last_token")[1], hidden[1, 2])


def _check_roundtrip(model: BiEncoder, folder: Path) -> None:
    records = list(iter_records(FIXTURE))[:4]
    queries = [record_query_text(r, model.config.query_template) for r in records]
    documents = [doc_text(d) for r in records for d in r.documents()]
    st = SentenceTransformer(str(folder), device="cpu")
    ours_q, ours_d = model.encode(queries, "query"), model.encode(documents, "document")
    theirs_q = torch.tensor(st.encode_query(queries))
    theirs_d = torch.tensor(st.encode_document(documents))
    torch.testing.assert_close(theirs_q, ours_q, rtol=0, atol=1e-5)
    torch.testing.assert_close(theirs_d, ours_d, rtol=0, atol=1e-5)


def test_minilm_saved_folder_reproduces_embeddings(tmp_path: Path) -> None:
    train_file = tmp_path / "mix.jsonl"
    manifest = tmp_path / "mix.jsonl.manifest.json"
    manifest.write_text(json.dumps({"preset": "ins-dv"}), encoding="utf-8")
    # short query limit: queries truncate at 16 tokens, documents at 40, in both libraries
    model = BiEncoder(ModelConfig(query_max_length=16, document_max_length=40))
    folder = model.save(tmp_path / "model", train_config_yaml="seed: 1\n", manifest=manifest)
    assert json.loads((folder / "data_manifest.json").read_text()) == {"preset": "ins-dv"}
    assert (folder / "dualview_train.yaml").read_text() == "seed: 1\n"
    assert train_file.name in manifest.name
    _check_roundtrip(model, folder)
    long_query = ["word " * 100]
    assert not torch.allclose(
        model.encode(long_query, "query"), model.encode(long_query, "document")
    )


@pytest.mark.parametrize("pooling", ["cls", "last_token"])
def test_other_poolings_roundtrip(tmp_path: Path, pooling: str) -> None:
    tiny = make_tiny_encoder(tmp_path / "tiny")
    model = BiEncoder(ModelConfig(name_or_path=str(tiny), pooling=pooling))
    _check_roundtrip(model, model.save(tmp_path / "model"))
