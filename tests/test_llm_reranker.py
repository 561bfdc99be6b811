"""LLM rerankers on tiny random Llama / Qwen2 LMs: the score is the answer log-odds read off
the LM's logits, left padding leaves it unchanged, save -> load_reranker keeps it, LoRA trains
the adapters alone and a listwise loss raises the positive."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from dualview.config import validate_config
from dualview.errors import ConfigError
from dualview.models import llm_reranker
from dualview.models.config import LLM_RERANKER_PROMPT, ModelConfig
from dualview.models.decoder import ADAPTER_DIR, load_adapter
from dualview.models.llm_reranker import (
    LlmReranker,
    answer_log_odds,
    prefix_cache,
    shared_prefixes,
    stack_caches,
)
from dualview.models.reranker import RERANKER_FILE, Reranker, TrainableReranker
from dualview.models.rerankers import load_reranker
from dualview.models.tokens import TokenizedTexts
from dualview.train.config import TrainConfig
from dualview.train.trainer import LOG_FILE, train
from tests.test_train_resume import _env
from tests.tiny_lm import ARCHS, FIXTURE, byte_tokenizer, save_tiny_lm, word_tokenizer

pytest.importorskip("peft")  # dualview[lora], installed by dualview[dev]

TRAIN_EPOCHS = 4
SPECIALS = ["<unk>", "<s>", "</s>"]
QUERY = "effects of caffeine on sleep"
INSTRUCTION = "I want physiological findings; market or sales information is not relevant."
PASSAGES = [
    "Caffeine blocks adenosine receptors in the brain and can delay sleep onset.",
    "A survey of coffee shop owners found that afternoon sales of espresso drinks rose.",
    "Bicycle lanes in Copenhagen carry more than forty percent of commuters",
    "sleep",
]


def make_tiny_lm(folder: Path, arch: str, pad: bool = False) -> Path:
    """A tiny random LM whose tokenizer has ``true`` and ``false`` as single tokens (Llama:
    words of the fixture and the prompt, no pad token unless ``pad``; Qwen2: bytes).

    Weights are drawn with std 0.2, not the usual 0.02: at 0.02 every prompt of a random LM
    ends in nearly the same state, and a few optimizer steps barely move a listwise loss."""
    if arch == "llama":
        text = FIXTURE.read_text(encoding="utf-8") + LLM_RERANKER_PROMPT + " true false yes no"
        specials = SPECIALS + (["<pad>"] if pad else [])
        tokenizer = word_tokenizer(folder, text, specials, pad_token="<pad>" if pad else None)
    else:
        tokenizer = byte_tokenizer(folder, whole_words=("true", "false"))
    return save_tiny_lm(
        folder,
        arch,
        tokenizer,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        initializer_range=0.2,
    )


def reranker_config(path: Path, lora: bool = False, **extra) -> ModelConfig:
    data = {
        "kind": "llm_reranker",
        "name_or_path": str(path),
        "query_max_length": 160,  # no cut: Qwen2's test tokenizer has one token per byte
        "document_max_length": 160,
        "lora": {"rank": 4, "alpha": 8} if lora else None,
        **extra,
    }
    return validate_config(ModelConfig, data, "test")


@pytest.fixture(params=sorted(ARCHS))
def tiny_lm(request, tmp_path: Path) -> tuple[str, Path]:
    return request.param, make_tiny_lm(tmp_path / request.param, request.param)


def _score_all(model, passages=PASSAGES, batch_size: int = 32):
    n = len(passages)
    return model.score([QUERY] * n, [INSTRUCTION] * n, passages, batch_size=batch_size)


def _hand_score(model: LlmReranker, passage: str) -> float:
    """The prompt alone (no padding) through the LM's full logits: log p(true) - log p(false)."""
    tok = model.tokenizer
    prompt = LLM_RERANKER_PROMPT.format(query=f"{QUERY} {INSTRUCTION}", passage=passage)
    ids = torch.tensor([tok(prompt)["input_ids"]])
    with torch.no_grad():
        logits = model.backbone(input_ids=ids).logits[0, -1].double()
    log_probs = torch.log_softmax(logits, dim=-1)
    true_id = tok.convert_tokens_to_ids("true")
    false_id = tok.convert_tokens_to_ids("false")
    by_logits = float(logits[true_id] - logits[false_id])
    assert by_logits == pytest.approx(float(log_probs[true_id] - log_probs[false_id]), abs=1e-9)
    return by_logits


