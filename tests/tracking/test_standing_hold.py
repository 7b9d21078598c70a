"""A vehicle that drove up and stands (a car at a red light) is carried by its appearance while the detector misses
it (tracking/standing_hold.py): one track, reported on every frame, from arrival to departure. It ends where the
vehicle is gone, and a vehicle never seen moving (parked, or clutter) is not carried."""

from __future__ import annotations

import cv2
import numpy as np

from tests.edge.service.service_fakes import BrightBoxDetector
from tests.tracking.test_pipeline_lost_gaps import MissingDetector
from tests.tracking.test_pipeline_motion_frames import FPS, H, W, _ground
from tracking.config import CalibrationConfig, PipelineConfig, RoadConfig, StandingHoldConfig
from tracking.pipeline import Pipeline
from tracking.standing_hold import StandingHold
from tracking.track_starts import from_first_frame
from vision.config import DetectorConfig, MotionConfig
from vision.types import Detections, DetectionSource, Frame

ARRIVES, DEPARTS, FRAMES = 25, 125, 150  # drives up to frame 25, stands until 125, drives on
MISSED = set(range(50, DEPARTS))  # the detector boxes it while it drives and its first second standing, then not


def _vehicle_x(i: int, parked: bool = False) -> float:
    if parked:
        return 200.0
    return 100 + 4.0 * min(i, ARRIVES) + 4.0 * max(0, i - DEPARTS)


def _image(ground: np.ndarray, i: int, parked: bool = False, gone_from: int | None = None) -> np.ndarray:
    img = ground.copy()
    if gone_from is not None and i >= gone_from:
        return img
    x = int(round(_vehicle_x(i, parked)))
    cv2.rectangle(img, (x, 250), (x + 29, 263), (255, 255, 255), -1)  # a white car, 30 x 14 px ...
    cv2.rectangle(img, (x + 8, 253), (x + 13, 260), (40, 40, 40), -1)  # ... with a dark windscreen
    cv2.rectangle(img, (x + 20, 253), (x + 23, 260), (90, 90, 90), -1)  # ... and rear window
    return img


class WeakLooseBoxes(MissingDetector):
    """On the missed frames, a weak box a little looser than the car (the any-heading detector's kind) instead of
    none: 0.33 at IoU 0.58 with the car's own box, below ByteTrack's score-weighted match (0.2) and enough, frame
    after frame on a standing car, to confirm a track of its own (0.3)."""

    def detect(self, image, road_mask=None, tiling=None):
        dets = BrightBoxDetector.detect(self, image, road_mask, tiling)
        self.frame += 1
        if self.frame - 1 in self.missed:
            dets.xyxy += np.array([-3, -3, 3, 3], np.float32)
            dets.score[:] = 0.33
        return dets


def _run(
    hold: bool,
    parked: bool = False,
    gone_from: int | None = None,
    missed: set[int] = MISSED,
    follow_moving: bool = True,
    detector: MissingDetector | None = None,
) -> list[list]:
    config = PipelineConfig(
        device="cpu",
        road=RoadConfig(enabled=False),
        motion=MotionConfig(enabled=False),  # nothing but the detector (and the hold) finds the vehicle
        detector=DetectorConfig(every_n_frames=1),
        standing_hold=StandingHoldConfig(enabled=hold, follow_moving=follow_moving),
        calibration=CalibrationConfig(metres_per_pixel=0.2),
    )
    p = Pipeline(config, detector=detector or MissingDetector(missed))
    p.reset(W, H, FPS, recorded=True)
    ground = _ground()
    results = (p.step(Frame(i, i / FPS, _image(ground, i, parked, gone_from))) for i in range(FRAMES))
    return [r.tracks for r in from_first_frame(results, p.report_lookback_frames())]


def test_a_vehicle_waiting_unboxed_is_one_track_on_every_frame_from_arrival_to_departure():
    tracks = _run(hold=True)
    assert len({tr.track_id for frame in tracks for tr in frame}) == 1
    for i in range(3, FRAMES):
        assert len(tracks[i]) == 1, i
        assert abs(tracks[i][0].center[0] - (_vehicle_x(i) + 15)) < 3, (i, tracks[i][0].center)
    # the held boxes are not measured (linking judges a piece's end from its last measured box), the detector's are
    assert not any(tracks[i][0].measured for i in range(55, DEPARTS))
    assert all(tracks[i][0].measured for i in range(3, 50))


