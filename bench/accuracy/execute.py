"""Running the suite: render (or reuse) each clip, run the dual-layer pipeline and the baseline with the same
detector weights, and score both with ``tracking.evaluation.evaluate_run``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from bench.accuracy.suite import SequenceSpec

MODES = ("dual", "baseline")  # dual = the dual-layer pipeline (road + motion layers); baseline = YOLOv8 + ByteTrack
MIN_TRACK_S = 1.0  # speed errors count for vehicles tracked at least this long (the target's definition)


@dataclass(frozen=True)
class RunSettings:
    weights: Path  # detector weights, the same for both modes
    road_weights: Path | None  # None: road layer disabled (weights missing)
    workdir: Path  # rendered clips, truncated ground truth and run folders
    device: str = "auto"
    videos: frozenset[str] = frozenset()  # sequence names whose annotated video is written
    dual_overrides: tuple[tuple[str, object], ...] = ()  # (dotted key, value) applied to the dual mode only


def pipeline_config(mode: str, settings: RunSettings):
    from tracking.config import PipelineConfig

    cfg = PipelineConfig(device=settings.device, baseline=(mode == "baseline"))
    cfg.detector.weights = str(settings.weights)
    if settings.road_weights is not None:
        cfg.road.weights = str(settings.road_weights)
    else:
        cfg.road.enabled = False
    if mode != "baseline":
        for key, value in settings.dual_overrides:
            *path, leaf = key.split(".")
            node = cfg
            for part in path:
                node = getattr(node, part)
            setattr(node, leaf, value)
    return cfg


def _scene_is_cached(out: Path, spec: SequenceSpec) -> bool:
    meta = out / "scene.json"
    if not (meta.is_file() and (out / "gt" / "gt.txt").is_file() and (out / "video.mp4").is_file()):
        return False
    try:
        saved = json.loads(meta.read_text())["config"]
    except (ValueError, KeyError):
        return False
    return spec.scene_config is not None and saved == spec.scene_config.model_dump(mode="json")


def _truncated_uavdt(spec: SequenceSpec, workdir: Path) -> Path:
    """UAVDT ground truth cut to the frames that are processed, in the work folder (never in the repository):
    without the cut, every later ground-truth box would count as a miss."""
    assert spec.source is not None  # a UAVDT sequence names its folder
    out = workdir / "gt" / f"{spec.name}-first{spec.frames}"
    (out / "gt").mkdir(parents=True, exist_ok=True)
    for name in ("M1303_gt_whole.txt", "M1303_gt_ignore.txt"):
        src = spec.source / "gt" / name
        if not src.is_file():
            continue
        keep = [ln for ln in src.read_text().splitlines() if ln.strip() and int(ln.split(",")[0]) <= spec.frames]
        (out / "gt" / name).write_text("\n".join(keep) + "\n")
    (out / "seqinfo.ini").write_text(
        "[Sequence]\nname=M1303\nimDir=img\nframeRate=30\nseqLength=%d\nimWidth=1024\nimHeight=540\nimExt=.jpg\n"
        % spec.frames
    )
    return out / "gt" / "M1303_gt_whole.txt"


@dataclass
class Prepared:
    video: Path  # a video file or an image folder
    ground_truth: Path
    telemetry: Path | None
    generated_s: float  # seconds spent rendering (0 when reused)
    assets: dict | None  # synthetic: which textures/crops the generator used


def prepare(spec: SequenceSpec, workdir: Path) -> Prepared:
    """The clip and ground truth of ``spec``: rendered into ``workdir/scenes`` (reused when the config matches)."""
    if spec.kind == "uavdt":
        assert spec.source is not None  # a UAVDT sequence names its folder
        return Prepared(spec.source, _truncated_uavdt(spec, workdir), None, 0.0, None)
    from vision.synth import generate_scene

    out = workdir / "scenes" / spec.name
    t0 = time.perf_counter()
    if not _scene_is_cached(out, spec):
        generate_scene(spec.scene_config, out, progress=False)
    took = time.perf_counter() - t0
    assets = json.loads((out / "scene.json").read_text()).get("assets")
    return Prepared(out / "video.mp4", out, out / "video.SRT", took, assets)


def condense(ev: dict, summary: dict) -> dict:
    """The numbers the report uses, from an ``evaluate_run`` result and the run's summary.json."""
    m = ev["mot"]
    sp = ev.get("speed") or {}
    tm = ev.get("timing") or {}
    rm = ev.get("road_mask") or {}
    keys = (
        "mota",
        "idf1",
        "idp",
        "idr",
        "precision",
        "recall",
        "num_frames",
        "num_objects",
        "num_predictions",
        "num_unique_objects",
        "num_false_positives",
        "num_misses",
        "num_switches",
        "num_fragmentations",
        "mostly_tracked",
        "mostly_lost",
        "fp_per_frame",
        "fn_per_frame",
        "motp_iou",
    )
    out = {k: m.get(k) for k in keys}
    out["speed"] = {
        k: sp.get(k)
        for k in (
            "n",
            "mae_kmh",
            "rmse_kmh",
            "p95_abs_kmh",
            "bias_kmh",
            "mape_pct",
            "p95_abs_pct",
            "n_pct",
            "coverage",
            "eligible_matches",
        )
    }
    out["speed"]["moving_mae_kmh"] = (sp.get("moving") or {}).get("mae_kmh")
    out["speed"]["standing_mae_kmh"] = (sp.get("standing") or {}).get("mae_kmh")
    out["ms_per_frame"] = tm.get("ms_per_frame")
    out["ms_per_frame_by_stage"] = tm.get("ms_per_frame_by_stage")
    out["road_mask_iou"] = rm.get("iou")
    out["tracks"] = (summary.get("counts") or {}).get("tracks")
    out["wall_s"] = (summary.get("timings") or {}).get("wall_s")
    out["detector_tiles"] = summary.get("detector_tiles")
    out["weights"] = summary.get("weights")  # the weights by name and SHA-256 (vision.yolo_weights.weights_label)
    return out


def run_mode(spec: SequenceSpec, mode: str, prep: Prepared, settings: RunSettings) -> dict:
    """One pipeline run of one sequence, scored; the run folder stays in ``workdir/runs/<name>/<mode>``."""
    from edge.runner import process_video
    from tracking.evaluation import evaluate_run

    run_dir = settings.workdir / "runs" / spec.name / mode
    outcome = process_video(
        prep.video,
        run_dir,
        pipeline_config(mode, settings),
        telemetry=prep.telemetry,
        write_video=spec.name in settings.videos,
        progress=False,
        max_frames=spec.frames,
    )
    ev = evaluate_run(outcome.out_dir, prep.ground_truth, min_track_s=MIN_TRACK_S)
    res = condense(ev, outcome.summary)
    res["run_dir"] = str(outcome.out_dir)
    return res