def test_score_is_the_answer_log_odds_of_the_lm(tiny_lm) -> None:
    arch, path = tiny_lm
    model = LlmReranker(reranker_config(path))
    assert isinstance(model, Reranker) and isinstance(model, TrainableReranker)
    tok = model.tokenizer
    assert tok.pad_token_id == tok.eos_token_id  # the Llama tokenizer has no pad token: EOS
    ids = model.tokenize_pairs([f"{QUERY} {INSTRUCTION}"], [PASSAGES[3]]).ids.tolist()
    assert ids[-2:] == tok("Answer:", add_special_tokens=False)["input_ids"][-2:]  # no EOS
    assert (ids[0] == tok.bos_token_id) == (arch == "llama")
    scores = _score_all(model)
    assert scores.dtype == "float32" and scores.shape == (len(PASSAGES),)
    hand = [_hand_score(model, passage) for passage in PASSAGES]
    torch.testing.assert_close(
        torch.tensor(scores).double(), torch.tensor(hand, dtype=torch.float64), atol=1e-5, rtol=0
    )
    assert max(hand) - min(hand) > 1e-3  # the passages are told apart


def test_batching_and_left_padding_leave_scores_unchanged(tiny_lm) -> None:
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path))
    lengths = model.tokenize_pairs([QUERY] * len(PASSAGES), PASSAGES).lengths
    assert len(set(lengths.tolist())) > 1  # one batch really pads
    assert model.score([], [], []).shape == (0,)
    alone = _score_all(model, batch_size=1)
    together = _score_all(model, batch_size=len(PASSAGES))
    torch.testing.assert_close(torch.tensor(together), torch.tensor(alone), atol=1e-5, rtol=0)
    # the same pair in another batch, at another position
    reordered = _score_all(model, passages=PASSAGES[::-1] + PASSAGES[:1])
    torch.testing.assert_close(
        torch.tensor(reordered[:4]), torch.tensor(alone[::-1].copy()), atol=1e-5, rtol=0
    )
    inputs = model.pad_pairs(model.tokenize_pairs([QUERY] * 2, PASSAGES[2:]), [0, 1])
    right = {k: v.flip(-1) for k, v in inputs.items()}  # right padding is refused
    assert not right["attention_mask"][:, -1].all()
    with pytest.raises(ValueError, match="left-padded"):
        model(**right)


def _token_rows(tokens: TokenizedTexts, start: int = 0) -> list[list[int]]:
    starts, ends = tokens.offsets.tolist(), (tokens.offsets + tokens.lengths).tolist()
    return [tokens.ids[o + start : e].tolist() for o, e in zip(starts, ends, strict=True)]


