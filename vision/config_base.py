"""The base of every stage's settings: a key the stage does not know is an error, not silently ignored.

A misspelt or outdated setting in a config file, an ``AIRPATROL_*`` variable or a benchmark's override would
otherwise leave the default in place while the user believes it changed; ``airpatrol process --config`` reports it
as ``FILE: invalid setting pipeline.detector.any_heading.X: Extra inputs are not permitted``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StageConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
