"""The `airpatrol` command line. Each command lives in its own module; this file only registers them."""
from __future__ import annotations

import typer

from edge.batch.cli import cli_batch
from edge.commands import demo as demo_cmd
from edge.commands.client import cli_stream, cli_upload
from edge.commands.config_show import cli_config
from edge.commands import process as process_cmd
from edge.service.cli import cli_serve
from dashboard.cli import cli_user_add
from db import cli as db_cli
from tracking.evaluation.report import cli_eval
from vision.synth.cli import cli_synth
from vision.detector.cli import cli_train_detector
from vision.road.cli import cli_train_road

app = typer.Typer(
    name="airpatrol",
    help="AirPatrol: vehicles, tracks and speeds from drone video.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("process")(process_cmd.cli_process)
app.command("demo")(demo_cmd.cli_demo)
app.command("batch")(cli_batch)
app.command("serve")(cli_serve)
app.command("config")(cli_config)
app.command("upload")(cli_upload)
app.command("stream")(cli_stream)
app.command("import-log")(db_cli.cli_import_log)
app.command("synth")(cli_synth)
app.command("eval")(cli_eval)
app.command("train-detector")(cli_train_detector)
app.command("train-road")(cli_train_road)
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
