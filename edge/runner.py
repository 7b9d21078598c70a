"""Process one recorded video end to end: source -> pipeline -> sinks, with progress and a run summary.

The CLI (`airpatrol process`, `airpatrol demo`) and the batch runner call ``process_video``; the live service drives
the same ``Pipeline`` frame by frame. All of them feed their sinks through the one loop in ``edge/sinks/loop.py``.
"""

from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from edge.completeness import completeness, telemetry_losses, video_losses
from edge.rundir import RunDirectory
from edge.sinks import AnnotatedVideoSink, GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink
from edge.sinks.loop import RunSinks
from tracking.config import PipelineConfig
from tracking.linked_run import LinkReport, hold, link_results, with_images
from tracking.pipeline import Pipeline
from tracking.types import RunInfo, Sink
from vision.run_inputs import record as record_input
from vision.runtime import runtime_label
from vision.source import SourceInfo, open_source
from vision.types import Frame
from vision.yolo_weights import detector_weights_label


class HasStats(Protocol):
    """What the summary reads from a run: one pipeline's stage statistics, or a segmented run's merged ones."""

    def stats(self) -> dict[str, Any]: ...


@dataclass
class RunOutcome:
    out_dir: Path
    summary: dict[str, Any]


def load_poses(video: Path, telemetry: Path | None, info: SourceInfo, time_offset_s: float = 0.0):
    """Camera poses for the video: the given flight log, else a DJI .SRT next to the video, else None."""
    poses, path, _ = load_poses_and_log(video, telemetry, info, time_offset_s)
    return poses, path


def load_poses_and_log(video: Path, telemetry: Path | None, info: SourceInfo, time_offset_s: float = 0.0):
    """As :func:`load_poses`, plus the parsed flight log (whether it was complete, where it stopped)."""
    from vision.telemetry import load_flight_log
    from vision.telemetry.poses import PoseTrack, TelemetryCoverageError, find_sidecar_srt

    path = telemetry or find_sidecar_srt(video)
    if path is None:
        return None, None, None
    log = load_flight_log(path)
    poses = PoseTrack.from_flight_log(log, None, time_offset_s=time_offset_s)
    duration = info.duration_s or ((info.frame_count or 0) / info.fps)
    if duration and not poses.covers(duration):
        raise TelemetryCoverageError(
            f"{path}: telemetry covers {poses.duration_s:.1f} s but the video {video.name} lasts {duration:.1f} s"
        )
    return poses, path, log


