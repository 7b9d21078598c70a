"""A long flight in segments on several Ray workers, stitched back into one run with consistent track ids.

Segment k owns frames [start, end). Its task seeks to ``start - warmup`` and runs the pipeline from there, so that
when it reaches ``start`` its tracker has confirmed the vehicles in view and its speed filter has a full window. The
warm-up frames are also the last frames of segment k-1: the two trackers saw the same vehicles there, and each track
of segment k is matched to the track of k-1 whose boxes overlap it most over those frames (mean IoU, Hungarian
assignment). Matched tracks keep the earlier id; the others get new ids. The stitched per-frame results then go
through the same sinks as ``process_video`` (run folder, database) - on the driver, without the annotated video.

Only flights with a flight log are split: each frame's ground frame then comes from its own camera pose, so speeds
and coordinates do not depend on where a segment starts. Without telemetry the ground frame is tied to the first
frame of the run (ego-motion chain, calibration points), so such flights stay one task. Frame indices come from
presentation times, which assumes a constant frame rate (what drone cameras record).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracking.frame_rate import analysed
from tracking.track_starts import from_first_frame
from tracking.types import FrameResult, TrackState
from vision.runtime import runtime_label
from vision.source import FrameSource, SourceError, SourceInfo, VideoFileSource
from vision.types import Frame
from vision.yolo_weights import detector_weights_label

# Two tracks are the same vehicle when their boxes overlap by this mean IoU over the frames both segments ran:
# a low bar with several common frames (small vehicles, boxes smoothed differently by two trackers), a higher one
# for a track the later segment only picked up at the end of its warm-up.
MIN_IOU, MIN_IOU_FEW_FRAMES = 0.3, 0.6
MIN_COMMON_FRAMES = 3


@dataclass(frozen=True)
class Segment:
    index: int
    start: int  # first frame this segment reports
    end: int  # one past its last frame
    warmup: int  # frames run before ``start`` (shared with the previous segment)


def plan_segments(frame_count: int, fps: float, segment_s: float, overlap_s: float) -> list[Segment]:
    """Equal segments of about ``segment_s`` seconds; each after the first starts ``overlap_s`` early."""
    n = max(1, math.ceil(frame_count / max(1.0, segment_s * fps)))
    bounds = [round(i * frame_count / n) for i in range(n + 1)]
    warm = max(MIN_COMMON_FRAMES, round(overlap_s * fps))
    return [Segment(i, bounds[i], bounds[i + 1], min(warm, bounds[i]) if i else 0) for i in range(n)]


class SeekingVideoSource(FrameSource):
    """Frames [first, last) of a video file, reached by seeking to the key frame before ``first`` (not by decoding
    everything before it). Index and time agree with ``VideoFileSource`` for constant-frame-rate video."""

    def __init__(self, path: str | Path, first: int, last: int):
        import av

        head = VideoFileSource(path)  # same checks and clear errors as a normal run
        self.info: SourceInfo = head.info
        head.close()
        self.path, self.first, self.last = Path(path), first, last
        self._container = av.open(str(self.path))
        self._stream = self._container.streams.video[0]
        self._stream.thread_type = "AUTO"

    def __iter__(self):
        import av

        fps, stream = self.info.fps, self._stream
        try:
            decoded = self._container.decode(stream)
            head = next(decoded)
            t0 = head.time or 0.0  # VideoFileSource's time origin: the first frame
            if self.first > 0:
                target = t0 + (self.first - 0.5) / fps
                assert stream.time_base is not None  # a decodable video stream has one
                self._container.seek(int(target / stream.time_base), stream=stream, backward=True, any_frame=False)
                decoded = self._container.decode(stream)
            else:
                decoded = itertools.chain([head], decoded)
            for vf in decoded:
                t = (vf.time if vf.time is not None else t0) - t0
                index = round(t * fps)
                if index < self.first:
                    continue
                if index >= self.last:
                    return
                yield Frame(index=index, t=t, image=vf.to_ndarray(format="bgr24"))
        except av.error.FFmpegError as exc:
            raise SourceError(f"{self.path}: video is damaged or truncated near frame {self.first} ({exc})") from None

    def close(self) -> None:
        self._container.close()


@dataclass
class SegmentOutput:
    segment: Segment
    results: list[FrameResult]  # frames [start - warmup, end), images dropped
    stats: dict[str, Any]
    weights: str
    mode: str
    device: str
    seconds: float
    # the runtime that ran the worker's detector ('auto' picks by the worker's CPU): summary.json -> detector_runtime
    detector_runtime: dict[str, Any] | None = None


def run_segment(video: str, config: dict, segment: Segment) -> SegmentOutput:
    """One segment with the worker's cached pipeline (runs in a Ray task)."""
    from edge.batch.worker import cached_pipeline
    from edge.runner import load_poses

    t0 = time.perf_counter()
    pipeline = cached_pipeline(config)
    results = []
    with SeekingVideoSource(video, segment.start - segment.warmup, segment.end) as source:
        info = source.info
        poses, _ = load_poses(Path(video), None, info)
        step = pipeline.config.recorded_step(info.fps, info.width, info.height)
        pipeline.reset(info.width, info.height, info.fps / step, poses, recorded=True, frame_step=step)
        # every step-th frame of the video (by its index: the segments' frames agree), as process_video; each
        # confirmed track reported from its first frame, as in a run of the whole video
        frames = analysed(source, step, []) if step > 1 else source
        for r in from_first_frame((pipeline.step(frame) for frame in frames), pipeline.report_lookback_frames()):
            slim = Frame(r.frame.index, r.frame.t, np.zeros((0, 0, 3), np.uint8), r.frame.pose)
            results.append(
                FrameResult(slim, r.tracks, None, r.metres_per_pixel, r.scale_source, r.timings_ms, r.scale_detail)
            )
    return SegmentOutput(
        segment,
        results,
        pipeline.stats(),
        detector_weights_label(pipeline.detector),
        pipeline.mode,
        pipeline.device,
        time.perf_counter() - t0,
        runtime_label(pipeline.detector),
    )


