"""CLI fuzz matrix: every command that reads user files x hostile inputs, zero tracebacks.

The matrix is generated: :data:`TARGETS` lists one line per (command, path argument) with the
file of a valid fixture to damage; :data:`INPUTS` lists the damages. Each case runs the CLI
in-process (``dualview.cli.main`` with argv) and must end with exit code 2 and one line
``error: PATH[:LINE]: ...`` naming the damaged file (or its folder), or with exit code 0
where the input is still valid (a BOM with CRLF endings must be accepted). A new command is
covered by adding one line to :data:`TARGETS`. ``test_subprocess_sample`` proves the real
entry point (``python -m dualview``) behaves the same on a sample of the cases.
"""

# ruff: noqa: E501  (the matrix is a table: one line per command and path argument)
from __future__ import annotations

import errno
import io
import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from dualview.data import gold
from dualview.data.mix import preset_config
from dualview.hub.dataset import export_hub_dataset
from dualview.io.atomic import write_jsonl
from dualview.io.files import MAX_FILE_BYTES
from dualview.models.reranker import RERANKER_FILE
from dualview.review.store import make_verdict
from dualview.synth.testing import StubServer
from tests.conftest import FIXTURES
from tests.helpers import invoke_in_process, make_record, run_cli
from tests.hub_stub import HubStub
from tests.review_fixtures import write_dv_file, write_judge

RECORDS_ORIG = FIXTURES / "synth" / "orig.jsonl"
RECORDS_DV = FIXTURES / "train" / "dv_small.jsonl"
BEIR = FIXTURES / "formats" / "beir-mini"
PAIRED = FIXTURES / "eval" / "paired"
HUGE_LINE_BYTES = 50 << 20

# ---------------------------------------------------------------------------- valid fixtures
# Each builder makes a valid input under ``root`` and returns (argument path, file to damage).
Built = tuple[Path, Path]


def _copy(src: Path, root: Path) -> Built:
    dst = root / src.name
    shutil.copyfile(src, dst)
    return dst, dst


def plain_records(root: Path) -> Built:
    path = root / "plain.jsonl"
    write_jsonl(path, [make_record(f"q{i}", view="plain", query=f"query {i}") for i in range(3)])
    return path, path


def orig_records(root: Path) -> Built:
    return _copy(RECORDS_ORIG, root)


def dv_records(root: Path) -> Built:
    return _copy(RECORDS_DV, root)


def beir_member(member: str) -> Callable[[Path], Built]:
    def build(root: Path) -> Built:
        folder = root / "beir"
        shutil.copytree(BEIR, folder)
        return folder, folder / member

    build.__name__ = f"beir/{member}"
    return build


def paired_member(member: str) -> Callable[[Path], Built]:
    def build(root: Path) -> Built:
        folder = root / "paired"
        shutil.copytree(PAIRED, folder)
        return folder, folder / member

    build.__name__ = f"paired/{member}"
    return build


def gold_source(root: Path) -> Built:
    folder = root / "source"
    folder.mkdir()
    shutil.copyfile(gold.SOURCE_DIR / "food.jsonl", folder / "food.jsonl")
    card = root / "out" / "gold" / "CARD.md"  # gold-build updates the card's counts
    card.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(gold.GOLD_DIR / "CARD.md", card)
    return folder, folder / "food.jsonl"


def gold_dir(root: Path) -> Built:
    folder = root / "gold"
    folder.mkdir()
    for split in gold.SPLITS:
        records = gold.load_gold(split)
        parents = [r for r in records if r.view == "orig"][:3]
        ids = {r.id for r in parents}
        write_jsonl(folder / f"{split}.jsonl", [r for r in records if (r.parent_id or r.id) in ids])
    return folder, folder / "train.jsonl"  # the split bench-synth reads by default


def yaml_file(data: dict | Callable[[Path], dict], name: str = "config.yaml"):
    def build(root: Path) -> Built:
        path = root / name
        path.write_text(yaml.safe_dump(data(root) if callable(data) else data))
        return path, path

    build.__name__ = data.__name__ if callable(data) else name
    return build


def job(root: Path) -> dict:
    return {"sampling": {"max_tokens": 256}, "runner": {"concurrency": 2}}


def mix_yaml(root: Path) -> dict:
    return preset_config("ins-orig", 8, 0).model_dump(mode="json")


