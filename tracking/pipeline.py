"""The pipeline object: one frame in, tracked vehicles with ground speeds out.

source -> frame (+ pose) -> ego-motion -> background layer (road) -> detection (+ motion layer) -> ByteTrack ->
speed -> FrameResult. The CLI, the batch runner and the live service all drive this same object.
``baseline=True`` gives plain YOLOv8 + ByteTrack with a constant scale: the comparison the design is measured against.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Protocol

import cv2
import numpy as np

from tracking.appearance import AppearanceSampler
from tracking.bytetrack import EgoCompensatedByteTrack
from tracking.config import PipelineConfig
from tracking.frame_edge import FrameEdgeRule
from tracking.scale import GroundScale
from tracking.speed import SpeedEstimator
from tracking.standing_hold import StandingHold
from tracking.types import FrameResult, ScaleSource, TrackState
from vision.detection import Detector, VehicleDetector, overlap_fraction, resolve_device
from vision.ego_motion import warp_boxes
from vision.gpu.backend import build_motion_stages
from vision.motion import MotionField
from vision.motion_gate import MovingBlobGate
from vision.turned_crops import CROP_PX, look_again
from vision.types import CameraPose, Detections, DetectionSource, Frame

if TYPE_CHECKING:
    from vision.road.segmenter import RoadSegmenter

MOVING_FRACTION = 0.15  # share of moving pixels that makes a detector box "moving"
OFF_ROAD_MOVING_FRACTION, OFF_ROAD_MIN_SCORE = 0.4, 0.5  # what keeps a detector box the road mask misses
MIN_VEHICLE_M, MAX_VEHICLE_M = 2.0, 26.0  # plausible vehicle lengths (motorbike-ish to articulated truck)
# Blob-fed tracks per detector-fed track (last 30 detector frames) above which the detector runs on every frame: the
# detector is blind to much of the traffic (tiny vehicles) and the motion layer, which needs every frame, carries it.
MOTION_CARRIES_FRACTION = 0.25
# Median share of their own length that tracked vehicles move between two detector frames above which the detector
# runs on every frame (coasting would lose them).
MAX_COAST_MOTION = 0.3
# The same for the tracks started on the last detector frame (not confirmed yet), measured by optical flow: above
# their own length between passes (a motorway filmed in 4K at 10 fps). At 0.3 it also fired on the real night
# sequence and cost it 2.3 MOTA (docs/study.md); at 1.0 it fires on none of the real UAVDT sequences.
NEW_TRACK_COAST_MOTION = 1.0
ULTRALYTICS_NMS_IOU = 0.7  # Ultralytics' default for predict/track; the dual layer uses detector.iou (0.5)


OUTAGE_STEPS = 5  # a step between frames this many times the usual one (and past the lost-track buffer) is an outage


class PoseProvider(Protocol):
    def pose_at(self, t: float) -> CameraPose: ...


def _coast_motion(tracks: list, k: int) -> float:
    """Median distance the ``tracks`` move over ``k`` frames, in their own lengths (Kalman state xyah + velocity)."""
    m = np.array([t.mean for t in tracks])
    length = np.maximum(m[:, 2] * m[:, 3], m[:, 3])  # xyah: width = aspect * height
    return float(np.median(np.hypot(m[:, 4], m[:, 5]) * k / np.maximum(length, 1.0)))


class Pipeline:
    def __init__(self, config: PipelineConfig | None = None, detector: Detector | None = None, streams: int = 1):
        """``streams``: how many pipelines step together with this one (``edge.batch.batched.step_streams``); the
        'auto' ego-motion backend weighs it (vision.gpu.backend)."""
        self.config = config or PipelineConfig()
        self.device = resolve_device(self.config.device)
        detector_config = self.config.detector
        if self.config.baseline:  # plain YOLOv8 as Ultralytics' predict/track runs it: its NMS IoU default
            detector_config = detector_config.model_copy(update={"iou": ULTRALYTICS_NMS_IOU})
        self.detector: Detector = detector or VehicleDetector(detector_config, self.device)
        self.road: RoadSegmenter | None = None
        if not self.config.baseline and self.config.road.enabled:
            from vision.road.segmenter import RoadSegmenter

            self.road = RoadSegmenter(self.config.road, self.device)
        # OpenCV on the CPU or torch on the device (ego_motion.backend, streams): same interface, grey frames as
        # numpy arrays or as device tensors
        self.ego, self.motion = build_motion_stages(self.config.ego_motion, self.config.motion, self.device, streams)
        self.gate = MovingBlobGate(self.config.motion.gate)
        self._size: tuple[int, int] | None = None
        self._warmed_ego: set[tuple[int, int]] = set()
        # overlap_stages: the helper thread; the size prior's measurements of the last frame, the motion field of this one
        self._helper_pool: ThreadPoolExecutor | None = None
        self._pending_sizes: Future | None = None
        self._pending_motion: Future | None = None

    @property
    def _wh(self) -> tuple[int, int]:
        assert self._size is not None  # set by reset(), which step() calls first
        return self._size

    @property
    def mode(self) -> str:
        return "baseline" if self.config.baseline else "dual_layer"

    def reset(
        self,
        width: int,
        height: int,
        fps: float,
        poses: PoseProvider | None = None,
        recorded: bool = False,
        frame_step: int = 1,
    ) -> None:
        """Start a new stream or video (keeps the loaded models). ``recorded``: a recording (``airpatrol process``,
        batch), which has no frame rate to keep up with: the detector's scale plan gets the recorded budget
        (``detector.recorded_max_input_pixels``); a live stream keeps the per-frame one. ``frame_step``: a recording
        analysed at every n-th frame (``tracking/frame_rate.py``; ``fps`` is then the analysed rate): frames handed
        over that far apart are consecutive, not a live stream shedding frames."""
        cfg = self.config
        self._frame_step = max(1, int(frame_step))
        self._size = (width, height)
        self.fps = fps
        self.poses = None if cfg.baseline and cfg.calibration.is_set else poses
        self.tracker = EgoCompensatedByteTrack(cfg.tracker, predict_new_tracks=not cfg.baseline)
        # on the CPU whatever the device: the fit is a few hundred numbers, which on a GPU are ~60 kernel launches and
        # 6 host copies (2 of them synchronising) per frame for no parallel work (the 'speed' stage measured 22 ms per
        # frame on CUDA, 6 on a CPU; it also holds the size prior, docs/deployment.md)
        self.speed = SpeedEstimator(cfg.speed)
        self._drain_helper()  # work of the last video still in the helper thread (a step that raised) ends first
        self._ground_scale = GroundScale(cfg.calibration, cfg.speed, width, height, constant=cfg.baseline)
        self.ego.reset()
        self.motion.reset()
        self.gate.reset()
        self.detector.reset()
        self._recorded = recorded
        # what each track looks like, for the recorded run's linking (live streams link nothing: no samples)
        link = cfg.linking
        self.looks = (
            AppearanceSampler(link.appearance_every_s)
            if recorded and link.enabled and link.appearance and not cfg.baseline
            else None
        )
        if isinstance(self.detector, VehicleDetector):
            self.detector.recorded = recorded
        wants = getattr(self.detector, "wants_any_heading", lambda: cfg.detector.any_heading.enabled)
        self.any_heading_on = not cfg.baseline and wants() and (recorded or not cfg.detector.any_heading.recorded_only)
        if self.any_heading_on and cfg.detector.any_heading.min_axis_angle_deg > 0:
            # the any-heading step asks which way tracks went; nothing else does (live, baseline: no per-frame note)
            self.tracker.heading_min_speed = cfg.detector.any_heading.heading_speed_lengths_s / max(fps, 1e-6)
        if cfg.tracker.weak_match_standing_lengths_s is not None:
            self.tracker.weak_match_max_speed = cfg.tracker.weak_match_standing_lengths_s / max(fps, 1e-6)
        self.any_heading_kept = 0  # the any-heading detector's boxes kept at a predicted track
        self.any_heading_movers = 0  # and at moving blobs no box explains (any_heading.movers)
        self._unboxed_movers = _NO_BOXES
        if self.road is not None:
            self.road.reset()
        self._H_cur_to_first = np.eye(3)
        self._last_boxes = np.zeros((0, 4), np.float32)
        self._residual_px = (
            0.0  # ego-motion registration residual since the last detector frame (the blob gate's noise floor)
        )
        # ego-motion chained since the last detector frame: None once a frame failed (the motion layer restarts its
        # background), while the road maps treat a failed frame as no motion, as they do frame by frame
        self._H_since_key: np.ndarray | None = np.eye(3)
        self._H_road_since_key = np.eye(3)
        self._since_key, self._residual_sq = 0, 0.0
        self._until_detect = 0  # frames (as handed over) to coast before the detector runs again
        # A live stream that sheds frames (pacing, a full queue, the burst at its start) hands over frames 2, 5 or 20
        # apart. The detector then also runs once the video's own frame numbers say ``_stride_video`` frames passed
        # since its last run, so it looks at the scene about as often in time as in a recorded run (on every frame
        # once they are that far apart) rather than every few frames handed over, across holes where vehicles moved.
        self._last_index: int | None = None
        self._last_t: float | None = None  # the last frame's time: a jump longer than the lost-track buffer ends tracks
        self.outages = 0  # times the tracks were ended that way
        self._steps: deque[float] = deque(maxlen=25)  # the last times between frames handed over
        self._last_gap = 1  # video frames between the last two frames handed over
        self._since_detect = 0  # video frames since the detector's last run
        self._stride_video = 1
        # while the motion layer carries the tracks: the detector's stride, and whether the frames between are motion
        # frames (the motion layer feeds the tracker) rather than coasted ones
        self._carried_stride = cfg.motion.carried_detector_every_n_frames if cfg.motion.enabled else 1
        self._motion_frames = False
        self._detector_step = -1  # the tracker's frame_id at the last detector frame
        # per detector (or motion) frame: tracks fed by the detector, by blobs
        self._fed_by: deque[tuple[int, int]] = deque(maxlen=30)
        self.detector_frames = 0
        self.looked_again, self.found_again = 0, 0  # turned crops of lost movers, and boxes found in them
        hold = cfg.standing_hold
        # a standing vehicle the detector misses is carried by its appearance, by boxes in ByteTrack's low band
        self.hold = (
            StandingHold(hold, fps, cfg.tracker.track_low_thresh + 0.05) if hold.enabled and not cfg.baseline else None
        )
        self._prev_grey: np.ndarray | None = None  # last frame's flow image: new tracks get their velocity from it
        self.timings: defaultdict[str, float] = defaultdict(float)  # stage -> ms
        self.frames = 0
        self.track_ids: set[int] = set()
        self._track_support: dict[int, list] = {}  # track id -> [first frame, last frame, seen by the detector]
        edge = cfg.tracker.min_visible_at_border
        self._edge = None if edge is None or cfg.baseline else FrameEdgeRule(edge, width, height)
        self.ego_failures = 0
        self.warm_up_s = self.warm_up(width, height)

    @property
    def scale(self) -> GroundScale:
        """The speed scale, with the vehicle measurements of every frame stepped so far in it (``_observe_sizes`` may
        still be measuring the last frame's in its helper thread: this waits for it)."""
        self._settle_sizes()
        return self._ground_scale

    def _helper(self) -> ThreadPoolExecutor:
        if self._helper_pool is None:
            self._helper_pool = ThreadPoolExecutor(1, thread_name_prefix="airpatrol-stages")
        return self._helper_pool

    def _settle_sizes(self) -> None:
        pending, self._pending_sizes = self._pending_sizes, None
        if pending is not None:
            pending.result()  # the measurement's own error, if it raised, surfaces here

    def _drain_helper(self) -> None:
        """Wait for whatever the helper thread still runs, its errors dropped: they belong to a video that is over."""
        for pending in (self._pending_sizes, self._pending_motion):
            if pending is not None:
                wait([pending])
        self._pending_sizes = self._pending_motion = None

    def warm_up(self, width: int, height: int) -> float:
        """On CUDA (``config.warm_up``): the detector at every input shape a run on this frame size can use, the road
        U-Net and the torch ego-motion once each, on blank frames; no stream state is touched. Seconds spent (0 on the
        CPU and for a frame size already warmed)."""
        if not (self.config.warm_up and self.device.startswith("cuda")):
            return 0.0
        import torch

        t0 = time.perf_counter()
        if isinstance(self.detector, VehicleDetector):
            self.detector.warm_up(width, height, fixed=False if self.config.baseline else None)
        if self.road is not None:
            self.road.warm_up(width, height)
        register = getattr(self.ego, "register", None)  # the torch ego-motion (batched form: keeps no state)
        if register is not None and (width, height) not in self._warmed_ego:
            blank = np.zeros((height, width, 3), np.uint8)
            register(self.ego.prepare(blank), self.ego.prepare(blank))
            self._warmed_ego.add((width, height))
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    # ------------------------------------------------------------------------------------------------------
    def step(self, frame: Frame) -> FrameResult:
        if self._size is None:
            h, w = frame.image.shape[:2]
            self.reset(w, h, 25.0)
        if frame.pose is None and self.poses is not None:
            frame.pose = self.poses.pose_at(frame.t)
        self._end_tracks_after_outage(frame.t)
        return self._step_baseline(frame) if self.config.baseline else self._step_dual(frame)

    def _end_tracks_after_outage(self, t: float) -> None:
        """A source outage (a live link cut, a damaged stretch of a video) shows as a jump in the frames' times, not in
        the tracker's steps: to ByteTrack the next frame is one step on, and a vehicle now where another was (a queue
        moved up, a looping publisher started over) would take its id. Longer than the lost-track buffer lasts in time,
        the tracks end, as ByteTrack would end them had the frames arrived with nothing detected on them (a recorded
        run's linking may join a vehicle's pieces across it afterwards)."""
        last, self._last_t = self._last_t, t
        if last is None:
            return
        step = t - last
        # An overloaded live run hands over frames far apart all the time (each one taking a second on a slow CPU);
        # that is its pace, not an outage: only a step many times its usual one counts.
        usual = float(np.median(self._steps)) if self._steps else step  # the pace so far (an outage barely moves it)
        self._steps.append(step)
        if step > max(self.config.tracker.track_buffer / max(self.fps, 1e-6), OUTAGE_STEPS * usual):
            self.tracker.end_all()
            self._last_boxes = np.zeros((0, 4), np.float32)
            self.outages += 1

    def _tick(self, name: str, t0: float) -> float:
        t1 = time.perf_counter()
        self.timings[name] += (t1 - t0) * 1000
        return t1

    def _step_baseline(self, frame: Frame) -> FrameResult:
        t = time.perf_counter()
        dets = self.detector.detect(frame.image, tiling=False)
        t = self._tick("detect", t)
        rows = self.tracker.step(dets, None)
        t = self._tick("track", t)
        ground = self.scale.frame(frame.pose, None, frame.t)
        self._observe_sizes(frame, dets, rows, None)
        result = self._finish(frame, rows, dets, ground, None, None)
        self._tick("speed", t)
        return result

    def _step_dual(self, frame: Frame) -> FrameResult:
        cfg = self.config
        img = frame.image
        h, w = img.shape[:2]
        t = time.perf_counter()
        grey = self.ego.prepare(img)
        ego = self.ego.update(grey, self._last_boxes)
        if not ego.ok and self.frames > 0:
            self.ego_failures += 1
        H = ego.H if ego.ok else None
        if H is not None:
            self._H_cur_to_first = self._H_cur_to_first @ np.linalg.inv(H)
        # The road and motion layers run on the frames the detector runs on; between them the ego-motion is chained,
        # and its registration noise adds up like a random walk.
        self._since_key += 1
        self._H_since_key = None if H is None or self._H_since_key is None else H @ self._H_since_key
        self._H_road_since_key = (np.eye(3) if H is None else H) @ self._H_road_since_key  # road maps: kept in place
        self._residual_sq += ego.residual_px**2
        t = self._tick("ego_motion", t)
        if self._pending_sizes is not None:
            self._settle_sizes()
            t = self._tick("sizes_wait", t)  # what the last frame's size measurement did not hide behind the above

        ground = self.scale.frame(frame.pose, self._H_cur_to_first, frame.t)
        gap = 1 if self._last_index is None else max(1, (frame.index - self._last_index) // self._frame_step)
        self._last_index, self._last_gap = frame.index, gap
        self._since_detect += gap
        detect = self._until_detect == 0 or self._since_detect >= self._stride_video
        if not detect:
            self._until_detect -= 1
            if not self._motion_frames:
                return self._coast(frame, grey, H, ground, t)
            # a motion frame: the motion layer feeds the tracker, the detector is skipped
        self.detector_frames += detect
        H_road: np.ndarray | None
        H_key, H_road, elapsed = self._H_since_key, self._H_road_since_key, self._since_key
        self._residual_px = float(np.sqrt(self._residual_sq))
        self._H_since_key, self._H_road_since_key, self._since_key, self._residual_sq = np.eye(3), np.eye(3), 0, 0.0

        if cfg.motion.enabled and cfg.overlap_stages and isinstance(grey, np.ndarray):
            # the motion layer's background update needs the ego-motion only: it runs beside the road layer and the
            # detector; the road restriction is applied once the road mask is there (OpenCV backend: numpy frames)
            self._pending_motion = self._helper().submit(self._motion_field, grey, H_key, None, elapsed)
        if np.allclose(H_road, np.eye(3)):
            H_road = None  # no known motion: the maps stay as they are
        road = self.road.update(frame, H_road, elapsed) if self.road is not None else None
        t = self._tick("road", t)

        mpp = ground.metres_per_pixel(w / 2, h / 2) if ground is not None else None
        expected_car_px = cfg.speed.car_length_m / mpp if mpp else None
        if isinstance(self.detector, VehicleDetector):
            self.detector.frame_number = self.frames + 1  # for its record of which scale each frame used
            # the scale plan's CPU budget covers the frames until the next detector run
            self.detector.budget_frames = self._carried_stride if self._motion_frames else 1
        dets = self.detector.detect(img, road) if detect else Detections()
        if detect and self.any_heading_on:
            dets = Detections.concat([dets, self._any_heading(img, dets, H)])
        if detect and len(self.tracker.lost_stracks):
            dets = Detections.concat([dets, self._look_again(img, dets, H)])
        t = self._tick("detect", t)

        field, moving_fraction = None, None
        if self._pending_motion is not None:
            motion_job, self._pending_motion = self._pending_motion, None
            field = self._on_road(motion_job.result(), road)
        elif cfg.motion.enabled:
            field = self._motion_field(grey, H_key, road, elapsed)
        if field is not None:
            moving_fraction = field.moving_fraction(dets.xyxy, on_road_only=False)
            dets.moving = moving_fraction > MOVING_FRACTION
            if cfg.motion.promote_moving_fraction is not None and len(dets):
                # a weak detection that moves against the compensated background is more likely a vehicle than a
                # weak detection of static clutter: let it start a track like a confident one
                trk = cfg.tracker
                weak = (dets.score >= trk.track_low_thresh) & (dets.score < trk.new_track_thresh)
                promote = weak & (moving_fraction >= cfg.motion.promote_moving_fraction)
                if promote.any() and cfg.motion.promote_track_iou is not None:
                    # a weak box on a vehicle already tracked extends that track from the low band; promoted, it would
                    # match it only at IoU >= 0.8 (overlap x score): a loose one matches nothing, the track is lost
                    tracked = self.tracker.moving_predicted(H, 0, 0.0)
                    if len(tracked):
                        from supervision import box_iou_batch  # imported when needed (0.4 s)

                        iou = box_iou_batch(dets.xyxy[promote], tracked).max(1)
                        promote[promote] = iou < cfg.motion.promote_track_iou
                dets.score[promote] = trk.new_track_thresh
        dets = self._filter_boxes(dets, road, ground, moving_fraction)
        if field is not None:
            if cfg.motion.add_missed:
                previous = self._last_boxes if H is None else warp_boxes(H, self._last_boxes)
                dets = Detections.concat(
                    [dets, self._missed_movers(field, dets, ground, expected_car_px, previous, H_key, elapsed, detect)]
                )
        if len(self._unboxed_movers):  # only set on detector frames with any_heading.movers (_missed_movers)
            dets = Detections.concat([dets, self._any_heading_movers(img, dets, H)])
            self._unboxed_movers = _NO_BOXES
        if detect and self.hold is not None:
            xyxy, speed, ids, cls = self.tracker.standing_candidates(H)
            driven = None
            if self.hold.config.driven_path_s is not None and self.road is not None:
                centres = 0.5 * (xyxy[:, :2] + xyxy[:, 2:])
                driven = self.road.driven_within(centres, self.hold.config.driven_path_s * self.hold.fps)
            dets = Detections.concat([dets, self.hold.boxes(img, self.frames, xyxy, speed, ids, cls, dets, driven)])
        if not detect:  # the tracks no blob feeds move on by prediction, as on a coasted frame
            xyxy, score, cls = self.tracker.predicted(H)
            carried = np.minimum(score, self.config.tracker.track_low_thresh + 0.05)  # never starts a track
            n = len(xyxy)
            dets = Detections.concat(
                [dets, Detections(xyxy, carried, cls, np.full(n, DetectionSource.PREDICTED, np.int8), np.ones(n, bool))]
            )
        t = self._tick("motion", t)

        if cfg.tracker.weak_match_iou is not None and cfg.tracker.weak_match_moved_only:
            self.tracker.weak_match_ids = self.hold.moved if self.hold is not None else frozenset()
        # a track the detector started waits through the motion frames for the detector's next look to confirm it
        rows = self.tracker.step(dets, H, None if detect else self._detector_step)
        if detect:
            self._detector_step = self.tracker.frame_id
            if self.hold is not None:
                lost = self.tracker.lost_boxes() if self.hold.config.found_again else None
                self.hold.remember(img, self.frames, rows, dets, self.tracker.track_motion(), lost)
        idx = rows[:, 7].astype(int)
        src = dets.source[idx[(idx >= 0) & (idx < len(dets))]]
        self._fed_by.append((int(_by_detector(src).sum()), int((src == DetectionSource.MOTION).sum())))
        new = self.tracker.new_tracks()
        if detect and self._motion_frames:
            # a track the detector starts here may be confirmed by a motion blob on a motion frame: it is a track the
            # detector has seen (reported at once), whichever source confirms it
            for tr in new:
                i = int(getattr(tr, "idx", -1))
                if 0 <= i < len(dets) and _by_detector(dets.source[i]):
                    self._track_support.setdefault(tr.track_id, [self.frames, self.frames, True])
        if new and self._prev_grey is not None:
            boxes = np.array([tr.xyxy for tr in new], np.float32)
            self.tracker.set_new_velocities(new, self.ego.ground_velocities(self._prev_grey, grey, boxes, H))
        self._prev_grey = grey
        if detect:
            stride = self._detector_stride()  # decided on the tracks as they now are
            # with consecutive frames the countdown decides (stride <= _stride_video)
            self._until_detect, self._stride_video = stride - 1, max(stride, self.config.detector.every_n_frames)
            self._since_detect = 0
        t = self._tick("track", t)
        result = self._finish(frame, rows, dets, ground, H, road)
        if self.road is not None and result.tracks:
            moving = [tr for tr in result.tracks if tr.moving]
            if moving:
                self.road.observe_tracks(np.array([tr.center for tr in moving]), np.ones(len(moving), bool))
        # last: the size prior's measurements feed the next frame's scale only, and may run while it is stepped
        self._observe_sizes(frame, dets, rows, self._H_cur_to_first)
        self._tick("speed", t)
        return result

    def _any_heading(self, img: np.ndarray, dets: Detections, H: np.ndarray | None) -> Detections:
        """The any-heading detector's boxes of tracked or recently lost vehicles the shipped detector has no box for
        this frame (``detector.any_heading``, recorded runs), kept where such a track is predicted: they carry the
        tracks the shipped detector started (through a turn) and start none (its false positives cost MOTA on the real
        sequences when they could). By default only tracks last seen moving diagonally in the image are looked for:
        the vehicles the shipped detector misses (``min_axis_angle_deg``)."""
        cfg = self.config.detector.any_heading
        detect_any_heading = getattr(self.detector, "detect_any_heading", None)
        if detect_any_heading is None or not cfg.max_crops:
            return Detections()
        from supervision import box_iou_batch  # imported when needed: supervision takes 0.4 s to import

        # with min_axis_angle_deg (default), tracks last seen moving diagonally only (a false track on glare or a
        # structure never moved; a car that went along the image's axes is one the shipped detector sees); with
        # min_track_updates, tracks with a history only; with min_speed_lengths_s, moving ones only (drops queued cars)
        predicted = self.tracker.moving_predicted(
            H,
            max(1, round(cfg.max_lost_s * self.fps)),
            cfg.min_speed_lengths_s / max(self.fps, 1e-6),
            cfg.min_track_updates,
            cfg.min_axis_angle_deg,
        )
        h, w = img.shape[:2]  # a vehicle that has left the view is not looked for
        cx, cy = (predicted[:, 0] + predicted[:, 2]) / 2, (predicted[:, 1] + predicted[:, 3]) / 2
        orphan = (cx > 0) & (cx < w) & (cy > 0) & (cy < h)
        if len(dets) and orphan.any():
            orphan &= box_iou_batch(predicted, dets.xyxy).max(1) < cfg.new_iou
        around = predicted[orphan][: cfg.max_crops]
        found = detect_any_heading(img, around, dets) if len(around) else Detections()
        if not len(found):
            return found
        found = found[box_iou_batch(found.xyxy, predicted).max(1) >= cfg.track_iou]
        self.any_heading_kept += len(found)
        return found

    def _any_heading_movers(self, img: np.ndarray, dets: Detections, H: np.ndarray | None) -> Detections:
        """The any-heading detector's boxes at vehicle-sized moving blobs that no box explains and no established
        track follows (``detector.any_heading.movers``): a diagonal vehicle the shipped detector never boxed, so no
        track exists for the crops around tracks to carry, or one whose new track they do not look for yet. Kept where
        the box lies inside the blob (the moving thing is that vehicle): with its own score it may start a track."""
        cfg = self.config.detector.any_heading
        detect_any_heading = getattr(self.detector, "detect_any_heading", None)
        if detect_any_heading is None or not cfg.max_crops:
            return Detections()
        blobs = self._unboxed_movers
        if cfg.mover_established_updates:
            # beside a vehicle an established track follows, an unexplained moving blob is more often that vehicle's
            # shadow, headlights or part than another vehicle
            est = self.tracker.moving_predicted(
                H, max(1, round(cfg.max_lost_s * self.fps)), 0.0, cfg.mover_established_updates
            )
            if len(est) and len(blobs):
                blobs = blobs[overlap_fraction(blobs, est).max(1) <= 0.3]
        blobs = blobs[: cfg.max_crops]
        if not len(blobs):
            return Detections()
        found = detect_any_heading(img, blobs, dets)
        if not len(found):
            return found
        found = found[overlap_fraction(found.xyxy, blobs).max(1) >= cfg.mover_overlap]
        found.moving[:] = True
        self.any_heading_movers += len(found)
        return found

    def _look_again(self, img: np.ndarray, dets: Detections, H: np.ndarray | None) -> Detections:
        """Boxes of recently lost moving tracks found again in crops turned to their heading (recorded runs)."""
        cfg = self.config.look_again
        detect_crops = getattr(self.detector, "detect_crops", None)  # VehicleDetector's; a plain Detector has none
        if not cfg.enabled or detect_crops is None or not cfg.max_crops or (cfg.recorded_only and not self._recorded):
            return Detections()
        boxes, velocity, _ = self.tracker.lost_predicted(H, max(1, round(cfg.max_lost_s * self.fps)))
        if not len(boxes):
            return Detections()
        length = np.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
        ok = np.hypot(velocity[:, 0], velocity[:, 1]) * self.fps >= cfg.min_speed_lengths_s * length
        h, w = img.shape[:2]  # a vehicle that has left the view is not looked for
        ok &= (boxes[:, 0] + boxes[:, 2] > 0) & (boxes[:, 0] + boxes[:, 2] < 2 * w)
        ok &= (boxes[:, 1] + boxes[:, 3] > 0) & (boxes[:, 1] + boxes[:, 3] < 2 * h)
        if len(dets):  # a detection already there: the track is matched as usual
            ok &= overlap_fraction(boxes, dets.xyxy).max(1) < 0.3
        take = np.flatnonzero(ok)[::-1][: cfg.max_crops]  # lost_stracks keeps the order they were lost in
        if not len(take):
            return Detections()
        centers = np.column_stack([(boxes[take, 0] + boxes[take, 2]) / 2, (boxes[take, 1] + boxes[take, 3]) / 2])
        headings = np.arctan2(velocity[take, 1], velocity[take, 0])
        found, _ = look_again(
            lambda crops: detect_crops(crops, CROP_PX), img, centers, headings, length[take], cfg.min_score
        )
        if len(found) and len(dets):
            found = found[overlap_fraction(found.xyxy, dets.xyxy).max(1) < 0.5]
        self.looked_again += len(take)
        self.found_again += len(found)
        return found

    def _detector_stride(self) -> int:
        """Frames (as handed over) until the next detector run: ``detector.every_n_frames``; while the motion layer
        feeds a good share of the tracks, ``motion.carried_detector_every_n_frames`` with motion frames between (1
        there: the detector on every frame). Coasting carries tracks the detector sees; vehicles too small for it are
        tracked from motion blobs alone, and those need every frame (the blob gate and the tracker compare consecutive
        blobs)."""
        k = self.config.detector.every_n_frames
        if self._last_gap > 1:
            # frames handed over this far apart (a live stream shedding frames): the stride in them is the configured
            # one divided by the gap, on every one once they are ``every_n_frames`` apart (coasting across a hole
            # loses vehicles and saves nothing: the frames between are already shed)
            k = max(1, math.floor(k / self._last_gap + 1e-9))
        share = getattr(self.detector, "budget_share", None)
        if self.config.detector.stride_follows_scale and share is not None:
            # a cheaper detector pass runs more often for the same compute
            k = max(min(k, self.config.detector.min_every_n_frames), min(k, round(k * share)))
        det = sum(d for d, _ in self._fed_by)
        blob = sum(b for _, b in self._fed_by)
        # detector.every_n_frames=1 asks for the detector on every frame: no motion frames then
        self._motion_frames = k > 1 and self._carried_stride > 1 and blob > MOTION_CARRIES_FRACTION * max(det, 1)
        if self._motion_frames:
            return self._carried_stride  # the frames between are motion frames: blobs feed the tracker every frame
        if k == 1 or blob > MOTION_CARRIES_FRACTION * max(det, 1):
            return 1
        # Coasting works while vehicles move little against their own size between detector frames: the prediction
        # stays on them and a new track still overlaps its vehicle k frames later. Small fast vehicles (a highway
        # from high up) move their own length in a few frames: then every frame is detected.
        tracks = [t for t in self.tracker.tracked_stracks if t.is_activated and t.tracklet_len >= 2]
        if not tracks and self.tracker.tracked_stracks:
            return 1  # vehicles whose motion is not measured yet (a video's first frames)
        if tracks and _coast_motion(tracks, k) > MAX_COAST_MOTION:
            return 1
        # Tracks started here and not confirmed yet, with the motion optical flow measured on them: vehicles this
        # fast may not be confirmed by a pass k frames later, so the confirmed tracks above (parked cars, a queue)
        # may never show them (a motorway filmed in 4K at 10 fps: 45 vehicles tracked against 89 with the detector
        # on every frame, docs/study.md)
        new = [
            t
            for t in self.tracker.tracked_stracks
            if not t.is_activated and t.mean is not None and np.hypot(t.mean[4], t.mean[5]) > 0
        ]
        if new and _coast_motion(new, k) > NEW_TRACK_COAST_MOTION:
            return 1
        return k

    def _coast(self, frame: Frame, grey: np.ndarray, H: np.ndarray | None, ground, t: float) -> FrameResult:
        """A frame between two detector runs (``detector.every_n_frames``): the tracks move on by prediction and the
        drone's ego-motion; nothing is detected or associated."""
        rows = self.tracker.coast(H)
        self._prev_grey = grey
        t = self._tick("track", t)
        result = self._finish(frame, rows, Detections(), ground, H, self.road.mask if self.road is not None else None)
        self._tick("speed", t)
        return result

    def _motion_field(self, grey, H: np.ndarray | None, road: np.ndarray | None, elapsed: int):
        s = self.ego.scale
        H_small = None if H is None else np.diag([s, s, 1.0]) @ H @ np.diag([1 / s, 1 / s, 1.0])
        return self.motion.update(grey, H_small, s, self._road_small(road, grey), elapsed)

    @staticmethod
    def _road_small(road: np.ndarray | None, grey) -> np.ndarray | None:
        small_wh = tuple(grey.shape[-2:])[::-1]  # (h, w) array or (1, 1, h, w) tensor
        return None if road is None else cv2.resize(road, small_wh, interpolation=cv2.INTER_NEAREST)

    def _on_road(self, field: MotionField, road: np.ndarray | None) -> MotionField:
        """A motion field computed without the road mask, restricted to it as ``MotionDetector.update`` does."""
        if road is None or field.unrestricted is None:
            return field
        h, w = field.unrestricted.shape[:2]
        on_road = cv2.bitwise_and(field.unrestricted, cv2.resize(road, (w, h), interpolation=cv2.INTER_NEAREST))
        return MotionField(on_road, field.scale, field.changed, unrestricted=field.unrestricted)

    def _filter_boxes(
        self, dets: Detections, road: np.ndarray | None, ground, moving_fraction: np.ndarray | None = None
    ) -> Detections:
        """Drop boxes too large to be one vehicle, boxes where the U-Net is sure there is no road and, with
        ``road.filter_detections``, every box off the road mask.

        A detected vehicle that moves against the (ego-motion compensated) background is traffic even where the road
        mask says otherwise: the U-Net misses road at scales and looks it was not trained on (e.g. 40 m over a
        junction, cars covering the lanes). Keeping those boxes lets them become tracks, and the road layer then
        learns their lanes from the tracks, so the same vehicles are kept when they stop there.
        """
        if not len(dets):
            return dets
        h, w = self._wh[1], self._wh[0]
        wh = dets.wh
        keep = (wh[:, 0] <= self.config.detector.max_box_fraction * w) & (
            wh[:, 1] <= self.config.detector.max_box_fraction * h
        )
        if ground is not None and ground.source != ScaleSource.SIZE_PRIOR:
            c = dets.centers
            mpp = np.array([ground.metres_per_pixel(x, y) for x, y in c])
            keep &= wh.max(1) * mpp <= MAX_VEHICLE_M
        sure = self.config.road.sure_off_road_probability
        if road is not None and self.road is not None and not self.config.road.filter_detections and sure is not None:
            off = self.road.surely_off_road(dets.centers, sure)  # clutter on roofs and fields only
            confident = self.config.road.sure_off_road_max_score
            if confident is not None:  # ... never a vehicle the detector is confident about
                off &= dets.score < confident
            keep &= ~off
        if road is not None and self.config.road.filter_detections:
            c = dets.centers.astype(int)
            cx, cy = c[:, 0].clip(0, w - 1), c[:, 1].clip(0, h - 1)
            on_road = road[cy, cx] > 0
            if moving_fraction is not None:
                # off the mapped road only confident boxes that are mostly moving pixels: clutter with some parallax
                # or a passing shadow does not qualify
                on_road |= (moving_fraction > OFF_ROAD_MOVING_FRACTION) & (dets.score >= OFF_ROAD_MIN_SCORE)
            keep &= on_road
        return dets[keep]

    def _missed_movers(
        self,
        field,
        dets: Detections,
        ground,
        expected_car_px: float | None,
        previous_tracks: np.ndarray,
        H: np.ndarray | None,
        elapsed: int,
        detector_ran: bool = True,
    ) -> Detections:
        """Moving blobs no detector box explains: tiny or rare-coloured vehicles the detector missed.
        ``previous_tracks``: last frame's track boxes, moved into this frame by the ego-motion.

        Only blobs the gate has seen move consistently over several frames count (vision/motion_gate.py): a single
        frame's foreground is as often residual misregistration, parallax or flicker as a vehicle.
        """
        blobs = self.motion.blobs(field)
        moving = self.gate.update(blobs, H, self._residual_px, self.fps / elapsed)  # the gate counts its own calls
        blobs = blobs[moving]
        if not len(blobs):
            return Detections()
        if len(dets):
            inside = overlap_fraction(blobs, dets.xyxy).max(1) > 0.2
            blobs = blobs[~inside]
        if not len(blobs):
            return Detections()
        bw, bh = blobs[:, 2] - blobs[:, 0], blobs[:, 3] - blobs[:, 1]
        long_side, short_side = np.maximum(bw, bh), np.minimum(bw, bh)
        ok = short_side >= 3
        ref = expected_car_px or self._median_car_px()
        if ref:
            ok &= (long_side >= 0.5 * ref) & (long_side <= 4.0 * ref) & (short_side <= 2.0 * ref)
        else:
            ok &= long_side <= 0.1 * max(self._wh)
        # Vehicles big enough for the detector are left to it: a motion blob's box (vehicle + shadow, or two vehicles
        # merged) is looser than a detector box. Blobs fill in where the detector is blind: vehicles only a few
        # pixels long in its input.
        det_scale = getattr(self.detector, "input_scale", None) or (
            1.0 if getattr(self.detector, "tiling_active", False) else self.config.detector.imgsz / max(self._wh)
        )
        small = long_side * det_scale <= self.config.motion.max_blob_detector_px
        if detector_ran and self.any_heading_on and self.config.detector.any_heading.movers:
            self._unboxed_movers = blobs[ok & ~small]  # vehicle-sized, too big for a blob detection, no box explains
        ok &= small
        blobs = blobs[ok]
        n = len(blobs)
        cls = np.zeros(n, int)  # car, or truck when clearly longer than a car
        if ref and n:
            cls = np.where(np.maximum(blobs[:, 2] - blobs[:, 0], blobs[:, 3] - blobs[:, 1]) > 1.7 * ref, 1, 0)
        # A blob on a vehicle that is already tracked, and big enough for the detector to see, only keeps that track
        # alive through the frames the detector misses (low score: ByteTrack's second association). As a high-score
        # detection its loose box (vehicle + shadow) would start a second track beside the detector's, which was most
        # of the dual layer's false positives. Blobs of vehicles the detector is blind to (too small) or has never
        # tracked (an unusual colour or shape) keep the high score and may start tracks.
        mc = self.config.motion
        in_detector_px = np.maximum(blobs[:, 2] - blobs[:, 0], blobs[:, 3] - blobs[:, 1]) * det_scale
        near_track = np.zeros(n, bool)
        if n and len(previous_tracks):
            near_track = overlap_fraction(blobs, previous_tracks).max(1) > 0.3
        # On a motion frame (the detector skipped it) a blob is the only measurement of its vehicle: it feeds the track.
        extend_only = near_track & (in_detector_px >= mc.detector_blind_px) & detector_ran
        score = np.where(extend_only, mc.visible_blob_score, mc.blob_score).astype(np.float32)
        return Detections(blobs, score, cls, np.full(n, DetectionSource.MOTION, np.int8), np.ones(n, bool))

    def _median_car_px(self) -> float | None:
        g = self.scale.size_prior_frame()
        if g is None:
            return None
        return self.config.speed.car_length_m / g.metres_per_pixel(self._wh[0] / 2, self._wh[1] / 2)

    def _observe_sizes(
        self, frame: Frame, dets: Detections, rows: np.ndarray, H_cur_to_first: np.ndarray | None
    ) -> None:
        """Every tracked vehicle's measured box this frame (detector or motion blob) goes to the size prior, which
        measures the vehicle in the image itself (``tracking.vehicle_size``)."""
        rows = np.asarray(rows).reshape(-1, 8)
        idx = rows[:, 7].astype(int)
        ok = (idx >= 0) & (idx < len(dets))
        ok[ok] = dets.source[idx[ok]] != DetectionSource.PREDICTED  # a prediction measures nothing
        if ok.any():
            i = idx[ok]
            args = (
                frame.t,
                frame.image,
                dets.xyxy[i],
                rows[ok, 4].astype(int),
                dets.class_id[i],
                dets.source[i] == DetectionSource.DETECTOR,
                None if H_cur_to_first is None else H_cur_to_first.copy(),
            )
            scale = self.scale  # the last frame's measurement done: one at a time, in frame order
            if self.config.overlap_stages and not self.config.baseline:
                # Measuring the vehicles (~7 ms of Python a 1080p frame) overlaps the next frame's ego-motion, whose
                # OpenCV calls run outside the interpreter lock; only that frame's scale needs the result.
                self._pending_sizes = self._helper().submit(scale.observe_vehicles, *args)
            else:
                scale.observe_vehicles(*args)

    def _finish(self, frame: Frame, rows: np.ndarray, dets: Detections, ground, H, road) -> FrameResult:
        cfg = self.config
        tracks: list[TrackState] = []
        for x1, y1, x2, y2, tid, score, cls, idx in rows:
            i = int(idx)
            # the box the detector (or motion layer) saw this frame, not the Kalman filter's blend of it with the
            # prediction: measured closer to the ground truth (UAVDT M1303 first 150 frames: MOTA 68.9 -> 69.6 dual,
            # 50.1 -> 50.7 baseline)
            # The baseline reports the tracker's box, as Ultralytics' `track` does: it is plain YOLOv8 + ByteTrack.
            box = dets.xyxy[i] if 0 <= i < len(dets) and not cfg.baseline else np.array([x1, y1, x2, y2], np.float32)
            tracks.append(
                TrackState(
                    int(tid),
                    np.array(box, np.float32),
                    float(score),
                    int(cls),
                    moving=bool(dets.moving[i]) if 0 <= i < len(dets) and not cfg.baseline else True,
                    measured=bool(0 <= i < len(dets) and dets.source[i] != DetectionSource.PREDICTED),
                )
            )
        speeds = self.speed.update(frame.t, {tr.track_id: tr.center for tr in tracks}, ground, H)
        for tr in tracks:
            s = speeds.get(tr.track_id)
            if s is None:
                continue
            tr.speed_kmh, tr.speed_sigma_kmh, tr.speed_flag, tr.ground_xy = (
                s.speed_kmh,
                s.sigma_kmh,
                s.flag,
                s.ground_xy,
            )
            if s.lonlat:
                tr.lon, tr.lat = s.lonlat
            if s.speed_kmh is not None and not cfg.baseline:
                tr.moving = s.speed_kmh >= cfg.speed.stationary_kmh
        self._last_boxes = np.array([tr.xyxy for tr in tracks], np.float32).reshape(-1, 4)
        withheld: list[TrackState] = []
        if not cfg.baseline:
            tracks, withheld = self._confirmed(tracks, rows, dets)
            if not cfg.motion.report_from_first_frame:
                withheld = []  # reported from confirmation on, live or recorded: nothing to hold
            if self._edge is not None and (tracks or withheld):
                # a box the detector or a blob gave this frame; a track's own prediction (motion frames) is not one
                measured = {
                    int(r[4])
                    for r in rows
                    if 0 <= int(r[7]) < len(dets) and dets.source[int(r[7])] != DetectionSource.PREDICTED
                }
                both = tracks + withheld  # a withheld track reported later from its start follows the rule there too
                keep = self._edge.keep(
                    [tr.track_id for tr in both],
                    np.array([tr.xyxy for tr in both]),
                    np.array([tr.track_id in measured for tr in both]),
                    np.arange(len(both)) < len(tracks),  # the reported tracks' sizes, as before anything was withheld
                )
                n = len(tracks)
                tracks = [tr for tr, k in zip(tracks, keep[:n]) if k]
                withheld = [tr for tr, k in zip(withheld, keep[n:]) if k]
        self.track_ids.update(tr.track_id for tr in tracks)
        lost: frozenset[int] = frozenset()
        to_first = None
        if not cfg.baseline and (cfg.tracker.fill_lost_gaps or cfg.linking.enabled):
            lost = frozenset(int(t.track_id) for t in self.tracker.lost_stracks) if cfg.tracker.fill_lost_gaps else lost
            to_first = self._H_cur_to_first.copy()
        looks: dict[int, np.ndarray] = {}
        if self.looks is not None:
            looks = self.looks.sample(
                frame.image, frame.t, [(tr.track_id, tr.xyxy) for tr in tracks + withheld if tr.measured]
            )
        self.frames += 1
        h, w = frame.image.shape[:2]
        return FrameResult(
            frame=frame,
            tracks=tracks,
            road_mask=road,
            metres_per_pixel=ground.metres_per_pixel(w / 2, h / 2) if ground is not None else None,
            scale_source=ground.source if ground is not None else None,
            scale_detail=ground.description if ground is not None else None,
            withheld=withheld,
            lost_ids=lost,
            to_first=to_first,
            appearance=looks,
        )

    def _confirmed(
        self, tracks: list[TrackState], rows: np.ndarray, dets: Detections
    ) -> tuple[list[TrackState], list[TrackState]]:
        """The tracks worth reporting: any the detector has seen, and motion-only tracks once they have lasted; and
        the motion-only tracks withheld because they have not lasted yet (reported from their start once they have,
        in recorded runs: ``report_lookback_frames``).

        A track only motion blobs ever fed is reported after ``motion.min_motion_track_s``: real movers the detector
        cannot see last, while flicker (jitter, parallax, a shadow edge) rarely does. Measured on the accuracy suite:
        motion-only tracks shorter than 15 frames were right in a quarter of their frames, longer ones in 60 %.
        """
        f = self.frames
        seen = self._track_support
        from_blob: set[int] = set()
        for *_, tid, _score, _cls, idx in rows:
            i, tid = int(idx), int(tid)
            entry = seen.setdefault(tid, [f, f, False])
            entry[1] = f
            by_detector = 0 <= i < len(dets) and bool(_by_detector(dets.source[i]))
            entry[2] = entry[2] or by_detector
            if 0 <= i < len(dets) and dets.source[i] == DetectionSource.MOTION:
                from_blob.add(tid)
        if f % 50 == 0:  # forget tracks gone for longer than the tracker keeps them
            horizon = f - self.config.tracker.track_buffer - 1
            for tid in [t for t, e in seen.items() if e[1] < horizon]:
                del seen[tid]
        min_frames = self.config.motion.min_motion_track_s * self.fps
        stationary = self.config.speed.stationary_kmh
        # A vehicle that stands is reported from detector evidence only: a motion blob on a track measured standing
        # contradicts itself (flicker, parallax or a shadow beside a parked car), and was the dual layer's largest
        # source of false positives on a moving drone.
        reported: list[TrackState] = []
        withheld: list[TrackState] = []
        for tr in tracks:
            if tr.track_id in from_blob and tr.speed_kmh is not None and tr.speed_kmh < stationary:
                continue
            entry = seen[tr.track_id]
            (reported if entry[2] or f - entry[0] + 1 >= min_frames else withheld).append(tr)
        return reported, withheld

    def report_lookback_frames(self) -> int:
        """How many frames a recorded run holds its results back (``motion.min_motion_track_s``; 0: none, as live):
        so that a motion-only track is reported from its first frame once it has lasted that long, and a track lost
        and found again within it is reported on the frames between (``tracker.fill_lost_gaps``).

        Only motion-only tracks are reported from their first frame: reporting the tracks ByteTrack starts from their
        first detector box too (before its second look confirms them) scored M1303 +0.5, M1003 night -0.6 (23 more
        false positives), M0703 -0.2 MOTA (docs/detector_scale.md)."""
        cfg = self.config
        m = cfg.motion
        starts = m.enabled and m.report_from_first_frame
        if cfg.baseline or not (starts or cfg.tracker.fill_lost_gaps):
            return 0
        return int(np.ceil(m.min_motion_track_s * (self.fps or 25.0)))

    def stats(self) -> dict:
        n = max(1, self.frames)
        return {
            "frames": self.frames,
            "tracks": len(self.track_ids),
            "ms_per_frame_by_stage": {k: round(v / n, 2) for k, v in self.timings.items()},
            "ego_motion_failures": self.ego_failures,
            "warm_up_s": round(getattr(self, "warm_up_s", 0.0), 3),  # CUDA start-up: warm_up(), not in the frame loop
            "detector_tiles": getattr(self.detector, "tiles_run", 0),
            "detector_frames": self.detector_frames if not self.config.baseline else self.frames,
            "looked_again": {"crops": self.looked_again, "found": self.found_again},
            "standing_held": self.hold.held if self.hold is not None else 0,  # boxes that carried a track (the hold)
            # the any-heading detector's crops, its boxes the shipped one had no box for, those kept at a predicted track
            "any_heading": {
                "crops": getattr(self.detector, "any_heading_crops", 0),
                "boxes": getattr(self.detector, "any_heading_boxes", 0),
                "kept": self.any_heading_kept,
                "at_movers": self.any_heading_movers,
            },
            # frame range x rows -> the detector's input scale (input px per frame px), as the dual layer chose it
            "detector_scales": list(getattr(self.detector, "scale_log", [])) if not self.config.baseline else None,
        }


def _by_detector(source: np.ndarray) -> np.ndarray:
    """Boxes a detector gave (the shipped one or the any-heading one), not a motion blob or a track's prediction."""
    # two comparisons, not np.isin: this runs per track and frame, where isin's set machinery cost ~3 ms a 1080p frame
    return (source == DetectionSource.DETECTOR) | (source == DetectionSource.ANY_HEADING)


_NO_BOXES = np.zeros((0, 4), np.float32)
