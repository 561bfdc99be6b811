"""Hub artifacts: the export loads with ``datasets``, cards carry provenance, push over HTTP."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
import yaml

from dualview.data.jsonl import iter_records
from dualview.errors import ConfigError
from dualview.hub.dataset import DATA_FILE
from dualview.synth.testing import StubServer
from tests.conftest import FIXTURES
from tests.helpers import run_cli
from tests.hub_stub import HubStub
from tests.train_tiny import train_tiny_model

RECORDS_ORIG = FIXTURES / "synth" / "orig.jsonl"
PAIRED = FIXTURES / "eval" / "paired"
REVIEW = {"accuracy": 0.8125, "ci_low": 0.7, "ci_high": 0.9, "n": 16}


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


@pytest.fixture(scope="module")
def mix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real chain: synth (stub LLM, so real stats beside dv.jsonl), then an Ins-DV mix."""
    root = tmp_path_factory.mktemp("hub-mix")
    with StubServer() as server:
        llm = ["--backend", "openai", "--base-url", server.base_url, "--model", "stub"]
        done = run_cli("synth", str(RECORDS_ORIG), str(root / "dv.jsonl"), *llm)
    assert done.returncode == 0, done.stderr
    out = root / "train.jsonl"
    done = run_cli(
        "mix", str(RECORDS_ORIG), str(root / "dv.jsonl"), "-o", str(out),
        "--preset", "ins-dv", "--size", "4", "--seed", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def test_hub_dataset_loads_with_datasets_and_card_says_how_it_was_made(
    mix: Path, tmp_path: Path
) -> None:
    from datasets import load_dataset

    review = tmp_path / "review.json"
    review.write_text(json.dumps(REVIEW))
    out = tmp_path / "hub"
    done = run_cli(
        "export", str(mix), str(out), "--to", "hub-dataset", "--license", "cc-by-4.0",
        "--review", str(review),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    loaded = load_dataset(str(out), split="train")
    records = list(iter_records(mix))
    assert loaded.num_rows == len(records) == 4
    assert loaded["id"] == [r.id for r in records]
    assert loaded["view"].count("dv") == 2
    assert loaded[0]["positives"] == [d.model_dump() for d in records[0].positives]

    card = (out / "README.md").read_text()
    meta = _front_matter(card)
    assert meta["license"] == "cc-by-4.0"
    assert meta["configs"][0]["data_files"][0] == {"split": "train", "path": DATA_FILE}
    assert meta["size_categories"] == ["n<1K"]
    stats = json.loads((mix.parent / "dv.jsonl.stats.json").read_text())
    assert stats["task_fingerprint"]["template"][:16] in card
    assert f"`{stats['model']}`" in card
    assert "Human-review accuracy: 0.812 (95% CI 0.700-0.900) over 16 judged records" in card
    manifest = json.loads((mix.parent / "train.jsonl.manifest.json").read_text())
    assert manifest["sources"][1]["sha256"][:16] in card
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["manifest"] == manifest
    assert provenance["llm_stages"][0]["sampling"] == stats["sampling"]


def test_model_card_has_training_data_and_model_index(mix: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from dualview.eval.run import evaluate
    from dualview.hub.model_card import write_model_card

    model = train_tiny_model(tmp_path, mix)
    # The library's save leaves sentence-transformers' own README; the card is written by
    # whoever saves a model for a user (the CLI and the pipeline call write_model_card).
    assert "dualview" not in (model / "README.md").read_text()
    write_model_card(model)
    card = (model / "README.md").read_text()
    meta = _front_matter(card)
    assert meta["library_name"] == "sentence-transformers"
    assert "model-index" not in meta  # not evaluated yet
    assert '"name": "ins-dv"' in card and "temperature: 0.02" in card
    assert SentenceTransformer(str(model), device="cpu").encode(["x"]).shape == (1, 32)

    evaluate([str(model)], [f"paired={PAIRED}"], tmp_path / "eval", cache=False)
    result_dir = next(p for p in (tmp_path / "eval").iterdir() if p.is_dir())
    write_model_card(model, [result_dir], name="tiny-dv")
    card = (model / "README.md").read_text()
    result = json.loads(next(result_dir.glob("*.json")).read_text())
    # The paired set is local: no Hub dataset id, so in the table and not in the model-index
    # (tests/test_model_card_honest.py covers the model-index of Hub datasets).
    assert "model-index" not in _front_matter(card) and "\n# tiny-dv\n" in card
    assert f"| paired | p-MRR | {result['metrics']['p-MRR']:.2f} |" in card
    assert f"| paired | nDCG@10 | {100 * result['metrics']['nDCG@10']:.2f} |" in card


def _verdict_file(path: Path, verdicts: list[str]) -> Path:
    """A verdict file as ``dualview review`` appends it (one reviewer)."""
    from dualview.review.store import append_verdict, make_verdict

    for i, verdict in enumerate(verdicts):
        item = {"item": f"i{i}", "record_id": f"r{i}", "stratum": "all"}
        append_verdict(path, make_verdict(item, "ana", verdict, None, ""))
    return path


@pytest.mark.parametrize("form", ["verdicts", "review-stats-json"])
def test_hub_dataset_card_reads_a_review_verdict_file_or_review_stats_json(
    mix: Path, tmp_path: Path, form: str
) -> None:
    """The review path of provenance: a verdict file (JSONL) and what `review stats --json`
    writes both give the card the accuracy with its Wilson interval."""
    verdicts = _verdict_file(tmp_path / "dv.jsonl.review.jsonl", ["valid"] * 12 + ["invalid"] * 4)
    review = verdicts
    if form == "review-stats-json":
        review = tmp_path / "summary.json"
        done = run_cli("review", "stats", str(verdicts), "--json", str(review))
        assert done.returncode == 0, done.stderr
    done = run_cli("export", str(mix), str(tmp_path / "hub"), "--to", "hub-dataset",
                   "--review", str(review))  # fmt: skip
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "hub" / "README.md").read_text()
    assert "Human-review accuracy: 0.750 (95% CI 0.505-0.898) over 16 judged records" in card
    provenance = json.loads((tmp_path / "hub" / "provenance.json").read_text())
    assert provenance["review"]["accuracy"] == 0.75 and provenance["review"]["items"] == 16


def test_push_uploads_every_file_in_one_commit_with_the_token_from_env(
    mix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, caplog
) -> None:
    import huggingface_hub.constants

    from dualview.hub.dataset import export_hub_dataset
    from dualview.hub.push import push

    folder = export_hub_dataset(mix, tmp_path / "hub").path
    secret = "hf_TESTsecret0123456789"
    monkeypatch.setenv("DV_HUB_TOKEN", secret)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # local stub only
    caplog.set_level(logging.DEBUG)
    with HubStub() as hub:
        result = push(folder, "me/dv-data", token_env="DV_HUB_TOKEN", endpoint=hub.url)
    assert (result.repo_type, result.commit) == ("dataset", "abc123")

    calls = [(r.method, r.path) for r in hub.requests if r.path != "/api/validate-yaml"]
    calls = [c for c in calls if c[1].startswith(("/api/repos", "/api/datasets"))]
    assert calls == [
        ("POST", "/api/repos/create"),
        ("POST", "/api/datasets/me/dv-data/preupload/main"),
        ("POST", "/api/datasets/me/dv-data/commit/main"),
    ]
    create = next(r for r in hub.requests if r.path == "/api/repos/create")
    assert json.loads(create.body) == {
        "name": "dv-data", "organization": "me", "visibility": "public", "type": "dataset",
    }  # fmt: skip
    for request in hub.requests:
        auth = {k.lower(): v for k, v in request.headers.items()}.get("authorization")
        assert auth == f"Bearer {secret}"
    commit = next(r for r in hub.requests if "/commit/" in r.path)
    lines = [json.loads(line) for line in commit.body.decode().splitlines()]
    assert lines[0] == {
        "key": "header",
        "value": {"summary": "Upload with dualview", "description": ""},
    }
    files = {f["value"]["path"]: base64.b64decode(f["value"]["content"]) for f in lines[1:]}
    on_disk = {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
    assert files == on_disk
    assert {"README.md", DATA_FILE, "provenance.json"} <= set(files)
    seen = capsys.readouterr()
    assert secret not in seen.out + seen.err + caplog.text


def test_push_without_token_names_the_variable(mix: Path, tmp_path: Path, monkeypatch) -> None:
    from dualview.hub.dataset import export_hub_dataset
    from dualview.hub.push import push

    folder = export_hub_dataset(mix, tmp_path / "hub").path
    monkeypatch.delenv("NO_TOKEN_HERE", raising=False)
    with pytest.raises(ConfigError, match="NO_TOKEN_HERE"):
        push(folder, "me/x", token_env="NO_TOKEN_HERE", endpoint="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("kind", "tag", "usage"),
    [
        ("cross_encoder", "cross-encoder", "CrossEncoder("),
        ("llm_reranker", "llm-reranker", "load_reranker("),
        ("someone_elses", "reranker", "load_reranker("),
    ],
)
def test_a_reranker_card_says_what_it_is_and_how_to_load_it(tmp_path, kind, tag, usage) -> None:
    from dualview.hub.model_card import render_model_card
    from dualview.models.reranker import RERANKER_FILE

    info = {"kind": kind, "query_template": "{instruction} :: {query}", "answers": ["yes", "no"]}
    (tmp_path / RERANKER_FILE).write_text(json.dumps(info))
    card = render_model_card(tmp_path)
    meta = _front_matter(card)
    assert meta["pipeline_tag"] == "text-ranking" and tag in meta["tags"]
    assert usage in card and "SentenceTransformer(" not in card and "bi-encoder" not in card
    assert "`{instruction} :: {query}`" in card  # the reranker's own template
    assert ("Answers: ['yes', 'no']" in card) == (kind == "llm_reranker")
