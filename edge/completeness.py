"""What a run could not use: undecodable video stretches, a damaged flight log, gaps in the telemetry.

A run over damaged input completes what it can and says what it lost: ``summary.json`` gets ``status``
(``complete`` / ``incomplete``) and ``losses`` (one entry per lost stretch, with the reason and the frame and time
ranges), the database run row gets the same, and ``airpatrol process`` warns and exits with
:data:`edge.commands.errors.EXIT_INCOMPLETE`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vision.source import FrameSource

TELEMETRY_GAP_MIN_S = 1.0  # a pause between samples longer than this (and than GAP_FACTOR x the usual interval)...
TELEMETRY_GAP_FACTOR = 5.0  # ...is a gap: poses across it are interpolated guesses


def video_losses(source: FrameSource) -> list[dict[str, Any]]:
    return [
        {
            "input": "video",
            "reason": loss.reason,
            "frames": [loss.first_frame, loss.last_frame],
            "t_s": [loss.start_s, loss.end_s],
        }
        for loss in getattr(source, "losses", [])
    ]


def telemetry_losses(log, poses, duration_s: float | None, fps: float) -> list[dict[str, Any]]:
    """A flight log read only up to its damage, and gaps in its samples during the video."""
    if log is None or poses is None:
        return []
    out: list[dict[str, Any]] = []
    end = duration_s or 0.0

    def frames(a: float, b: float) -> list[int] | None:
        first, last = max(1, int(np.ceil(a * fps)) + 1), int(np.floor(b * fps)) + 1
        return [first, last] if last >= first else None

    if not log.complete:
        out.append(
            {
                "input": "telemetry",
                "reason": f"flight log {log.path.name} damaged, read up to {log.stopped_at}",
                "frames": frames(poses.end_s, end) if end > poses.end_s else None,
                "t_s": [round(poses.end_s, 3), round(max(end, poses.end_s), 3)],
            }
        )
    t = np.asarray(poses.t, float) - poses.time_offset_s  # sample times on the video's clock
    if len(t) >= 3:
        dt = np.diff(t)
        limit = max(TELEMETRY_GAP_MIN_S, TELEMETRY_GAP_FACTOR * float(np.median(dt)))
        for i in np.flatnonzero(dt > limit):
            a, b = float(t[i]), float(t[i + 1])
            if b <= 0 or (end and a >= end):
                continue  # outside the video
            a, b = max(a, 0.0), min(b, end) if end else b
            out.append(
                {
                    "input": "telemetry",
                    "reason": f"no telemetry for {dt[i]:.1f} s (positions interpolated)",
                    "frames": frames(a, b),
                    "t_s": [round(a, 3), round(b, 3)],
                }
            )
    return out


def completeness(losses: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "incomplete" if losses else "complete", "losses": losses}


def describe(summary: dict[str, Any]) -> str:
    """One line: what was lost (for the CLI warning and the dashboard)."""
    parts = []
    declared = (summary.get("video") or {}).get("frame_count")
    for loss in summary.get("losses") or []:
        where = ""
        if loss.get("frames"):
            a, b = loss["frames"]
            share = f", {100 * (b - a + 1) / declared:.0f} %" if declared else ""
            where = f"frames {a}-{b} ({b - a + 1} frames{share}, {loss['t_s'][0]:.1f}-{loss['t_s'][1]:.1f} s)"
        else:
            where = f"{loss['t_s'][0]:.1f}-{loss['t_s'][1]:.1f} s"
        parts.append(f"{loss['input']} {where}: {loss['reason']}")
    return "; ".join(parts)
