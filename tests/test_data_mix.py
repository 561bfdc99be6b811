"""Training mixes: exact counts per view, DV halves, determinism, missing-DV errors, manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dualview.config import load_config
from dualview.data.jsonl import iter_records
from dualview.data.manifest import file_sha256, manifest_path, read_manifest
from dualview.data.mix import MixConfig, build_mix, part_counts, preset_config
from dualview.data.schema import Document, Record
from dualview.errors import DualviewError
from dualview.io.atomic import write_jsonl

N_ORIG, N_WITH_DV, N_WITH_PLAIN, N_EXTRA_PLAIN = 60, 41, 47, 9


def _doc(doc_id: str) -> Document:
    return Document(id=doc_id, text=f"passage {doc_id}")


def generated_set(folder: Path) -> dict[str, Path]:
    """orig records (some with dv, some with plain counterparts) + unrelated plain records."""
    origs, dvs, plains = [], [], []
    for i in range(N_ORIG):
        inst_negs = [_doc(f"i{i}-{k}") for k in range(1 + i % 5)]
        hard = [_doc(f"h{i}-{k}") for k in range(10 + i % 40)]
        origs.append(
            Record(
                id=f"o{i}",
                view="orig",
                query=f"query {i}",
                instruction=f"instruction {i}",
                positives=[_doc(f"p{i}")],
                instruction_negatives=inst_negs,
                hard_negatives=hard,
                meta={"counterpart_id": f"c{i}"} if i < N_WITH_PLAIN else {},
            )
        )
        if i < N_WITH_DV:
            dvs.append(
                Record(
                    id=f"d{i}",
                    parent_id=f"o{i}",
                    view="dv",
                    query=f"query {i}",
                    instruction=f"reversed {i}",
                    positives=[inst_negs[-1]],
                    instruction_negatives=[_doc(f"p{i}"), *inst_negs[:-1]],
                    hard_negatives=hard,
                )
            )
        if i < N_WITH_PLAIN:
            plains.append(
                Record(id=f"c{i}", view="plain", query=f"query {i}", positives=[_doc(f"p{i}")])
            )
    for j in range(N_EXTRA_PLAIN):
        plains.append(
            Record(id=f"x{j}", view="plain", query=f"other {j}", positives=[_doc(f"x{j}")])
        )
    paths = {
        "orig": folder / "orig.jsonl",
        "dv": folder / "dv.jsonl",
        "plain": folder / "plain.jsonl",
    }
    write_jsonl(paths["orig"], origs)
    write_jsonl(paths["dv"], dvs[::-1])  # order of inputs must not matter
    write_jsonl(paths["plain"], plains)
    return paths


@pytest.fixture
def inputs(tmp_path: Path) -> list[Path]:
    return list(generated_set(tmp_path / "in").values())


def _views(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in iter_records(path):
        counts[record.view] = counts.get(record.view, 0) + 1
    return counts


@pytest.mark.parametrize(
    ("preset", "size", "expected"),
    [
        ("ins-orig", 36, {"orig": 36}),
        ("ins-dv", 36, {"orig": 18, "dv": 18}),
        ("all-orig", 36, {"orig": 18, "plain": 18}),
        ("all-dv", 82, {"orig": 41, "dv": 41}),
    ],
)
def test_exact_counts_per_view(inputs, tmp_path, preset, size, expected):
    out = tmp_path / f"{preset}.jsonl"
    result = build_mix(inputs, preset_config(preset, size, seed=3), out)
    assert _views(out) == expected
    assert result.manifest["counts"] == dict(sorted(expected.items()))
    assert result.manifest["records"] == size


@pytest.mark.parametrize("preset", ["ins-dv", "all-dv"])
def test_dv_half_is_exactly_the_dv_of_the_chosen_instances(inputs, tmp_path, preset):
    out = tmp_path / "mix.jsonl"
    build_mix(inputs, preset_config(preset, 40, seed=11), out)
    records = list(iter_records(out))
    orig_ids = {r.id for r in records if r.view == "orig"}
    dv = [r for r in records if r.view == "dv"]
    assert {r.parent_id for r in dv} == orig_ids
    assert len(dv) == len(orig_ids) == 20
    # the dv record of instance o<i> is d<i>: nothing else is in the dv half
    assert {r.id for r in dv} == {"d" + i[1:] for i in orig_ids}
    # both views of an instance are adjacent (orig first), so batching can keep them together
    for first, second in zip(records[::2], records[1::2], strict=True):
        assert (first.view, second.view, second.parent_id) == ("orig", "dv", first.id)


def test_all_orig_pairs_each_instance_with_its_counterpart(inputs, tmp_path):
    out = tmp_path / "mix.jsonl"
    build_mix(inputs, preset_config("all-orig", 30, seed=5), out)
    records = list(iter_records(out))
    origs = {r.id for r in records if r.view == "orig"}
    plains = {r.id for r in records if r.view == "plain"}
    assert plains == {"c" + i[1:] for i in origs}


def test_same_seed_identical_files_different_seed_different(inputs, tmp_path):
    paths = [tmp_path / f"{name}.jsonl" for name in ("a", "b", "c")]
    for path, seed in zip(paths, (7, 7, 8), strict=True):
        build_mix(inputs, preset_config("all-dv", 30, seed=seed), path)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert (
        manifest_path(paths[0]).read_text().replace("a.jsonl", "b.jsonl")
        == manifest_path(paths[1]).read_text()
    )
    assert paths[0].read_bytes() != paths[2].read_bytes()
    ids = [{r.id for r in iter_records(p) if r.view == "orig"} for p in (paths[0], paths[2])]
    assert ids[0] != ids[1]


def test_ins_orig_and_ins_dv_share_the_seeded_order(inputs, tmp_path):
    """With one seed, the instances of the DV configuration come first in the same shuffle."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    build_mix(inputs, preset_config("ins-orig", 50, seed=2), a)
    build_mix(inputs, preset_config("ins-dv", 20, seed=2), b)
    big = {r.id for r in iter_records(a)}
    small = {r.id for r in iter_records(b) if r.view == "orig"}
    # the 10 first dv-eligible instances lie within the first 29 shuffled ids (19 ineligible)
    assert small <= big


