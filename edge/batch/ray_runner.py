"""Run a batch on a Ray cluster: one task per flight, or per segment of a long flight (edge/batch/segments.py).

Every node needs AirPatrol installed (``pip install 'airpatrol[cluster]'``), the weights, and the videos at the same
path (a shared file system); results go to the run folders (on the shared file system too) and to the database.
Ray keeps a worker process alive between tasks, so the pipeline cached by ``edge.batch.worker`` is loaded once per
worker. Retries are made here, not by Ray, so that every attempt and its error are reported per file; a task lost
with its worker or node (``RayError``) counts as a retryable failure.

``address``: ``local`` starts a private Ray instance on this machine with ``num_cpus`` CPUs; anything else (``auto``,
``ray://head:10001``, ``head:6379``) is given to ``ray.init(address=...)``. An already initialised Ray is used as is.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from edge.batch.local import ProgressBar, should_retry
from edge.batch.plan import BatchInputError, BatchItem, ItemResult
from edge.batch.worker import BatchJob, init_worker, process_item

_initialised = False  # per Ray worker process
if TYPE_CHECKING:
    from edge.batch.segments import SegmentOutput

WAIT, RETRY = "wait", "retry"  # a segmented flight's state after one of its segments came back


def _ensure_worker(job: BatchJob) -> None:
    global _initialised
    if not _initialised:
        init_worker(job.threads)
        _initialised = True


def _node_id() -> str:
    """The Ray node this task runs on: recorded in the run's manifest (``batch.json``), to see where work went."""
    import ray

    return ray.get_runtime_context().get_node_id()


def _task(item: BatchItem, job: BatchJob, attempt: int) -> ItemResult:
    _ensure_worker(job)
    return process_item(item, job, attempt, node=_node_id())


def import_ray():
    try:
        import ray
    except ImportError:
        raise BatchInputError("--ray needs Ray: pip install 'airpatrol[cluster]' (or 'ray[default]>=2.9')") from None
    return ray


def connect(address: str, num_cpus: int | None = None) -> bool:
    """Initialise Ray; True when this call started it (and so should shut it down)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    env = {"env_vars": {"YOLO_OFFLINE": "1"}}
    if address == "local":
        ray.init(num_cpus=num_cpus, include_dashboard=False, runtime_env=env, log_to_driver=False)
    else:
        try:
            ray.init(address=address, runtime_env=env, log_to_driver=False)
        except ConnectionError as exc:
            raise BatchInputError(
                f"--ray {address}: cannot connect to a Ray cluster ({str(exc).splitlines()[0]})"
            ) from None
    return True


def gpus_per_task(job: BatchJob, requested: float | None) -> float:
    """GPUs each task reserves: as asked, else 1 when the pipeline will run on CUDA (device cuda, or auto on a
    cluster that has GPUs), else 0."""
    ray = import_ray()
    if requested is not None:
        return requested
    device = job.config.get("device", "auto")
    if device == "cuda":
        return 1.0
    if device == "auto" and ray.cluster_resources().get("GPU", 0) > 0:
        return 1.0
    return 0.0


def _segment_task(video: str, job: BatchJob, segment) -> tuple[SegmentOutput, str]:
    """The segment's output, and the node that ran it."""
    _ensure_worker(job)
    from edge.batch.segments import run_segment

    return run_segment(video, job.config, segment), _node_id()


def segments_for(item: BatchItem, segment_s: float | None, overlap_s: float):
    """The segments of a flight worth splitting (long, with a flight log); None for one task per flight."""
    if not segment_s:
        return None
    from edge.batch.segments import plan_segments
    from vision.source import VideoFileSource
    from vision.telemetry.poses import find_sidecar_srt

    if find_sidecar_srt(item.video) is None:
        return None  # without per-frame poses the ground frame depends on the run's first frame
    try:
        head = VideoFileSource(item.video)
    except ValueError:
        return None  # the per-flight task reports the error
    info = head.info
    head.close()
    if not info.frame_count or info.frame_count < 1.5 * segment_s * info.fps:
        return None
    return plan_segments(info.frame_count, info.fps, segment_s, overlap_s)


def run_ray(
    items: list[BatchItem],
    job: BatchJob,
    address: str = "auto",
    retries: int = 2,
    progress: bool = True,
    num_cpus: int | None = None,
    cpus_per_task: float = 1.0,
    gpus: float | None = None,
    segment_s: float | None = None,
    overlap_s: float = 3.0,
) -> list[ItemResult]:
    """Results in the order of ``items``. ``segment_s``: split flights longer than 1.5 x this (with a flight log)
    into segments of about this length, ``overlap_s`` of warm-up each (edge/batch/segments.py)."""
    ray = import_ray()
    started = connect(address, num_cpus)
    try:
        n_gpus = gpus_per_task(job, gpus)
        if n_gpus == 0 and job.config.get("device", "auto") == "auto":
            # a task that reserved no GPU must not use one it happens to see
            job = replace(job, config={**job.config, "device": "cpu"})
        if job.threads is None:
            job = replace(job, threads=max(1, int(cpus_per_task)))
        opts = dict(num_cpus=cpus_per_task, num_gpus=n_gpus, max_retries=0)
        flight_task = ray.remote(_task).options(**opts)
        segment_task = ray.remote(_segment_task).options(**opts)
        results: dict[int, ItemResult] = {}
        refs: dict = {}  # ObjectRef -> (item index, segment or None, attempt)
        split: dict[int, _Split] = {}
        for i, item in enumerate(items):
            segments = segments_for(item, segment_s, overlap_s)
            if segments is None:
                refs[flight_task.remote(item, job, 1)] = (i, None, 1)
                continue
            try:
                sp = _Split.start(item, job, segments)
            except Exception as exc:  # unreadable file, database down: reported like a task's failure
                results[i] = ItemResult(str(item.video), "failed", 1, error=f"{type(exc).__name__}: {exc}"[:500])
                continue
            if sp.result is not None:  # already done
                results[i] = sp.result
                continue
            split[i] = sp
            for seg in segments:
                refs[segment_task.remote(str(item.video), job, seg)] = (i, seg, 1)
        bar = ProgressBar(len(items), "batch (ray)", progress)
        for r in results.values():
            bar.update(r)
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                result: ItemResult | str
                for ref in ready:
                    i, seg, attempt = refs.pop(ref)
                    if seg is None:
                        result = _get(ray, ref, items[i], attempt)
                        if should_retry(result, retries):
                            refs[flight_task.remote(items[i], job, attempt + 1)] = (i, None, attempt + 1)
                            continue
                    else:
                        if i in results:
                            continue  # another segment of this flight already failed it
                        result = split[i].collect(ray, ref, seg, attempt, retries)
                        if result == RETRY:
                            refs[segment_task.remote(str(items[i].video), job, seg)] = (i, seg, attempt + 1)
                        if not isinstance(result, ItemResult):
                            continue
                    results[i] = result
                    bar.update(result)
        finally:
            bar.close()
            for ref in refs:
                ray.cancel(ref)
        return [results[i] for i in range(len(items))]
    finally:
        if started:
            ray.shutdown()