def test_prompts_of_one_query_share_their_prefix_with_the_scores_of_whole_prompts(
    tiny_lm, monkeypatch
) -> None:
    """Prompts of one query text are scored on the cache of their common token prefix, run
    once per group; each score is that of the whole prompt run alone, at any batch size."""
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path))
    queries = [QUERY] * 4 + ["sleep and caffeine"] * 2 + ["coffee"]
    instructions = [INSTRUCTION] * 4 + [""] * 3
    passages = [*PASSAGES, PASSAGES[1], PASSAGES[0], PASSAGES[2]]
    texts = model.query_texts(queries, instructions)
    tokens = model.tokenize_pairs(texts, passages)
    rows = _token_rows(tokens)
    groups, rest = shared_prefixes(texts, tokens)
    assert sorted(sorted(members) for members, _ in groups) == [[0, 1, 2, 3], [4, 5]]
    assert rest == [6]
    for members, length in groups:  # the longest common prefix, the answer position left out
        heads = {tuple(rows[i][:length]) for i in members}
        assert len(heads) == 1 and length < min(len(rows[i]) for i in members)
        shortest = min(len(rows[i]) for i in members)
        assert length == shortest - 1 or len({rows[i][length] for i in members}) > 1
    assert shared_prefixes(texts, tokens, min_length=10_000) == ([], list(range(7)))

    model.eval()
    with torch.inference_mode():
        whole = [float(model(**model.pad_pairs(tokens, [i]))) for i in range(7)]
    runs = []
    monkeypatch.setattr(llm_reranker, "prefix_cache", lambda *a: runs.append(a) or prefix_cache(*a))
    for batch_size in (1, 3, 32):
        scores = model.score(queries, instructions, passages, batch_size=batch_size)
        torch.testing.assert_close(torch.tensor(scores), torch.tensor(whole), atol=1e-5, rtol=0)
    assert len(runs) == 3 * 2  # one prefix run per group and call
    assert max(whole) - min(whole) > 1e-3


def test_cached_prefixes_of_two_lengths_give_the_log_odds_of_the_whole_prompts(tiny_lm) -> None:
    """Two prompts, each continuing its own cached prefix (20 and 12 tokens, stacked and
    left-padded into one cache): the log-odds of the whole prompts."""
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path)).eval()
    tokens = model.tokenize_pairs([QUERY] * 2, PASSAGES[:2])
    heads = [20, 12]
    rows = _token_rows(tokens)
    with torch.inference_mode():
        whole = model(**model.pad_pairs(tokens, [0, 1], multiple=1))
        pieces = zip(rows, heads, strict=True)
        caches = [prefix_cache(model.backbone, torch.tensor(r[:n])) for r, n in pieces]
        rests = TokenizedTexts.from_lists([r[n:] for r, n in zip(rows, heads, strict=True)])
        rest = model.pad_pairs(rests, [0, 1], multiple=1)
        past, head_mask = stack_caches(caches, heads)
        assert head_mask.tolist() == [[1] * 20, [0] * 8 + [1] * 12]
        mask = torch.cat([head_mask, rest["attention_mask"]], 1)
        cached = answer_log_odds(model.backbone, rest["input_ids"], mask, model.answer_ids, past)
        torch.testing.assert_close(cached, whole, atol=1e-5, rtol=0)
        past, _ = stack_caches(caches, heads)
        with pytest.raises(ValueError, match="20 cached"):  # the prefix's columns left out
            answer_log_odds(
                model.backbone, rest["input_ids"], rest["attention_mask"], model.answer_ids, past
            )


def test_long_texts_are_cut_before_the_question(tiny_lm) -> None:
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path, query_max_length=32, document_max_length=24))
    long_passage = " ".join(["caffeine blocks adenosine receptors in the brain"] * 30)
    long_query = " ".join(["effects of caffeine on sleep"] * 30)
    ids = model.tokenize_pairs([long_query], [long_passage]).ids.tolist()
    short = model.tokenize_pairs([QUERY], ["sleep"]).ids.tolist()
    overhead = len(short) - len(model.tokenizer(QUERY, add_special_tokens=False)["input_ids"])
    assert len(ids) <= overhead + 32 + 24 + 2  # both cut to their limits (+ word joins)
    tail = short[-6:]  # the question at the prompt's end is kept
    assert ids[-6:] == tail


def test_pairs_tokenize_alike_in_loader_threads(tiny_lm) -> None:
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path, query_max_length=8, document_max_length=6))
    jobs = [([QUERY] * 3, PASSAGES[i : i + 3]) for i in range(2)] * 8
    serial = [model.tokenize_pairs(*job).ids.tolist() for job in jobs]
    with ThreadPoolExecutor(4) as pool:
        threaded = [t.ids.tolist() for t in pool.map(lambda job: model.tokenize_pairs(*job), jobs)]
    assert threaded == serial
    assert max(model.tokenize_pairs(*jobs[0]).lengths.tolist()) <= model.max_length