def process_video(
    video: str | Path,
    out_dir: str | Path,
    config: PipelineConfig | None = None,
    telemetry: str | Path | None = None,
    pipeline: Pipeline | None = None,
    extra_sinks: list[Sink] | None = None,
    write_video: bool = True,
    progress: bool = True,
    max_frames: int | None = None,
    batch_size: int = 1,
    speed_limit_kmh: float | None = None,
) -> RunOutcome:
    """Run ``config``'s pipeline over ``video``; files in ``out_dir``. ``batch_size`` > 1 detects that many frames
    per model call (edge/batch/batched.py: same results, faster on a GPU); frames are decoded in a thread."""
    from edge.batch.decode import frame_results

    config = config or PipelineConfig()
    video = Path(video)
    wall0 = time.perf_counter()
    with open_source(video, max_frames=max_frames) as source:
        info = source.info
        poses, tel_path, flight_log = load_poses_and_log(video, Path(telemetry) if telemetry else None, info)
        pipeline = pipeline or Pipeline(config)
        link = config.linking.enabled and not config.baseline
        # a high frame rate costs more frames, not more vehicles: every n-th frame analysed, the others interpolated
        # once the flight is linked (tracking/frame_rate.py); a run streamed to its sinks analyses every frame
        step = config.recorded_step(info.fps, info.width, info.height)
        between: list[Frame] = []
        pipeline.reset(info.width, info.height, info.fps / step, poses, recorded=True, frame_step=step)
        run = RunInfo(
            str(video),
            info.width,
            info.height,
            info.fps,
            info.frame_count,
            config.model_dump(mode="json"),
            detector_weights_label(pipeline.detector),
            pipeline.mode,
            pipeline.device,
        )
        rundir = RunDirectory(out_dir)
        with rundir as tmp:
            file_sinks: list[Sink] = [MOTSink(tmp), TrackCSVSink(tmp), TrackSummarySink(tmp), GeoJSONSink(tmp)]
            if write_video:
                file_sinks.append(AnnotatedVideoSink(tmp, speed_limit_kmh=speed_limit_kmh))

            link_report: LinkReport | None = None

            def summarize() -> dict[str, Any]:
                summary = _summary(
                    run, info, pipeline, file_sinks, sinks.loop_s, time.perf_counter() - wall0, tel_path, rundir.final
                )
                duration = info.duration_s or ((info.frame_count or 0) / info.fps)
                summary.update(
                    completeness(video_losses(source) + telemetry_losses(flight_log, poses, duration, info.fps))
                )
                # the pieces of one vehicle's path joined over the flight (tracking/linking.py); None: not linked
                summary["linking"] = link_report.as_dict() if link_report is not None else None
                summary["analysis_rate"] = {
                    "every_n_frames": step,
                    "fps": round(info.fps / step, 3),
                    "frames_interpolated": len(between),
                }
                seen_s = (summary["counts"]["frames"] + len(between)) / info.fps  # the video's time processed
                # the flight cost target's measure (a 5-minute 1080p flight in <= 3x its duration, issue 32)
                summary["timings"]["x_duration"] = round(sinks.loop_s / seen_s, 3) if seen_s > 0 else None
                return summary

            with RunSinks(run, file_sinks, extra_sinks, rundir) as sinks:
                total = min(info.frame_count or 0, max_frames or 10**12) or None
                if total and step > 1:
                    total = -(-total // step)  # the frames analysed
                bar = tqdm(total=total, unit="frame", desc=video.name[:24], disable=not progress, dynamic_ncols=True)
                with frame_results(pipeline, source, batch_size, step=step, between=between) as results:
                    if link:  # the whole flight first, then the sinks: every sink gets the linked tracks
                        t0 = time.perf_counter()
                        held = hold(sinks.watched(results), bar)
                        bar.close()
                        link_report = link_results(held.results, info.width, info.height, config.linking)
                        held = held.with_between(between)
                        sinks.loop_s += time.perf_counter() - t0
                        bar = tqdm(
                            total=len(held.results),
                            unit="frame",
                            desc="writing",
                            disable=not progress,
                            dynamic_ncols=True,
                        )
                        if write_video:  # the annotated video draws on the frames: decoded a second time
                            with open_source(video, max_frames=max_frames) as again:
                                sinks.feed(with_images(held, again), bar, watchers=False)
                        else:  # files and database need no pixels
                            sinks.feed(held.results, bar, watchers=False)
                    else:
                        sinks.feed(results, bar)
                summary = sinks.finish(summarize, tmp / "summary.json")
            final = rundir.commit()
    return RunOutcome(final, summary)


def _summary(
    run: RunInfo,
    info: SourceInfo,
    pipeline: HasStats,
    sinks: list[Sink],
    loop_s: float,
    wall_s: float,
    telemetry: Path | None,
    run_dir: Path,
) -> dict[str, Any]:
    """The run's ``summary.json``. Its inputs (video, flight log) are recorded by absolute path and by path relative
    to ``run_dir``, the run's final folder, so that `import-run` finds them from any folder (vision/run_inputs.py)."""
    import statistics

    import torch
    import ultralytics

    stats = pipeline.stats()
    summ = next((s for s in sinks if isinstance(s, TrackSummarySink)), None)
    geo = next((s for s in sinks if isinstance(s, GeoJSONSink)), None)
    rows = next((s for s in sinks if isinstance(s, TrackCSVSink)), None)
    speeds = summ.speeds if summ else []
    n = max(1, stats["frames"])
    return {
        "source": run.source,
        "status": "complete",  # or "incomplete", with "losses": see edge/completeness.py
        "losses": [],
        "mode": run.mode,
        "video": {**asdict(info), **_recorded_video(info.path, run_dir)},
        **_recorded_telemetry(telemetry, run_dir),
        "weights": run.weights,  # name and hash (vision.yolo_weights.weights_label)
        "device": run.device,
        # a segmented run's merged statistics have no detector: edge/batch/segments.py writes the segments' runtime
        "detector_runtime": runtime_label(getattr(pipeline, "detector", None)),
        "config": run.config,
        "counts": {
            "frames": stats["frames"],
            "tracks": summ.counts["tracks"] if summ else stats["tracks"],
            "vehicles": summ.counts["vehicles"] if summ else None,  # db/vehicles.py: what every page counts
            "moving_tracks": summ.counts["moving"] if summ else None,
            "stationary_tracks": summ.counts["stationary"] if summ else None,
            # boxes on frames a track was lost on, filled between the frames it was seen on (tracker.fill_lost_gaps)
            "interpolated_boxes": rows.interpolated if rows else None,
        },
        "speed_kmh": {
            "median_of_moving": round(statistics.median(speeds), 2) if speeds else None,
            "max_of_moving": round(max(speeds), 2) if speeds else None,
        },
        "coordinate_system": geo.coordinate_system if geo else None,
        "scale": summ.scale.summary() if summ else None,
        "timings": {
            "wall_s": round(wall_s, 2),
            "processing_s": round(loop_s, 2),
            "fps": round(stats["frames"] / loop_s, 2) if loop_s > 0 else None,
            "ms_per_frame": round(1000 * loop_s / n, 2),
            "ms_per_frame_by_stage": stats["ms_per_frame_by_stage"],
            "warm_up_s": stats.get("warm_up_s"),  # CUDA start-up before the frame loop (Pipeline.warm_up)
        },
        "ego_motion_failures": stats["ego_motion_failures"],
        "detector_tiles": stats["detector_tiles"],
        "detector_scales": stats.get("detector_scales"),
        "looked_again": stats.get("looked_again"),  # turned crops of lost movers, boxes found (tracking/pipeline.py)
        "any_heading": stats.get("any_heading"),  # the any-heading detector: new boxes, kept at a predicted track
        "standing_held": stats.get("standing_held"),  # boxes that carried a standing vehicle (standing_hold)
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "ultralytics": ultralytics.__version__,
        },
    }


def _recorded_video(path: str, run_dir: Path) -> dict[str, str | None]:
    absolute, from_run = record_input(path, run_dir)
    return {"path": absolute, "path_from_run": from_run}


def _recorded_telemetry(path: Path | None, run_dir: Path) -> dict[str, str | None]:
    if path is None:
        return {"telemetry": None, "telemetry_from_run": None}
    absolute, from_run = record_input(path, run_dir)
    return {"telemetry": absolute, "telemetry_from_run": from_run}