def test_without_the_hold_it_is_lost_while_it_waits_and_comes_back_as_another_track():
    tracks = _run(hold=False)
    assert not any(tracks[i] for i in range(60, DEPARTS))
    assert len({tr.track_id for frame in tracks for tr in frame}) == 2


def test_a_held_vehicle_the_detector_boxes_weakly_and_loosely_keeps_one_track():
    """A weak box on a held car that ByteTrack does not match to its track (the two detectors' boxes differ in size)
    is that car: it does not start a second track on it."""
    tracks = _run(hold=True, detector=WeakLooseBoxes(MISSED))
    assert len({tr.track_id for frame in tracks for tr in frame}) == 1
    assert all(len(tracks[i]) == 1 for i in range(3, FRAMES))


def test_a_held_vehicle_that_drives_off_unboxed_is_followed_by_its_appearance():
    """A car the detector misses while it waits and as it drives off (a dark car at the stop line) stays one track,
    on the car, to the end of the clip; without following moving vehicles it is let go as it sets off."""
    unboxed = set(range(50, FRAMES))
    tracks = _run(hold=True, missed=unboxed)
    assert len({tr.track_id for frame in tracks for tr in frame}) == 1
    for i in range(3, FRAMES):
        assert len(tracks[i]) == 1, i
        assert abs(tracks[i][0].center[0] - (_vehicle_x(i) + 15)) < 3, (i, tracks[i][0].center)
    # the held boxes are not measured (linking judges a piece's end from its last measured box), the detector's are
    assert not any(tracks[i][0].measured for i in range(55, DEPARTS))
    assert all(tracks[i][0].measured for i in range(3, 50))
    standing_only = _run(hold=True, missed=unboxed, follow_moving=False)
    assert not any(standing_only[i] for i in range(DEPARTS + 10, FRAMES))


def test_the_hold_ends_where_the_vehicle_is_gone():
    tracks = _run(hold=True, gone_from=90)
    assert all(len(tracks[i]) == 1 for i in range(60, 90))
    assert not any(tracks[i] for i in range(91, DEPARTS))


def test_a_vehicle_never_seen_moving_is_not_carried():
    tracks = _run(hold=True, parked=True)
    assert all(len(tracks[i]) == 1 for i in range(3, 50))
    assert not any(tracks[i] for i in range(60, DEPARTS))


def test_a_track_whose_box_holds_another_vehicle_is_not_carried():
    """Two queued cars the detector once boxed as one: where it now boxes one of them inside that box, the box is not
    one vehicle, and its track is not carried (with ``two_vehicles_min_score``, only where that box is confident). A
    tighter box of the same vehicle, spanning most of it and centred on it, is not another vehicle."""
    img = _image(_ground(), ARRIVES)
    hold = StandingHold(StandingHoldConfig(), FPS, 0.15)
    box = np.array([[195, 245, 235, 268]], np.float32)  # the car and some road around it
    mine = Detections(box.copy(), np.array([0.9], np.float32), np.zeros(1, np.int32))
    rows = np.array([[*box[0], 7, 0.9, 0, 0]], np.float32)
    for frame in range(0, 18, 3):  # seen driving: 3 px a frame (48 px in all), 40 px long
        hold.remember(img, frame, rows, mine, {7: (3.0, 0.0, 40.0)})
    standing: dict[str, np.ndarray] = dict(xyxy=box, speed_px=np.zeros(1), ids=np.array([7]), cls=np.zeros(1, int))
    held = hold.boxes(img, 20, dets=Detections(), **standing)
    assert len(held) == 1 and held.source[0] == DetectionSource.PREDICTED and held.score[0] == np.float32(0.15)
    assert np.allclose(held.xyxy, box, atol=1)
    inner = Detections(np.array([[200, 250, 215, 264]], np.float32), np.array([0.5], np.float32), np.zeros(1, np.int32))
    assert len(hold.boxes(img, 20, dets=inner, **standing)) == 0
    # the same box in ByteTrack's low band: by default it too shows a second vehicle; with two_vehicles_min_score
    # 0.25 it does not (the weak boxes a detector scatters across two queued cars): held, the weak box keeps its score
    weak_inner = Detections(inner.xyxy.copy(), np.array([0.12], np.float32), np.zeros(1, np.int32))
    assert len(hold.boxes(img, 20, dets=weak_inner, **standing)) == 0
    confident = StandingHold(StandingHoldConfig(two_vehicles_min_score=0.25), FPS, 0.15)
    for frame in range(0, 18, 3):
        confident.remember(img, frame, rows, mine, {7: (3.0, 0.0, 40.0)})
    assert len(confident.boxes(img, 20, dets=weak_inner, **standing)) == 1
    assert weak_inner.score[0] == np.float32(0.12)
    assert len(confident.boxes(img, 20, dets=inner, **standing)) == 0  # a confident box inside: two vehicles
    # the same car boxed tighter, weakly (the shipped detector's box inside the any-heading detector's looser one,
    # which fed the track): ByteTrack would not match it (IoU 0.46 x 0.25), and it is not another vehicle: held,
    # and the weak box goes down to the held box's band
    tight = Detections(
        np.array([[200, 250, 230, 264]], np.float32), np.array([0.25], np.float32), np.zeros(1, np.int32)
    )
    assert len(hold.boxes(img, 20, dets=tight, **standing)) == 1
    assert tight.score[0] == np.float32(0.15)  # and it cannot start a second track on the car
    weak = Detections(np.array([[197, 246, 236, 266]], np.float32), np.array([0.25], np.float32), np.zeros(1, np.int32))
    assert len(hold.boxes(img, 20, dets=weak, **standing)) == 1  # ByteTrack would not match it: held too ...
    assert weak.score[0] == np.float32(0.15)  # ... and the weak box cannot start a second track on the car
    sure = Detections(weak.xyxy.copy(), np.array([0.8], np.float32), np.zeros(1, np.int32))
    assert len(hold.boxes(img, 20, dets=sure, **standing)) == 0  # ByteTrack matches it
    moving = dict(standing, speed_px=np.array([3.0]))
    assert len(hold.boxes(img, 20, dets=Detections(), **moving)) == 1  # a moving vehicle is followed too ...
    standing_only = StandingHold(StandingHoldConfig(follow_moving=False), FPS, 0.15)
    for frame in range(0, 18, 3):
        standing_only.remember(img, frame, rows, mine, {7: (3.0, 0.0, 40.0)})
    assert len(standing_only.boxes(img, 20, dets=Detections(), **moving)) == 0  # ... unless asked not to