def test_save_then_load_reranker_gives_the_same_scores(tiny_lm, tmp_path: Path) -> None:
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path, lora=True, query_template="{instruction} {query}"))
    torch.manual_seed(1)
    with torch.no_grad():  # LoRA B starts at zero: make the adapter matter
        for name, param in model.backbone.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    before = _score_all(model)
    folder = model.save(tmp_path / "saved")
    info = json.loads((folder / RERANKER_FILE).read_text())
    assert info["kind"] == "llm_reranker" and info["answers"] == ["true", "false"]
    assert info["query_template"] == "{instruction} {query}"
    assert (folder / ADAPTER_DIR / "adapter_model.safetensors").is_file()
    loaded = load_reranker(folder, device="cpu")
    assert isinstance(loaded, LlmReranker) and loaded.config.lora is None  # merged weights
    after = _score_all(loaded)
    torch.testing.assert_close(torch.tensor(after), torch.tensor(before), atol=1e-5, rtol=0)
    base = _score_all(LlmReranker(reranker_config(path, query_template="{instruction} {query}")))
    assert abs(base - before).max() > 1e-3  # the adapter changed the scores that were saved
    assert load_reranker(folder, device="cpu").fingerprint == loaded.fingerprint


def test_lora_trains_adapters_only_and_a_listwise_loss_raises_the_positive(tiny_lm) -> None:
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path, lora=True)).train()
    frozen = {
        n: p.detach().clone() for n, p in model.backbone.named_parameters() if "lora_" not in n
    }
    trainable = [p for p in model.parameters() if p.requires_grad]
    names = [n for n, p in model.backbone.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    group = model.tokenize_pairs([f"{QUERY} {INSTRUCTION}"] * len(PASSAGES), PASSAGES)
    inputs = model.pad_pairs(group, range(len(PASSAGES)))  # positive first
    optimizer = torch.optim.AdamW(trainable, lr=3e-3)
    before = model.fingerprint
    losses, margins = [], []
    for _ in range(6):
        logits = model(**inputs)
        loss = torch.nn.functional.cross_entropy(logits[None], torch.tensor([0]))
        losses.append(float(loss.detach()))
        margins.append(float((logits[0] - logits[1:].max()).detach()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        final = model.eval()(**inputs)
    final_loss = float(torch.nn.functional.cross_entropy(final[None], torch.tensor([0])))
    assert final_loss < 0.6 * losses[0], [*losses, final_loss]
    assert float(final[0] - final[1:].max()) > margins[0] + 0.5, margins
    for name, param in model.backbone.named_parameters():
        if name in frozen:
            assert torch.equal(param, frozen[name]), name
    assert model.fingerprint != before


def test_answer_words_must_be_single_known_tokens(tiny_lm) -> None:
    arch, path = tiny_lm
    bad = "yes" if arch == "qwen2" else "relevant passage"
    config = reranker_config(path, llm_reranker={"answers": [bad, "false"]})
    with pytest.raises(ConfigError, match=r"model\.llm_reranker\.answers: .*one known token"):
        LlmReranker(config)
    unknown = reranker_config(path, llm_reranker={"answers": ["true", "zebra"]})
    with pytest.raises(ConfigError, match=r"model\.llm_reranker\.answers"):
        LlmReranker(unknown)  # Llama: one token, but <unk>; Qwen2: five bytes


def test_prompt_and_answer_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="prompt"):
        reranker_config(Path("x"), llm_reranker={"prompt": "Query: {query}\nAnswer:"})
    with pytest.raises(ConfigError, match="prompt"):
        reranker_config(Path("x"), llm_reranker={"prompt": "{query} {passage} {title}"})
    with pytest.raises(ConfigError, match="answers"):
        reranker_config(Path("x"), llm_reranker={"answers": ["true", "true"]})
    with pytest.raises(ConfigError, match=r"model\.interaction"):
        LlmReranker(reranker_config(Path("x"), interaction="cross_attention"))


def test_a_tokenizer_without_pad_or_eos_is_a_config_error(tmp_path: Path) -> None:
    path = make_tiny_lm(tmp_path / "llama", "llama")
    config = json.loads((path / "tokenizer_config.json").read_text())
    config.pop("eos_token", None)
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="neither a pad token nor an EOS token"):
        LlmReranker(reranker_config(path))


def test_dualview_train_fits_an_llm_reranker_with_lora(tmp_path: Path) -> None:
    base = make_tiny_lm(tmp_path / "llama", "llama")
    out = tmp_path / "run"
    model = reranker_config(base, lora=True, query_max_length=48, document_max_length=48)
    config = {
        "model": model.model_dump(mode="json", exclude_defaults=True),
        "data": {"train_file": str(FIXTURE), "num_negatives": 3, "num_workers": 0},
        "loss": {"objective": "rerank_listwise"},
        "optim": {"lr": 1e-2, "warmup_steps": 0, "schedule": "constant"},
        "output_dir": str(out),
        "batch_size": 4,
        "epochs": TRAIN_EPOCHS,
        "seed": 1,
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    cli = [sys.executable, "-c", "from dualview.cli import main; main()", "train", str(path)]
    run = subprocess.run(cli, capture_output=True, text=True, check=False, env=_env())
    assert run.returncode == 0, run.stderr[-3000:]
    logged = (out / LOG_FILE).read_text(encoding="utf-8").splitlines()
    losses = [json.loads(line)["loss"] for line in logged]
    per_epoch = len(losses) // TRAIN_EPOCHS  # batches differ within an epoch: compare epochs
    assert sum(losses[-per_epoch:]) < 0.8 * sum(losses[:per_epoch]), losses

    folder = out / "model"
    card = (folder / "README.md").read_text(encoding="utf-8")  # the CLI's model card
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["pipeline_tag"] == "text-ranking" and "llm-reranker" in meta["tags"]
    assert "load_reranker" in card and "bi-encoder" not in card and "Answers: ['true'" in card
    loaded = load_reranker(folder, device="cpu")
    assert isinstance(loaded, LlmReranker)
    trained = _score_all(loaded)
    fresh = LlmReranker(model)  # the base with fresh adapters, then the saved adapter
    untrained = _score_all(fresh)
    load_adapter(fresh.backbone, folder)
    torch.testing.assert_close(
        torch.tensor(_score_all(fresh)), torch.tensor(trained), atol=1e-5, rtol=0
    )
    assert abs(trained - untrained).max() > 1e-2  # training changed the scores


def test_training_resumes_exactly_with_lora_dropout(tmp_path: Path) -> None:
    base = make_tiny_lm(tmp_path / "llama", "llama")
    model = reranker_config(base, query_max_length=24, document_max_length=24)
    lora = {"rank": 4, "alpha": 8, "dropout": 0.1}  # dropout: the RNG state must resume too

    def config(out: Path) -> TrainConfig:
        data = {
            "model": {**model.model_dump(mode="json"), "lora": lora},
            "data": {"train_file": str(FIXTURE), "num_negatives": 2, "num_workers": 0},
            "loss": {"objective": "rerank_listwise"},
            "optim": {"lr": 1e-2, "warmup_steps": 0, "schedule": "constant"},
            "output_dir": str(out),
            "batch_size": 4,
            "epochs": 2,
            "checkpoint_every": 3,
            "keep_checkpoints": 20,
            "seed": 5,
        }
        return validate_config(TrainConfig, data, "test")

    straight = tmp_path / "straight"
    train(config(straight))
    resumed = tmp_path / "resumed"
    step3 = Path("checkpoints") / "step-00000003"
    saved = torch.load(straight / step3 / "model.pt", weights_only=True)
    params = [k for k in saved if k.endswith((".weight", ".bias"))]
    assert params and all("lora_" in k for k in params)  # the adapter, not the frozen base
    shutil.copytree(straight / step3, resumed / step3)
    lines = (straight / LOG_FILE).read_text(encoding="utf-8").splitlines(keepends=True)
    (resumed / LOG_FILE).write_text("".join(lines[:3]), encoding="utf-8")
    train(config(resumed), resume=True)
    losses = [json.loads(line)["loss"] for line in lines]
    logged = (resumed / LOG_FILE).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["loss"] for line in logged] == losses and len(losses) == 8
    adapter = Path("model") / ADAPTER_DIR / "adapter_model.safetensors"
    a, b = load_file(str(straight / adapter)), load_file(str(resumed / adapter))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class _Spy:
    """A loaded reranker that remembers every triple it scored and the score it gave."""

    def __init__(self, model: LlmReranker) -> None:
        self.model, self.name, self.scored = model, "spy", {}

    @property
    def fingerprint(self) -> str:
        return self.model.fingerprint

    def score(self, queries, instructions, passages, batch_size: int = 32):
        scores = self.model.score(queries, instructions, passages, batch_size)
        triples = zip(queries, instructions, passages, strict=True)
        self.scored.update(zip(triples, scores, strict=True))
        return scores


def test_a_saved_llm_reranker_reranks_in_two_stage_evaluation(tmp_path: Path, monkeypatch):
    from dualview.eval.run import evaluate
    from dualview.eval.two_stage import RerankSettings
    from tests.test_eval_rerank import write_pairs

    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    folder = LlmReranker(reranker_config(make_tiny_lm(tmp_path / "llama", "llama")))
    folder = folder.save(tmp_path / "reranker")
    spec = [f"paired={write_pairs(tmp_path / 'pairs')}"]
    by_path = RerankSettings(rerankers=[str(folder)], first_stage="bm25", top_k=2)
    summary = evaluate([], spec, tmp_path / "a", rerank=by_path)
    spy = _Spy(load_reranker(folder, device="cpu"))
    by_object = RerankSettings(rerankers=[spy], first_stage="bm25", top_k=2)
    again = evaluate([], spec, tmp_path / "b", rerank=by_object, cache=False)
    assert spy.scored  # the folder's model scored the first stage's top 2 of each query
    for (query, instruction, passage), score in spy.scored.items():
        alone = spy.model.score([query], [instruction], [passage], batch_size=1)[0]
        assert abs(alone - score) < 1e-5
    name = f"{folder}@bm25"
    assert again.values["spy@bm25"] == summary.values[name]
    result = json.loads(next((tmp_path / "a").glob("*@bm25/paired.json")).read_text())
    assert result["rerank"]["reranker"]["fingerprint"] == spy.fingerprint


def _raise_both_answer_logits(model: LlmReranker, to: float = 200.0) -> None:
    """Add one vector to both answer rows of the output embedding, so that both answer
    logits of every prompt lie near ``to`` while their difference, the score, is unchanged
    (where bf16 logits move in steps of 1)."""
    rows = model.backbone.get_output_embeddings().weight
    ids = model.tokenize_pairs([f"{QUERY} {INSTRUCTION}"] * len(PASSAGES), PASSAGES)
    inputs = model.pad_pairs(ids, list(range(len(PASSAGES))))
    with torch.no_grad():
        hidden = model.backbone.get_decoder()(**inputs).last_hidden_state[:, -1]
        mean = hidden.mean(0)
        rows[list(model.answer_ids)] += to * mean / mean.dot(mean)


@pytest.mark.parametrize("lora", [False, True])
def test_a_half_precision_lm_scores_through_a_float32_answer_head(tiny_lm, lora: bool) -> None:
    """bf16 weights: the two answer logits are read in float32 off the last hidden state
    (LoRA or not), close to the float32 model's scores; a float32 LM keeps its own logits."""
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path, lora=lora))
    assert llm_reranker.float32_answer_head(model.backbone, torch.device("cpu")) is None
    full = torch.tensor(_score_all(model)).double()
    model.backbone.to(torch.bfloat16)
    assert llm_reranker.float32_answer_head(model.backbone, torch.device("cpu")) is not None
    half = _score_all(model, batch_size=2)
    assert half.dtype == "float32"
    torch.testing.assert_close(torch.tensor(half).double(), full, atol=0.1, rtol=0)


