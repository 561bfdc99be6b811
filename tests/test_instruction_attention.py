"""The instruction-aware interaction (``model.interaction: instruction_attention``, ours):
the concatenation model at step 0, the instruction read once trained, save/load, eval,
GradCache and several processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dualview.data.jsonl import iter_records
from dualview.models.bi_encoder import BiEncoder
from dualview.models.config import ModelConfig
from dualview.models.instruction_attention import InstructionAttention
from dualview.models.saved import interaction_of, load_interaction_head
from dualview.retrieval.text import InstructedQuery
from dualview.train.step import Chunking, contrastive_step, text_groups
from tests.helpers import on_two_gloo_ranks
from tests.step_checks import FIXTURE, LOSSES, assert_same_step, run_step, step_batch
from tests.train_tiny import make_tiny_encoder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_encoder(tmp_path_factory.mktemp("tiny"), dropout=0.0)


def _model(path: Path, interaction: str = "instruction_attention", moved: bool = False):
    torch.manual_seed(1)
    config = ModelConfig(
        name_or_path=str(path),
        query_max_length=32,
        document_max_length=48,
        interaction=interaction,
    )
    model = BiEncoder(config)
    if moved:  # a trained-looking head, so that a wrong pairing or a missing term shows
        for layer in (model.head.query, model.head.key, model.head.value):
            torch.nn.init.normal_(layer.weight, std=0.3)
        with torch.no_grad():
            model.head.gate.fill_(0.7)
    return model.eval()


def _spy_step(model: BiEncoder, loss_name: str = "inf_multi_P_I_IQ") -> dict[str, torch.Tensor]:
    """The embeddings the objective receives for `step_batch` (no update)."""
    loss_fn = LOSSES[loss_name]()
    seen: dict[str, torch.Tensor] = {}

    def spy(embeddings, _batch):
        seen.update(embeddings)
        return embeddings["queries"].sum() * 0

    loss_fn.batch_loss = spy
    with torch.no_grad():
        contrastive_step(model, loss_fn, step_batch(), backward=lambda loss: None)
    return seen


def _extra(model: BiEncoder, instruction: str, query: str) -> torch.Tensor:
    i = model.tokenize([instruction], "query")
    q = model.tokenize([query], "query")
    with torch.no_grad():
        return model.head.extra(
            model.token_states(i), i["attention_mask"], model.token_states(q), q["attention_mask"]
        )[0]


def test_untrained_variant_is_the_concat_model(tiny: Path) -> None:
    """Step 0: the same query (and swapped-instruction) embeddings as concatenation."""
    variant, concat = _model(tiny), _model(tiny, "concat")
    assert float(variant.head.gate.detach()) == 0.0
    got, want = _spy_step(variant), _spy_step(concat)
    groups = text_groups(step_batch(), LOSSES["inf_multi_P_I_IQ"](), "instruction_attention")
    assert set(groups) == {"queries", "cross", "documents", "instructions", "query_tokens"}
    for group in ("queries", "cross", "documents"):
        assert (got[group] - want[group]).abs().max() <= 1e-6, group
    # and the extra term itself is not zero: only the gate hides it
    rec = step_batch().records[0]
    assert _extra(variant, rec.instruction, rec.query).norm() > 1e-3


def test_step_embeddings_are_concat_plus_gated_term(tiny: Path) -> None:
    """queries[i] = norm(c(q_i, i_i) + g x extra(I_i, Q_i)); cross[i, j] with instruction j."""
    model = _model(tiny, moved=True)
    seen = _spy_step(model)
    records = step_batch().records
    n = len(records)
    cross = seen["cross"].view(n, n, -1)
    gate = model.head.gate.detach()

    def one(instruction: str, query: str) -> torch.Tensor:
        concat = model.encode([f"{query} {instruction}"], "query")[0]
        return model.finish((concat + gate * _extra(model, instruction, query))[None])[0]

    for i, rec in enumerate(records):
        torch.testing.assert_close(seen["queries"][i], one(rec.instruction, rec.query))
        for j, donor in enumerate(records):
            torch.testing.assert_close(cross[i, j], one(donor.instruction, rec.query))


def test_first_step_trains_the_gate_only(tiny: Path) -> None:
    """At gate 0 the projections get no gradient and the gate does: training can start."""
    loss, grads = run_step(_model(tiny), "inf_multi_P_I_IQ", None)
    assert loss > 0
    assert grads["head.gate"].abs() > 0
    for name in ("head.query.weight", "head.key.weight", "head.value.weight"):
        assert name not in grads or grads[name].abs().max() == 0


def test_gradcache_equals_plain_with_instruction_attention(tiny: Path) -> None:
    """InF multivariate with the I set: queries, cross and token states all go through
    GradCache (InfoNCE is covered in the two-process test)."""
    loss_name = "inf_multi_P_I_IQ"
    model = _model(tiny, moved=True)
    plain = run_step(model, loss_name, None)
    assert any(name.startswith("head.") for name in plain[1])
    assert plain[1]["head.value.weight"].abs().max() > 0  # the projections train once g != 0
    assert_same_step(run_step(model, loss_name, 2), plain)
    assert_same_step(run_step(model, loss_name, Chunking(max_tokens=120)), plain)


CASES = [("inf_multi_P_I_IQ", None), ("inf_multi_P_I_IQ", 2), ("infonce", 3)]


def _variant_results(tiny: str) -> list:
    """What each rank computes (rank 0's result is compared with one process)."""
    model = _model(Path(tiny), moved=True)
    return [run_step(model, loss_name, chunk) for loss_name, chunk in CASES]


@pytest.mark.slow
def test_two_gloo_processes_equal_single_with_instruction_attention(tiny: Path, tmp_path: Path):
    gathered = on_two_gloo_ranks(_variant_results, (str(tiny),), tmp_path)
    model = _model(tiny, moved=True)
    for (loss_name, _), result in zip(CASES, gathered, strict=True):
        assert_same_step(result, run_step(model, loss_name, None))


def _eval_texts(records) -> list[InstructedQuery]:
    return [InstructedQuery(f"{r.query} {r.instruction}", r.query, r.instruction) for r in records]


def test_saved_untrained_variant_evaluates_as_the_concat_model(tiny: Path, tmp_path: Path):
    """Through eval's Encoder (folder + saved head) the step-0 variant is the concat model."""
    from dualview.retrieval.encode import Encoder

    records = list(iter_records(FIXTURE))[:5]
    paths = {}
    for interaction in ("instruction_attention", "concat"):
        paths[interaction] = _model(tiny, interaction).save(tmp_path / interaction)
    assert interaction_of(paths["instruction_attention"]) == "instruction_attention"
    assert isinstance(load_interaction_head(paths["instruction_attention"]), InstructionAttention)
    got, want = (
        Encoder(str(paths[k]), cache=False, show_progress=False).encode(_eval_texts(records))
        for k in ("instruction_attention", "concat")
    )
    assert abs(got - want).max() <= 1e-6


def test_trained_variant_reads_the_instruction_and_round_trips(tiny: Path, tmp_path: Path):
    """A few trainer steps: the gate leaves 0, one query under two instructions gets two
    different extra terms, the embeddings move off the concat ones, and the saved folder
    gives the in-memory embeddings through eval's Encoder."""
    from dualview.config import validate_config
    from dualview.retrieval.encode import Encoder
    from dualview.train.config import TrainConfig
    from dualview.train.trainer import Trainer

    config = {
        "model": {
            "name_or_path": str(tiny),
            "query_max_length": 32,
            "document_max_length": 48,
            "interaction": "instruction_attention",
        },
        "data": {"train_file": str(FIXTURE), "num_workers": 0},
        "loss": {"objective": "inf_multivariate", "inf_sets": ["P", "I"]},
        "optim": {"lr": 1e-3, "head_lr": 1e-2, "warmup_steps": 0},
        "output_dir": str(tmp_path / "run"),
        "batch_size": 4,
        "max_steps": 4,
    }
    trainer = Trainer(validate_config(TrainConfig, config, "test"))
    trainer.train()
    model = trainer.model.eval()
    assert abs(float(model.head.gate.detach())) > 1e-3
    records = list(iter_records(FIXTURE))[:5]
    query = records[0].query
    instructions = [records[0].instruction, "Only passages written in French are relevant."]
    extras = [_extra(model, inst, query) for inst in instructions]
    assert (extras[0] - extras[1]).norm() > 1e-3 * extras[0].norm()
    texts = _eval_texts(records)
    concat = model.encode([str(t) for t in texts], "query")
    folder = trainer.save_model() or tmp_path / "run" / "model"
    got = torch.as_tensor(Encoder(str(folder), cache=False, show_progress=False).encode(texts))
    assert (got - concat).norm(dim=-1).min() > 1e-4  # the head's term is in every embedding
    gate = model.head.gate.detach()
    want = model.finish(
        torch.stack(
            [
                c + gate * _extra(model, r.instruction, r.query)
                for c, r in zip(concat, records, strict=True)
            ]
        )
    )
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
