"""Benchmark loaders, one per benchmark, and `load_benchmark` for ``KIND[:SUBSETS][=PATH]``.

A benchmark is one module: a `Benchmark` subclass whose `BenchmarkMeta` declares its report
columns, pairing and mteb tasks (`dualview.eval.benchmarks.meta`), and one registration in
`BENCHMARKS` (or, from outside the package, ``BENCHMARKS.register`` / an entry point).

Local folder layouts are documented in each module and in ``docs/architecture/eval.md``.
"""

from __future__ import annotations

from pathlib import Path

from dualview.errors import DualviewError
from dualview.eval.benchmarks.base import Benchmark, BenchmarkResult, EvalContext
from dualview.eval.benchmarks.beir import Beir
from dualview.eval.benchmarks.followir import FollowIR
from dualview.eval.benchmarks.gold_val import GoldValidation
from dualview.eval.benchmarks.infosearch import InfoSearch
from dualview.eval.benchmarks.instructir import InstructIR
from dualview.eval.benchmarks.mair import MAIR
from dualview.eval.benchmarks.meta import BenchmarkMeta
from dualview.eval.benchmarks.paired import PairedInstructions
from dualview.eval.benchmarks.phenomena import Phenomena
from dualview.registry import Registry, UnknownNameError

#: ``-b KIND`` -> the benchmark class; plugins: entry-point group ``dualview.benchmarks``.
BENCHMARKS: Registry[type[Benchmark]] = Registry(
    "benchmark",
    field="-b/--benchmark",
    group="dualview.benchmarks",
    entries={
        "followir": FollowIR,
        "infosearch": InfoSearch,
        "mair": MAIR,
        "instructir": InstructIR,
        "paired": PairedInstructions,
        "phenomena": Phenomena,
        "gold-val": GoldValidation,
        "beir": Beir,
    },
)


def benchmark_meta(kind: str) -> BenchmarkMeta | None:
    """The metadata of the benchmark registered as ``kind`` (what a result's
    ``benchmark.name`` stores); None for one no longer registered (a plugin's old result)."""
    return BENCHMARKS.get(kind).meta if kind in BENCHMARKS else None


def parse_spec(spec: str) -> tuple[str, list[str] | None, Path | None]:
    """``"mair:IFEval,InstructIR=/data/mair"`` -> ``("mair", ["IFEval", "InstructIR"], path)``.

    Without ``=PATH`` the benchmark is fetched from the Hugging Face Hub by name.
    """
    head, sep, path = spec.partition("=")
    kind, _, subset_text = head.partition(":")
    kind = kind.strip().lower()
    if kind not in BENCHMARKS:
        where = f"{BENCHMARKS.field} {spec!r} (KIND[:SUBSET,...][=PATH])"
        raise UnknownNameError(BENCHMARKS.unknown_message(kind, where=where))
    subsets = [s.strip() for s in subset_text.split(",") if s.strip()] or None
    return kind, subsets, Path(path).expanduser() if sep and path else None


def load_benchmark(spec: str) -> Benchmark:
    """Load a benchmark from its spec (see `parse_spec`)."""
    kind, subsets, path = parse_spec(spec)
    if path is not None and not path.exists():
        raise DualviewError(f"{path}: benchmark folder does not exist ({spec})")
    return BENCHMARKS.get(kind)(path, subsets)


def data_path(spec: str) -> Path | None:
    """The local data a spec reads: its ``=PATH``, else the data bundled with its kind
    (``phenomena``), else None (fetched from the Hub by name)."""
    kind, _, path = parse_spec(spec)
    return path if path is not None else BENCHMARKS.get(kind).bundled_path


def spec_label(spec: str) -> str:
    """Short name of a spec for file names and tables: ``kind`` or ``kind-subset+subset``."""
    kind, subsets, _ = parse_spec(spec)
    return kind if not subsets else f"{kind}-{'+'.join(subsets)}".replace("/", "_")


__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "BenchmarkMeta",
    "BenchmarkResult",
    "EvalContext",
    "benchmark_meta",
    "data_path",
    "load_benchmark",
    "parse_spec",
    "spec_label",
]