@pytest.mark.parametrize(
    ("preset", "size", "missing", "what"),
    [("all-dv", 100, 50 - N_WITH_DV, "dual-view"), ("all-orig", 110, 55 - N_WITH_PLAIN, "plain")],
)
def test_not_enough_counterparts_says_how_many_are_missing(
    inputs, tmp_path, preset, size, missing, what
):
    with pytest.raises(DualviewError, match=rf"{missing} missing") as info:
        build_mix(inputs, preset_config(preset, size), tmp_path / "x.jsonl")
    assert what in str(info.value)
    assert not (tmp_path / "x.jsonl").exists()


def test_not_enough_orig_records(inputs, tmp_path):
    with pytest.raises(DualviewError, match=f"{N_ORIG + 4} orig records.*4 missing"):
        build_mix(inputs, preset_config("ins-orig", N_ORIG + 4), tmp_path / "x.jsonl")


def test_odd_size_for_paired_preset_is_an_error():
    with pytest.raises(DualviewError, match="even"):
        preset_config("ins-dv", 31)


def test_manifest_traces_sources_seed_and_output(inputs, tmp_path):
    out = tmp_path / "mix.jsonl"
    build_mix(inputs, preset_config("ins-dv", 20, seed=9), out)
    manifest = read_manifest(out)
    assert manifest is not None
    assert manifest["seed"] == 9 and manifest["name"] == "ins-dv"
    assert manifest["output"]["sha256"] == file_sha256(out)
    by_path = {Path(s["path"]).name: s for s in manifest["sources"]}
    for path in inputs:
        assert by_path[path.name]["sha256"] == file_sha256(path)
    assert by_path["dv.jsonl"]["views"] == {"dv": N_WITH_DV}
    assert manifest["eligibility"]["orig_with_dv"] == N_WITH_DV
    assert manifest["eligibility"]["orig_with_plain"] == N_WITH_PLAIN


