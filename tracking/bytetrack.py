"""ByteTrack (Ultralytics' implementation) with the drone's ego-motion compensated.

Ultralytics' tracker exposes a hook between Kalman prediction and the first association; we use it to move every
track's predicted state by the ego-motion homography, so a drifting or rotating drone does not break associations.
"""

from __future__ import annotations

import copy
from collections.abc import Set as AbstractSet
from types import SimpleNamespace

import numpy as np
from ultralytics.trackers.basetrack import TrackState
from ultralytics.trackers.byte_tracker import BYTETracker, joint_stracks
from ultralytics.trackers.utils import matching
from ultralytics.utils.metrics import bbox_ioa

from tracking.config import TrackerConfig
from vision.types import Detections


class _DetectionBatch:
    """The minimal Results-like view Ultralytics' tracker reads: conf, cls, xywh, xyxy, boolean indexing."""

    def __init__(self, xyxy: np.ndarray, conf: np.ndarray, cls: np.ndarray):
        self.xyxy = np.asarray(xyxy, np.float32).reshape(-1, 4)
        self.conf = np.asarray(conf, np.float32)
        self.cls = np.asarray(cls, np.float32)

    @property
    def xywh(self) -> np.ndarray:
        b = self.xyxy
        return np.column_stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]])

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, idx) -> "_DetectionBatch":
        return _DetectionBatch(self.xyxy[idx], self.conf[idx], self.cls[idx])


def _off_axis_deg(v: np.ndarray | None) -> float:
    """How far a direction lies off the nearer image axis (0-45 degrees); -1 for none."""
    if v is None:
        return -1.0
    a = float(np.degrees(np.arctan2(abs(v[1]), abs(v[0]))))
    return min(a, 90.0 - a)


def warp_xyah_states(stracks: list, H: np.ndarray) -> None:
    """Move Kalman states laid out as (cx, cy, aspect, h, vx, vy, va, vh) through a homography.

    Ultralytics' own ``multi_gmc`` assumes an (x, y, w, h) layout; ByteTrack's is (x, y, aspect, h). The centre goes
    through the full homography, velocities through its local linear part, heights scale with the local zoom,
    and the aspect ratio is unchanged by a similarity.
    """
    if not stracks:
        return
    means = np.stack([st.mean for st in stracks]).astype(np.float64)  # (n, 8)
    covs = np.stack([st.covariance for st in stracks]).astype(np.float64)  # (n, 8, 8)
    p = np.column_stack([means[:, :2], np.ones(len(means))]) @ H.T  # (n, 3)
    w = p[:, 2]
    # Local Jacobian of the homography at each centre: (H2 * w - p_xy outer h3) / w^2
    J = (H[None, :2, :2] * w[:, None, None] - p[:, :2, None] * H[None, 2, None, :2]) / (w * w)[:, None, None]
    scale = np.sqrt(np.abs(np.linalg.det(J)))
    means[:, 0], means[:, 1] = p[:, 0] / w, p[:, 1] / w
    means[:, 3] *= scale
    means[:, 4:6] = np.einsum("nij,nj->ni", J, means[:, 4:6])
    means[:, 7] *= scale
    T = np.zeros((len(means), 8, 8))
    T[:, :2, :2] = J
    T[:, 4:6, 4:6] = J
    T[:, 2, 2] = T[:, 6, 6] = 1.0
    T[:, 3, 3] = T[:, 7, 7] = scale
    covs = T @ covs @ T.transpose(0, 2, 1)
    for st, m, c in zip(stracks, means, covs):
        st.mean, st.covariance = m, c


WEAK_REACH = 0.3  # Ultralytics confirms a new track at IoU x score >= 0.3: out of reach below this score
WEAK_CONFIRM_IOU = 0.5  # tracker.weak_tracks: a box overlapping a new track this much confirms it, whatever its score
WEAK_OVERLAP_IOU = 0.3  # ... and a weak box overlapping a track this much starts none


WEAK_SIZE_RATIO = 1.25  # a weak box extends a track only if each side is within this factor of the track's