def mine_yaml(root: Path) -> dict:
    return {"model": os.environ["FUZZ_TINY_MODEL"], "num_negatives": 2, "rank_end": 5}


def train_yaml(root: Path) -> dict:
    return {
        "model": {"name_or_path": os.environ["FUZZ_TINY_MODEL"], "query_max_length": 16},
        "data": {"train_file": str(RECORDS_DV)},
        "output_dir": str(root / "trained"),
        "batch_size": 8,
        "max_steps": 1,
    }


def train_data(root: Path) -> Built:
    data = root / "train.jsonl"
    shutil.copyfile(RECORDS_DV, data)
    config = {**train_yaml(root), "data": {"train_file": str(data)}}
    path = root / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, data


def experiment(root: Path) -> dict:
    return {
        "name": "fuzz",
        "run_dir": str(root / "run"),
        "instructions": {"path": str(RECORDS_ORIG), "views": ["orig"], "limit": 4},
        "synthesis": {"job": {"backend": {"kind": "openai", "model": "stub"}}},
        "mixes": [{"name": "Ins-orig", "preset": "ins-orig", "size": 4}],
        "training": {"config": {"data": {"train_file": "unused"}, "output_dir": "unused"}},
        "evaluation": {"benchmarks": [f"paired={PAIRED}"]},
    }


def sweep_experiment(root: Path) -> dict:
    sweep = {"parameters": {"training.config.batch_size": [1, 2]}, "seeds": [1]}
    return {**experiment(root), "sweep": sweep}


def sweep_manifest(root: Path) -> Built:
    """A sweep folder of one arm and seed (the fuzz run) and its ``sweep.json``."""
    folder = root / "sweep"
    shutil.copytree(Path(os.environ["FUZZ_RUN_DIR"]), folder / "a" / "seed=1")
    arm = {"label": "a", "settings": {"seed": 1}, "runs": {"1": "a/seed=1"}}
    manifest = {"name": "fuzz", "parameters": {"seed": [1]}, "seeds": [1], "arms": [arm]}
    (folder / "sweep.json").write_text(json.dumps(manifest))
    return folder, folder / "sweep.json"


def run_dir_member(member: str) -> Callable[[Path], Built]:
    def build(root: Path) -> Built:
        folder = root / "run"
        shutil.copytree(Path(os.environ["FUZZ_RUN_DIR"]), folder)
        return folder, next(folder.glob(member))

    build.__name__ = f"run/{member.split('/')[-1]}"
    return build


def verdicts(root: Path) -> Built:
    path = root / "verdicts.jsonl"
    rows = [
        make_verdict(_review_item(i), "ann", v, None, "")
        for i, v in enumerate(("valid", "invalid", "valid"))
    ]
    write_jsonl(path, rows)
    return path, path


def _review_item(i: int) -> dict:
    return {"item": f"it{i}", "stratum": "s", "judge": None, "expected": None}


def judge_file(root: Path) -> Built:
    """A ``verify`` output for ``OUT/dv.jsonl`` (kept records; rejections beside it)."""
    dv = write_dv_file(root / "out" / "dv.jsonl", {"food": 3, "law": 3})
    kept = write_judge(dv, ["r0-dv", "r1-dv", "r3-dv"], ["r2-dv"])
    return kept, kept


def _model_copy(root: Path) -> Path:
    folder = root / "out" / "model"
    if not folder.exists():
        shutil.copytree(Path(os.environ["FUZZ_TINY_MODEL"]), folder)
    return folder


def model_member(member: str) -> Callable[[Path], Built]:
    """A saved model folder (a copy of the tiny encoder) with ``member`` written valid."""

    def build(root: Path) -> Built:
        folder = _model_copy(root)
        path = folder / member
        if member.endswith(".yaml"):
            path.write_text(yaml.safe_dump(train_yaml(root)))
        else:
            source = {"path": "/data/dv.jsonl", "sha256": "ab" * 32}
            path.write_text(json.dumps({"kind": "dualview.mix", "size": 8, "sources": [source]}))
        return folder, path

    build.__name__ = f"model/{member}"
    return build


def reranker_folder(root: Path) -> Built:
    """A saved cross-encoder reranker (the tiny one); its description is the file under test."""
    folder = root / "reranker"
    shutil.copytree(Path(os.environ["FUZZ_TINY_RERANKER"]), folder)
    return folder, folder / RERANKER_FILE


