"""The configuration of each vision stage: detector, road, ego-motion and motion layer.

Each stage's settings live next to the stages (layers only look down: ``vision`` must not import ``tracking``);
``tracking.config.PipelineConfig`` composes them and re-exports these names, so ``from tracking.config import
DetectorConfig`` keeps working.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vision.config_base import StageConfig
from vision.motion_gate import MotionGateConfig

__all__ = ["AnyHeadingConfig", "DetectorConfig", "EgoMotionConfig", "MotionConfig", "MotionGateConfig", "RoadConfig"]


class AnyHeadingConfig(StageConfig):
    """Recorded runs: a second detector, trained on vehicles at any heading, beside the shipped one, for the diagonal
    vehicles the shipped one misses.

    The shipped detector misses many turning and diagonal vehicles (a roundabout, a junction's turns, a road across
    the frame); the any-heading one finds them but, as *the* detector, cost 2-15 MOTA on the real UAVDT sequences
    (looser boxes, more false positives). So it only looks where a tracked or recently lost vehicle is predicted and
    the shipped detector has no box, in small crops (a second pass over the whole frame cost 1.6-1.9x plain
    Ultralytics' CPU time on UAVDT), its box is kept only at the predicted track (it extends the tracks the shipped
    detector started), and only for tracks last seen moving diagonally in the image (``min_axis_angle_deg``): on the
    study renders it turns 64.2 % right O-D into 75.5 % at an oblique intersection (an oblique roundabout: 69.7 ->
    67.1 %), while the real UAVDT sequences stay within 0.1 MOTA (looking for every track carried false tracks on:
    -2.1 MOTA at night); docs/study.md, "A second detector for turning cars".
    """

    enabled: bool = Field(
        True,
        description="on: with the shipped detector (named or by default); with another one only when weights is set",
    )
    weights: str | None = Field(None, description="its YOLO weights; default: the shipped any-heading detector")
    recorded_only: bool = Field(True, description="live streams keep their per-frame cost")
    new_iou: float = Field(
        0.3,
        ge=0,
        le=1,
        description="a track has no box of the shipped detector, and a box of this one is new, when its IoU with "
        "every box of the shipped detector is below this",
    )
    track_iou: float = Field(
        0.3, ge=0, le=1, description="a new box is kept when its IoU with a track's predicted box is at least this"
    )
    max_lost_s: float = Field(1.0, ge=0, description="tracks lost at most this long ago are looked for too")
    min_track_updates: int = Field(
        0,
        ge=0,
        description="tracks looked for were matched at least this many times: a false track the shipped detector "
        "started on glare or a structure and let go has few (real night M1003, 240 frames: with 0, 15 of the boxes it "
        "kept were on a vehicle and 49 on none; with 10, 3 and 2; but the study renders keep only part of the gain)",
    )
    min_speed_lengths_s: float = Field(
        0.0,
        ge=0,
        description="tracks looked for move at least this many of their lengths a second (0.5 keeps standing false "
        "tracks from being carried on, but also the queued and slow turning vehicles a study needs)",
    )
    min_axis_angle_deg: float = Field(
        20.0,
        ge=0,
        le=45,
        description="tracks looked for were last seen moving at least this many degrees off both image axes: the "
        "shipped detector misses diagonal vehicles, which this one finds; one going along the axes that it misses is "
        "hidden, dark or not a vehicle (a false track on glare or a structure), where this one only adds its looser "
        "boxes and false positives; a track never seen moving is not looked for (0: every track, moving or not)",
    )
    heading_speed_lengths_s: float = Field(
        0.5, gt=0, description="a track's heading is noted while it moves at least this many of its lengths a second"
    )
    crop_lengths: float = Field(
        2.5, gt=1, description="the square crop around a track: this many times its box's long side"
    )
    min_crop_px: int = Field(64, ge=32, description="the smallest crop (frame px)")
    max_crops: int = Field(
        16, ge=0, description="tracks looked for per detector frame, tracked ones first, then the most recently lost"
    )
    movers: bool = Field(
        False,
        description="opt-in for junction studies: also look where the motion layer sees a vehicle-sized thing move "
        "that no box explains and no established track follows (a diagonal car the shipped detector never boxed, or "
        "its new track, which the crops around tracks do not look for yet): its box there, inside the moving blob, "
        "may start a track. Oblique roundabout render: right O-D 69.7 -> 77.6 %; real UAVDT 0 / -0.6 / -0.6 MOTA, so "
        "not the default (docs/study.md)",
    )
    mover_established_updates: int = Field(
        10,
        ge=0,
        description="movers beside a track matched at least this many times are not looked at (0: every mover)",
    )
    mover_overlap: float = Field(
        0.5, ge=0, le=1, description="a box found at a moving blob is kept when this share of it lies inside the blob"
    )


class DetectorConfig(StageConfig):
    weights: str | None = Field(
        None, description="YOLO weights (.pt, .onnx, ...); default: the shipped AirPatrol detector"
    )
    conf: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="minimum detection confidence (0.1: Ultralytics' default for "
        "tracking; ByteTrack drops boxes below its track_low_thresh "
        "0.1 anyway, and uses 0.1-0.25 to extend tracks)",
    )
    iou: float = Field(0.5, ge=0.0, le=1.0, description="NMS IoU threshold")
    imgsz: int = Field(640, ge=32, description="detector input size")
    tiling: Literal["auto", "on", "off"] = Field(
        "auto",
        description="the detector's input scale: 'auto' chooses it from the vehicles' measured pixel size, per row "
        "band (target_vehicle_px); 'on' always the frame's native resolution (one pass over the road's bounding "
        "box, or tiles for frames beyond single_pass_max); 'off' the frame letterboxed to imgsz",
    )
    target_vehicle_px: float = Field(
        48.0,
        gt=0,
        description="'auto': the median vehicle length (px) the detector's input should show. Measured "
        "(docs/accuracy.md): the shipped detector finds vehicles of about 24-96 px in its input best; smaller "
        "ones are missed, larger ones are boxed in parts (roof, bonnet) or missed; 48 is the middle of that range",
    )
    min_scale: float = Field(0.25, gt=0, description="'auto': smallest input scale (input px per frame px)")
    max_scale: float = Field(
        1.0, gt=0, description="'auto': largest input scale; above 1 upscales bands of tiny vehicles (CPU cost)"
    )
    max_input_pixels: float = Field(
        2.6,
        gt=0,
        description="'auto': CPU budget of one detector pass, in pixels of the frame letterboxed to imgsz (2.6: a "
        "1024x540 frame at native resolution; a 1920x1080 frame at half scale, where the motion layer carries the "
        "vehicles too small for the detector)",
    )
    recorded_max_input_pixels: float | None = Field(
        5.1,
        gt=0,
        description="'auto', recorded runs (process, batch): the budget of one detector pass instead of "
        "max_input_pixels when larger, in pixels ONNX Runtime detects in that time (5.1: a 1920x1080 frame at 0.75 "
        "scale on ONNX Runtime; OpenVINO at bfloat16 detects 1.8x as many in it: native, vision/runtime.py). A "
        "recording has no frame rate to keep "
        "up with, only a cost target (a 5-minute 1080p flight in <= 3x its duration on 2 cores, issue 32): on oblique "
        "renders at 100-120 m, cars of ~50 px crossing a junction were boxed (conf >= 0.25) in 5-7 % of the frames "
        "their tracks broke on at half scale, 40-75 % at 0.75 (docs/study.md). None: the live budget for both",
    )
    native_up_to_px: int = Field(
        1280,
        ge=0,
        description="'auto': frames whose long side is at most this (720p, landscape or portrait) may be detected at "
        "native resolution whatever max_input_pixels allows, when their vehicles need it (below 1.0x their small "
        "vehicles are missed: toll-plaza speeds, docs/detector_scale.md); larger frames stay within the budget",
    )
    budget_frame_px: int = Field(
        1920,
        ge=0,
        description="'auto': frames larger than this (4K) get at least the input scale max_input_pixels gives a frame "
        "of this size (1920: half scale), not the same number of pixels: a 4K frame at a quarter scale showed ~100 px "
        "cars to the detector at ~25 px, and the queues at a junction were lost (issue 32). Such a pass costs the "
        "detector more; 0: the budget in pixels whatever the frame's size (the previous behaviour)",
    )
    scale_bands: int = Field(
        3, ge=1, le=8, description="'auto': row bands of the frame that get their own scale (oblique views)"
    )
    single_pass_max: int = Field(
        2048,
        ge=32,
        description="tiling on: frames whose long side is at most this are detected at native resolution "
        "in ONE pass over the road's bounding box instead of in tiles (no overlap, no seams)",
    )
    crop_to_road: bool = Field(
        False,
        description="native pass: detect only in the road's bounding box (saves compute "
        "where the road leaves part of the frame out, but on the real "
        "sequences it cost MOTA: vehicles outside the U-Net's road are lost)",
    )
    road_margin_px: int = Field(32, ge=0, description="native pass: margin kept around the road's bounding box")
    every_n_frames: int = Field(
        3,
        ge=1,
        description="dual layer: run the detector on every N-th frame only; in between, tracks are carried by "
        "their Kalman motion and the drone's ego-motion (DeepStream's 'interval'). With stride_follows_scale this is "
        "the stride of a pass that uses the whole max_input_pixels budget (native 1024x540)",
    )
    stride_follows_scale: bool = Field(
        True,
        description="'auto': shorten every_n_frames in proportion to the share of the max_input_pixels budget the "
        "scale plan uses, down to min_every_n_frames (a downscaled nadir frame costs the detector what plain 640 px "
        "costs: it can run more often for the same compute). Coasting for two frames lost vehicles on a moving "
        "nadir view; measured leave-one-sequence-out in docs/accuracy.md",
    )
    min_every_n_frames: int = Field(
        2,
        ge=1,
        description="stride_follows_scale: the shortest stride (1: the detector on every frame, measured 1.35-1.48x "
        "plain Ultralytics' CPU time on UAVDT M0703, over the 1.3x budget; 2: 0.89x, docs/detector_scale.md)",
    )
    tile_overlap: float = Field(0.15, ge=0.0, lt=0.5)
    probe_every: int = Field(
        50,
        ge=1,
        description="'auto': every N detector frames one extra pass at the other end of the scale range measures "
        "vehicles the chosen scale cannot see, so a wrong choice recovers",
    )
    max_box_fraction: float = Field(
        0.25, gt=0, le=1, description="reject boxes wider/taller than this fraction of the frame"
    )
    half: bool = Field(True, description="FP16 inference on CUDA")
    cuda_input_step: int = Field(
        32,
        ge=0,
        description="CUDA: the detector input's short side is padded up to a multiple of this (px; the long side, "
        "which sets the scale, is unchanged), so every pass runs at one of the input shapes warmed up at the start. "
        "32 (YOLOv8's stride) gives the inputs Ultralytics' own padding gives: the default plan is one band and uses "
        "5-7 shapes per frame size; a larger step bounds the shapes of multi-band plans (max_scale > 1: 57 shapes at "
        "1024x540 with 32, 38 with 128; docs/gpu.md); 0: Ultralytics' padding, no fixed shapes, no warm-up",
    )
    runtime: Literal["auto", "torch", "onnx", "openvino"] = Field(
        "auto",
        description="'onnx' / 'openvino': run .pt weights through a cached ONNX Runtime / OpenVINO export; 'auto': "
        "OpenVINO on a CPU that runs bfloat16 (1.8x ONNX Runtime's speed there), else ONNX Runtime; PyTorch on CUDA "
        "(measured rule, see vision/runtime.py)",
    )
    any_heading: AnyHeadingConfig = AnyHeadingConfig()


class RoadConfig(StageConfig):
    enabled: bool = True
    weights: str | None = Field(None, description="road U-Net weights; default: the shipped ones")
    every_n_frames: int = Field(15, ge=1, description="run the U-Net every N frames, warp by ego-motion in between")
    threshold: float = Field(0.5, gt=0, lt=1)
    mask_file: str | None = Field(None, description="fixed road mask image (white = road), replaces the U-Net")
    polygon: list[tuple[float, float]] | None = Field(None, description="fixed road polygon in pixels")
    learn_from_tracks: bool = Field(True, description="fuse where moving vehicles actually drive into the road mask")
    dilate_px: int = Field(8, ge=0, description="grow the road mask so vehicles on the kerb are kept")
    sure_off_road_probability: float | None = Field(
        0.05,
        ge=0,
        lt=1,
        description="detector boxes centred where the U-Net is this sure there is no road (and no "
        "vehicle path was learnt) are dropped even without filter_detections: clutter on "
        "roofs and fields; where the network is unsure (night, unusual scenes) nothing "
        "is dropped (None: off)",
    )
    sure_off_road_max_score: float | None = Field(
        0.5,
        gt=0,
        le=1,
        description="the sure-off-road drop steps aside for detector boxes scoring at least this: a vehicle the "
        "detector is confident about stays wherever the U-Net puts the road (parking bays, junction areas and nadir "
        "views it was not trained on: dropping them cost 1.7 MOTA on UAVDT M0703, docs/accuracy.md); None: the "
        "sure-off-road drop applies to every box",
    )
    filter_detections: bool = Field(
        False,
        description="also drop detector boxes off the road (the motion layer is always restricted to it); off: "
        "on the real sequences it cost MOTA day and night, dropping vehicles the U-Net's mask "
        "missed (docs/accuracy.md)",
    )


class EgoMotionConfig(StageConfig):
    backend: Literal["auto", "opencv", "torch"] = Field(
        "auto",
        description="ego-motion and motion layer implementation: 'opencv' (CPU), 'torch' (kornia, on the "
        "pipeline's device, batched over streams), 'auto': OpenCV everywhere (on an H200 OpenCV measured 5x "
        "faster for one stream and 1.7x the total fps of 8 streams stepped together; CPU: OpenCV faster at "
        "equal accuracy; docs/gpu.md)",
    )
    max_features: int = Field(600, ge=20)
    ransac_px: float = Field(2.5, gt=0)
    downscale_to: int = Field(960, ge=160, description="long side of the image the flow is computed on")


class MotionConfig(StageConfig):
    enabled: bool = True
    min_contrast: float = Field(
        14.0, gt=0, description="grey-level difference from the background that counts as foreground"
    )
    min_area_px: int = Field(12, ge=1)
    add_missed: bool = Field(True, description="add moving blobs the detector missed")
    max_blob_detector_px: float = Field(
        32.0, gt=0, description="moving blobs are added only when this small (long side) in the detector's input"
    )
    blob_score: float = Field(
        0.5,
        gt=0,
        le=1,
        description="confidence of a moving blob that may start a track (the detector is blind to it: "
        "too small, or never tracked it)",
    )
    min_motion_track_s: float = Field(
        1.0,
        ge=0,
        description="a track only motion blobs have fed is reported once it has lasted this long (the "
        "speed window: by then it also has a speed)",
    )
    report_from_first_frame: bool = Field(
        True,
        description="recorded runs and a live stream's stored run: a motion-only track, once it has lasted "
        "min_motion_track_s, is reported from its first frame (the outputs are held back that long); a live feed "
        "shows it from then on",
    )
    detector_blind_px: float = Field(
        12.0, gt=0, description="below this long side in the detector's input YOLOv8 rarely finds a vehicle"
    )
    visible_blob_score: float = Field(
        0.2,
        gt=0,
        le=1,
        description="confidence of a moving blob on an already tracked vehicle the detector could "
        "see: below ByteTrack's track_high_thresh, so it only extends that track",
    )
    promote_moving_fraction: float | None = Field(
        0.3,
        ge=0,
        le=1,
        description="a detector box scored in ByteTrack's low band (track_low..new_track) whose pixels move at least "
        "this much may start a track: a car the detector scores low while it turns or pulls away at an angle it "
        "rarely sees (UAVDT, leave-one-out: +0.8 / +1.0 / +0.9 MOTA on M1303 / M1003 night / M0703, docs/study.md); "
        "None: off",
    )
    promote_track_iou: float | None = Field(
        None,
        gt=0,
        le=1,
        description="opt-in for junction studies: a weak moving box is not promoted where it overlaps a tracked "
        "vehicle's predicted box this much (IoU; 0.3 measured). Promoted to ByteTrack's new-track score it enters the "
        "first association, where a box of that score matches a track only at IoU >= 0.8 (overlap x score, "
        "fuse_score): a loose box of a moving vehicle matches nothing there and the track is lost; left in the low "
        "band it extends that track (IoU >= 0.5). Oblique renders: right O-D +4 and +8 points; real UAVDT -0.3 / -0.1 "
        "/ +0.6 MOTA, so not the default (docs/study.md). None: promoted wherever it is",
    )
    carried_detector_every_n_frames: int = Field(
        8,
        ge=1,
        description="while the motion layer carries the tracks (the detector is blind to much of the traffic: tiny "
        "vehicles), the detector runs on every N-th frame only, with the scale plan's CPU budget for N frames, and "
        "on the frames between the motion layer's blobs feed the tracker while the other tracks coast (1: the "
        "detector on every frame, as before; docs/accuracy.md, 1080p interchange)",
    )
    anchored_background_coverage: float | None = Field(
        0.98,
        gt=0,
        le=1,
        description="the background is kept in the coordinates of an earlier frame (its anchor) and each frame is "
        "warped into them, until less than this share of the current frame lies inside the anchor's; then it moves "
        "to the current frame. Warping the background itself every frame, as before, resampled it each time: after "
        "a few hundred frames of a hovering flight it was a blur in which lane markings, kerbs and the outlines of a "
        "waiting queue stayed foreground and joined every vehicle passing along them into one arm-long region. "
        "None: re-anchor on every frame (the previous behaviour)",
    )
    gate: MotionGateConfig = Field(
        MotionGateConfig(),
        description="a blob counts only after consistent motion over several frames (vision/motion_gate.py)",
    )
