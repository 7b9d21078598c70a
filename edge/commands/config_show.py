"""`airpatrol config`: print the effective configuration (defaults < file < environment) as YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml

from edge.commands.errors import user_errors


@user_errors
def cli_config(
    config: Annotated[Optional[Path], typer.Option(help="YAML/JSON config file to merge")] = None,
) -> None:
    """Print the effective configuration; save it to a file, edit, and pass it back with --config."""
    from edge.config import load_settings

    typer.echo(yaml.safe_dump(load_settings(config).model_dump(mode="json"), sort_keys=False))
