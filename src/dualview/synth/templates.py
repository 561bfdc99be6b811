"""Prompt templates: Jinja2 files in ``synth/prompts/``, rendered strictly, hashed for caching."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2

from dualview.errors import ConfigError
from dualview.io.files import read_input_text
from dualview.synth.parsing import normalize

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
_JINJA_SYNTAX = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
    autoescape=False,
)


@dataclass(frozen=True)
class PromptTemplate:
    """One task's prompt. ``sha256`` of the source is part of the synthesis cache key."""

    name: str
    source: str
    extra_fragments: tuple[str, ...] = field(default=())

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @cached_property
    def _compiled(self) -> jinja2.Template:
        try:
            return _ENV.from_string(self.source)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"prompt template {self.name}: line {exc.lineno}: {exc}") from None

    def render(self, **data: Any) -> str:
        """The prompt text for ``data``; a variable the template needs but lacks is an error."""
        try:
            return self._compiled.render(**data).strip() + "\n"
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"prompt template {self.name}: {exc}") from None

    @cached_property
    def fragments(self) -> tuple[str, ...]:
        """Normalized fixed sentences of the template, for echo detection."""
        text = _JINJA_SYNTAX.sub("\n", self.source)
        pieces = [normalize(line) for line in re.split(r"[\n]|(?<=[.!?])\s", text)]
        return tuple(p for p in pieces if len(p) >= 12) + tuple(
            normalize(f) for f in self.extra_fragments if normalize(f)
        )

    def with_fragments(self, extra: list[str]) -> PromptTemplate:
        """The same template, also treating ``extra`` (e.g. few-shot answers) as prompt text."""
        return PromptTemplate(self.name, self.source, tuple(extra))


def load_template(name: str, path: str | Path | None = None) -> PromptTemplate:
    """The bundled ``prompts/<name>.jinja``, or the file at ``path`` when given."""
    source_path = Path(path) if path else PROMPTS_DIR / f"{name}.jinja"
    if not source_path.is_file():
        raise ConfigError(f"prompt template {source_path}: file does not exist")
    return PromptTemplate(name, read_input_text(source_path))  # BOM, CRLF, size: one policy
