"""The `airpatrol` command line. Each command lives in its own module; this file only registers them.

The development tools (`synth`, `train-detector`, `train-road`: ``vision.synth``, ``vision.training``) are registered
lazily: their modules load only when one of them runs or `--help` lists them, so `airpatrol process`, `serve` or
`batch` never import training or simulation code.
"""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperGroup

from dashboard.cli import cli_user_add
from db import cli as db_cli
from edge.batch.cli import cli_batch
from edge.commands import demo as demo_cmd
from edge.commands import process as process_cmd
from edge.commands.client import cli_stream, cli_upload
from edge.commands.config_show import cli_config
from edge.service.cli import cli_serve
from tracking.evaluation.report import cli_eval
from tracking.study.cli import cli_study

# name -> (module, function) of the commands loaded on first use.
LAZY_COMMANDS = {
    "synth": ("vision.synth.cli", "cli_synth"),
    "train-detector": ("vision.training.detector.cli", "cli_train_detector"),
    "train-road": ("vision.training.road.cli", "cli_train_road"),
}
# The order `airpatrol --help` lists the commands in (lazy ones included).
HELP_ORDER = (
    "process",
    "demo",
    "batch",
    "serve",
    "config",
    "upload",
    "stream",
    "import-log",
    "synth",
    "eval",
    "study",
    "train-detector",
    "train-road",
    "import-run",
    "db",
    "user",
)


class LazyCommandsGroup(TyperGroup):
    """The top-level group, with :data:`LAZY_COMMANDS` built from their module when first asked for."""

    def list_commands(self, ctx) -> list[str]:
        names = [*super().list_commands(ctx), *(n for n in LAZY_COMMANDS if n not in self.commands)]
        return sorted(names, key=lambda n: HELP_ORDER.index(n) if n in HELP_ORDER else len(HELP_ORDER))

    def get_command(self, ctx, cmd_name: str):
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            module, function = LAZY_COMMANDS[cmd_name]
            single = typer.Typer(add_completion=False)
            single.command(cmd_name)(getattr(importlib.import_module(module), function))
            self.commands[cmd_name] = typer.main.get_command(single)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    name="airpatrol",
    help="AirPatrol: vehicles, tracks and speeds from drone video.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyCommandsGroup,
)

app.command("process")(process_cmd.cli_process)
app.command("demo")(demo_cmd.cli_demo)
app.command("batch")(cli_batch)
app.command("serve")(cli_serve)
app.command("config")(cli_config)
app.command("upload")(cli_upload)
app.command("stream")(cli_stream)
app.command("import-log")(db_cli.cli_import_log)
app.command("eval")(cli_eval)
app.command("study")(cli_study)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
db_app.command("upgrade")(db_cli.cli_db_upgrade)
db_app.command("backup")(db_cli.cli_db_backup)
db_app.command("restore")(db_cli.cli_db_restore)
app.add_typer(db_app, name="db")
app.command("import-run")(db_cli.cli_import_run)
user_app = typer.Typer(help="Dashboard users.", no_args_is_help=True)
user_app.command("add")(cli_user_add)
app.add_typer(user_app, name="user")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