def eval_result(root: Path) -> Built:
    _model_copy(root)
    folder = Path(os.environ["FUZZ_RUN_DIR"])
    result = next(p for p in folder.glob("eval-*/eval/*/*.json"))
    return _copy(result, root)


def hub_card(root: Path) -> Built:
    """A ``dualview export --to hub-dataset`` folder; the card is the file under test."""
    folder = root / "hub"
    export_hub_dataset(RECORDS_ORIG, folder)
    return folder, folder / "README.md"


def shard(root: Path) -> Built:
    """A finished one-shard synth run (made once by the ``env`` fixture)."""
    made = Path(os.environ["FUZZ_SHARD"])
    for part in made.parent.glob(made.name + "*"):
        shutil.copyfile(part, root / part.name)
    return root / made.name, root / made.name


# ------------------------------------------------------------------------------------ targets
LLM = ("--backend", "openai", "--base-url", "{URL}", "--model", "stub")


@dataclass(frozen=True)
class Target:
    """One command and one of its path arguments: ``{P}`` is the path under test."""

    argv: tuple[str, ...]
    build: Callable[[Path], Built]
    fmt: str = "jsonl"  # jsonl | yaml | tsv | json: which damages apply
    accepts: frozenset[str] = field(default_factory=frozenset)  # inputs that may exit 0
    huge: bool = False  # also feed the 50 MB line (only where a reader differs)
    label: str = ""  # the command's name in test ids when its first words are ambiguous

    @property
    def name(self) -> str:
        """``command:input`` for test ids, e.g. ``data-convert:beir/corpus.jsonl``."""
        words = [self.label] if self.label else []
        for part in self.argv[: 0 if self.label else 2]:
            if part.startswith(("{", "-")):
                break
            words.append(part)
        return "-".join(words) + ":" + self.build.__name__