def test_under_autocast_the_answer_logits_keep_float32_resolution(tiny_lm) -> None:
    """Both answer logits near 200, where bf16 moves in steps of 1: under bf16 autocast the
    LM's own logits lose the score, the float32 answer head keeps it."""
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path))
    before = torch.tensor(_score_all(model)).double()
    _raise_both_answer_logits(model)
    full = torch.tensor(_score_all(model)).double()
    torch.testing.assert_close(full, before, atol=1e-3, rtol=0)  # the scores are unchanged
    inputs = model.pad_pairs(
        model.tokenize_pairs([f"{QUERY} {INSTRUCTION}"] * len(PASSAGES), PASSAGES),
        list(range(len(PASSAGES))),
    )
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert llm_reranker.float32_answer_head(model.backbone, torch.device("cpu")) is not None
        scores = model(**inputs)
        own = model.backbone(**inputs).logits[:, -1]
    assert scores.dtype == torch.float32 and own.dtype == torch.bfloat16
    assert own[:, model.answer_ids[0]].float().min() > 100
    assert (scores.double() - full).abs().max() < 0.1
    coarse = (own[:, model.answer_ids[0]] - own[:, model.answer_ids[1]]).double()
    assert (coarse - full).abs().max() > 0.2


def test_lms_with_a_transformed_head_keep_their_own_logits(tiny_lm) -> None:
    _, path = tiny_lm
    model = LlmReranker(reranker_config(path))
    model.backbone.to(torch.bfloat16)
    model.backbone.config.final_logit_softcapping = 30.0  # as Gemma 2: tanh after the head
    assert llm_reranker.float32_answer_head(model.backbone, torch.device("cpu")) is None


