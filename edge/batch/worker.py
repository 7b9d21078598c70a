"""The work of one file, the same in a local worker process and in a Ray task.

checksum -> already done? (database, else the run folder) -> pipeline (loaded once per worker process, reused)
-> ``process_video`` with the file sinks (+ ``DatabaseSink``) -> ``batch.json`` manifest in the run folder.
Errors never escape: they come back as a failed ``ItemResult`` saying whether another attempt could help.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from edge.batch.plan import BatchItem, ItemResult, run_folder, sha256_file

if TYPE_CHECKING:  # the pipeline (and torch) load in the worker process, when the first item runs
    from tracking.pipeline import Pipeline

MANIFEST = "batch.json"


@dataclass(frozen=True)
class BatchJob:
    """Settings shared by every file of a batch (plain values: it travels to worker processes and Ray tasks)."""

    config: dict  # PipelineConfig, JSON mode
    out_root: str
    database_url: str | None = None
    write_video: bool = False
    batch_size: int = 1
    force: bool = False  # process even files already done
    device_serial: str | None = None  # aircraft of the flight logs that do not name it
    threads: int | None = None  # torch/OpenCV threads per worker (None: leave the libraries' default)

    @property
    def baseline(self) -> bool:
        return bool(self.config.get("baseline"))


_PIPELINES: dict[str, Pipeline] = {}  # per process: config JSON -> Pipeline


def init_worker(threads: int | None) -> None:
    """Process start-up: keep N workers x M threads within the machine's cores."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    if threads:
        import cv2
        import torch

        torch.set_num_threads(threads)
        cv2.setNumThreads(threads)


def cached_pipeline(config: dict):
    """The worker's pipeline for ``config``: models load once per process, not once per file."""
    from tracking.config import PipelineConfig
    from tracking.pipeline import Pipeline

    key = json.dumps(config, sort_keys=True)
    if key not in _PIPELINES:
        _PIPELINES[key] = Pipeline(PipelineConfig.model_validate(config))
    pipe = _PIPELINES[key]
    pipe.detector.tiles_run = 0  # per-run statistic (Pipeline.reset resets the models' state, not this counter)
    return pipe


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return (
        f"{type(exc).__name__}: {text}"[:500] if not isinstance(exc, ValueError) else (text or type(exc).__name__)[:500]
    )


def done_folder(out_root: Path, sha: str, baseline: bool) -> Path | None:
    """The finished run folder of this content, whatever the video was called then (``*-<sha[:12]>``)."""
    for folder in sorted(Path(out_root).glob(f"*-{sha[:12]}{'-baseline' if baseline else ''}")):
        try:
            if json.loads((folder / MANIFEST).read_text()).get("sha256") == sha and (folder / "summary.json").is_file():
                return folder
        except (OSError, ValueError):
            continue
    return None


def done_before(job: BatchJob, video: Path, sha: str) -> tuple[str, int | None] | None:
    """(note, run id) when this content was processed before - by the database when there is one, else by the
    run folder's manifest; None when it must be processed (or ``job.force``)."""
    if job.force:
        return None
    if job.database_url:
        from edge.batch import records

        run = records.completed_run_id(job.database_url, sha, job.baseline)
        return None if run is None else (f"already in the database (run {run})", run)
    folder = done_folder(Path(job.out_root), sha, job.baseline)
    return None if folder is None else (f"already done: {folder}", None)


def process_item(item: BatchItem, job: BatchJob, attempt: int = 1, node: str | None = None) -> ItemResult:
    """``node``: the Ray node the task runs on (recorded in the manifest; None in a local worker process)."""
    result = ItemResult(video=str(item.video), status="failed", attempts=attempt)
    t0 = time.perf_counter()
    try:
        result.sha256 = sha = sha256_file(item.video)
        prior = done_before(job, item.video, sha)
        if prior is not None:
            result.status, (result.note, result.run_id) = "skipped", prior
            return result
        folder = run_folder(Path(job.out_root), item.video, sha, job.baseline)
        sink = None
        if job.database_url:
            from db.sink import DatabaseSink
            from edge.batch import records

            video_id, flight_id, result.note = records.prepare_video(
                job.database_url, item.video, sha, job.device_serial
            )
            sink = DatabaseSink(job.database_url, video_id=video_id, flight_id=flight_id)

        from edge.runner import process_video
        from tracking.config import PipelineConfig

        outcome = process_video(
            item.video,
            folder,
            PipelineConfig.model_validate(job.config),
            pipeline=cached_pipeline(job.config),
            extra_sinks=[sink] if sink else None,
            write_video=job.write_video,
            progress=False,
            batch_size=job.batch_size,
        )
        s = outcome.summary
        (outcome.out_dir / MANIFEST).write_text(
            json.dumps(
                {
                    "sha256": sha,
                    "video": str(item.video),
                    "run_id": sink.run_id if sink else None,
                    "attempt": attempt,
                    "host": os.uname().nodename,
                    "pid": os.getpid(),
                    **({"ray_node": node} if node else {}),
                },
                indent=2,
            )
        )
        if sink is not None:
            from edge.batch import records

            assert job.database_url is not None and sink.video_id is not None  # a sink is made with both
            records.update_video_metadata(job.database_url, sink.video_id, s["video"])
            result.run_id = sink.run_id
        result.status, result.out_dir = "done", str(outcome.out_dir)
        if s.get("status") == "incomplete":  # damaged input: done, but never silently (see edge/completeness.py)
            from edge.completeness import describe

            result.note = f"INCOMPLETE: {describe(s)}; {outcome.out_dir}"
        result.frames, result.tracks = s["counts"]["frames"], s["counts"]["tracks"]
        result.fps = s["timings"]["fps"]
    except Exception as exc:  # reported per file; the batch goes on
        result.status, result.error = "failed", _one_line(exc)
        result.retryable = not isinstance(exc, ValueError)  # bad input fails the same way every time
    finally:
        result.extra["seconds"] = round(time.perf_counter() - t0, 2)
    return result
