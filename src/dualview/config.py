"""Configuration base: strict pydantic models loaded from YAML.

Every stage keeps its own config model next to its code (``dualview.train.config`` and so on);
all of them derive from `StrictModel`, so an unknown or mistyped key is an error that
names the key and the file instead of a silently ignored default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from dualview.errors import ConfigError, DataError
from dualview.io.atomic import atomic_write_text
from dualview.io.files import read_input_text, reject_lone_surrogates

ModelT = TypeVar("ModelT", bound=BaseModel)


class StrictModel(BaseModel):
    """Base of every config: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def format_validation_error(exc: ValidationError, source: str) -> str:
    """All problems on one line: ``SOURCE: key.path: message; other.key: message``."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or "(root)"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key (typo?)"
        lines.append(f"{key}: {message}")
    return f"{source}: " + "; ".join(lines)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Load a YAML mapping, with a clear error for a missing file or bad YAML."""
    path = Path(path)
    try:
        text = read_input_text(path)
    except DataError as exc:
        raise ConfigError(str(exc)) from None
    return parse_yaml_mapping(text, path)


def parse_yaml_mapping(text: str, source: str | Path, first_line: int = 1) -> dict[str, Any]:
    """YAML ``text`` that must be a mapping (empty is ``{}``); errors name ``source`` and
    the line, counting the text's first line as ``first_line`` (for a block in a file)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f":{where.line + first_line}" if where is not None else ""
        problem = getattr(exc, "problem", None) or "not parseable"
        raise ConfigError(f"{source}{line}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    try:
        reject_lone_surrogates(text, data, source, None)
    except DataError as exc:
        raise ConfigError(str(exc)) from None
    return data


def set_dotted(
    data: dict[str, Any], key: str, value: Any, flat_maps: tuple[str, ...], where: str
) -> None:
    """Set ``a.b.c`` in nested ``data``, in place. Below a mapping named in ``flat_maps``
    (one whose keys are dotted paths themselves, like an experiment's
    ``training.overrides``) the rest of the path is one key, so that
    ``training.overrides.model.name_or_path`` adds that override beside the others instead
    of replacing the whole ``model`` section. ``where`` begins the error of a non-mapping."""
    node = data
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{where}: {part} is not a mapping")
        node = child
        if part in flat_maps:
            node[".".join(parts[i + 1 :])] = value
            return
    node[parts[-1]] = value


def apply_overrides(
    data: dict[str, Any], overrides: list[str], flat_maps: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (value parsed as YAML) to a nested dict, in place
    (``flat_maps``: see `set_dotted`).

    A value that is not valid YAML is one `ConfigError` naming the key (the value itself is
    not repeated: it may be a secret). A text with ``: `` in it (a template) must be quoted
    as YAML: ``--set 'model.query_template="Q: {query} I: {instruction}"'``.
    """
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE")
        set_dotted(data, key, _override_value(key, raw), flat_maps, f"override {item!r}")
    return data


def _override_value(key: str, raw: str) -> Any:
    """``raw`` parsed as YAML, or a `ConfigError` naming the ``--set`` key."""
    try:
        value = yaml.safe_load(raw)
        reject_lone_surrogates(raw, value, f"--set {key}", None)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "not parseable"
        raise ConfigError(
            f"--set {key}: invalid YAML value ({problem}); quote a text with ': ' in it "
            f"as YAML: --set '{key}=\"...\"'"
        ) from None
    except DataError as exc:
        raise ConfigError(str(exc)) from None
    return value


def flag_overrides(flags: dict[str, Any]) -> list[str]:
    """Command-line flags that were given (not None) as ``key.path=value`` overrides."""
    return [f"{key}={json.dumps(value)}" for key, value in flags.items() if value is not None]


def validate_config(model: type[ModelT], data: dict[str, Any], source: str) -> ModelT:
    """Validate ``data`` against ``model``; errors name ``source`` and the offending keys."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def load_config(
    model: type[ModelT],
    path: str | Path,
    overrides: list[str] | None = None,
    flat_maps: tuple[str, ...] = (),
) -> ModelT:
    """Read ``path`` (YAML), apply ``overrides`` (``flat_maps``: see `set_dotted`), validate
    against ``model``."""
    data = apply_overrides(read_yaml(path), overrides or [], flat_maps)
    return validate_config(model, data, str(path))


def dump_config(config: BaseModel, path: str | Path) -> None:
    """Write a config back to YAML atomically (round-trips through `load_config`)."""
    atomic_write_text(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
