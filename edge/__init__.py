"""Entry points: the `airpatrol` command line, output sinks and (later) the live service."""
