"""A synthesis task's parser version, derived from its source.

The result cache stores verdicts, not only raw answers (`dualview.synth.cache`), so a change
to how a task builds prompts in code, parses or judges answers must change the task's
fingerprint. The prompt template files are keyed by their sha256 already
(`dualview.synth.templates`); the code is keyed here: the *parser digest* of a task class
is the sha256 of the syntax trees (docstrings, comments and layout left out) of the module
that defines it and of `dualview.synth.parsing`.

`PINNED` maps each built-in task class's digests to the parser version numbers that its
caches carry, so caches made before the version was derived keep their keys:

- a digest found in the table gives its version (version 1 adds nothing to the key; a
  higher one adds ``parser_version``), and the lower versions are the task's earlier
  fingerprints, whose cached raw answers the new parser re-judges without asking the LLM;
- a digest missing from the table (the source was edited, the table was not) adds the
  digest itself to the key (``parser_source``) and replays nothing: the edit may have
  changed the prompts, so the LLM is asked again; nothing stale is ever reused.
  ``tests/test_parser_versions.py`` fails until the new digest is pinned with the next
  version number; cached answers of the older versions are then re-judged, unless
  `REPLAY_FROM` says the prompts changed too (then the LLM is asked again).

A task class outside the table (a plugin's) declares ``parser_version`` itself.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
from dataclasses import dataclass
from functools import cache

#: Modules every built-in task parses with.
SHARED_MODULES: tuple[str, ...] = ("dualview.synth.parsing",)

#: task class (``module.QualName``) -> {parser digest: parser version}. After editing a
#: task's module or the shared parsing module, add the new digest (the test prints it)
#: with the next version number. A version replays the cached answers of every lower
#: version; when the prompts changed too, also raise ``REPLAY_FROM`` for the class to the
#: new version so that no older answer is replayed.
PINNED: dict[str, dict[str, int]] = {
    # 2: reworded copies of a worked example are rejected
    # 3: an instruction that is a piece (>= 40 characters) of a passage is rejected
    # 4: echo checks ignore punctuation; naming a prompt label (TARGET, [R1]) is rejected
    # 5: a copy (or rewording) of a worked example's original instruction is rejected too
    "dualview.synth.reverse.ReverseTask": {
        "b72ceb1bd6bd2d791849132552584ada6dd28b6bf98f2f3b328edde31ade5040": 4,
        "452c8c80f1cde5a006c573e1cb06c3fc6b487671ecf5d29354afa1db690d551b": 5,
    },
    # 2: an instruction cut from the positive, and a negative that is a piece or a near copy
    # of the positive or of another negative, are rejected
    # 3: an instruction that repeats (or is cut from) one of its negatives is rejected
    # 4: echo checks ignore punctuation (the second digest of 4: worked examples and
    # constrained output, options that stay out of the key while unset; without them the
    # same prompts and verdicts, so the same keys)
    "dualview.synth.seed.SeedTask": {
        "433819ef0e8a395a00928c27f56b445bdbb2b058a2b52b62310139277419eafb": 4,
        "6601200a260901793fe2ceda22ce7ef442ce3e80ea55ae9ba4983816d29510ae": 4,
    },
    # 2: a bare [k] reply is accepted (the second digest of 2: both pointwise judges build
    # their two prompts through one helper; the same prompts and verdicts, so the same keys;
    # the third adds the pairwise judge, a new scoring whose key differs anyway)
    "dualview.synth.verify.VerifyTask": {
        "82888f4145844b8733ec93cbc245814e2d709ab47eb0304768fe261ea430199d": 2,
        "da3fcfeb5360ae02c3b8690c680feeb752317e621986f188bc1c2aa79b0d3dc9": 2,
        "228bafe20470dd5ed6b00f1fd28af4d4be8686ebca1ccc58db1f976a13c86880": 2,
    },
    # 2: echo checks ignore punctuation
    "dualview.synth.poison.PoisonTask": {
        "2a3ddf94d85d85cf9f1a0212747c91db600fbf2d99162e46129a4d03d2202221": 2,
    },
}

#: task class -> the lowest version whose cached answers may be replayed (default 1).
REPLAY_FROM: dict[str, int] = {}


@dataclass(frozen=True)
class ParserVersion:
    """A task's parser version: the pinned ``number``, or ``digest`` when unpinned."""

    number: int
    digest: str | None = None  # set only when the source matches no pinned version
    replay_from: int = 1

    def earlier(self) -> list[int]:
        """Versions whose cached answers the parser re-judges, newest first (none for an
        unpinned source: its prompts may differ)."""
        if self.digest is not None:
            return []
        return list(range(self.number - 1, self.replay_from - 1, -1))


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def pinned_class(cls: type) -> type | None:
    """The first class of ``cls``'s MRO that `PINNED` names (None: a plugin's task)."""
    return next((c for c in cls.__mro__ if class_name(c) in PINNED), None)


def _tree_digest(source: str) -> str:
    """sha256 of the module's syntax tree without docstrings (layout and comments are not
    in the tree): documenting the code leaves it unchanged."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[:1] = [] if len(body) > 1 else [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


@cache
def module_digest(module_name: str) -> str:
    return _tree_digest(inspect.getsource(importlib.import_module(module_name)))


def parser_digest(cls: type) -> str:
    """The digest of the module defining ``cls`` and of `SHARED_MODULES`."""
    parts = [module_digest(name) for name in (cls.__module__, *SHARED_MODULES)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def parser_version(cls: type, declared: int = 1) -> ParserVersion:
    """The parser version of task class ``cls`` (``declared``: a plugin's own number)."""
    pinned = pinned_class(cls)
    if pinned is None:
        return ParserVersion(declared)
    name = class_name(pinned)
    versions = PINNED[name]
    digest = parser_digest(pinned)
    if digest in versions:
        return ParserVersion(versions[digest], replay_from=REPLAY_FROM.get(name, 1))
    return ParserVersion(max(versions.values()) + 1, digest)