def test_a_track_first_seen_standing_where_traffic_drives_is_carried_as_queued():
    """With ``standing_hold.driven_path_s``: a car the tracker took up while it already stood (lost while it waited and
    found again, or queued when it came into view) never drove under that track. Where moving vehicles drove lately
    (the road layer's learnt paths, ``driven``) it is a queued car and is carried; where none drove (a parked car on a
    verge) it is not, nor without the setting."""
    img = _image(_ground(), ARRIVES)
    box = np.array([[195, 245, 235, 268]], np.float32)
    rows = np.array([[*box[0], 7, 0.9, 0, 0]], np.float32)
    mine = Detections(box.copy(), np.array([0.9], np.float32), np.zeros(1, np.int32))

    def held(config: StandingHoldConfig, driven: bool | None, speed: float = 0.0) -> int:
        hold = StandingHold(config, FPS, 0.15)
        for frame in range(0, 18, 3):  # track 7 boxed standing: it never moved
            hold.remember(img, frame, rows, mine, {7: (0.0, 0.0, 40.0)})
        lane = None if driven is None else np.array([driven])
        return len(hold.boxes(img, 20, box, np.array([speed]), np.array([7]), np.zeros(1, int), Detections(), lane))

    queued = StandingHoldConfig(driven_path_s=120)
    assert held(queued, driven=True) == 1
    assert held(queued, driven=False) == 0  # a verge or a bay: no traffic drove there
    assert held(queued, driven=None) == 0  # no road layer
    assert held(queued, driven=True, speed=3.0) == 0  # moving: not standing in a queue, and never seen to move
    assert held(StandingHoldConfig(), driven=None) == 0


class MissesTheQueuedCar(BrightBoxDetector):
    """Boxes every white car, but the one standing near x = 215 only up to ``until`` (0-based frames)."""

    def __init__(self, until: int):
        super().__init__()
        self.frame, self.until = 0, until

    def detect(self, image, road_mask=None, tiling=None):
        dets = BrightBoxDetector.detect(self, image, road_mask, tiling)
        self.frame += 1
        if self.frame - 1 < self.until:
            return dets
        centre_x = 0.5 * (dets.xyxy[:, 0] + dets.xyxy[:, 2])
        return dets[np.abs(centre_x - 215) > 20]


