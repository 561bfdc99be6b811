"""``python -m dualview`` runs the CLI."""

from dualview.cli import main

main()
