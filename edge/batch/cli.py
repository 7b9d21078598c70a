"""`airpatrol batch PATHS...`: process many flights - on this machine (process pool) or on a Ray cluster."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from edge.commands.errors import user_errors


def preflight(config, database_url: str | None) -> None:
    """Fail before starting any worker when every file would fail the same way."""
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS, WeightsError

    weights = Path(config.detector.weights) if config.detector.weights else DEFAULT_DETECTOR_WEIGHTS
    if not weights.is_file():
        raise WeightsError(f"{weights}: detector weights not found")
    road = config.road
    if not config.baseline and road.enabled and not road.mask_file and not road.polygon:
        from vision.road.unet import DEFAULT_WEIGHTS as ROAD_WEIGHTS

        road_weights = Path(road.weights) if road.weights else ROAD_WEIGHTS
        if not road_weights.is_file():
            raise ValueError(f"{road_weights}: road U-Net weights not found (train them, or pass --no-road)")
    if config.detector.runtime != "torch" and config.device != "cuda":
        from vision.detection import resolve_device
        from vision.runtime import runtime_weights

        # export the ONNX model once here rather than in every worker at the same time
        runtime_weights(config.detector, resolve_device(config.device), DEFAULT_DETECTOR_WEIGHTS)
    if database_url:
        from db.migrate import require_current

        require_current(database_url)


def run_batch(
    paths: list[Path],
    config,
    out: Path,
    database_url: str | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    retries: int = 2,
    write_video: bool = False,
    batch_size: int = 1,
    force: bool = False,
    aircraft: str | None = None,
    progress: bool = True,
    gpus_per_task: float | None = None,
    cpus_per_task: float = 1.0,
    segment_s: float | None = None,
    overlap_s: float = 3.0,
):
    """Everything ``airpatrol batch`` does except printing: returns the per-file results."""
    from edge.batch.plan import discover
    from edge.batch.worker import BatchJob

    if segment_s and not ray_address:
        raise ValueError("--segment-minutes splits long flights across Ray workers: it needs --ray")
    items = discover(paths)
    preflight(config, database_url)
    cpus = os.cpu_count() or 1
    workers = workers or max(1, cpus // 4)
    job = BatchJob(
        config=config.model_dump(mode="json"),
        out_root=str(Path(out).resolve()),
        database_url=database_url,
        write_video=write_video,
        batch_size=batch_size,
        force=force,
        device_serial=aircraft,
        threads=None if ray_address else max(1, cpus // min(workers, len(items))),
    )
    results = {i: r for i, r in known_done(items, job).items()}
    todo = [i for i in range(len(items)) if i not in results]
    if todo:
        if ray_address:
            from edge.batch.ray_runner import run_ray

            ran = run_ray(
                [items[i] for i in todo],
                job,
                ray_address,
                retries,
                progress,
                num_cpus=workers,
                cpus_per_task=cpus_per_task,
                gpus=gpus_per_task,
                segment_s=segment_s,
                overlap_s=overlap_s,
            )
        else:
            from edge.batch.local import run_local

            ran = run_local([items[i] for i in todo], job, workers, retries, progress)
        results.update(zip(todo, ran))
        remember_checksums(job, ran)
    return [results[i] for i in range(len(items))]


def known_done(items, job) -> dict:
    """Files whose checksum is cached (unchanged since hashed) and that are done: skipped without a worker."""
    from edge.batch.plan import ChecksumCache, ItemResult
    from edge.batch.worker import done_before

    cache = ChecksumCache(Path(job.out_root))
    out = {}
    for i, item in enumerate(items):
        sha = cache.get(item.video)
        prior = done_before(job, item.video, sha) if sha else None
        if prior is not None:
            out[i] = ItemResult(str(item.video), "skipped", 0, sha256=sha, note=prior[0], run_id=prior[1])
    return out


def remember_checksums(job, results) -> None:
    from edge.batch.plan import ChecksumCache

    cache = ChecksumCache(Path(job.out_root))
    for r in results:
        if r.sha256:
            cache.put(Path(r.video), r.sha256)
    cache.save()


@user_errors
def cli_batch(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="video files and/or folders (searched recursively); a DJI .SRT beside a video is its flight log"
        ),
    ],
    ray: Annotated[
        Optional[str],
        typer.Option(
            "--ray",
            help="run on Ray: 'auto' / ray://head:10001 / head:6379 (a cluster), or 'local' (a private instance here)",
        ),
    ] = None,
    workers: Annotated[
        Optional[int],
        typer.Option(min=1, help="local worker processes (default: CPUs / 4); with --ray local: CPUs given to Ray"),
    ] = None,
    out: Annotated[Path, typer.Option(help="folder for the run folders (<video>-<sha256[:12]>)")] = Path(
        "airpatrol-runs"
    ),
    database_url: Annotated[
        Optional[str],
        typer.Option(
            help="also store results in this database (default: AIRPATROL_DATABASE_URL / config file, if set)"
        ),
    ] = None,
    retries: Annotated[
        int, typer.Option(min=0, help="extra attempts for a file that failed for a reason other than bad input")
    ] = 2,
    force: Annotated[bool, typer.Option("--force", help="process files already done (same sha256) again")] = False,
    video: Annotated[bool, typer.Option("--video", help="also write the annotated MP4 of each flight")] = False,
    config: Annotated[Optional[Path], typer.Option(help="YAML/JSON config file")] = None,
    weights: Annotated[Optional[Path], typer.Option(help="detector weights; default: the shipped detector")] = None,
    device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda")] = None,
    baseline: Annotated[bool, typer.Option("--baseline", help="plain YOLOv8 + ByteTrack, for comparison")] = False,
    no_road: Annotated[bool, typer.Option("--no-road", help="do not restrict detection to the road")] = False,
    detector_runtime: Annotated[Optional[str], typer.Option(help="auto | torch | onnx | openvino")] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="frames per detector call (>1 pays off on a GPU)")] = 1,
    aircraft: Annotated[
        Optional[str], typer.Option(help="aircraft serial for flight logs that do not name it (links runs to flights)")
    ] = None,
    gpus_per_task: Annotated[
        Optional[float], typer.Option(help="Ray: GPUs per task (default 1 when running on CUDA, else 0)")
    ] = None,
    cpus_per_task: Annotated[float, typer.Option(help="Ray: CPUs per task")] = 1.0,
    segment_minutes: Annotated[
        Optional[float],
        typer.Option(
            min=0.05,
            help="Ray: split flights (with a flight log) longer than 1.5x this into segments of about this length, one task each; track ids are stitched",
        ),
    ] = None,
    overlap_seconds: Annotated[
        float, typer.Option(min=0.2, help="Ray: warm-up overlap between segments (matched to stitch track ids)")
    ] = 3.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
) -> None:
    """Process many flights; skip those already done (by content); retry failures; report every file."""
    from edge.batch.plan import format_table
    from edge.commands.process import build_overrides
    from edge.config import load_settings

    if device is not None and device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device {device}: expected auto, cpu or cuda")
    overrides = build_overrides(weights, device, None, baseline, None, None, no_road, None)
    if detector_runtime is not None:
        overrides.setdefault("pipeline", {}).setdefault("detector", {})["runtime"] = detector_runtime
    settings = load_settings(config, overrides)
    results = run_batch(
        paths,
        settings.pipeline,
        out,
        database_url or settings.database_url,
        ray,
        workers,
        retries,
        video,
        batch_size,
        force,
        aircraft,
        not quiet,
        gpus_per_task,
        cpus_per_task,
        segment_minutes * 60 if segment_minutes else None,
        overlap_seconds,
    )
    typer.echo(format_table(results))
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)
    incomplete = [r for r in results if r.status == "done" and (r.note or "").startswith("INCOMPLETE")]
    if incomplete:
        from edge.commands.errors import EXIT_INCOMPLETE

        typer.echo(
            f"airpatrol: warning: {len(incomplete)} file(s) only partly readable, their runs are INCOMPLETE "
            "(see the table and each summary.json)",
            err=True,
        )
        raise typer.Exit(EXIT_INCOMPLETE)
