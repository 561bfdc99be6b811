"""InF-Embed Interaction II: the cross-attention head, training with it, save/load, eval."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from dualview.data.jsonl import iter_records
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.models.interaction import (
    InstructionQueryAttention,
    encode_instructed_queries,
    pair_index,
)
from dualview.train.objectives import RelationInfoNCE
from dualview.train.step import (
    Chunking,
    contrastive_step,
    text_groups,
)
from tests.helpers import on_two_gloo_ranks
from tests.step_checks import FIXTURE, LOSSES, assert_same_step, run_step, step_batch
from tests.train_tiny import make_tiny_encoder


def _reference(head, inst, inst_mask, query, query_mask, pooling):
    """The head's formula with explicit loops over pairs and tokens."""
    w_i, w_k, w_v = (m.weight.T for m in (head.instruction, head.query_key, head.query_value))
    d = inst.shape[-1]
    out = []
    for n in range(inst.shape[0]):
        rows = []
        keys = [t for t in range(query.shape[1]) if query_mask[n, t]]
        for t in range(inst.shape[1]):
            a = inst[n, t] @ w_i
            logits = torch.stack([a @ (query[n, k] @ w_k) / math.sqrt(d) for k in keys])
            weights = torch.softmax(logits, 0)
            rows.append(sum(w * (query[n, k] @ w_v) for w, k in zip(weights, keys, strict=True)))
        real = [t for t in range(inst.shape[1]) if inst_mask[n, t]]
        if pooling == "mean":
            out.append(sum(rows[t] for t in real) / len(real))
        elif pooling == "cls":
            out.append(rows[real[0]])
        else:
            out.append(rows[real[-1]])
    return torch.stack(out)


def _mask(lengths: list[int], width: int, left: bool) -> torch.Tensor:
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        if left:
            mask[i, width - n :] = 1
        else:
            mask[i, :n] = 1
    return mask


# cls pooling reads token 0 (encoders pad on the right), as the bi-encoder's own pooling
@pytest.mark.parametrize(
    ("pooling", "left"),
    [("mean", False), ("mean", True), ("cls", False), ("last_token", False), ("last_token", True)],
)
def test_head_matches_slow_reference(pooling: str, left: bool) -> None:
    torch.manual_seed(0)
    d = 8
    head = InstructionQueryAttention(d, pooling)
    for layer in (head.instruction, head.query_key, head.query_value):
        torch.nn.init.normal_(layer.weight, std=0.5)
    inst, query = torch.randn(3, 5, d), torch.randn(3, 7, d)
    inst_mask, query_mask = _mask([5, 2, 3], 5, left), _mask([7, 1, 4], 7, left)
    # garbage in the padding must not matter
    inst = inst.masked_fill(~inst_mask.bool().unsqueeze(-1), 1e4)
    query = query.masked_fill(~query_mask.bool().unsqueeze(-1), -1e4)
    got = head(inst, inst_mask, query, query_mask)
    want = _reference(head, inst, inst_mask, query, query_mask, pooling)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_identity_start_is_a_weighted_mean_of_query_states() -> None:
    head = InstructionQueryAttention(4)
    query = torch.randn(1, 3, 4)
    out = head(torch.randn(1, 2, 4), torch.ones(1, 2), query, torch.ones(1, 3))
    # a convex combination of the query's token states: inside their bounding box
    assert (out >= query.min(1).values - 1e-6).all() and (out <= query.max(1).values + 1e-6).all()


