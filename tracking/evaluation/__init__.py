"""Scoring runs against ground truth: MOT metrics (motmetrics; HOTA via TrackEval when installed), speed error,
road-mask IoU, time per frame. CLI: ``airpatrol eval RUN_DIR GROUND_TRUTH``."""

from tracking.evaluation.io import EvalInputError, load_ground_truth
from tracking.evaluation.mot import mot_metrics
from tracking.evaluation.report import cli_eval, evaluate_run, format_table
from tracking.evaluation.speed import speed_errors

__all__ = [
    "EvalInputError",
    "cli_eval",
    "evaluate_run",
    "format_table",
    "load_ground_truth",
    "mot_metrics",
    "speed_errors",
]
