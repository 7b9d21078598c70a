"""The one configuration model of the pipeline.

CLI flags, a YAML/JSON config file and ``AIRPATROL_*`` environment variables all fill this model
(see ``edge.config``); stages receive only their own section.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tracking.frame_rate import AnalysisRateConfig, analysis_step
from tracking.linking import LinkingConfig
from tracking.standing_hold import StandingHoldConfig

# The vision stages' own configs live next to them (vision/config.py); re-exported here, where the pipeline's
# composed config is, so existing imports keep working.
from vision.config import DetectorConfig, EgoMotionConfig, MotionConfig, RoadConfig
from vision.config_base import StageConfig
from vision.motion_gate import MotionGateConfig

__all__ = [
    "CalibrationConfig",
    "DetectorConfig",
    "EgoMotionConfig",
    "LinkingConfig",
    "MotionConfig",
    "MotionGateConfig",
    "PipelineConfig",
    "RoadConfig",
    "SpeedConfig",
    "StandingHoldConfig",
    "TrackerConfig",
]


class TrackerConfig(StageConfig):
    track_high_thresh: float = 0.25
    track_low_thresh: float = 0.1
    new_track_thresh: float = 0.25
    track_buffer: int = 30
    match_thresh: float = 0.8
    fuse_score: bool = True
    fill_lost_gaps: bool = Field(
        True,
        description="a recorded run (and a live stream's stored run) reports a moving track the tracker lost and "
        "found again within its hold-back (motion.min_motion_track_s) on the frames between too, at boxes and "
        "positions interpolated between the two frames it was seen on with the drone's own motion taken out "
        "(ByteTrack's own offline interpolation; such boxes have no speed and the speed flag 'interpolated'). A gap a "
        "rule made (the frame's edge, a standing vehicle's blob) and a standing track's gap (as likely clutter as a "
        "parked car) are never filled; the live feed cannot wait and fills nothing. False: lost frames stay empty",
    )
    weak_tracks: bool = Field(
        False,
        description="opt-in (dual layer): a vehicle the detector boxes only weakly (new_track_thresh to 0.3) frame "
        "after frame gets a track: a track started last frame is confirmed by a weak box overlapping it at IoU 0.5. "
        "Ultralytics' ByteTrack (the default, and the baseline) asks IoU x score >= 0.3 there, out of reach below "
        "0.3: a diagonal car the detector scores 0.1-0.25, its box promoted as it moves "
        "(motion.promote_moving_fraction), or one creeping in a queue, starts a track on every frame and never keeps "
        "one. A weak box overlapping a track (IoU >= 0.3) starts none: it would be a second one on that vehicle. On "
        "the oblique study renders more crossings get a right O-D, and twice the ID switches (docs/study.md)",
    )
    weak_match_iou: float | None = Field(
        None,
        gt=0,
        le=1,
        description="opt-in (dual layer; 0.5 measured): a box scored under 0.3 of about a track's size extends that "
        "confirmed track where it overlaps it at IoU >= this: a box of the high band under 0.3 after the first "
        "association (lost tracks too with weak_refind_lost, and then the low band's boxes in the second), for tracks "
        "that stand and drove there only (below). Ultralytics' first association weighs overlap by score "
        "(fuse_score), so a box scored 0.25-0.3 needs IoU 0.67-0.8 there, while a box just under track_high_thresh "
        "extends a tracked track at IoU 0.5: a queued car boxed at 0.1-0.3 lost its track and, no weak box confirming "
        "a new one, stayed untracked for tens of seconds. UAVDT unchanged, one oblique render's study better and "
        "another's worse, so not the default (docs/study.md). None: Ultralytics' rule (the baseline's always)",
    )
    weak_refind_lost: bool = Field(
        False,
        description="with weak_match_iou, weak boxes also find lost confirmed tracks again: those under 0.3 of the "
        "high band after the first association, and the low band's in the second (Ultralytics: tracked ones only). "
        "False: weak boxes extend tracks still tracked only",
    )
    weak_match_standing_lengths_s: float | None = Field(
        0.5,
        gt=0,
        description="weak boxes extend only tracks slower than this many of their box lengths a second (standing or "
        "creeping in a queue); on real footage moving tracks carried on weak boxes cost MOTA (UAVDT M1303 -2.2). "
        "None: any speed",
    )
    weak_match_moved_only: bool = Field(
        True,
        description="weak boxes extend only tracks the standing hold has seen drive there (standing_hold."
        "moved_lengths; with the hold off, none): a parked car's or clutter's track is not carried by them (UAVDT "
        "night: 47 false boxes with this, 127 without)",
    )
    min_visible_at_border: float | None = Field(
        0.5,
        ge=0,
        le=1,
        description="a track whose box is cut by the frame's edge is reported only while at least this share of its "
        "vehicle is in view (its box inside the frame against the vehicle's whole box: the track's own box when it "
        "was last seen whole, else the median box of whole vehicles in the same rows); the track itself lives on. A "
        "sliver of a vehicle entering or leaving the view has a box whose centre and size are not the vehicle's "
        "(its speed and class follow), and UAVDT's annotators leave such slivers out too (docs/accuracy.md). "
        "None: every track is reported",
    )


class SpeedConfig(StageConfig):
    window_s: float = Field(1.0, gt=0, description="regression window for speed")
    min_track_s: float = Field(0.4, ge=0)
    max_plausible_kmh: float = Field(250.0, gt=0)
    max_accel_ms2: float = Field(12.0, gt=0, description="larger jumps are flagged implausible")
    stationary_kmh: float = Field(4.0, ge=0, description="below this a vehicle counts as standing")
    car_length_m: float = Field(4.5, gt=0, description="median car length, for the size-prior scale")
    car_width_m: float = Field(1.8, gt=0, description="median car width (without mirrors), for the size-prior scale")
    size_window_s: float = Field(30.0, gt=0, description="size prior: vehicles seen in the last N seconds count")
    size_min_tracks: int = Field(5, ge=1, description="size prior: vehicles measured before it gives a scale")
    size_systematic_rel: float = Field(
        0.08,
        ge=0,
        description="size prior: 1-sigma relative error no number of vehicles removes (the local fleet's "
        "mean size against the priors, how vehicles stand out from the road)",
    )
    size_focal_rel: float = Field(0.08, ge=0, description="size prior, oblique views: error of the assumed lens")
    size_min_perspective: float = Field(
        0.25, ge=0, description="size prior: relative change of vehicle size top to bottom that makes a view oblique"
    )
    assumed_focal_equiv_mm: float = Field(
        24.0, gt=0, description="size prior, oblique views: 35 mm-equivalent focal length assumed (most drone lenses)"
    )
    max_metres_per_pixel: float = Field(
        1.0, gt=0, description="no speed where a pixel is coarser than this (a car under ~5 px; near the horizon)"
    )


class CalibrationConfig(BaseModel):
    """User calibration: either a constant scale, or four image points with their ground coordinates in metres."""

    metres_per_pixel: float | None = Field(None, gt=0)
    image_points: list[tuple[float, float]] | None = Field(
        None,
        description="pixel points (first frame); with lonlat_points and no image_points: the frame corners TL, TR, BR, BL",
    )
    ground_points_m: list[tuple[float, float]] | None = Field(
        None, description="ground (east, north) metres of image_points"
    )
    lonlat_points: list[tuple[float, float]] | None = Field(None, description="WGS84 (lon, lat) of image_points")

    @property
    def is_set(self) -> bool:
        return bool(self.metres_per_pixel or self.ground_points_m or self.lonlat_points)


class LookAgainConfig(StageConfig):
    """Recorded runs: where a moving vehicle was lost, look again in a crop turned to its heading
    (``vision/turned_crops.py``): the detector misses turning cars it would see lying along the image axes."""

    enabled: bool = True
    recorded_only: bool = Field(True, description="live streams keep their per-frame cost")
    max_lost_s: float = Field(1.0, gt=0, description="tracks lost at most this long ago")
    min_speed_lengths_s: float = Field(0.5, ge=0, description="moving: at least this many of its lengths a second")
    min_score: float = Field(0.25, ge=0, le=1, description="a box in the turned crop counts from this score")
    max_crops: int = Field(8, ge=0, description="crops per detector frame, most recently lost tracks first")


class PipelineConfig(StageConfig):
    device: Literal["auto", "cpu", "cuda"] = "auto"
    baseline: bool = Field(False, description="plain YOLOv8 + ByteTrack with a constant scale")
    detector: DetectorConfig = DetectorConfig()
    road: RoadConfig = RoadConfig()
    ego_motion: EgoMotionConfig = EgoMotionConfig()
    motion: MotionConfig = MotionConfig()
    tracker: TrackerConfig = TrackerConfig()
    linking: LinkingConfig = LinkingConfig()
    analysis_rate: AnalysisRateConfig = (
        AnalysisRateConfig()
    )  # recorded runs at high frame rates: tracking/frame_rate.py
    look_again: LookAgainConfig = LookAgainConfig()
    standing_hold: StandingHoldConfig = StandingHoldConfig()
    speed: SpeedConfig = SpeedConfig()
    calibration: CalibrationConfig = CalibrationConfig()
    warm_up: bool = Field(
        True,
        description="CUDA: at the start of a video or stream, run the detector once at every input shape its scale "
        "plan can use, the road U-Net and the torch ego-motion once, so the first frames do not pay each shape's "
        "first CUDA call (on the CPU nothing is run: there it would only cost)",
    )
    overlap_stages: bool = Field(
        True,
        description="run two CPU stages in a helper thread beside stages that do not need their results: the "
        "vehicle measurements for the size prior beside the next frame's ego-motion, and the motion layer's "
        "background update beside the road layer and the detector (OpenCV, numpy and the GPU work outside the "
        "interpreter lock). Each result is waited for where it is used, so the results are the same as in turn",
    )

    def recorded_step(self, fps: float, width: int, height: int) -> int:
        """Analyse every n-th frame of a recorded run of this rate and size: 1 where nothing is linked (the
        whole-flight results are what the frames between are filled from) or for the plain baseline."""
        if not self.linking.enabled or self.baseline:
            return 1
        return analysis_step(fps, width, height, self.analysis_rate)
