"""Sinks: where pipeline results go. Each implements ``tracking.types.Sink``; ``edge.sinks.loop`` feeds them.

The sink classes are imported lazily, so what needs only the sink loop (the live service) does not load the video
encoder and the file writers.
"""

from __future__ import annotations

_EXPORTS = {
    "GeoJSONSink": "edge.sinks.files",
    "MOTSink": "edge.sinks.files",
    "TrackCSVSink": "edge.sinks.files",
    "TrackSummarySink": "edge.sinks.files",
    "AnnotatedVideoSink": "edge.sinks.video",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'edge.sinks' has no attribute {name!r}")


__all__ = [*_EXPORTS]