def merged_runtime(outputs: list[SegmentOutput]) -> dict[str, Any]:
    """The segments' detector runtime for the run's summary: theirs where they agree; where workers on different CPUs
    picked different runtimes ('auto'), runtime "mixed" and each segment's (their tracks may differ at the seams:
    docs/deployment.md pins the runtime for a mixed cluster)."""
    seen = [o.detector_runtime for o in sorted(outputs, key=lambda o: o.segment.index)]
    distinct = [r for k, r in enumerate(seen) if r not in seen[:k]]
    if len(distinct) == 1:
        return dict(distinct[0]) if distinct[0] is not None else runtime_label(None)
    return {"runtime": "mixed", "pixels_per_onnx_pixel": None, "segments": seen}


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match_tracks(earlier: list[FrameResult], later: list[FrameResult]) -> dict[int, int]:
    """{later track id: earlier track id} for tracks that are the same vehicle on the frames both segments ran."""
    from scipy.optimize import linear_sum_assignment

    boxes_a = {r.frame.index: {t.track_id: t.xyxy for t in r.tracks} for r in earlier}
    sums: dict[tuple[int, int], list[float]] = {}
    for r in later:
        a = boxes_a.get(r.frame.index)
        if a is None:
            continue
        for tb in r.tracks:
            for ida, box in a.items():
                iou = _iou(box, tb.xyxy)
                if iou > 0:
                    sums.setdefault((tb.track_id, ida), []).append(iou)
    pairs = [
        (b, a, sum(v) / len(v))
        for (b, a), v in sums.items()
        if sum(v) / len(v) >= (MIN_IOU if len(v) >= MIN_COMMON_FRAMES else MIN_IOU_FEW_FRAMES)
    ]
    if not pairs:
        return {}
    ids_b, ids_a = sorted({p[0] for p in pairs}), sorted({p[1] for p in pairs})
    cost = np.ones((len(ids_b), len(ids_a)))
    for id_b, id_a, m in pairs:
        cost[ids_b.index(id_b), ids_a.index(id_a)] = 1.0 - m
    rows, cols = linear_sum_assignment(cost)
    return {ids_b[r]: ids_a[c] for r, c in zip(rows, cols) if cost[r, c] < 1.0}


def between_frames(results: list[FrameResult], info: SourceInfo, step: int) -> list[Frame]:
    """The frames the segments skipped (every one whose index is no multiple of ``step``) up to the video's end."""
    if step <= 1 or not results:
        return []
    last = results[-1].frame.index + step - 1
    if info.frame_count:
        last = min(last, info.frame_count - 1)
    empty = np.zeros((0, 0, 3), np.uint8)
    return [Frame(i, i / info.fps, empty) for i in range(last + 1) if i % step]


