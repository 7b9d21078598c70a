"""Relational storage of flights, telemetry, runs and results."""
