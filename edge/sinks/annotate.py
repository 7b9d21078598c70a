"""Draw a FrameResult for people: road overlay, vehicles coloured by speed, labels, trails, violators, a status line.

Drawn with Roboflow ``supervision``'s annotators (the field's maintained ones) rather than hand-placed OpenCV:

* colours are the map legend's speed classes (``tracking/speed_classes.py``); grey while the speed is unknown;
* sizes follow the frame *and* the vehicles: the label text is about half the height of the typical vehicle in the
  frame (so a 1080p nadir clip with 40 px cars does not get labels several times larger than the cars), never
  below a readable minimum nor above what suits the frame;
* labels sit outside the boxes and ``smart_position`` moves them apart when they would overlap;
* a speed carries its 1-sigma uncertainty (``87+-9 km/h``: OpenCV's Hershey font has no "±"), which is large when
  the scale comes from the vehicles' own sizes (no telemetry, no calibration);
* a vehicle faster than the speed limit even at the low end of its uncertainty (speed - 2 sigma > limit, the
  database's violation rule) gets a red box and a red marker above it (the map's violation colour);
* trails show the last ``trail_s`` seconds of each vehicle (only :class:`FrameAnnotator`, which keeps history);
* a vehicle whose speed is not measured yet is labelled with its id only, never "parked": "parked" means a measured
  speed below the stationary threshold.

Shared by the video sink (one :class:`FrameAnnotator` per video) and the live preview (:func:`annotate`).
"""

from __future__ import annotations

import statistics

import cv2
import numpy as np
import supervision as sv

from tracking import speed_classes as sc
from tracking.types import FrameResult, TrackState, lower_bound_kmh, trusted_speed

ROAD_TINT = (255, 120, 0)  # BGR
UNKNOWN = len(sc.SPEED_COLOURS)  # palette index of "speed unknown"
VIOLATOR = UNKNOWN + 1
PALETTE = sv.ColorPalette([sv.Color.from_hex(c) for c in (*sc.SPEED_COLOURS, sc.UNKNOWN_COLOUR, sc.VIOLATION_COLOUR)])
HERSHEY_PX = 22.0  # height of cv2.FONT_HERSHEY_SIMPLEX capitals at scale 1
COMPACT_BELOW_PX = 30  # vehicles smaller than this (short box side) get compact labels


def label_text(tr: TrackState, speed_limit_kmh: float | None = None, compact: bool = False) -> str:
    """``#12 87+-3 km/h``; ``#12 parked`` only for a measured standstill; ``#12`` while the speed is unknown.

    ``compact`` (small vehicles, e.g. a nadir view from 100 m): ``#12 87+-3``, the unit stated once in the status line.
    The ``+-`` part is the speed's 1-sigma uncertainty, left out when the speed has none.
    """
    if tr.speed_kmh is None or (tr.speed_flag or "").startswith("implausible"):
        return f"#{tr.track_id}"
    if not tr.moving:
        return f"#{tr.track_id} parked"
    sigma = f"+-{tr.speed_sigma_kmh:.0f}" if tr.speed_sigma_kmh else ""
    text = f"#{tr.track_id} {tr.speed_kmh:.0f}{sigma}" + ("" if compact else " km/h")
    return text + " !" if is_violator(tr, speed_limit_kmh) else text


def is_violator(tr: TrackState, speed_limit_kmh: float | None) -> bool:
    """Over the limit even at speed - 2 sigma (the database's rule, per frame); size-prior speeds count with their
    sigma (:func:`tracking.types.trusted_speed`)."""
    return (
        speed_limit_kmh is not None
        and bool(speed_limit_kmh)
        and tr.speed_kmh is not None
        and tr.moving
        and trusted_speed(tr.speed_flag, tr.speed_sigma_kmh)
        and lower_bound_kmh(tr.speed_kmh, tr.speed_sigma_kmh) > speed_limit_kmh
    )


def colour_index(tr: TrackState, speed_limit_kmh: float | None) -> int:
    if is_violator(tr, speed_limit_kmh):
        return VIOLATOR
    if tr.speed_kmh is None or not trusted_speed(tr.speed_flag, tr.speed_sigma_kmh):
        return UNKNOWN
    return sc.speed_class(tr.speed_kmh)