def stitch(outputs: list[SegmentOutput]) -> list[FrameResult]:
    """The run's results: each segment's own frames, track ids made consistent across segments."""
    outputs = sorted(outputs, key=lambda o: o.segment.index)
    stitched: list[FrameResult] = []
    next_id = 1
    previous: list[FrameResult] = []  # the earlier segment's results with global ids
    for out in outputs:
        seg = out.segment
        with_global: list[FrameResult] = []
        mapping = match_tracks(previous, out.results) if previous else {}  # local id -> global id
        for r in out.results:
            tracks = []
            for t in r.tracks:
                if t.track_id not in mapping:
                    mapping[t.track_id] = next_id
                    next_id += 1
                tracks.append(_with_id(t, mapping[t.track_id]))
            stitched_result = FrameResult(
                r.frame, tracks, None, r.metres_per_pixel, r.scale_source, r.timings_ms, r.scale_detail
            )
            # the tracks the segment's tracker had lost, by their run-wide ids (whole-flight linking fills a standing
            # vehicle's lost frames); each segment's ego-motion starts at its own first frame, so no to_first
            stitched_result.lost_ids = frozenset(mapping[i] for i in r.lost_ids if i in mapping)
            with_global.append(stitched_result)
        stitched += [r for r in with_global if seg.start <= r.frame.index < seg.end]
        previous = [r for r in with_global if r.frame.index < seg.end]
    return stitched


def _with_id(t: TrackState, track_id: int) -> TrackState:
    from dataclasses import replace

    return replace(t, track_id=track_id)


class _MergedStats:
    """What ``edge.runner._summary`` asks of a pipeline, for a run made of segments."""

    def __init__(self, outputs: list[SegmentOutput], results: list[FrameResult]):
        total = sum(o.stats["frames"] for o in outputs) or 1
        stages: dict[str, float] = {}
        for o in outputs:
            for k, v in o.stats["ms_per_frame_by_stage"].items():
                stages[k] = stages.get(k, 0.0) + v * o.stats["frames"] / total
        self._stats = {
            "frames": len(results),
            "tracks": len({t.track_id for r in results for t in r.tracks}),
            "ms_per_frame_by_stage": {k: round(v, 2) for k, v in stages.items()},
            "ego_motion_failures": sum(o.stats["ego_motion_failures"] for o in outputs),
            "detector_tiles": sum(o.stats["detector_tiles"] for o in outputs),
        }

    def stats(self) -> dict:
        return self._stats


def write_run(
    video: Path,
    out_dir: Path,
    config,
    outputs: list[SegmentOutput],
    results: list[FrameResult],
    extra_sinks: list | None,
    processing_s: float,
    wall0: float,
):
    """The stitched results through the file sinks (+ ``extra_sinks``) into ``out_dir``, through the same sink loop
    as ``process_video`` (``edge.sinks.loop``)."""
    from edge.rundir import RunDirectory
    from edge.runner import RunOutcome, _summary
    from edge.sinks import GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink
    from edge.sinks.loop import RunSinks
    from tracking.frame_rate import with_between
    from tracking.linked_run import link_results
    from tracking.types import RunInfo
    from vision.telemetry.poses import find_sidecar_srt

    head = VideoFileSource(video)
    info = head.info
    head.close()
    first = min(outputs, key=lambda o: o.segment.index)
    run = RunInfo(
        str(video),
        info.width,
        info.height,
        info.fps,
        info.frame_count,
        config.model_dump(mode="json"),
        first.weights,
        first.mode,
        first.device,
    )
    rundir = RunDirectory(out_dir)
    with rundir as tmp:
        file_sinks = [MOTSink(tmp), TrackCSVSink(tmp), TrackSummarySink(tmp), GeoJSONSink(tmp)]

        def summarize() -> dict[str, Any]:
            summary = _summary(
                run,
                info,
                _MergedStats(outputs, results),
                file_sinks,
                processing_s,
                time.perf_counter() - wall0,
                find_sidecar_srt(video),
                rundir.final,
            )
            summary["segments"] = [
                {
                    "start": o.segment.start,
                    "end": o.segment.end,
                    "warmup": o.segment.warmup,
                    "seconds": round(o.seconds, 2),
                }
                for o in sorted(outputs, key=lambda o: o.segment.index)
            ]
            summary["linking"] = link_report.as_dict() if link_report is not None else None
            summary["detector_runtime"] = merged_runtime(outputs)
            return summary

        link_report = None
        if config.linking.enabled and not config.baseline:  # as process_video: the pieces joined over the flight
            link_report = link_results(results, info.width, info.height, config.linking)
            # the frames the segments skipped, their tracks interpolated (tracking/frame_rate.py)
            results, _ = with_between(
                results, between_frames(results, info, config.recorded_step(info.fps, info.width, info.height))
            )

        with RunSinks(run, file_sinks, extra_sinks, rundir) as sinks:
            sinks.feed(results)
            summary = sinks.finish(summarize, tmp / "summary.json")
        final = rundir.commit()
    return RunOutcome(final, summary)
