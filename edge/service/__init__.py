"""`airpatrol serve`: the edge service (FastAPI + uvicorn). Live streams in, tracks/speeds/violations out.

Kept import-light on purpose: ``edge.config`` imports :mod:`edge.service.config`; the web stack is imported only by
:func:`edge.service.app.create_app` and the CLI.
"""