def test_a_car_first_seen_standing_in_a_lane_traffic_drove_along_is_one_track_while_it_waits():
    """A car drives along a lane; a second car is found standing in that lane behind it (already queued when the
    tracker took it up), boxed for a second, then missed while it waits. With ``standing_hold.driven_path_s`` the road
    layer's learnt path says it stands where traffic drives: it is held to the end. Without it the track never moved,
    so it is not held and is lost."""

    def run(driven_path_s: float | None) -> list[list]:
        config = PipelineConfig(
            device="cpu",
            road=RoadConfig(polygon=[(0, 0), (W, 0), (W, H), (0, H)], dilate_px=0, learn_from_tracks=True),
            motion=MotionConfig(enabled=False),
            detector=DetectorConfig(every_n_frames=1),
            standing_hold=StandingHoldConfig(driven_path_s=driven_path_s),
            calibration=CalibrationConfig(metres_per_pixel=0.2),
        )
        p = Pipeline(config, detector=MissesTheQueuedCar(until=85))
        p.reset(W, H, FPS, recorded=True)
        ground = _ground()

        def image(i: int) -> np.ndarray:
            img = _image(ground, 0, parked=True)  # the queued car at x = 200-229 ... from frame 60
            if i < 60:
                img = ground.copy()
            x = 100 + 6 * i  # ... and the one that drove along its lane, 6 px a frame (30 m/s)
            if x + 30 < W:
                cv2.rectangle(img, (x, 250), (x + 29, 263), (255, 255, 255), -1)
                cv2.rectangle(img, (x + 8, 253), (x + 13, 260), (40, 40, 40), -1)
            return img

        results = (p.step(Frame(i, i / FPS, image(i))) for i in range(FRAMES))
        frames = [r.tracks for r in from_first_frame(results, p.report_lookback_frames())]
        return [[tr for tr in frame if abs(tr.center[0] - 215) < 20] for frame in frames]

    queued = run(driven_path_s=120.0)
    assert all(len(queued[i]) == 1 for i in range(65, FRAMES))
    assert len({tr.track_id for frame in queued[65:] for tr in frame}) == 1
    plain = run(driven_path_s=None)
    assert all(len(plain[i]) == 1 for i in range(65, 85))
    assert not any(plain[i] for i in range(130, FRAMES))


def test_a_track_found_where_a_moving_one_was_just_lost_is_carried_like_it():
    """With ``standing_hold.found_again``: a car that drove up to a queue and stood, lost for a moment (the detector
    boxed it with its neighbour), is taken up by a new track that has never moved: found standing where the lost track
    stood, it is that vehicle, and is carried while the detector misses it. Found elsewhere, or where a track that
    never moved was lost, it is not."""
    img = _image(_ground(), ARRIVES)
    box = np.array([[195, 245, 235, 268]], np.float32)

    def hold_after(lost: dict[int, np.ndarray], drove: bool = True, found_again: bool = True) -> StandingHold:
        hold = StandingHold(StandingHoldConfig(found_again=found_again), FPS, 0.15)
        rows = np.array([[*box[0], 7, 0.9, 0, 0]], np.float32)
        mine = Detections(box.copy(), np.array([0.9], np.float32), np.zeros(1, np.int32))
        for frame in range(0, 18, 3):  # track 7 seen driving (3 px a frame) or jittering in place
            hold.remember(img, frame, rows, mine, {7: (3.0 if drove else 0.0, 0.0, 40.0)})
        # track 9 starts on the car, standing: tentative on its first frame (kept, not in the rows), then confirmed
        kept = {7: (0.0, 0.0, 40.0), 9: (0.0, 0.0, 40.0)}
        hold.remember(img, 18, np.zeros((0, 8), np.float32), mine, kept, lost)
        hold.remember(img, 20, np.array([[*box[0], 9, 0.9, 0, 0]], np.float32), mine, kept, lost)
        return hold

    def held(hold: StandingHold) -> int:
        return len(hold.boxes(img, 23, box, np.zeros(1), np.array([9]), np.zeros(1, int), Detections()))

    taken_up = hold_after({7: box[0].astype(np.float64)})
    assert 9 in taken_up.moved and held(taken_up) == 1
    elsewhere = hold_after({7: box[0].astype(np.float64) + np.array([60, 0, 60, 0])})  # 1.5 lengths on
    assert 9 not in elsewhere.moved and held(elsewhere) == 0
    never_moved = hold_after({7: box[0].astype(np.float64)}, drove=False)
    assert 9 not in never_moved.moved and held(never_moved) == 0
    assert 9 not in hold_after({}).moved
    # opt-in (docs/study.md): by default a track that never moved is not carried, wherever it started
    assert 9 not in hold_after({7: box[0].astype(np.float64)}, found_again=False).moved
