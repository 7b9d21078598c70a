"""Sinks: where pipeline results go. Each implements ``tracking.types.Sink``."""
from edge.sinks.files import GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink
from edge.sinks.video import AnnotatedVideoSink

__all__ = ["AnnotatedVideoSink", "GeoJSONSink", "MOTSink", "TrackCSVSink", "TrackSummarySink"]
