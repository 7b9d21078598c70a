"""Standing vehicles held by their appearance while the detector misses them.

A car waiting at a red light is where a junction study's queues are, and the detector does not always box it: on the
rendered oblique intersection, cars it boxed while they drove up went unboxed for 30-60 s while they waited (a dark
car on dark asphalt at the stop line, scored 0.03), so ByteTrack lost them after its two-second buffer and the
vehicle came back as a second track when it drove off, often too far on for the linking to join (docs/study.md).
A vehicle that stands looks the same from frame to frame, whatever the detector makes of it: where a confirmed track
that drove there now stands and no detector box covers it, the patch its last detector box showed is looked for
around where the track stands (normalised cross-correlation, OpenCV ``matchTemplate``); where it is still there, a
low-score box there carries the track (ByteTrack's second association, which never starts a track). Where another
vehicle takes its place, the patch no longer matches and the track is lost as before.

A car the detector missed while it waited is often missed as it drives off too, and came back, if at all, as a
second track metres on. With ``standing_hold.follow_moving`` (the default) a moving track is looked for the same way
around where the tracker predicts it, a quarter of its length either side: the held car that sets off, and a moving
one the detector boxes only now and then, are carried until the patch no longer matches (it turned, or has changed
too much since its last detector box; in an oblique view it shrinks or grows as it drives).

Only tracks seen moving hold (a vehicle that arrived and stopped): a parked car the detector flickers on, or clutter
it took for a vehicle, is never carried by this. Templates come from detector boxes only, never from a held box, so
a hold cannot drift off its vehicle. A weak detector box on a held vehicle that ByteTrack does not match to its track
(the two detectors' boxes differ in size: the any-heading one's are looser) is that vehicle: it goes down to the held
box's score instead of starting a second track on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pydantic import Field

from vision.config_base import StageConfig
from vision.detection import overlap_fraction
from vision.types import Detections, DetectionSource


class StandingHoldConfig(StageConfig):
    enabled: bool = Field(
        True,
        description="carry a standing vehicle's track by its appearance where the detector misses it (a car waiting "
        "at a red light; tracking/standing_hold.py; moving ones too with follow_moving); tracks that never moved are "
        "not carried",
    )
    min_similarity: float = Field(
        0.8,
        ge=-1,
        le=1,
        description="normalised cross-correlation of the patch now against the vehicle's last detector box from "
        "which it still stands there",
    )
    standing_lengths_s: float = Field(
        0.5,
        ge=0,
        description="a track slower than this (its box lengths a second) stands or creeps (a queue moving up): the "
        "patch is looked for around it (with follow_moving, faster tracks too)",
    )
    moved_lengths: float = Field(
        0.5,
        ge=0,
        description="a track that has travelled at least this many of its box lengths since it started (its "
        "velocity summed over the frames, the drone's motion taken out) drove there: a parked car's or clutter's box "
        "jitters in place",
    )
    search_lengths: float = Field(
        0.25, ge=0, description="the patch is looked for this share of the box's long side around the track"
    )
    max_hold_s: float = Field(
        120.0, gt=0, description="longest a track is carried without a detector box (a long red light)"
    )
    follow_moving: bool = Field(
        True,
        description="carry a moving vehicle the same way: its last detector patch looked for around where the track "
        "predicts it (a car that waited unboxed is often missed as it drives off too); let go where the patch no "
        "longer matches (it turned, or looks too different from its last detector box)",
    )
    two_vehicles_min_score: float = Field(
        0.0,
        ge=0,
        le=1,
        description="a much smaller box inside a track's shows that the track's box holds two vehicles (so it is not "
        "carried) only at this score or more. 0: any box. 0.25 (ByteTrack's high band, a box that could start a "
        "track) keeps carrying a car whose track the detector once boxed loosely, with part of the car ahead, where "
        "weak boxes (0.10-0.18) lie across the two: opt-in, on the two 5-minute oblique intersection renders it "
        "kept such cars but not the studies (docs/study.md, 'Weak boxes across two queued cars')",
    )
    driven_path_s: float | None = Field(
        None,
        gt=0,
        description="opt-in (120 measured): a standing track where moving vehicles drove within this many seconds "
        "(the road layer's learnt paths, road.learn_from_tracks) is a queued vehicle and is held as if seen to drive "
        "there: a car the tracker lost while it waited and found again standing, or one already queued when it came "
        "into view. A parked car on a verge or in a bay, where no traffic drives, still is not. On the oblique "
        "intersection renders the queued cars' recall, ID switches and fragments gain, but neighbours in a queue "
        "swap tracks as it moves up and seed 3's right O-D falls (docs/study.md). None: only tracks seen moving",
    )
    found_again: bool = Field(
        False,
        description="a track at most 2 s old found standing where a track that drove there and stood was just lost "
        "(centres within half a box length, sizes within 1.6x) counts as moved, so the hold carries it: a car "
        "lost for a moment as it stopped and found again by a new track is held while it waits. Opt-in: on the "
        "two 5-minute oblique intersection renders it fixed the car it was built for but not the studies "
        "(docs/study.md, 'A waiting car found again by a new track')",
    )


INSIDE_SHARE = 0.7  # a box this much inside a track's ...
SMALLER_SHARE = 0.6  # ... and at most this share of its area is another vehicle within it
SAME_LONG_SHARE = 0.7  # a box within a track's spanning this share of its long side ...
SAME_OFFSET_SHARE = 0.15  # ... its centre at most this share of it off the track's: the same vehicle boxed tighter
OWN_IOU = 0.5  # a weak box overlapping a held track this much is its vehicle
SURE_MATCH = 0.3  # a box whose IoU x score with a track reaches this, ByteTrack matches to it (it needs 0.2)
SAME_PLACE_LENGTHS = 0.5  # a new track this close (box long sides) to a lost one that moved ...
SAME_SIZE_RATIO = 1.6  # ... its box at most this much larger or smaller (a neighbour boxed with it a moment): that one
NEW_TRACK_S = 2.0  # ... and the new track started within this long (a tracker's buffer): found again, not another
TEMPLATE_PX = 24  # patches are compared at most this long (a car's shape shows; ~1 ms for a hundred tracks)


def _same_vehicle_tighter(inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """(N, M): box n, within box m, is m's vehicle boxed tighter: it spans most of m's long side and sits near its
    middle. Another vehicle inside a box of two is about half its length, at one end."""
    long_in = np.maximum(inner[:, 2] - inner[:, 0], inner[:, 3] - inner[:, 1])[:, None]
    long_out = np.maximum(outer[:, 2] - outer[:, 0], outer[:, 3] - outer[:, 1]).clip(1.0)[None, :]
    c_in, c_out = (inner[:, :2] + inner[:, 2:]) / 2, (outer[:, :2] + outer[:, 2:]) / 2
    off = np.hypot(*(c_in[:, None, :] - c_out[None, :, :]).transpose(2, 0, 1))
    return (long_in >= SAME_LONG_SHARE * long_out) & (off <= SAME_OFFSET_SHARE * long_out)


@dataclass
class _Template:
    patch: np.ndarray  # grey, the last detector box's pixels, at most TEMPLATE_PX long
    size: tuple[int, int]  # that box's width and height, frame pixels
    frame: int  # the pipeline frame it was taken on

    @property
    def factor(self) -> float:
        """Patch pixels per frame pixel."""
        return self.patch.shape[1] / self.size[0]


def _grey(img: np.ndarray, x0: int, y0: int, x1: int, y1: int, factor: float = 1.0) -> np.ndarray:
    crop = img[y0:y1, x0:x1]
    grey = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY) if crop.ndim == 3 else crop
    if factor >= 1.0:
        return grey
    size = (max(1, round(grey.shape[1] * factor)), max(1, round(grey.shape[0] * factor)))
    return cv2.resize(grey, size, interpolation=cv2.INTER_AREA)


class StandingHold:
    """Per stream: each track's last detector patch, and the held boxes of a detector frame."""

    def __init__(self, config: StandingHoldConfig, fps: float, score: float):
        self.config = config
        self.fps = max(fps, 1e-6)
        self.score = score  # the held boxes' score: in ByteTrack's low band, never starting a track
        self._templates: dict[int, _Template] = {}
        self._travel: dict[int, np.ndarray] = {}  # track id -> its displacement since it started (px)
        self._moved: set[int] = set()  # tracks that have travelled moved_lengths
        self._first_seen: dict[int, int] = {}  # track id -> the frame the tracker first kept it on (tentative)
        self._last_frame: int | None = None
        self.held = 0  # boxes given, for the run's stats

    def boxes(
        self,
        img: np.ndarray,
        frame: int,
        xyxy: np.ndarray,
        speed_px: np.ndarray,
        ids: np.ndarray,
        cls: np.ndarray,
        dets: Detections,
        driven: np.ndarray | None = None,
    ) -> Detections:
        """Held boxes for this frame: of the confirmed tracks predicted at ``xyxy`` (``speed_px`` px per frame), those
        standing (any, with ``follow_moving``), that drove there (or, with ``driven``, per track: stand where traffic
        drove lately), that no box of ``dets`` surely feeds or shows to be two vehicles, where their last detector
        patch is still there. A weak box of ``dets`` that is a held vehicle
        (boxed tighter, or at IoU >= 0.5) gets the held boxes' score (in place): it cannot start a second track on it."""
        cfg = self.config
        if not len(ids):
            return Detections()
        length = np.maximum(xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]).clip(1.0)
        standing = speed_px * self.fps < cfg.standing_lengths_s * length
        candidates = standing | cfg.follow_moving
        queued = standing & driven if driven is not None else np.zeros(len(ids), bool)
        if len(dets):
            area_d = ((dets.xyxy[:, 2] - dets.xyxy[:, 0]) * (dets.xyxy[:, 3] - dets.xyxy[:, 1]))[:, None]
            area_t = ((xyxy[:, 2] - xyxy[:, 0]) * (xyxy[:, 3] - xyxy[:, 1]))[None, :]
            inter = overlap_fraction(dets.xyxy, xyxy) * np.maximum(area_d, 1e-6)
            # a confident box on the track: ByteTrack matches it first. A weak one (0.25 at IoU 0.6 on a waiting
            # truck) fails its score-weighted match, and would start a second track as the first is lost: held too
            iou = inter / np.maximum(area_d + area_t - inter, 1e-6)
            sure = (iou * dets.score[:, None] >= SURE_MATCH).any(0)
            # a box (mostly) inside the track's and much smaller: another vehicle in it, so the track's box is not one
            # vehicle (two queued cars the detector once boxed as one). Not the same vehicle boxed tighter: the
            # any-heading detector's boxes are looser than the shipped one's (59 x 49 px against 46 x 34 on a car
            # waiting at a roundabout's entry), and a weak tight box in the middle of the track's is that car
            inside = (inter >= INSIDE_SHARE * area_d) & (area_d <= SMALLER_SHARE * area_t)
            tighter = inside & _same_vehicle_tighter(dets.xyxy, xyxy)
            # with two_vehicles_min_score: a weak box across two queued cars, inside a track's box the any-heading
            # detector once made loose, is no second vehicle (it let go of a car that then waited 22 s untracked)
            confident = (dets.score >= cfg.two_vehicles_min_score)[:, None]
            merged = (inside & ~tighter & confident).any(0)
            candidates &= ~sure & ~merged
            own = tighter | (iou >= OWN_IOU)  # a box that is the track's vehicle, should it be held
        else:
            own = np.zeros((0, len(ids)), bool)
        h, w = img.shape[:2]
        out, out_cls = [], []
        for k in np.flatnonzero(candidates):
            tpl = self._templates.get(int(ids[k]))
            moved = int(ids[k]) in self._moved or queued[k]
            if tpl is None or not moved or (frame - tpl.frame) / self.fps > cfg.max_hold_s:
                continue
            tw, th = tpl.size
            pad = int(np.ceil(cfg.search_lengths * length[k]))
            cx, cy = 0.5 * (xyxy[k, 0] + xyxy[k, 2]), 0.5 * (xyxy[k, 1] + xyxy[k, 3])
            x0, y0 = int(round(cx - tw / 2)) - pad, int(round(cy - th / 2)) - pad
            x1, y1 = x0 + tw + 2 * pad, y0 + th + 2 * pad
            if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
                continue  # at the frame's edge the vehicle may be leaving the view
            window = _grey(img, x0, y0, x1, y1, tpl.factor)
            if window.shape[0] < tpl.patch.shape[0] or window.shape[1] < tpl.patch.shape[1]:
                continue
            _, best, _, (dx, dy) = cv2.minMaxLoc(cv2.matchTemplate(window, tpl.patch, cv2.TM_CCOEFF_NORMED))
            if best >= cfg.min_similarity:
                bx, by = x0 + dx / tpl.factor, y0 + dy / tpl.factor
                out.append([bx, by, bx + tw, by + th])
                out_cls.append(int(cls[k]))
                # the held vehicle's own weak box (tighter or looser than the track's: the two detectors' boxes
                # differ) fails ByteTrack's score-weighted match and would start a second track on it, which the
                # detector's next weak box confirms: it joins the held box in the band that never starts one
                mine = own[:, k]
                dets.score[mine] = np.minimum(dets.score[mine], self.score)
        self.held += len(out)
        n = len(out)
        return Detections(
            np.array(out, np.float32).reshape(-1, 4),
            np.full(n, self.score, np.float32),
            np.array(out_cls, np.int32),
            np.full(n, DetectionSource.PREDICTED, np.int8),
            np.zeros(n, bool),
        )

    @property
    def moved(self) -> frozenset[int]:
        """The tracks seen to drive (``moved_lengths``): vehicles, not a parked car's or clutter's jitter."""
        return frozenset(self._moved)

    def remember(
        self,
        img: np.ndarray,
        frame: int,
        rows: np.ndarray,
        dets: Detections,
        motion: dict[int, tuple[float, float, float]],
        lost: dict[int, np.ndarray] | None = None,
    ) -> None:
        """Take each track's patch where a detector box fed it this frame (``rows`` as the tracker returns them;
        ``motion``: track id -> (velocity x, y, px per frame; box long side, px) of every track the tracker keeps);
        add up each track's travel; forget tracks the tracker no longer keeps. ``lost``: the lost tracks' boxes
        (this frame's pixels): with ``found_again``, a new track where a track that drove there was just lost
        counts as moved."""
        cfg = self.config
        gap = 1 if self._last_frame is None else frame - self._last_frame
        self._last_frame = frame
        if lost and cfg.found_again:
            self._inherit_moved(frame, rows, lost, motion)
        for tid, (vx, vy, length) in motion.items():
            self._first_seen.setdefault(tid, frame)
            travel = self._travel.get(tid, np.zeros(2)) + gap * np.array([vx, vy])
            self._travel[tid] = travel
            if float(np.hypot(*travel)) >= cfg.moved_lengths * max(length, 1.0):
                self._moved.add(tid)
        h, w = img.shape[:2]
        for row in rows:
            tid, i = int(row[4]), int(row[7])
            if not 0 <= i < len(dets) or dets.source[i] not in (DetectionSource.DETECTOR, DetectionSource.ANY_HEADING):
                continue
            x0, y0, x1, y1 = (int(round(float(v))) for v in dets.xyxy[i])
            if x0 < 0 or y0 < 0 or x1 > w or y1 > h or x1 - x0 < 4 or y1 - y0 < 4:
                self._templates.pop(tid, None)  # cut by the frame's edge: not the whole vehicle
                continue
            factor = min(1.0, TEMPLATE_PX / max(x1 - x0, y1 - y0))
            self._templates[tid] = _Template(_grey(img, x0, y0, x1, y1, factor), (x1 - x0, y1 - y0), frame)
        for store in (self._templates, self._travel, self._first_seen):
            for tid in [t for t in store if t not in motion]:
                del store[tid]
        self._moved &= set(motion)

    def _inherit_moved(
        self, frame: int, rows: np.ndarray, lost: dict[int, np.ndarray], motion: dict[int, tuple[float, float, float]]
    ) -> None:
        """``found_again``: a track at most ``NEW_TRACK_S`` old (since the tracker first kept it, tentative),
        standing where a track that was seen moving and stood is lost (centres within ``SAME_PLACE_LENGTHS`` of the
        longer box side, sizes within ``SAME_SIZE_RATIO``), is that vehicle found again: it counts as moved, so the
        hold carries it. On the rendered oblique intersection a car that drove up to a queue was lost as the detector
        boxed it with its neighbour for a moment; the track that took it up a second later had never moved, was not
        held, and was lost for the 23 s it waited. Both must stand: a new track where a moving one was lost (at night,
        lights) cost UAVDT's night sequence 15 false boxes."""

        def standing(tid: int) -> bool:
            vx, vy, length = motion.get(tid, (np.inf, 0.0, 1.0))
            return float(np.hypot(vx, vy)) * self.fps < self.config.standing_lengths_s * max(length, 1.0)

        movers = [(tid, box) for tid, box in lost.items() if tid in self._moved and standing(tid)]
        if not movers:
            return
        young = NEW_TRACK_S * self.fps
        for row in rows:
            tid = int(row[4])
            if tid in self._moved or frame - self._first_seen.get(tid, frame) > young or not standing(tid):
                continue
            box = np.asarray(row[:4], np.float64)
            for _, other in movers:
                size = max(_long_side(box), _long_side(other))
                ratio = size / max(min(_long_side(box), _long_side(other)), 1.0)
                if ratio <= SAME_SIZE_RATIO and np.hypot(*(_centre(box) - _centre(other))) <= SAME_PLACE_LENGTHS * size:
                    self._moved.add(tid)
                    break


def _long_side(xyxy: np.ndarray) -> float:
    return float(max(xyxy[2] - xyxy[0], xyxy[3] - xyxy[1]))


def _centre(xyxy: np.ndarray) -> np.ndarray:
    return np.array([0.5 * (xyxy[0] + xyxy[2]), 0.5 * (xyxy[1] + xyxy[3])])
