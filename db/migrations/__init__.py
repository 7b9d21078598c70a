"""Alembic migrations of the AirPatrol schema (run with `airpatrol db upgrade`)."""