def test_evaluation_scores_a_saved_llm_reranker_in_the_precision_asked(
    tmp_path: Path, monkeypatch
) -> None:
    from dualview.errors import DualviewError
    from dualview.eval.run import evaluate
    from dualview.eval.two_stage import RerankSettings, open_reranker
    from tests.test_eval_rerank import write_pairs

    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    folder = LlmReranker(reranker_config(make_tiny_lm(tmp_path / "qwen2", "qwen2")))
    folder = folder.save(tmp_path / "reranker")
    full = open_reranker(str(folder), "cpu", 8, cache=False)
    half = open_reranker(str(folder), "cpu", 8, cache=False, precision="bf16")
    assert next(full.reranker.parameters()).dtype == torch.float32  # auto on CPU: fp32
    assert next(half.reranker.parameters()).dtype == torch.bfloat16
    assert full.fingerprint != half.fingerprint  # two precisions never share cached scores
    spec = [f"paired={write_pairs(tmp_path / 'pairs')}"]
    runs = {}
    for precision in ("fp32", "bf16"):
        rerank = RerankSettings(
            rerankers=[str(folder)], first_stage="bm25", top_k=2, precision=precision
        )
        evaluate([], spec, tmp_path / precision, rerank=rerank)
        result = next((tmp_path / precision).glob("*@bm25/paired.json"))
        runs[precision] = json.loads(result.read_text())["rerank"]["reranker"]["fingerprint"]
    assert runs == {"fp32": full.fingerprint, "bf16": half.fingerprint}
    with pytest.raises(DualviewError, match="--reranker-precision: one of auto, fp32"):
        RerankSettings(rerankers=[str(folder)], precision="int8").check(["m"])
