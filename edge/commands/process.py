"""`airpatrol process VIDEO`: run the pipeline on a recorded flight and write every file sink."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from edge.commands.errors import user_errors


def default_out_dir(video: Path, baseline: bool) -> Path:
    return Path("airpatrol-runs") / (video.stem + ("-baseline" if baseline else ""))


def build_overrides(weights, device, calibration, baseline, conf, tiling, no_road, road_mask) -> dict:
    from tracking.scale import load_calibration

    pipe: dict = {}
    if weights is not None:
        pipe.setdefault("detector", {})["weights"] = str(weights)
    if conf is not None:
        pipe.setdefault("detector", {})["conf"] = conf
    if tiling is not None:
        pipe.setdefault("detector", {})["tiling"] = tiling
    if device is not None:
        pipe["device"] = device
    if baseline:
        pipe["baseline"] = True
    if calibration is not None:
        pipe["calibration"] = load_calibration(calibration).model_dump()
    if no_road:
        pipe.setdefault("road", {})["enabled"] = False
    if road_mask is not None:
        pipe.setdefault("road", {})["mask_file"] = str(road_mask)
    return {"pipeline": pipe} if pipe else {}


@user_errors
def cli_process(
    video: Annotated[Path, typer.Argument(help="video file (anything FFmpeg reads) or image-sequence folder")],
    telemetry: Annotated[
        Optional[Path],
        typer.Option(
            help="flight log (DJI SRT/CSV, ULog, tlog, BIN, GPX); a DJI .SRT next to the video is used automatically"
        ),
    ] = None,
    weights: Annotated[
        Optional[Path], typer.Option(help="YOLO weights (.pt, .onnx, ...); default: the shipped detector")
    ] = None,
    device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda")] = None,
    calibration: Annotated[
        Optional[str],
        typer.Option(
            help="metres per pixel, or a JSON file (points with ground or lon/lat coordinates, or georeferenced frame corners)"
        ),
    ] = None,
    out: Annotated[Optional[Path], typer.Option(help="output folder (default: airpatrol-runs/<video name>)")] = None,
    baseline: Annotated[
        bool, typer.Option("--baseline", help="plain YOLOv8 + ByteTrack with a constant scale, for comparison")
    ] = False,
    config: Annotated[
        Optional[Path],
        typer.Option(help="YAML/JSON config file (`airpatrol config` prints every setting and its default)"),
    ] = None,
    conf: Annotated[Optional[float], typer.Option(help="detector confidence threshold")] = None,
    tiling: Annotated[
        Optional[str],
        typer.Option(
            help="auto | on | off: detect at native resolution (one pass over the road, or tiles) for small vehicles"
        ),
    ] = None,
    road_mask: Annotated[
        Optional[Path], typer.Option(help="fixed road mask image (white = road) instead of the U-Net")
    ] = None,
    no_road: Annotated[bool, typer.Option("--no-road", help="do not restrict detection to the road")] = False,
    no_video: Annotated[bool, typer.Option("--no-video", help="skip the annotated MP4 (faster)")] = False,
    max_frames: Annotated[Optional[int], typer.Option(help="stop after this many frames")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
    batch_size: Annotated[
        int, typer.Option(min=1, help="frames per detector call (>1 pays off on a GPU; same results)")
    ] = 1,
    detector_runtime: Annotated[
        Optional[str],
        typer.Option(
            help="auto | torch | onnx | openvino (auto: OpenVINO on a bfloat16 CPU, else ONNX Runtime; PyTorch on CUDA)"
        ),
    ] = None,
    speed_limit: Annotated[
        Optional[float],
        typer.Option(
            min=1,
            help="km/h: the annotated video marks faster vehicles (the database's violations come from `import-run --speed-limit`)",
        ),
    ] = None,
) -> None:
    """Detect, track and measure the speed of every vehicle in a recorded drone video."""
    from edge.config import load_settings
    from edge.runner import process_video

    if device is not None and device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device {device}: expected auto, cpu or cuda")
    overrides = build_overrides(weights, device, calibration, baseline, conf, tiling, no_road, road_mask)
    if detector_runtime is not None:
        overrides.setdefault("pipeline", {}).setdefault("detector", {})["runtime"] = detector_runtime
    settings = load_settings(config, overrides)
    out_dir = out or default_out_dir(video, settings.pipeline.baseline)
    outcome = process_video(
        video,
        out_dir,
        settings.pipeline,
        telemetry=telemetry,
        write_video=not no_video,
        progress=not quiet,
        max_frames=max_frames,
        batch_size=batch_size,
        speed_limit_kmh=speed_limit,
    )
    typer.echo(one_line_summary(outcome.summary, outcome.out_dir))
    exit_if_incomplete(outcome.summary, video)


def exit_if_incomplete(summary: dict, video: Path) -> None:
    """Damaged input is never silent: a warning line and exit code 3 (EXIT_INCOMPLETE) when something was lost."""
    from edge.commands.errors import EXIT_INCOMPLETE
    from edge.completeness import describe

    if summary.get("status") == "incomplete":
        typer.echo(f"airpatrol: warning: {video}: run INCOMPLETE, {describe(summary)}", err=True)
        raise typer.Exit(EXIT_INCOMPLETE)


def one_line_summary(s: dict, out_dir: Path) -> str:
    c, t, sp = s["counts"], s["timings"], s["speed_kmh"]
    speed = f", median speed {sp['median_of_moving']:.0f} km/h" if sp.get("median_of_moving") is not None else ""
    vehicles = f"{c['vehicles']} vehicles, " if c.get("vehicles") is not None else ""
    scale = s.get("scale") or {}
    scale_txt = (
        f", scale: {scale.get('detail') or scale.get('source')}" if scale.get("source") else ", no scale (no speeds)"
    )
    rate = s.get("analysis_rate") or {}
    frames = f"{c['frames']} frames"
    if rate.get("every_n_frames", 1) > 1:  # tracking/frame_rate.py: the frames between interpolated
        frames = (
            f"{c['frames'] + rate['frames_interpolated']} frames ({c['frames']} analysed, {rate['fps']:g} a second)"
        )
    cost = f" ({t['x_duration']:g}x the video's duration)" if t.get("x_duration") else ""
    return (
        f"{s['mode']}: {frames}, {vehicles}{c['tracks']} tracks ({c['moving_tracks']} moving, "
        f"{c['stationary_tracks']} stationary){speed}{scale_txt}, {t['fps']} fps{cost} -> {out_dir}"
    )
