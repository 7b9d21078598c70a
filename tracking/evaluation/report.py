"""``airpatrol eval RUN_DIR GROUND_TRUTH``: score a run folder of ``airpatrol process`` against ground truth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from tracking.evaluation.io import EvalInputError, load_ground_truth, read_mot, read_summary, read_track_speeds
from tracking.evaluation.masks import road_mask_iou
from tracking.evaluation.mot import drop_ignored, hota, mot_metrics
from tracking.evaluation.speed import speed_errors

DEFAULT_FPS = 30.0


def _fps(explicit: float | None, gt_fps: float | None, summary: dict | None) -> tuple[float, str]:
    if explicit:
        return float(explicit), "option"
    if gt_fps:
        return float(gt_fps), "ground truth"
    video = (summary or {}).get("video") or {}
    if isinstance(video, dict) and isinstance(video.get("fps"), (int, float)) and video["fps"] > 0:
        return float(video["fps"]), "summary.json"
    return DEFAULT_FPS, "default"


def _timing(summary: dict | None) -> dict | None:
    if not summary:
        return None
    t = summary.get("timings")
    if not isinstance(t, dict):
        return None
    out = {k: t[k] for k in ("ms_per_frame", "fps", "processing_s", "wall_s") if k in t}
    if isinstance(t.get("ms_per_frame_by_stage"), dict):
        out["ms_per_frame_by_stage"] = t["ms_per_frame_by_stage"]
    return out or None


def evaluate_run(
    run_dir: str | Path,
    gt_path: str | Path,
    iou_threshold: float = 0.5,
    min_track_s: float = 1.0,
    fps: float | None = None,
    write: bool = True,
    parked: str = "ignore",
) -> dict:
    """Metrics of one run: MOT (MOTA, IDF1, HOTA when TrackEval is installed, FP/FN/ID switches), speed error of
    matched vehicles, road-mask IoU and time per frame. Writes ``eval.json`` into the run folder when ``write``."""
    run = Path(run_dir)
    if run.is_file() and run.name.endswith(".txt"):
        run = run.parent
    if not run.is_dir():
        raise EvalInputError(f"{run}: run folder not found")
    if not 0.0 < iou_threshold <= 1.0:
        raise EvalInputError(f"iou threshold {iou_threshold} must be in (0, 1]")
    gt = load_ground_truth(gt_path, parked=parked)
    pred, _ = read_mot(run / "tracks_mot.txt")
    summary = read_summary(run / "summary.json")
    fps_value, fps_from = _fps(fps, gt.fps, summary)

    first_frame: dict[int, int] = {}
    for f, i in zip(pred.frame.tolist(), pred.ids.tolist()):
        first_frame[i] = min(f, first_frame.get(i, f))
    gt_boxes, gt_ignored = drop_ignored(gt.boxes, gt.ignore)
    pred_boxes, pred_ignored = drop_ignored(pred, gt.ignore)
    mot, matches = mot_metrics(gt_boxes, pred_boxes, iou_threshold)
    mot["hota"] = hota(gt_boxes, pred_boxes)

    result: dict = {
        "run_dir": str(run),
        "ground_truth": str(gt.path),
        "ground_truth_format": gt.kind,
        "iou_threshold": iou_threshold,
        "fps": fps_value,
        "fps_from": fps_from,
        "ignored": {
            "ground_truth_boxes": gt_ignored,
            "predicted_boxes": pred_ignored,
            "regions": len(gt.ignore),
            "parked": parked,
        },
        "mot": mot,
    }
    if gt.speeds is not None:
        tracks_csv = run / "tracks.csv"
        if tracks_csv.is_file():
            result["speed"] = speed_errors(
                matches, read_track_speeds(tracks_csv), gt.speeds, gt.moving, first_frame, fps_value, min_track_s
            )
        else:
            result["speed"] = {"n": 0, "note": f"{tracks_csv} missing: no speeds to compare"}
    else:
        result["speed"] = {"n": 0, "note": "ground truth has no speeds"}
    if gt.road_mask_dir is not None and (run / "road_mask").is_dir():
        result["road_mask"] = road_mask_iou(run / "road_mask", gt.road_mask_dir)
    else:
        result["road_mask"] = None
    result["timing"] = _timing(summary)
    if write:
        (run / "eval.json").write_text(json.dumps(result, indent=2))
    return result


def _f(v, fmt: str = ".3f") -> str:
    if v is None:
        return "-"
    return format(v, fmt) if isinstance(v, float) else str(v)


def format_table(res: dict) -> str:
    m = res["mot"]
    rows = [
        ("MOTA", _f(m["mota"])),
        ("IDF1", _f(m["idf1"])),
        ("HOTA", _f(m["hota"]) if m["hota"] is not None else "- (TrackEval not installed)"),
        ("MOTP (mean IoU)", _f(m["motp_iou"])),
        ("precision / recall", f"{_f(m['precision'])} / {_f(m['recall'])}"),
        ("GT boxes / predictions", f"{m['num_objects']} / {m['num_predictions']}"),
        ("FP (per frame)", f"{m['num_false_positives']} ({m['fp_per_frame']:.2f})"),
        ("FN (per frame)", f"{m['num_misses']} ({m['fn_per_frame']:.2f})"),
        ("ID switches", _f(m["num_switches"])),
        ("fragmentations", _f(m["num_fragmentations"])),
        ("mostly tracked / lost", f"{m['mostly_tracked']} / {m['mostly_lost']} of {m['num_unique_objects']}"),
    ]
    ign = res["ignored"]
    if ign["regions"]:
        rows.append(("ignored (GT / pred boxes)", f"{ign['ground_truth_boxes']} / {ign['predicted_boxes']}"))
    sp = res.get("speed") or {}
    if sp.get("n"):
        rows += [
            (f"speed MAE / RMSE (km/h, n={sp['n']})", f"{sp['mae_kmh']:.2f} / {sp['rmse_kmh']:.2f}"),
            ("speed p95 |error| (km/h)", f"{sp['p95_abs_kmh']:.2f}"),
            ("speed bias (km/h)", f"{sp['bias_kmh']:+.2f}"),
        ]
        if "mape_pct" in sp:
            rows.append(("speed mean / p95 |error| (%)", f"{sp['mape_pct']:.1f} / {sp['p95_abs_pct']:.1f}"))
        if sp["standing"].get("n"):
            rows.append(("standing vehicles MAE (km/h)", f"{sp['standing']['mae_kmh']:.2f}"))
        rows.append(("speed coverage", _f(sp["coverage"])))
    else:
        rows.append(("speed", sp.get("note", "no matched vehicle tracked long enough with a speed")))
    rm = res.get("road_mask")
    if rm:
        rows.append((f"road-mask IoU ({rm['frames']} frames)", _f(rm["iou"])))
    tm = res.get("timing")
    if tm and "ms_per_frame" in tm:
        rows.append(("time per frame (ms)", _f(tm["ms_per_frame"], ".1f")))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def cli_eval(
    run_dir: Annotated[Path, typer.Argument(help="run folder written by `airpatrol process` (tracks_mot.txt, ...)")],
    ground_truth: Annotated[Path, typer.Argument(help="scene folder / gt.txt (MOTChallenge) or UAVDT *_gt_whole.txt")],
    iou: Annotated[float, typer.Option(help="IoU a prediction needs to match a ground-truth box")] = 0.5,
    min_track_s: Annotated[float, typer.Option(help="speed errors only for tracks at least this old")] = 1.0,
    fps: Annotated[Optional[float], typer.Option(help="frame rate, when neither the GT nor the run states it")] = None,
    parked: Annotated[
        str,
        typer.Option(
            help="parked vehicles of a synthetic scene: 'ignore' (neither found nor "
            "missed counts) or 'count' (scored like traffic)"
        ),
    ] = "ignore",
) -> None:
    """Score a run against ground truth: MOTA, IDF1, FP/FN, ID switches, speed error, road-mask IoU; writes eval.json."""
    try:
        res = evaluate_run(run_dir, ground_truth, iou_threshold=iou, min_track_s=min_track_s, fps=fps, parked=parked)
    except EvalInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(format_table(res))
    typer.echo(f"written: {Path(res['run_dir']) / 'eval.json'}")