def test_pair_index_deduplicates_in_first_seen_order() -> None:
    inst, queries, i_idx, q_idx = pair_index(["a", "b", "a"], ["q", "q", "r"])
    assert inst == ["a", "b"] and queries == ["q", "r"]
    assert i_idx.tolist() == [0, 1, 0] and q_idx.tolist() == [0, 0, 1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


def _model(path: Path, interaction: str = "cross_attention") -> BiEncoder:
    torch.manual_seed(1)
    config = ModelConfig(
        name_or_path=str(path),
        query_max_length=32,
        document_max_length=48,
        interaction=interaction,
    )
    model = BiEncoder(config)
    if model.head is not None:  # a head away from the identity, so a wrong pairing shows
        for layer in (model.head.instruction, model.head.query_key, model.head.query_value):
            torch.nn.init.normal_(layer.weight, std=0.3)
    model.eval()
    return model


def test_concat_is_the_default_and_has_no_head(tiny: Path) -> None:
    assert ModelConfig().interaction == "concat"
    model = _model(tiny, "concat")
    assert model.head is None
    assert not any(k.startswith("head.") for k in model.state_dict())
    assert set(text_groups(step_batch(), RelationInfoNCE())) == {"queries", "documents"}


def test_step_embeddings_are_the_head_on_separate_encodings(tiny: Path) -> None:
    """queries[i] = head(I_i, Q_i) and cross[i, j] = head(I_j, Q_i), from single encodings."""
    model = _model(tiny)
    batch = step_batch()
    loss_fn = LOSSES["inf_multi_P_I_IQ"]()
    groups = text_groups(batch, loss_fn, "cross_attention")
    assert set(groups) == {"instructions", "query_tokens", "documents"}
    seen = {}

    def spy(embeddings, _batch):
        seen.update(embeddings)
        return embeddings["queries"].sum() * 0

    loss_fn.batch_loss = spy  # the objective sees the head's embeddings
    with torch.no_grad():
        contrastive_step(model, loss_fn, batch, backward=lambda loss: None)

    def one(instruction: str, query: str) -> torch.Tensor:
        i = model.tokenize([instruction], "query")
        q = model.tokenize([query], "query")
        with torch.no_grad():
            states_i, states_q = model.token_states(i), model.token_states(q)
            out = model.head(states_i, i["attention_mask"], states_q, q["attention_mask"])
        return model.finish(out)[0]

    records = batch.records
    n = len(records)
    cross = seen["cross"].view(n, n, -1)
    for i, rec in enumerate(records):
        want = one(rec.instruction, rec.query)
        torch.testing.assert_close(seen["queries"][i], want, atol=1e-5, rtol=1e-4)
        for j, donor in enumerate(records):
            want = one(donor.instruction, rec.query)
            torch.testing.assert_close(cross[i, j], want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_gradcache_equals_plain_with_cross_attention(tiny: Path, loss_name: str) -> None:
    model = _model(tiny)
    plain = run_step(model, loss_name, None)
    assert plain[0] > 0
    assert any(name.startswith("head.") for name in plain[1])  # the head is trained
    assert any(name.startswith("backbone.") for name in plain[1])
    assert_same_step(run_step(model, loss_name, 2), plain)
    assert_same_step(run_step(model, loss_name, Chunking(max_tokens=120)), plain)


CASES = [("inf_multi_P_I_IQ", None), ("inf_multi_P_I_IQ", 2), ("infonce", 3)]


def _cross_attention_results(tiny: str) -> list:
    """What each rank computes (rank 0's result is compared with one process)."""
    model = _model(Path(tiny))
    return [run_step(model, loss_name, chunk) for loss_name, chunk in CASES]


@pytest.mark.slow
def test_two_gloo_processes_equal_single_with_cross_attention(tiny: Path, tmp_path: Path) -> None:
    """Token states gathered over ranks; the head's gradient is averaged, not summed."""
    gathered = on_two_gloo_ranks(_cross_attention_results, (str(tiny),), tmp_path)
    model = _model(tiny)
    for (loss_name, _), result in zip(CASES, gathered, strict=True):
        assert_same_step(result, run_step(model, loss_name, None))


@pytest.mark.slow
def test_trained_model_round_trips_through_sentence_transformers(tiny: Path, tmp_path: Path):
    """Train with the trainer, save, reload with sentence-transformers + the saved head:
    the same query and document embeddings as the model in memory; eval's Encoder too."""
    from sentence_transformers import SentenceTransformer

    from dualview.config import validate_config
    from dualview.retrieval.encode import Encoder
    from dualview.retrieval.text import InstructedQuery, doc_text
    from dualview.train.config import TrainConfig
    from dualview.train.trainer import Trainer

    config = {
        "model": {
            "name_or_path": str(tiny),
            "query_max_length": 32,
            "document_max_length": 48,
            "interaction": "cross_attention",
        },
        "data": {"train_file": str(FIXTURE), "num_workers": 0},
        "loss": {"objective": "inf_multivariate", "inf_sets": ["P", "I"]},
        "optim": {"lr": 1e-2, "warmup_steps": 0},
        "output_dir": str(tmp_path / "run"),
        "batch_size": 4,
        "max_steps": 3,
        "gradcache_chunk_size": 3,
    }
    trainer = Trainer(validate_config(TrainConfig, config, "test"))
    trainer.train()
    model = trainer.model.eval()
    assert not torch.equal(model.head.instruction.weight, torch.eye(model.dim))  # trained
    folder = trainer.save_model() or tmp_path / "run" / "model"
    records = list(iter_records(FIXTURE))[:5]
    with torch.no_grad():
        inst = model.tokenize([r.instruction for r in records], "query")
        bare = model.tokenize([r.query for r in records], "query")
        want = model.finish(
            model.head(
                model.token_states(inst),
                inst["attention_mask"],
                model.token_states(bare),
                bare["attention_mask"],
            )
        )
    st = SentenceTransformer(str(folder), device="cpu")
    head = InstructionQueryAttention.load(folder)
    got = encode_instructed_queries(
        st, head, [r.query for r in records], [r.instruction for r in records]
    )
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    docs = [doc_text(r.positives[0]) for r in records]
    doc_want = model.encode(docs, "document")
    doc_got = torch.as_tensor(st.encode_document(docs))
    torch.testing.assert_close(doc_got, doc_want, atol=1e-5, rtol=1e-4)
    encoder = Encoder(str(folder), cache=False, show_progress=False)
    texts = [InstructedQuery(f"{r.query} {r.instruction}", r.query, r.instruction) for r in records]
    torch.testing.assert_close(torch.as_tensor(encoder.encode(texts)), want, atol=1e-5, rtol=1e-4)
