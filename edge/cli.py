"""The `airpatrol` command line. Each command lives in its own module; this file only registers them."""
from __future__ import annotations

import typer

from edge.commands import demo as demo_cmd
from edge.commands import process as process_cmd

app = typer.Typer(
    name="airpatrol",
    help="AirPatrol: vehicles, tracks and speeds from drone video.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("process")(process_cmd.cli_process)
app.command("demo")(demo_cmd.cli_demo)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