EMPTY_OK = frozenset({"empty"})
TARGETS = [
    Target(("data", "validate", "{P}"), orig_records, accepts=EMPTY_OK, huge=True),
    Target(("data", "stats", "{P}"), orig_records, accepts=EMPTY_OK | {"duplicate_ids"}),
    Target(("data", "convert", "{P}", "{O}/o.jsonl"), orig_records, accepts=EMPTY_OK),
    Target(("data", "convert", "{P}", "{O}/o.jsonl", "--from", "beir"), beir_member("corpus.jsonl")),
    Target(("data", "convert", "{P}", "{O}/o.jsonl", "--from", "beir"), beir_member("queries.jsonl")),
    Target(("data", "convert", "{P}", "{O}/o.jsonl", "--from", "beir"), beir_member("qrels/test.tsv"), fmt="tsv", accepts=EMPTY_OK | {"duplicate_ids"}),
    Target(("data", "split-beir", "{P}", "{O}/a", "{O}/b", "--n", "1"), beir_member("queries.jsonl")),
    Target(("data", "gold-build", "--source", "{P}", "--out", "{O}/gold"), gold_source),
    Target(("data", "gold-check", "--source", "{P}"), gold_source),
    Target(("seed", "{P}", "{O}/o.jsonl", *LLM), plain_records, accepts=EMPTY_OK),
    Target(("synth", "{P}", "{O}/o.jsonl", *LLM), orig_records, accepts=EMPTY_OK, huge=True),
    Target(("synth", "{O}/in.jsonl", "{O}/o.jsonl", *LLM, "--config", "{P}"), yaml_file(job), fmt="yaml", accepts=EMPTY_OK),
    Target(("poison", "{P}", "{O}/o.jsonl", *LLM), orig_records, accepts=EMPTY_OK),
    Target(("verify", "{P}", "{O}/o.jsonl", *LLM), dv_records, accepts=EMPTY_OK),
    Target(("synth-merge", "{O}/m.jsonl", "{P}"), shard),
    Target(("bench-synth", "--out", "{O}/b", "--gold-dir", "{P}", "--limit", "2", "--shots", "0", *LLM), gold_dir),
    Target(("mix", "{P}", "--out", "{O}/m.jsonl", "--preset", "ins-orig", "--size", "8"), orig_records, accepts=EMPTY_OK, huge=True),
    Target(("mix", "{O}/in.jsonl", "--out", "{O}/m.jsonl", "--config", "{P}"), yaml_file(mix_yaml), fmt="yaml"),
    Target(("mine", "{P}", "--out", "{O}/m.jsonl", "--config", "{O}/mine.yaml"), orig_records, accepts=EMPTY_OK),
    Target(("mine", "{O}/in.jsonl", "--out", "{O}/m.jsonl", "--config", "{P}"), yaml_file(mine_yaml), fmt="yaml", accepts=EMPTY_OK),
    Target(("mine", "{O}/in.jsonl", "--out", "{O}/m.jsonl", "--config", "{O}/mine.yaml", "--corpus", "{P}"), beir_member("corpus.jsonl"), accepts=EMPTY_OK),
    Target(("export", "{P}", "{O}/o.parquet"), orig_records, accepts=EMPTY_OK),
    Target(("export", "{P}", "{O}/hub", "--to", "hub-dataset"), orig_records, accepts=EMPTY_OK, label="export-hub"),
    Target(("review", "export", "{P}", "--out", "{O}/r.md", "--n", "4"), dv_records, accepts=EMPTY_OK),
    Target(("review", "{P}", "--n", "4"), dv_records, accepts=EMPTY_OK),
    Target(("review", "export", "{O}/dv.jsonl", "--out", "{O}/r.md", "--judge", "{P}"), judge_file, accepts=EMPTY_OK | {"duplicate_ids"}),
    # A verdict file is appended by the review page: a torn last line is a killed writer's.
    Target(("review", "stats", "{P}"), verdicts, accepts=frozenset({"duplicate_ids", "truncated"})),
    # A saved model's own files are optional (a plain ST model has none) and described, not
    # validated: any YAML mapping or JSON object is shown; unreadable or broken ones are errors.
    Target(("model-card", "{P}"), model_member("dualview_train.yaml"), fmt="yaml", accepts=EMPTY_OK | {"missing", "yaml_wrong_type", "yaml_unknown_key"}),
    Target(("model-card", "{P}"), model_member("data_manifest.json"), fmt="json", accepts=frozenset({"missing", "wrong_shape"})),
    Target(("model-card", "{O}/model", "--eval", "{P}"), eval_result, fmt="json"),
    # A card cut short is still Markdown; its metadata block must be whole and a mapping.
    Target(("push", "{P}", "user/fuzz", "--token-env", "FUZZ_HF_TOKEN"), hub_card, fmt="md", accepts=frozenset({"truncated"})),
    Target(("train", "{P}"), yaml_file(train_yaml), fmt="yaml"),
    Target(("train", "{P}"), train_data),
    Target(("eval", "{MODEL}", "-b", "paired={P}", "-o", "{O}/e"), paired_member("pairs.jsonl")),
    Target(("eval", "{MODEL}", "-b", "paired={P}", "-o", "{O}/e"), paired_member("corpus.jsonl")),
    Target(("eval", "--reranker", "{P}", "--first-stage", "bm25", "-b", f"paired={PAIRED}", "-o", "{O}/e", "--no-cache"), reranker_folder, fmt="json", label="eval-reranker"),
    Target(("run", "{P}", "--dry-run"), yaml_file(experiment), fmt="yaml"),
    Target(("run", "{P}", "--dry-run"), yaml_file(sweep_experiment), fmt="yaml"),
    Target(("report", "{P}", "--out", "{O}/r"), run_dir_member("stages.json"), fmt="json"),
    Target(("report", "{P}", "--out", "{O}/r"), sweep_manifest, fmt="json"),
    Target(("report", "{P}", "--out", "{O}/r"), run_dir_member("eval-*/configurations.json"), fmt="json"),
    # A model without results is a row of "-" (an unfinished evaluation), not an error.
    Target(("report", "{P}", "--out", "{O}/r"), run_dir_member("eval-*/eval/*/*.json"), fmt="json", accepts=frozenset({"missing"})),
]  # fmt: skip


# ------------------------------------------------------------------------------------- inputs
def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _set(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def missing(path: Path) -> None:
    path.unlink()


def directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside.jsonl").write_text("{}\n")


def empty(path: Path) -> None:
    _set(path, b"")


def random_bytes(path: Path) -> None:
    _set(path, random.Random(path.name).randbytes(3000))


def invalid_utf8(path: Path) -> None:
    data = path.read_bytes()
    for quote in (b'": "', b": ", b"\t"):
        if quote in data:  # inside a JSON string / YAML scalar / TSV cell
            index = data.rindex(quote) + len(quote)
            _set(path, data[:index] + b"\xff\xfe\xc3(" + data[index:])
            return
    _set(path, data + b"\xff")


def bom_crlf(path: Path) -> None:
    _set(path, b"\xef\xbb\xbf" + path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))


