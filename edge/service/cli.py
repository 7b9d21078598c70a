"""`airpatrol serve`: run the edge service with uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edge.commands.errors import user_errors


@user_errors
def cli_serve(
    host: Annotated[
        Optional[str], typer.Option(help="address to listen on (default 127.0.0.1; 0.0.0.0 for the network)")
    ] = None,
    port: Annotated[Optional[int], typer.Option(help="TCP port (default 8000)")] = None,
    config: Annotated[
        Optional[Path], typer.Option(help="YAML/JSON config file (sections pipeline, service, ...)")
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error")] = "info",
) -> None:
    """Serve live streams, uploads and batch jobs over HTTP/WebSocket (OpenAPI docs at /docs)."""
    import uvicorn

    from edge.config import load_settings
    from edge.service.app import create_app
    from edge.service.logconf import log_config

    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ValueError(f"--log-level {log_level}: expected debug, info, warning or error")
    overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = load_settings(config, overrides)
    logging_config = log_config(log_level.upper())
    import logging.config

    logging.config.dictConfig(logging_config)  # the app logs while it is built, before uvicorn configures logging
    app = create_app(settings)
    app.state.ctx.preload()  # bad weights: one clear line now, not an error at the first stream
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    typer.echo(
        f"AirPatrol edge service on http://{shown}:{settings.port} (API docs: http://{shown}:{settings.port}/docs)"
    )
    # A model loading for a new stream can hold the GIL for seconds on a busy CPU: a generous WebSocket ping timeout
    # keeps the other devices' connections from being dropped meanwhile.
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=logging_config,
        timeout_graceful_shutdown=30,
        ws_max_size=settings.service.max_push_frame_bytes + 64 * 1024,
        ws_ping_interval=20.0,
        ws_ping_timeout=60.0,
        proxy_headers=False,
    )
