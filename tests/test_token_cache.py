"""`dualview.models.token_cache`: cached ids are the tokenizer's, shared by tokenizers that
give the same ids, kept apart for those that do not, and rebuilt from a damaged file."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from dualview.models.token_cache import TokenIdCache, corpus_hash, tokenizer_fingerprint
from dualview.models.token_ids import token_ids
from dualview.resources import embedded_encoder_path

TEXTS = [
    "a short passage",
    "Another, longer passage about retrieval with instructions and negatives " * 12,
    "",
    "ünïcödé text – with dashes",
]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(embedded_encoder_path()))


def _lists(tokens) -> list[list[int]]:
    ids, out, start = tokens.ids.tolist(), [], 0
    for length in tokens.lengths.tolist():
        out.append(ids[start : start + length])
        start += length
    return out


def test_cached_ids_equal_the_tokenizer(tmp_path: Path, tokenizer) -> None:
    cache = TokenIdCache(tmp_path)
    first = cache.ids(tokenizer, TEXTS, 32)
    second = TokenIdCache(tmp_path).ids(tokenizer, TEXTS, 32)  # a new process, same disk
    expected = tokenizer(TEXTS, truncation=True, max_length=32)["input_ids"]
    assert _lists(first) == expected and _lists(second) == expected
    assert (cache.hits, cache.misses) == (0, 1)
    assert len(list((tmp_path / "token_ids").rglob("*.npz"))) == 1


def test_same_tokenizer_shares_and_others_do_not(tmp_path: Path, tokenizer) -> None:
    copy = AutoTokenizer.from_pretrained(str(embedded_encoder_path()))
    token_ids(copy, ["x"], 5)  # truncation state set by a call does not change the key
    assert tokenizer_fingerprint(copy) == tokenizer_fingerprint(tokenizer)
    cache = TokenIdCache(tmp_path)
    cache.ids(tokenizer, TEXTS, 32)
    cache.ids(copy, TEXTS, 32)
    assert (cache.hits, cache.misses) == (1, 1)
    cache.ids(tokenizer, TEXTS, 16)  # another length: another entry
    cache.ids(tokenizer, TEXTS[:3], 32)  # another corpus: another entry
    assert cache.misses == 3
    copy.truncation_side = "left"  # changes the ids of truncated texts
    assert tokenizer_fingerprint(copy) != tokenizer_fingerprint(tokenizer)
    assert corpus_hash(["ab", "c"]) != corpus_hash(["a", "bc"])


def test_damaged_file_is_tokenized_again(
    tmp_path: Path, tokenizer, capsys: pytest.CaptureFixture
) -> None:
    cache = TokenIdCache(tmp_path)
    path = cache.path(tokenizer, TEXTS, 32)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npz file")
    tokens = cache.ids(tokenizer, TEXTS, 32)
    assert _lists(tokens) == tokenizer(TEXTS, truncation=True, max_length=32)["input_ids"]
    assert "unreadable token-id cache" in capsys.readouterr().err
    assert TokenIdCache(tmp_path).ids(tokenizer, TEXTS, 32).lengths.tolist() == [
        len(x) for x in _lists(tokens)
    ]  # rewritten whole