def test_custom_ratio_mix_from_yaml(inputs, tmp_path):
    spec = {
        "name": "half-dv-quarter-plain",
        "size": 40,
        "seed": 4,
        "parts": [
            {"view": "orig", "share": 2},
            {"view": "dv", "share": 1, "paired": True},
            {"view": "plain", "share": 1},
        ],
        "negatives": {"total": 8, "max_instruction_negatives": 2},
    }
    (tmp_path / "mix.yaml").write_text(yaml.safe_dump(spec))
    config = load_config(MixConfig, tmp_path / "mix.yaml")
    assert part_counts(config) == {"orig": 20, "dv": 10, "plain": 10}
    out = tmp_path / "mix.jsonl"
    build_mix(inputs, config, out)
    records = list(iter_records(out))
    assert _views(out) == {"orig": 20, "dv": 10, "plain": 10}
    origs = {r.id for r in records if r.view == "orig"}
    assert all(r.parent_id in origs for r in records if r.view == "dv")
    assert all(len(r.negatives()) <= 8 and len(r.instruction_negatives) <= 2 for r in records)


def test_largest_remainder_keeps_the_total():
    config = MixConfig(
        size=10,
        parts=[
            {"view": "orig", "share": 1},
            {"view": "dv", "share": 1},
            {"view": "plain", "share": 1},
        ],
    )
    counts = part_counts(config)
    assert sum(counts.values()) == 10 and sorted(counts.values()) == [3, 3, 4]


def test_duplicate_record_id_across_inputs_names_both_places(inputs, tmp_path):
    dup = tmp_path / "dup.jsonl"
    dup.write_text(inputs[0].read_text().splitlines()[3] + "\n")
    with pytest.raises(DualviewError, match=r"dup.jsonl:1: id: .*orig.jsonl:4"):
        build_mix([*inputs, dup], preset_config("ins-orig", 4), tmp_path / "x.jsonl")


def test_bad_line_is_located(inputs, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "z", "view": "orig", "query": "q", "positives": []}) + "\n")
    with pytest.raises(DualviewError, match=r"bad.jsonl:1: positives"):
        build_mix([*inputs, bad], preset_config("ins-orig", 4), tmp_path / "x.jsonl")


def test_padding_drop_removes_whole_instances(inputs, tmp_path):
    config = preset_config("all-dv", 40, seed=6)
    config.negatives.padding = "drop"
    out = tmp_path / "mix.jsonl"
    result = build_mix(inputs, config, out)
    records = list(iter_records(out))
    origs = {r.id for r in records if r.view == "orig"}
    assert {r.parent_id for r in records if r.view == "dv"} == origs
    assert all(len(r.negatives()) == 30 for r in records)
    dropped_units = result.manifest["negatives"]["dropped_units"]
    assert dropped_units > 0 and len(records) == 40 - 2 * dropped_units


def test_padding_random_fills_every_record(inputs, tmp_path):
    config = preset_config("ins-dv", 20, seed=6)
    config.negatives.padding = "random"
    out = tmp_path / "mix.jsonl"
    result = build_mix(inputs, config, out)
    records = list(iter_records(out))
    assert all(len(r.negatives()) == 30 for r in records)
    assert result.manifest["negatives"]["padded_records"] > 0
    for record in records:
        i = int((record.parent_id or record.id)[1:])
        hard = [d.id for d in record.hard_negatives]
        assert hard[0] == f"h{i}-0"  # the record's own hard negatives come before the padding
        # never a family positive: the orig/plain positive p<i>, the dv positive i<i>-<last>
        assert not {f"p{i}", f"i{i}-{i % 5}"} & set(hard)
