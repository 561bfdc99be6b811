"""``dualview review SOURCE`` (the review page), ``review stats`` and ``review export``."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualview.cli.vocabulary import VocabularyGroup
from dualview.errors import ConfigError
from dualview.io.paths import check_outputs
from dualview.resources import require_extra

console = Console(stderr=True)


class _ServeByDefault(VocabularyGroup):
    """``dualview review SOURCE`` means ``dualview review serve SOURCE``."""

    def resolve_command(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["serve", *args]
        return super().resolve_command(ctx, args)


review_app = typer.Typer(
    cls=_ServeByDefault,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Human validation of dual views: `review SOURCE` serves the page, `review stats "
    "VERDICTS` summarizes verdicts.",
)

Source = Annotated[
    str,
    typer.Argument(
        metavar="RUN_OR_FILE",
        help="A record file (its dv records), a run folder, or gold:train / gold:test.",
    ),
]
Size = Annotated[int, typer.Option("--size", help="Items in the stratified sample.")]
Seed = Annotated[int, typer.Option(help="Sampling seed.")]
Stratify = Annotated[
    str, typer.Option(help="meta key to stratify by; auto = domain, else source; none.")
]
Judge = Annotated[
    Path | None,
    typer.Option(help="A `dualview verify` output (kept file) whose verdicts to show."),
]


def _read_files(source: str, judge: Path | None) -> list[Path | None]:
    """The files a review reads that its outputs must not be: a record file, the judge's."""
    return [Path(source) if Path(source).is_file() else None, judge]


def _default_reviewer() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


def serve(
    source: Source,
    n: Size = 100,
    seed: Seed = 0,
    stratify: Stratify = "auto",
    judge: Judge = None,
    verdicts: Annotated[
        Path | None,
        typer.Option(help="Verdict file (default: SOURCE.review.jsonl beside the data)."),
    ] = None,
    reviewer: Annotated[
        str | None, typer.Option(help="Reviewer id (default: the login name); ?reviewer= too.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port.")] = 8765,
    blind: Annotated[bool, typer.Option(help="Hide the judge's verdict.")] = False,
) -> None:
    """Serve the review page for a seeded stratified sample of SOURCE's dual views."""
    require_extra("review", "dualview review")  # starlette and uvicorn, before app imports them
    from dualview.review.app import LOCAL_HOSTS
    from dualview.review.app import serve as serve_app
    from dualview.review.items import load_review_set
    from dualview.review.store import check_reviewer

    try:
        name = check_reviewer(reviewer or _default_reviewer())
    except ValueError as exc:
        raise ConfigError(f"--reviewer: {exc}") from None
    check_outputs([verdicts], _read_files(source, judge))
    review = load_review_set(source, n, seed, stratify, judge, verdicts)
    if host not in LOCAL_HOSTS:
        console.print(f"warning: serving on {host}: anyone who reaches it can read and label")
    console.print(
        f"{len(review.items)} of {review.population} items (seed {seed}); verdicts -> "
        f"{review.verdicts}\nopen http://{host}:{port}/?reviewer={name}"
    )
    serve_app(review, name, host=host, port=port, blind=blind)


def stats(
    verdicts: Annotated[Path, typer.Argument(help="A verdict file (JSONL).")],
    reviewer: Annotated[str | None, typer.Option(help="Only this reviewer's verdicts.")] = None,
    json_out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Also write the summary as JSON here.")
    ] = None,
) -> None:
    """Inversion accuracy (Wilson 95% CI), failure modes, judge-vs-human kappa."""
    from dualview.io.atomic import atomic_write_json
    from dualview.review.stats import markdown, review_summary

    check_outputs([json_out], [verdicts])
    summary = review_summary(verdicts, reviewer)
    if not summary["verdicts"]:
        raise ConfigError(f"{verdicts}: no verdicts" + (f" by {reviewer}" if reviewer else ""))
    typer.echo(markdown(summary), nl=False)
    if json_out:
        atomic_write_json(json_out, summary)


def export(
    source: Source,
    out: Annotated[Path, typer.Option("--out", "-o", help="Markdown file to write.")],
    n: Size = 100,
    seed: Seed = 0,
    stratify: Stratify = "auto",
    judge: Judge = None,
) -> None:
    """Write the sample as Markdown (judge verdicts left out), for reading offline."""
    from dualview.io.atomic import atomic_write_text
    from dualview.review.items import load_review_set, to_markdown

    check_outputs([out], _read_files(source, judge))
    review = load_review_set(source, n, seed, stratify, judge)
    atomic_write_text(out, to_markdown(review.items))
    console.print(f"wrote {len(review.items)} items: {out}")


def register(app: typer.Typer) -> None:
    """Add the ``review`` command group."""
    review_app.command("serve")(serve)
    review_app.command("stats")(stats)
    review_app.command("export")(export)
    app.add_typer(review_app, name="review")
