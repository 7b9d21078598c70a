"""Prometheus metrics of one service instance (its own registry, so several apps in one process never clash)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0)
STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class _CallbackCollector(Collector):
    """Values read at scrape time (queue depths, job counts, GPU memory) instead of kept up to date."""

    def __init__(self, fn: Callable[[], Iterable[GaugeMetricFamily]]):
        self.fn = fn

    def collect(self):
        yield from self.fn()


class ServiceMetrics:
    def __init__(self):
        self.registry = r = CollectorRegistry()
        self.frames_received = Counter(
            "airpatrol_stream_frames_received", "frames that reached a stream", ["stream"], registry=r
        )
        self.frames_processed = Counter(
            "airpatrol_stream_frames_processed", "frames the pipeline processed", ["stream"], registry=r
        )
        self.frames_dropped = Counter(
            "airpatrol_stream_frames_dropped",
            "frames dropped (oldest first) because processing fell behind",
            ["stream"],
            registry=r,
        )
        self.reconnects = Counter(
            "airpatrol_stream_reconnects", "pull stream connections after the first", ["stream"], registry=r
        )
        self.frame_errors = Counter(
            "airpatrol_stream_frame_errors", "frames the pipeline failed on", ["stream"], registry=r
        )
        self.fps = Gauge("airpatrol_stream_fps", "processed frames per second (last seconds)", ["stream"], registry=r)
        self.frame_latency = Histogram(
            "airpatrol_frame_latency_seconds", "frame arrival to result published", buckets=LATENCY_BUCKETS, registry=r
        )
        self.stage_latency = Histogram(
            "airpatrol_stage_latency_seconds",
            "pipeline time per frame and stage",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.ws_closed = Counter(
            "airpatrol_ws_protocol_closes", "WebSocket connections closed for a protocol error", ["code"], registry=r
        )
        self.upload_bytes = Counter("airpatrol_upload_bytes", "bytes received by resumable uploads", registry=r)
        self.jobs_finished = Counter("airpatrol_jobs_finished", "batch jobs finished", ["status"], registry=r)
        self._per_stream = (
            self.frames_received,
            self.frames_processed,
            self.frames_dropped,
            self.reconnects,
            self.frame_errors,
            self.fps,
        )
        r.register(_CallbackCollector(_gpu_memory))

    def add_callback(self, fn: Callable[[], Iterable[GaugeMetricFamily]]) -> None:
        self.registry.register(_CallbackCollector(fn))

    def new_stream(self, stream: str) -> None:
        """Create a stream's series at 0, so rates and alerts see them before the first drop or reconnect."""
        for metric in self._per_stream:
            metric.labels(stream)

    def forget_stream(self, stream: str) -> None:
        for metric in self._per_stream:
            try:
                metric.remove(stream)
            except KeyError:
                pass

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _gpu_memory():
    torch = sys.modules.get("torch")  # only when a model is loaded: never import torch just to say "no GPU"
    if torch is None or not torch.cuda.is_available():
        return
    g = GaugeMetricFamily("airpatrol_gpu_memory_bytes", "GPU memory held by PyTorch", labels=["device", "kind"])
    for i in range(torch.cuda.device_count()):
        g.add_metric([str(i), "allocated"], torch.cuda.memory_allocated(i))
        g.add_metric([str(i), "reserved"], torch.cuda.memory_reserved(i))
    yield g