def truncated(path: Path) -> None:
    lines = _lines(path)
    last = lines[-1].rstrip(b"\n")
    _set(path, b"".join(lines[:-1]) + last[: max(1, len(last) // 2)])


def huge_line(path: Path) -> None:
    payload = b'{"id": "huge", "query": "' + b"x" * HUGE_LINE_BYTES + b'"}\n'
    _set(path, path.read_bytes() + payload)


def wrong_shape(path: Path) -> None:
    fmt = path.suffix
    if fmt == ".jsonl":
        _set(path, b"".join(b'["not", "an", "object"]\n' for _ in _lines(path)))
    elif fmt == ".tsv":
        _set(path, b"only-one-column\nsecond\n")
    elif fmt == ".json":
        _set(path, b'["a", "list", "not", "an", "object"]\n')
    elif fmt == ".md":  # a card whose metadata block is a list
        _set(path, b"---\n- a\n- list\n---\n\n# card\n")
    else:
        _set(path, b"- a\n- list\n")


def duplicate_ids(path: Path) -> None:
    lines = [line for line in _lines(path) if line.strip()]
    _set(path, b"".join(lines) + (b"" if lines[-1].endswith(b"\n") else b"\n") + lines[-1])


def nan_scores(path: Path) -> None:
    if path.suffix == ".tsv":
        lines = _lines(path)
        rows = [line.split(b"\t") for line in lines[1:]]
        _set(path, lines[0] + b"".join(b"\t".join([*r[:-1], b"NaN\n"]) for r in rows))
        return
    data = path.read_bytes()
    index = data.index(b"{") + 1
    _set(path, data[:index] + b'"score": NaN, "other": -Infinity, ' + data[index:])


def _first_leaf(node: dict) -> list[str]:
    for key, value in node.items():
        if isinstance(value, dict) and value:
            return [key, *_first_leaf(value)]
        return [key]
    return []


def yaml_wrong_type(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    keys = _first_leaf(data)
    node = data
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = {"a mapping": "where a scalar belongs"}
    path.write_text(yaml.safe_dump(data))


def yaml_unknown_key(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    data["unknown_key_typo"] = 1
    path.write_text(yaml.safe_dump(data))


def no_final_newline(path: Path) -> None:
    """Complete, but the last line lacks its newline (an editor's or a tool's output)."""
    _set(path, path.read_bytes().rstrip(b"\r\n"))


def lone_surrogate(path: Path) -> None:
    """A JSON or YAML escape of half a surrogate pair (``\\ud800``) in the first string."""
    if path.suffix in (".yaml", ".yml"):
        data = yaml.safe_load(path.read_text())
        keys = _first_text(data)
        node = data
        for key in keys[:-1]:
            node = node[key]
        if keys:
            node[keys[-1]] = "\ud800" + node[keys[-1]]
        else:  # a config without texts: in a key of its own
            data["note"] = "\ud800"
        path.write_text(yaml.safe_dump(data, allow_unicode=False))  # escaped: "\uD800..."
        return
    data = path.read_bytes()
    index = data.index(b'": "') + len(b'": "')
    _set(path, data[:index] + b"\\udc80" + data[index:])


def _first_text(node: dict | list) -> list:
    """The key path of the first string leaf of a YAML document."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        if isinstance(value, str):
            return [key]
        if isinstance(value, (dict, list)) and (inner := _first_text(value)):
            return [key, *inner]
    return []


def oversized(path: Path) -> None:
    """Valid content followed by zeros, one byte past `MAX_FILE_BYTES` (a sparse file)."""
    with path.open("r+b") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)


def symlink_loop(path: Path) -> None:
    path.unlink()
    os.symlink(path.name, path)


def unreadable(path: Path) -> None:
    """chmod 000; as root (who reads it anyway) opening it is made to fail with EACCES."""
    path.chmod(0)
    try:
        path.open("rb").close()
    except PermissionError:
        return
    path.chmod(0o644)
    ROOT_UNREADABLE.add(str(path))


ROOT_UNREADABLE: set[str] = set()


def _deny_root_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = io.open

    def guarded(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.fspath(file) in ROOT_UNREADABLE:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", guarded)


ALL = ("jsonl", "yaml", "tsv", "json", "md")
INPUTS: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "missing": (missing, ALL),
    "directory": (directory, ALL),
    "empty": (empty, ALL),
    "random_bytes": (random_bytes, ALL),
    "invalid_utf8": (invalid_utf8, ALL),
    "bom_crlf": (bom_crlf, ALL),
    "truncated": (truncated, ("jsonl", "json", "md")),
    "huge_line": (huge_line, ("jsonl",)),
    "wrong_shape": (wrong_shape, ALL),
    "duplicate_ids": (duplicate_ids, ("jsonl", "tsv")),
    "nan_scores": (nan_scores, ("jsonl", "tsv", "json")),
    "yaml_wrong_type": (yaml_wrong_type, ("yaml",)),
    "yaml_unknown_key": (yaml_unknown_key, ("yaml",)),
    "symlink_loop": (symlink_loop, ALL),
    "unreadable": (unreadable, ALL),
    "no_final_newline": (no_final_newline, ALL),
    "lone_surrogate": (lone_surrogate, ("jsonl", "json", "yaml")),
    "oversized": (oversized, ("yaml", "json", "md")),
}
VALID_INPUTS = {"bom_crlf", "no_final_newline"}
# What the error line must say for an input (beyond naming the file).
EXPECTED = {"lone_surrogate": "lone surrogate", "oversized": "larger than 64 MiB"}


def cases() -> list:
    out = []
    for target in TARGETS:
        for name, (_, formats) in INPUTS.items():
            if target.fmt not in formats or (name == "huge_line" and not target.huge):
                continue
            out.append(pytest.param(target, name, id=f"{target.name}-{name}"))
    return out


CASES = cases()


# ----------------------------------------------------------------------------------- running
@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    """The stub LLM, a tiny encoder and a finished run folder (for ``report``)."""
    from dualview.eval.run import evaluate
    from tests.test_eval_rerank import make_tiny_cross_encoder
    from tests.train_tiny import make_tiny_encoder

    root = tmp_path_factory.mktemp("fuzz-env")
    tiny = make_tiny_encoder(root / "tiny")
    os.environ["FUZZ_TINY_MODEL"] = str(tiny)
    reranker = make_tiny_cross_encoder(root / "reranker")
    description = {"kind": "cross_encoder", "query_template": "{query} {instruction}"}
    (reranker / RERANKER_FILE).write_text(json.dumps({**description, "max_length": 64}))
    os.environ["FUZZ_TINY_RERANKER"] = str(reranker)
    run = root / "run"
    stage = run / "eval-0123456789ab"
    evaluate([str(tiny)], [f"paired={PAIRED}"], stage / "eval", cache=False)
    (stage / "configurations.json").write_text(json.dumps({"models": {"tiny": str(tiny)}}))
    (run / "stages.json").write_text(json.dumps({"eval": stage.name}))
    os.environ["FUZZ_RUN_DIR"] = str(run)
    with StubServer() as server, HubStub() as hub:
        shard_out = root / "shard" / "shard.jsonl"
        shard_out.parent.mkdir()
        llm = [a.format(URL=server.base_url) for a in LLM]
        result = run_cli("synth", str(RECORDS_ORIG), str(shard_out), *llm, "--shard", "0/1")
        assert result.returncode == 0, result.stderr
        os.environ["FUZZ_SHARD"] = str(shard_out)
        yield {"URL": server.base_url, "MODEL": str(tiny), "HUB": hub.url}
    os.environ.pop("FUZZ_TINY_MODEL")
    os.environ.pop("FUZZ_TINY_RERANKER")
    os.environ.pop("FUZZ_RUN_DIR")


def prepare(target: Target, input_name: str, root: Path, env: dict) -> tuple[list[str], Path]:
    """Build the valid fixture, damage it, and return the argv and the damaged file."""
    (root / "out").mkdir()
    arg, damaged = target.build(root)
    # Sibling inputs a command needs besides the one under test (all valid).
    shutil.copyfile(RECORDS_ORIG, root / "out" / "in.jsonl")
    (root / "out" / "mine.yaml").write_text(yaml.safe_dump(mine_yaml(root)))
    INPUTS[input_name][0](damaged)
    values = {"P": str(arg), "O": str(root / "out"), **env}
    return [part.format(**values) for part in target.argv], damaged


def check(
    code: int, out: str, err: str, target: Target, input_name: str, damaged: Path, arg: str,
    before: bytes | None = None,
):  # fmt: skip
    """Exit code and error line of one case; a valid input is also left as it was (readers
    never write: ``before`` is its content before the command)."""
    if "Traceback" in out + err:
        pytest.fail(f"traceback:\n{err[-4000:]}", pytrace=False)
    if before is not None and input_name in VALID_INPUTS and damaged.is_file():
        assert damaged.read_bytes() == before, "a valid input was rewritten by its reader"
    allowed = {2}
    if input_name in VALID_INPUTS:
        allowed = {0}
    elif input_name in target.accepts:
        allowed = {0, 2}
    if code not in allowed:
        pytest.fail(f"exit {code}, expected {allowed}:\n{err[-2000:]}", pytrace=False)
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, f"expected one error line:\n{err[-2000:]}"
        named = {str(damaged), arg, str(damaged.parent)}
        # A damaged input is named; a valid one may still fail for another reason (one line).
        if input_name not in target.accepts:
            assert any(errors[0].startswith(f"error: {p}") for p in named), errors[0]
            assert EXPECTED.get(input_name, "") in errors[0], errors[0]
        assert len(errors[0]) < 1000, "an error line must not dump the input"


@pytest.mark.parametrize(("target", "input_name"), CASES)
def test_fuzz_matrix(target, input_name, env, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    ROOT_UNREADABLE.clear()
    argv, damaged = prepare(target, input_name, tmp_path, env)
    if ROOT_UNREADABLE:  # running as root: simulate what chmod 000 does to other users
        _deny_root_unreadable(monkeypatch)
    _offline_stand_ins(monkeypatch, env)
    arg = _arg_of(target, argv)
    before = damaged.read_bytes() if input_name in VALID_INPUTS else None
    code, out, err = invoke_in_process(argv, capsys)  # traceback: code -1
    check(code, out, err, target, input_name, damaged, arg, before)


def _offline_stand_ins(monkeypatch: pytest.MonkeyPatch, env: dict) -> None:
    """``review SOURCE`` returns instead of serving; ``push`` uploads to the local Hub stub."""
    import huggingface_hub.constants

    monkeypatch.setattr("dualview.review.app.serve", lambda *args, **kwargs: None)
    monkeypatch.setenv("FUZZ_HF_TOKEN", "hf_fuzz")
    monkeypatch.setenv("HF_ENDPOINT", env["HUB"])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def _arg_of(target: Target, argv: list[str]) -> str:
    index = target.argv.index("{P}") if "{P}" in target.argv else None
    if index is not None:
        return argv[index]
    return next(a.split("=", 1)[1] for a in argv if "=" in a and not a.startswith("-"))


SAMPLE = [
    "data-validate:orig_records-random_bytes",
    "synth:orig_records-bom_crlf",
    "train:train_yaml-yaml_unknown_key",
]


@pytest.mark.parametrize("case_id", SAMPLE)
def test_subprocess_sample(case_id: str, env, tmp_path: Path) -> None:
    """The real entry point (``python -m dualview``) gives the same outcome as in-process."""
    (case,) = [c for c in CASES if c.id == case_id]
    target, input_name = case.values
    argv, damaged = prepare(target, input_name, tmp_path, env)
    result = run_cli(*argv, timeout=300)
    check(result.returncode, result.stdout, result.stderr, target, input_name, damaged,
          _arg_of(target, argv))  # fmt: skip


MATRIX = (26, 42, 18, 587)  # commands, path arguments, hostile inputs, cases


def test_matrix_size() -> None:
    """N commands, M path arguments x K inputs = C cases, pinned, and the same figure in
    docs/architecture.md: a new command or input changes MATRIX and the docs together."""
    commands = {t.name.split(":")[0] for t in TARGETS}
    size = (len(commands), len(TARGETS), len(INPUTS), len(CASES))
    print(f"\nfuzz matrix: {size[0]} commands, {size[1]} path arguments x "
          f"{size[2]} inputs = {size[3]} cases")  # fmt: skip
    assert size == MATRIX
    docs = Path(__file__).parents[1] / "docs" / "architecture.md"
    quoted = " ".join(docs.read_text(encoding="utf-8").split())
    n, m, k, c = MATRIX
    assert f"{n} commands, {m} path arguments x {k} hostile inputs = {c} cases" in quoted
