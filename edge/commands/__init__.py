"""One module per `airpatrol` command."""