def _get(ray, ref, item: BatchItem, attempt: int) -> ItemResult:
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as exc:  # worker or node lost, task cancelled
        return ItemResult(
            str(item.video),
            "failed",
            attempt,
            retryable=True,
            error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}",
        )


class _Split:
    """A flight processed as segments: checksum and skip on the driver, outputs collected, then stitched and
    written (run folder + database) on the driver."""

    sha: str  # set by start()

    def __init__(self, item: BatchItem, job: BatchJob, segments):
        self.item, self.job, self.segments = item, job, segments
        self.outputs: dict[int, SegmentOutput] = {}
        self.nodes: dict[int, str] = {}  # segment index -> the Ray node that ran it
        self.result: ItemResult | None = None
        self.attempts = 1
        self.wall0 = time.perf_counter()

    @classmethod
    def start(cls, item: BatchItem, job: BatchJob, segments) -> "_Split":
        from edge.batch.plan import sha256_file
        from edge.batch.worker import done_before

        sp = cls(item, job, segments)
        sp.sha = sha256_file(item.video)
        prior = done_before(job, item.video, sp.sha)
        if prior is not None:
            sp.result = ItemResult(str(item.video), "skipped", 0, sha256=sp.sha, note=prior[0], run_id=prior[1])
        return sp

    def collect(self, ray, ref, seg, attempt: int, retries: int) -> ItemResult | str:
        """The item's result once every segment is in (or one failed for good); else WAIT, or RETRY the segment."""
        self.attempts = max(self.attempts, attempt)
        try:
            self.outputs[seg.index], self.nodes[seg.index] = ray.get(ref)
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None)
            retryable = not isinstance(cause, ValueError)
            text = str(cause if cause is not None else exc).strip().splitlines()
            if retryable and attempt <= retries:
                return RETRY
            return ItemResult(
                str(self.item.video),
                "failed",
                attempt,
                sha256=self.sha,
                retryable=retryable,
                error=f"segment {seg.index}: {text[0][:300] if text else type(exc).__name__}",
            )
        if len(self.outputs) < len(self.segments):
            return WAIT
        return self._finish()

    def _finish(self) -> ItemResult:
        from edge.batch.plan import run_folder
        from edge.batch.segments import stitch, write_run
        from edge.batch.worker import MANIFEST
        from tracking.config import PipelineConfig

        job, item = self.job, self.item
        result = ItemResult(str(item.video), "failed", self.attempts, sha256=self.sha)
        try:
            outputs = list(self.outputs.values())
            sinks = []
            if job.database_url:
                from db.sink import DatabaseSink
                from edge.batch import records

                video_id, flight_id, result.note = records.prepare_video(
                    job.database_url, item.video, self.sha, job.device_serial
                )
                sinks.append(DatabaseSink(job.database_url, video_id=video_id, flight_id=flight_id))
            folder = run_folder(Path(job.out_root), item.video, self.sha, job.baseline)
            processing_s = time.perf_counter() - self.wall0
            outcome = write_run(
                item.video,
                folder,
                PipelineConfig.model_validate(job.config),
                outputs,
                stitch(outputs),
                sinks,
                processing_s,
                self.wall0,
            )
            run_id = sinks[0].run_id if sinks else None
            (outcome.out_dir / MANIFEST).write_text(
                json.dumps(
                    {
                        "sha256": self.sha,
                        "video": str(item.video),
                        "run_id": run_id,
                        "attempt": self.attempts,
                        "segments": len(self.segments),
                        "segment_nodes": [self.nodes[s.index] for s in self.segments],
                    },
                    indent=2,
                )
            )
            if sinks:
                from edge.batch import records

                assert job.database_url is not None and sinks[0].video_id is not None  # the sink is made with both
                records.update_video_metadata(job.database_url, sinks[0].video_id, outcome.summary["video"])
            c = outcome.summary["counts"]
            result.status, result.out_dir, result.run_id = "done", str(outcome.out_dir), run_id
            result.frames, result.tracks, result.fps = c["frames"], c["tracks"], outcome.summary["timings"]["fps"]
            result.note = f"{len(self.segments)} segments" + (f"; {result.note}" if result.note else "")
        except Exception as exc:
            result.error = f"stitching: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            result.retryable = False
        return result
