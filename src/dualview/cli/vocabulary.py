"""One flag vocabulary for every command (the table is in ``docs/cli.md``).

The old spellings keep working for one release: `VocabularyGroup` (the class of the command
groups) rewrites them to the new ones before a command parses its arguments and prints one
``warning: ... is deprecated`` line on stderr. The command functions only know the new names.

It also makes ``--help`` readable at 80 columns: metavars as click writes them (``TEXT``,
``PATH``, ``INTEGER``, ``[a|b]``) instead of Python types (``<list[str]>``, ``<bool>``).
"""

from __future__ import annotations

from typing import get_args

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

#: Old option spellings per command (the words after ``dualview``): old -> new.
_LLM = {"--backend": "--llm-backend", "--cache": "--llm-cache"}
RENAMED_OPTIONS: dict[str, dict[str, str]] = {
    "seed": _LLM,
    "reverse": _LLM,
    "poison": _LLM,
    "verify": _LLM,
    "bench-synth": {"--backend": "--llm-backend"},
    "eval": {
        "--backend": "--search-backend",
        "--cache": "--embedding-cache",
        "--no-cache": "--no-embedding-cache",
    },
    "review serve": {"--n": "--size"},
    "review export": {"--n": "--size"},
    "review stats": {"--json": "--out"},
    "data split-beir": {"--n": "--size"},
}
#: Commands whose output was a positional argument: its place among the positionals.
POSITIONAL_OUTPUT: dict[str, int] = {
    "data convert": 1,
    "seed": 1,
    "reverse": 1,
    "poison": 1,
    "verify": 1,
    "export": 1,
    "synth-merge": 0,
}
#: Old command names: old -> new (the old one is registered hidden, same function).
RENAMED_COMMANDS: dict[str, str] = {"synth": "reverse"}
OUT_OPTIONS = ("-o", "--out")


def deprecated(old: str, new: str) -> None:
    """The one deprecation line on stderr."""
    typer.echo(
        f"warning: {old} is deprecated: use {new} (the old form goes in the next release)",
        err=True,
    )


def _value_options(command: TyperCommand) -> set[str]:
    """The option strings of ``command`` that take a value (the next token)."""
    return {
        opt
        for param in command.params
        if isinstance(param, TyperOption) and not param.is_flag and not param.count
        for opt in param.opts
    }


def _rename_options(path: str, command: TyperCommand, args: list[str]) -> tuple[list, list]:
    """``args`` with old option names replaced, and the indices of the positional tokens."""
    renamed, takes_value = RENAMED_OPTIONS.get(path, {}), _value_options(command)
    out: list[str] = []
    positions: list[int] = []
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name == "--":  # what follows is positional as written, never moved
            return out + args[i:], positions
        if name in renamed:
            deprecated(name, renamed[name])
            name = renamed[name]
        out.append(name + eq + value)
        if name in takes_value and not eq:
            out += args[i + 1 : i + 2]  # the option's value, whatever it looks like
            i += 1
        elif name == "-" or not name.startswith("-"):
            positions.append(len(out) - 1)
        i += 1
    return out, positions


def _move_positional_output(path: str, args: list[str], positions: list[int]) -> list[str]:
    """``reverse IN OUT`` -> ``reverse IN --out OUT`` (deprecated form, one warning)."""
    index = POSITIONAL_OUTPUT.get(path)
    given = any(a in OUT_OPTIONS or a.startswith("--out=") for a in args)
    if index is None or given or len(positions) < 2:
        return args
    at = positions[index]
    deprecated(f"the positional output ({args[at]})", f"-o/--out {args[at]}")
    return [*args[:at], *args[at + 1 :], "--out", args[at]]


def rewrite_args(path: str, command: TyperCommand, args: list[str]) -> list[str]:
    """The arguments of ``dualview PATH`` in the current vocabulary (warning once per old
    spelling)."""
    path = RENAMED_COMMANDS.get(path, path)
    args, positions = _rename_options(path, command, args)
    return _move_positional_output(path, args, positions)


_METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "Path": "PATH", "bool": "BOOLEAN"}


def _type_metavar(param: TyperOption) -> str:
    """What click writes for the value of ``param``: TEXT, INTEGER, PATH, [a|b], ..."""
    kind = param.type_descriptor
    if kind.is_choice:
        return "[" + "|".join(str(c) for c in kind.choices or ()) + "]"
    annotation = get_args(kind.annotation)[0] if kind.is_list else kind.annotation
    return _METAVARS.get(getattr(annotation, "__name__", ""), "VALUE")  # VALUE: own parser


class ReadableOption(TyperOption):
    """An option whose help shows a metavar (``PATH``), never a Python type."""

    def display_type_rich(self, ctx: typer.Context) -> str | None:
        if self.is_flag or self.count:
            return None
        return self.metavar or _type_metavar(self)


class ReadableArgument(TyperArgument):
    """An argument named by its metavar (``MODELS...``), without a Python type beside it."""

    @property
    def display_name_raw(self) -> str:
        return self.metavar or (self.name or "").upper()

    def display_type_rich(self, ctx: typer.Context) -> str | None:
        return None


def readable_help(command: TyperCommand) -> None:
    """Give every parameter of ``command`` (and of its subcommands) readable help. typer
    builds the parameters; a subclass that only renders help differently takes their place."""
    for param in command.params:
        if type(param) is TyperOption:
            param.__class__ = ReadableOption
        elif type(param) is TyperArgument:
            param.__class__ = ReadableArgument
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            readable_help(sub)


def _command_path(ctx: typer.Context, name: str) -> str:
    words = [name]
    while ctx.parent is not None:
        words.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(words)


class VocabularyGroup(TyperGroup):
    """The command groups of ``dualview``: old spellings rewritten (with a warning), and
    readable help for every command below."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        readable_help(self)

    def resolve_command(self, ctx: typer.Context, args: list[str]):  # type: ignore[no-untyped-def]
        name, command, rest = super().resolve_command(ctx, args)
        if name is None or command is None or isinstance(command, TyperGroup):
            return name, command, rest
        path = _command_path(ctx, name)
        if path in RENAMED_COMMANDS:
            deprecated(f"`dualview {path}`", f"`dualview {RENAMED_COMMANDS[path]}`")
        return name, command, rewrite_args(path, command, rest)
