"""Fault tests reuse the service tests' fixtures: seeded template database, settings, the fake-detector clip."""
from tests.edge.service.conftest import clip, settings_factory, template_db  # noqa: F401
