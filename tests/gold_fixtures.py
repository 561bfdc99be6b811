"""Self-made gold authoring instances for the gold tests (valid by default, easy to break)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "pe", "do", "fu", "gra", "bel"]


def words(seed: str, n: int = 50) -> str:
    """``n`` made-up words, different for every seed."""
    rng = random.Random(seed)
    return " ".join(
        "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(n)
    )


def passage(seed: str, n: int = 50, **extra: Any) -> dict[str, Any]:
    return {"title": f"title {seed}", "text": words(seed, n), **extra}


def instance(domain: str = "alpha", number: int = 1, n_negatives: int = 2) -> dict[str, Any]:
    """A valid authoring instance; N* is the first instruction negative."""
    key = f"{domain}-{number:03d}"
    negatives = [passage(f"{key}-n{i}") for i in range(n_negatives)]
    negatives[0]["n_star"] = True
    return {
        "instance": key,
        "domain": domain,
        "constraint_type": "audience",
        "query": f"query {words(key + '-q', 4)}",
        "instruction": "I want advice written for children; material for adults is not relevant.",
        "reversed_instruction": "I want advice written for adults; material for children is out.",
        "positive": passage(f"{key}-p"),
        "instruction_negatives": negatives,
        "hard_negatives": [passage(f"{key}-h0"), passage(f"{key}-h1")],
    }


def write_source(folder: Path, instances: list[dict[str, Any]], name: str = "alpha") -> Path:
    """Write instances as one authoring file ``folder/<name>.jsonl``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in instances), encoding="utf-8")
    return path