def _same_size(tracks: list, boxes: list) -> np.ndarray:
    """(T, B): box b's width and height are each within ``WEAK_SIZE_RATIO`` of track t's. A weak box of a waiting car
    together with half its neighbour would grow the track's box over both, which then passes for the neighbour's
    twin (``linking.twin_tracks``)."""
    if not tracks or not boxes:
        return np.zeros((len(tracks), len(boxes)), bool)
    tw = np.array([t.tlwh[2:] for t in tracks], np.float64).clip(1.0)
    bw = np.array([b.tlwh[2:] for b in boxes], np.float64).clip(1.0)
    ratio = bw[None, :, :] / tw[:, None, :]
    return ((ratio <= WEAK_SIZE_RATIO) & (ratio >= 1.0 / WEAK_SIZE_RATIO)).all(2)


class EgoCompensatedByteTrack(BYTETracker):
    def __init__(self, config: TrackerConfig | None = None, predict_new_tracks: bool = False):
        """``predict_new_tracks``: move tracks started last time by their (flow-measured) velocity before associating,
        as confirmed ones are. Off, the tracker is Ultralytics' ByteTrack exactly (the baseline), which leaves them."""
        cfg = config or TrackerConfig()
        super().__init__(SimpleNamespace(tracker_type="bytetrack", **cfg.model_dump()))
        self._H: np.ndarray | None = None
        self.predict_new_tracks = predict_new_tracks
        self.weak_tracks = cfg.weak_tracks and predict_new_tracks
        self.weak_match_iou = cfg.weak_match_iou if predict_new_tracks else None
        self.weak_refind_lost = cfg.weak_refind_lost and self.weak_match_iou is not None
        # weak boxes extend only tracks slower than this (box lengths a frame); None: any. Set by the pipeline from
        # ``weak_match_standing_lengths_s`` and the frame rate
        self.weak_match_max_speed: float | None = None
        # and only the tracks of these ids (those that drove there, set by the pipeline each frame); None: any
        self.weak_match_ids: AbstractSet[int] | None = None
        self._hold_started: int | None = None
        self._confirming = False
        # moving at least this (its box's long side a frame), a track's image heading is noted (``heading_seen``); 0
        # notes none. Set by the pipeline from ``detector.any_heading.heading_speed_lengths_s``
        self.heading_min_speed = 0.0

    def _pre_first_associate(self, strack_pool, unconfirmed, img, results_high) -> None:
        # Ultralytics leaves tracks started last time (unconfirmed) where they were; ours may carry a velocity measured
        # by optical flow (``set_new_velocities``), so they move on like the others.
        if self.predict_new_tracks:
            self.multi_predict(unconfirmed)
        if self._H is not None:
            warp_xyah_states(strack_pool, self._H)
            warp_xyah_states(unconfirmed, self._H)

    def step(
        self, dets: Detections, H_prev_to_cur: np.ndarray | None = None, hold_started_at: int | None = None
    ) -> np.ndarray:
        """Associate this frame's detections; returns rows [x1, y1, x2, y2, track_id, score, cls, det_index].

        ``hold_started_at``: tracks started at that step (``frame_id``) and not confirmed yet are confirmed by a
        detection here as usual, but one that finds none waits, moving on by prediction, instead of being dropped: on
        frames the detector skips only other sources (motion blobs) detect anything, and a vehicle the detector found
        may show no blob (parked)."""
        self._H = None if H_prev_to_cur is None or np.allclose(H_prev_to_cur, np.eye(3)) else H_prev_to_cur
        self._hold_started = hold_started_at
        out = self.update(_DetectionBatch(dets.xyxy, dets.score, dets.class_id))
        if self.heading_min_speed > 0:
            self._note_headings()
        return np.asarray(out, np.float32).reshape(-1, 8)

    def _note_headings(self) -> None:
        """Each tracked track's image velocity, noted while it moves (``heading_seen``): the way a vehicle was last seen
        going, kept while it stands (a car waiting in a turn). Not warped by later ego-motion: a hovering drone turns
        by a few degrees in minutes."""
        for t in self.tracked_stracks:
            v = np.asarray(t.mean, np.float64)[4:6]
            x1, y1, x2, y2 = t.xyxy
            if float(np.hypot(*v)) >= self.heading_min_speed * max(float(max(x2 - x1, y2 - y1)), 1.0):
                t.heading_seen = v.copy()  # type: ignore[attr-defined]  # our note on Ultralytics' STrack

    def get_dists(self, tracks: list, detections: list) -> np.ndarray:
        dists = super().get_dists(tracks, detections)
        if self._confirming and len(detections) and dists.size:
            # a weak box (below 0.3, which IoU x score >= 0.3 never reaches) confirms at IoU 0.5 (tracker.weak_tracks);
            # it started a track only where no other track was (_init_new_tracks). Others as Ultralytics
            score = np.array([d.score for d in detections])
            iou = 1.0 - matching.iou_distance(tracks, detections)
            weak = (score < WEAK_REACH)[None, :]
            dists = np.where(weak, 1.0 - iou * (WEAK_REACH / WEAK_CONFIRM_IOU), dists)
        return dists

    def _post_first_association(self, strack_pool, detections, u_track, u_detection, activated, refind):
        """Weak boxes of the high band (under ``WEAK_REACH``) left over by the score-weighted first association extend
        the confirmed tracks they overlap at IoU >= ``weak_match_iou`` (tracker config), as the second association does
        for the band below: between the two a box could match no track its score and overlap plainly show."""
        if self.weak_match_iou is None or not len(u_track) or not len(u_detection):
            return u_track, u_detection
        weak = [i for i in u_detection if detections[i].score < WEAK_REACH]
        if not weak:
            return u_track, u_detection
        tracks = [strack_pool[i] for i in u_track]
        boxes = [detections[i] for i in weak]
        dists = matching.iou_distance(tracks, boxes)
        dists[~self._weakly_extended(tracks)] = 1.0
        dists[~_same_size(tracks, boxes)] = 1.0
        matches, _, _ = matching.linear_assignment(dists, thresh=1.0 - self.weak_match_iou)
        if not len(matches):
            return u_track, u_detection
        self._apply_matches([[u_track[t], weak[d]] for t, d in matches], strack_pool, detections, activated, refind)
        used_t = {u_track[t] for t, _ in matches}
        used_d = {weak[d] for _, d in matches}
        return [i for i in u_track if i not in used_t], [i for i in u_detection if i not in used_d]

    def _weakly_extended(self, tracks: list) -> np.ndarray:
        """Which of ``tracks`` a weak box may extend: confirmed ones, lost ones only with ``weak_refind_lost``; slow
        ones only with ``weak_match_max_speed``, and those of ``weak_match_ids`` only where it is set."""
        ok = np.array([t.is_activated for t in tracks], bool)
        if not self.weak_refind_lost:
            ok &= np.array([t.state == TrackState.Tracked for t in tracks], bool)
        if self.weak_match_ids is not None:
            ok &= np.array([t.track_id in self.weak_match_ids for t in tracks], bool)
        if self.weak_match_max_speed is not None and len(tracks):
            mean = np.array([t.mean for t in tracks], np.float64)
            length = np.maximum(mean[:, 2] * mean[:, 3], mean[:, 3]).clip(1.0)  # xyah: width = aspect x height
            ok &= np.hypot(mean[:, 4], mean[:, 5]) < self.weak_match_max_speed * length
        return ok

    def _second_association(self, strack_pool, u_track, detections_second, activated, refind, lost) -> None:
        """Ultralytics' second association (low band, tracked tracks, IoU >= 0.5); with ``weak_refind_lost`` the lost
        confirmed tracks take part too, at ``weak_match_iou``: a standing car the detector missed on one frame and
        boxes weakly on the next is found again where it stood instead of waiting for a confident box."""
        if not self.weak_refind_lost:
            super()._second_association(strack_pool, u_track, detections_second, activated, refind, lost)
            return
        pool = [strack_pool[i] for i in u_track if strack_pool[i].state in (TrackState.Tracked, TrackState.Lost)]
        unmatched = list(range(len(pool)))
        if pool and detections_second:
            dists = matching.iou_distance(pool, detections_second)
            lost_ok = self._weakly_extended(pool)
            tracked = np.array([t.state == TrackState.Tracked for t in pool])
            assert self.weak_match_iou is not None  # weak_refind_lost implies it
            # a lost track: one a weak box may extend, of about its size, at weak_match_iou
            barred = ~lost_ok[:, None] | ~_same_size(pool, detections_second) | (dists > 1.0 - self.weak_match_iou)
            dists[~tracked[:, None] & barred] = 1.0
            matches, unmatched, _ = matching.linear_assignment(dists, thresh=0.5)
            self._apply_matches(matches, pool, detections_second, activated, refind)
        for it in unmatched:
            track = pool[it]
            if track.state == TrackState.Tracked:
                track.mark_lost()
                lost.append(track)

    def _unconfirmed_association(self, unconfirmed, u_detection, detections, activated, removed):
        dropped: list = []
        self._confirming = self.weak_tracks
        try:
            out = super()._unconfirmed_association(unconfirmed, u_detection, detections, activated, dropped)
        finally:
            self._confirming = False
        for t in dropped:
            if t.start_frame == self._hold_started:
                t.state = TrackState.Tracked  # not matched now: waits, unconfirmed, for the detector's next look
            else:
                removed.append(t)
        return out

    def _init_new_tracks(self, u_detection, detections, activated, refind=None) -> None:
        if self.weak_tracks and len(u_detection):
            # a weak box overlapping a track, or a stronger box starting one now, is that vehicle boxed weakly, or a
            # neighbour: no second track from it
            weak = [i for i in u_detection if detections[i].score < WEAK_REACH]
            stronger = [detections[i] for i in u_detection if detections[i].score >= WEAK_REACH]
            known = [t.xyxy for t in self.tracked_stracks + self.lost_stracks + activated + stronger]
            if weak and known:
                boxes = np.array([detections[i].xyxy for i in weak], np.float32)
                overlap = bbox_ioa(boxes, np.array(known, np.float32), iou=True).max(1) >= WEAK_OVERLAP_IOU
                skip = {i for i, o in zip(weak, overlap) if o}
                u_detection = [i for i in u_detection if i not in skip]
        super()._init_new_tracks(u_detection, detections, activated, refind)

    def end_all(self) -> None:
        """End every track, tracked or lost, without resetting the ids: after a source outage longer than the lost-track
        buffer the vehicles have moved on unseen, and matching the next frame's detections to where they were would
        hand a vehicle that only now passes there an old vehicle's id. Ids go on counting, so no id is used twice."""
        ended = self.tracked_stracks + self.lost_stracks
        for t in ended:
            t.mark_removed()
        self.removed_stracks.extend(ended)
        self.tracked_stracks, self.lost_stracks = [], []

    def coast(self, H_prev_to_cur: np.ndarray | None = None) -> np.ndarray:
        """A frame the detector skips by design (``detector.every_n_frames``): every track moves on by its Kalman
        motion and the drone's ego-motion, exactly as ``update`` moves it before associating, and the confirmed tracks
        are reported at their predicted boxes (det_index -1). Nothing is matched, lost or started: the next frame with
        detections does that, with one more prediction step, so each frame gets exactly one."""
        self.frame_id += 1  # frames, not detector runs: the lost-track buffer keeps its meaning in time
        unconfirmed, tracked = self._split_tracked()
        pool = joint_stracks(tracked, self.lost_stracks)
        self.multi_predict(pool)
        if self.predict_new_tracks:
            self.multi_predict(unconfirmed)
        if H_prev_to_cur is not None and not np.allclose(H_prev_to_cur, np.eye(3)):
            warp_xyah_states(pool, H_prev_to_cur)
            warp_xyah_states(unconfirmed, H_prev_to_cur)
        rows = [[*t.xyxy.tolist(), t.track_id, t.score, t.cls, -1] for t in tracked]
        return np.asarray(rows, np.float32).reshape(-1, 8)

    def predicted(self, H_prev_to_cur: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boxes (xyxy), scores and classes of the confirmed tracks where the next ``step`` will predict them (Kalman
        motion, then the ego-motion), without changing any track. As low-score detections of that step they carry the
        tracks nothing else feeds, as ``coast`` would, while the other detections are associated as usual."""
        shadows = self._predicted_copies([t for t in self.tracked_stracks if t.is_activated], H_prev_to_cur)
        xyxy = np.array([t.xyxy for t in shadows], np.float32).reshape(-1, 4)
        return xyxy, np.array([t.score for t in shadows], np.float32), np.array([t.cls for t in shadows], int)

    def standing_candidates(
        self, H_prev_to_cur: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The confirmed tracked tracks where the next ``step`` will predict them: boxes (xyxy), speeds (px per
        frame), ids and classes, without changing any track (tracking/standing_hold.py picks those it carries)."""
        shadows = self._predicted_copies([t for t in self.tracked_stracks if t.is_activated], H_prev_to_cur)
        xyxy = np.array([t.xyxy for t in shadows], np.float32).reshape(-1, 4)
        speed = np.array([np.hypot(*np.asarray(t.mean)[4:6]) for t in shadows], np.float32)
        ids = np.array([t.track_id for t in shadows], int)
        return xyxy, speed, ids, np.array([t.cls for t in shadows], int)

    def track_motion(self) -> dict[int, tuple[float, float, float]]:
        """Track id -> (velocity x, y, px per frame, the drone's motion taken out; box long side, px) of every track
        kept (tracked or lost)."""
        out = {}
        for t in self.tracked_stracks + self.lost_stracks:
            x1, y1, x2, y2 = t.xyxy
            vx, vy = (float(v) for v in np.asarray(t.mean)[4:6])
            out[int(t.track_id)] = (vx, vy, float(max(x2 - x1, y2 - y1)))
        return out

    def lost_boxes(self) -> dict[int, np.ndarray]:
        """Track id -> box (xyxy, this frame's pixels: predicted, the drone's motion followed) of every lost track kept."""
        return {int(t.track_id): np.asarray(t.xyxy, np.float64) for t in self.lost_stracks}

    def lost_predicted(
        self, H_prev_to_cur: np.ndarray | None, max_lost_frames: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Lost tracks lost at most ``max_lost_frames`` ago, where the next ``step`` will predict them: boxes (xyxy),
        velocities (px per frame, this frame's pixels) and ids, without changing any track."""
        shadows = self._predicted_copies(self._recently_lost(max_lost_frames), H_prev_to_cur)
        xyxy = np.array([t.xyxy for t in shadows], np.float32).reshape(-1, 4)
        velocity = np.array([np.asarray(t.mean)[4:6] for t in shadows], np.float32).reshape(-1, 2)
        return xyxy, velocity, np.array([t.track_id for t in shadows], int)

    def moving_predicted(
        self,
        H_prev_to_cur: np.ndarray | None,
        max_lost_frames: int,
        min_lengths_per_frame: float,
        min_updates: int = 0,
        min_axis_angle_deg: float = 0.0,
    ) -> np.ndarray:
        """Boxes (xyxy) where the next ``step`` will predict the confirmed tracks, tracked ones first, then those lost
        at most ``max_lost_frames`` ago (most recently lost first), of the tracks that move at least
        ``min_lengths_per_frame`` of their box's long side a frame, were updated (matched) at least ``min_updates``
        times and, with ``min_axis_angle_deg``, were last seen moving (``heading_seen``) at least that many degrees
        off both image axes; no track is changed."""
        tracked = [t for t in self.tracked_stracks if t.is_activated]
        shadows = self._predicted_copies(tracked + self._recently_lost(max_lost_frames)[::-1], H_prev_to_cur)
        xyxy = np.array([t.xyxy for t in shadows], np.float32).reshape(-1, 4)
        speed = np.array([np.hypot(*np.asarray(t.mean)[4:6]) for t in shadows], np.float32)
        length = np.maximum(xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1])
        updates = np.array([t.tracklet_len for t in shadows], np.float32)
        keep = (speed >= min_lengths_per_frame * length) & (updates >= min_updates)
        if min_axis_angle_deg > 0:
            keep &= np.array([_off_axis_deg(getattr(t, "heading_seen", None)) for t in shadows]) >= min_axis_angle_deg
        return xyxy[keep]

    def _recently_lost(self, max_lost_frames: int) -> list:
        """Confirmed lost tracks lost at most ``max_lost_frames`` ago, in the order they were lost."""
        return [t for t in self.lost_stracks if t.is_activated and self.frame_id + 1 - t.end_frame <= max_lost_frames]

    def _predicted_copies(self, tracks: list, H_prev_to_cur: np.ndarray | None) -> list:
        """Copies of ``tracks`` moved as the next ``step`` will move them (Kalman motion, then the ego-motion); the
        tracks themselves are left as they are (predict assigns new arrays to the copies)."""
        shadows = [copy.copy(t) for t in tracks]
        self.multi_predict(shadows)
        if H_prev_to_cur is not None and not np.allclose(H_prev_to_cur, np.eye(3)):
            warp_xyah_states(shadows, H_prev_to_cur)
        return shadows

    def new_tracks(self) -> list:
        """Tracks started by the last ``step`` (not confirmed yet): their boxes (xyxy) and the tracks themselves."""
        return [t for t in self.tracked_stracks if not t.is_activated and t.start_frame == self.frame_id]

    @staticmethod
    def set_new_velocities(tracks: list, velocities_xy: np.ndarray) -> None:
        """Start tracks with a measured image velocity (px per frame, ground motion only) instead of zero, so they
        are where their vehicle is when the next detections come, even several frames later."""
        for t, v in zip(tracks, np.asarray(velocities_xy, np.float64).reshape(-1, 2)):
            if np.isfinite(v).all():
                t.mean[4:6] = v