class FrameAnnotator:
    """Annotates the frames of one video or stream (keeps the trails and a steady text size between frames)."""

    def __init__(
        self,
        speed_limit_kmh: float | None = None,
        fps: float = 25.0,
        trail_s: float = 2.0,
        trails: bool = True,
        road_alpha: float = 0.22,
    ):
        self.speed_limit_kmh = speed_limit_kmh
        self.road_alpha = road_alpha
        self._vehicle_px: float | None = None  # smoothed typical vehicle size (short box side), pixels
        self._trace = (
            sv.TraceAnnotator(
                color=PALETTE,
                trace_length=max(2, int(round(fps * trail_s))),
                position=sv.Position.CENTER,
                thickness=2,
                color_lookup=sv.ColorLookup.INDEX,
            )
            if trails
            else None
        )
        self._box = sv.BoxAnnotator(color=PALETTE, thickness=2, color_lookup=sv.ColorLookup.INDEX)
        self._label = sv.LabelAnnotator(
            color=PALETTE,
            text_color=sv.Color.WHITE,
            text_position=sv.Position.TOP_CENTER,
            smart_position=True,
            color_lookup=sv.ColorLookup.INDEX,
            border_radius=2,
        )
        self._marker = sv.TriangleAnnotator(
            color=PALETTE,
            position=sv.Position.TOP_CENTER,
            color_lookup=sv.ColorLookup.INDEX,
            outline_thickness=1,
            outline_color=sv.Color.WHITE,
        )

    # -- sizes -----------------------------------------------------------------------------------------------------
    def _sizes(self, w: int, h: int, tracks: list[TrackState]) -> tuple[float, int, int]:
        """(text scale, line thickness, label padding) for this frame size and the vehicles in it."""
        if tracks:
            sides = [min(float(t.xyxy[2] - t.xyxy[0]), float(t.xyxy[3] - t.xyxy[1])) for t in tracks]
            now = statistics.median(sides)
            self._vehicle_px = now if self._vehicle_px is None else 0.9 * self._vehicle_px + 0.1 * now
        frame_px = HERSHEY_PX * sv.calculate_optimal_text_scale((w, h))  # what suits the frame alone
        min_px = max(8.0, h / 108)  # still readable on the output video
        text_px = frame_px if self._vehicle_px is None else 0.6 * self._vehicle_px
        text_px = min(max(text_px, min_px), frame_px)
        thickness = max(
            2 if h >= 720 else 1,
            min(sv.calculate_optimal_line_thickness((w, h)), int(round((self._vehicle_px or 40) / 20))),
        )
        return text_px / HERSHEY_PX, thickness, max(2, int(round(text_px * 0.25)))

    # -- drawing ---------------------------------------------------------------------------------------------------
    def __call__(self, result: FrameResult) -> np.ndarray:
        img = result.frame.image.copy()
        h, w = img.shape[:2]
        if result.road_mask is not None and self.road_alpha > 0:
            # img + alpha * colour on road pixels with whole-image uint8 ops (boolean indexing of a 1080p frame
            # costs ~10 ms per frame)
            road = (result.road_mask > 0).astype(np.uint8)
            img = cv2.add(img, cv2.merge([road * np.uint8(round(c * self.road_alpha)) for c in ROAD_TINT]))
        tracks = result.tracks
        scale, thickness, padding = self._sizes(w, h, tracks)
        if tracks:
            det = sv.Detections(
                xyxy=np.array([t.xyxy for t in tracks], np.float32).reshape(-1, 4),
                confidence=np.array([t.score for t in tracks], np.float32),
                class_id=np.array([t.class_id for t in tracks], int),
                tracker_id=np.array([t.track_id for t in tracks], int),
            )
            colours = np.array([colour_index(t, self.speed_limit_kmh) for t in tracks], int)
            colours[colours < 0] = UNKNOWN
            if self._trace is not None:
                self._trace.thickness = thickness
                img = self._trace.annotate(img, det, custom_color_lookup=colours)
            self._box.thickness = thickness
            img = self._box.annotate(img, det, custom_color_lookup=colours)
            violators = colours == VIOLATOR
            if violators.any():
                size = max(8, int(round(scale * HERSHEY_PX)))
                self._marker.base, self._marker.height = size, size
                # the marker sits above the label, so both stay readable
                offset = int(round(scale * HERSHEY_PX + 2 * padding))
                shifted = det[violators]
                assert isinstance(shifted, sv.Detections)  # a boolean mask selects Detections
                shifted.xyxy = shifted.xyxy - np.array([0, offset, 0, offset], np.float32)
                img = self._marker.annotate(img, shifted, custom_color_lookup=colours[violators])
            self._label.text_scale, self._label.text_thickness, self._label.text_padding = scale, 1, padding
            compact = self.compact
            img = self._label.annotate(
                img,
                det,
                labels=[label_text(t, self.speed_limit_kmh, compact) for t in tracks],
                custom_color_lookup=colours,
            )
        elif self._trace is not None:
            self._trace.annotate(img, sv.Detections.empty())  # let the trails of vehicles that left fade
        return self._status(img, result, tracks, w, h)

    @property
    def compact(self) -> bool:
        return self._vehicle_px is not None and self._vehicle_px < COMPACT_BELOW_PX

    def _status(self, img: np.ndarray, result: FrameResult, tracks: list[TrackState], w: int, h: int) -> np.ndarray:
        """One status line on a solid dark band: drawn once, no outline copy behind it."""
        moving = sum(t.moving and t.speed_kmh is not None for t in tracks)
        info = f"t {result.frame.t:6.2f} s   {len(tracks)} vehicles, {moving} moving"
        if self.compact:
            info += "   labels: #id km/h"
        if self.speed_limit_kmh:
            info += f"   limit {self.speed_limit_kmh:g} km/h"
        if result.metres_per_pixel:
            info += f"   {result.metres_per_pixel * 100:.1f} cm/px ({result.scale_detail or result.scale_source})"
        scale = max(0.4, HERSHEY_PX * sv.calculate_optimal_text_scale((w, h)) * 0.7 / HERSHEY_PX)
        (tw, th), base = cv2.getTextSize(info, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        pad = max(3, th // 3)
        band = img[0 : th + base + 2 * pad, 0 : min(w, tw + 2 * pad)]
        band[:] = (band.astype(np.uint16) * 35 // 100).astype(np.uint8)  # darkened, the scene still shows through
        cv2.putText(img, info, (pad, pad + th), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)
        return img


def annotate(result: FrameResult, road_alpha: float = 0.22, speed_limit_kmh: float | None = None) -> np.ndarray:
    """One frame on its own (the live preview): everything but the trails, which need the frames before."""
    return FrameAnnotator(speed_limit_kmh, trails=False, road_alpha=road_alpha)(result)
