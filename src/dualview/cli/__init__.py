"""The ``dualview`` command line: one thin module per stage, each registering its commands.

Every command parses arguments, loads its config and calls the library; user-facing errors
(`dualview.errors.DualviewError`) become one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

import typer

from dualview.cli import bench as bench_cli
from dualview.cli import data as data_cli
from dualview.cli import eval as eval_cli
from dualview.cli import gold as gold_cli
from dualview.cli import hub as hub_cli
from dualview.cli import init as init_cli
from dualview.cli import mix as mix_cli
from dualview.cli import review as review_cli
from dualview.cli import run as run_cli
from dualview.cli import synth as synth_cli
from dualview.cli import train as train_cli
from dualview.cli.vocabulary import VocabularyGroup
from dualview.errors import DualviewError, input_error
from dualview.progress import progress_enabled, quiet_library_bars

app = typer.Typer(
    cls=VocabularyGroup,  # old flag spellings (with a warning), readable help
    rich_markup_mode=None,  # plain click help: wraps at any width, never cuts a name
    name="dualview",
    help="Instruction-following retrieval: dual-view data, training, evaluation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from dualview import __version__

        typer.echo(f"dualview {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_show_version,
        is_eager=True,
        help="Print the installed version and exit.",
    ),
) -> None:
    """Instruction-following retrieval: dual-view data, training, evaluation."""


# Each stage module exposes ``register(app)``; keep one line per stage here.
bench_cli.register(app)
data_cli.register(app)
eval_cli.register(app)
gold_cli.register(app)
hub_cli.register(app)
init_cli.register(app)
mix_cli.register(app)
review_cli.register(app)
run_cli.register(app)
train_cli.register(app)
synth_cli.register(app)  # last: a plugin's task cannot take the name of another command


def main() -> None:
    """Console-script entry point."""
    if not progress_enabled():
        quiet_library_bars()  # logs, not a terminal: no Hugging Face bars in them
    try:
        app()
    except DualviewError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # A path the user named that cannot be opened, wherever the library opened it.
        if exc.filename is None:
            raise
        typer.echo(f"error: {input_error(exc.filename, exc)}", err=True)
        sys.exit(2)
