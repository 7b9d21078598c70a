import numpy as np

from tracking.bytetrack import EgoCompensatedByteTrack
from tracking.config import TrackerConfig
from vision.types import Detections


def _det(boxes):
    return Detections(np.array(boxes, np.float32), np.full(len(boxes), 0.9), np.zeros(len(boxes)))


def test_ids_are_stable_for_steady_objects():
    tr = EgoCompensatedByteTrack(TrackerConfig())
    ids = []
    for k in range(20):
        out = tr.step(_det([[10 + 3 * k, 10, 30 + 3 * k, 20], [200, 100 + 2 * k, 220, 110 + 2 * k]]))
        ids.append(tuple(sorted(out[:, 4].astype(int))))
    assert len(set(ids[1:])) == 1 and len(ids[-1]) == 2


def test_ego_motion_keeps_ids_through_a_camera_jump():
    """The camera jumps 40 px between frames (more than a small box): without compensation the IoU is zero."""

    def run(compensate):
        tr = EgoCompensatedByteTrack(TrackerConfig())
        shift = 0.0
        seen = set()
        for k in range(12):
            jump = 40.0 if k == 6 else 0.0
            shift += jump
            box = [[100 + shift, 100, 116 + shift, 110]]
            H = np.array([[1, 0, jump], [0, 1, 0], [0, 0, 1.0]]) if compensate else None
            out = tr.step(_det(box), H)
            seen.update(out[:, 4].astype(int).tolist())
        return seen

    assert len(run(True)) == 1
    assert len(run(False)) == 2


def test_output_rows_point_back_to_detections():
    tr = EgoCompensatedByteTrack(TrackerConfig())
    out = tr.step(_det([[0, 0, 10, 10], [50, 50, 60, 60]]))
    assert sorted(out[:, 7].astype(int)) == [0, 1]


def test_coasting_carries_tracks_between_detector_frames():
    """With the detector on every 3rd frame only, tracks move on by their Kalman velocity and the drone's motion in
    between, are reported there (without a detection index), and the next detections continue the same ids."""
    tr = EgoCompensatedByteTrack(TrackerConfig())
    pan = np.array([[1, 0, 2.0], [0, 1, 0], [0, 0, 1.0]])  # the camera pans: everything drifts +2 px per frame
    ids, errors = set(), []
    for k in range(30):
        x = 100 + 4 * k + 2 * k  # 4 px/frame own motion + 2 px/frame pan
        truth = [x, 100, x + 20, 110]
        if k % 3 == 0:
            out = tr.step(_det([truth]), pan if k else None)
            assert (out[:, 7] >= 0).all()
        else:
            out = tr.coast(pan)
            assert (out[:, 7] == -1).all()
            if k > 6:  # once the velocity is known, the prediction stays on the vehicle
                errors.append(abs(out[0, 0] - truth[0]))
        ids.update(out[:, 4].astype(int).tolist())
    assert len(ids) == 1
    assert errors and max(errors) < 2.0


def test_lost_tracks_are_predicted_on_along_their_motion_for_a_while():
    tr = EgoCompensatedByteTrack(TrackerConfig())
    for k in range(10):  # 4 px a frame to the right
        tr.step(_det([[100 + 4 * k, 50, 130 + 4 * k, 62]]))
    tr.step(_det([]))  # lost here
    boxes, velocity, ids = tr.lost_predicted(None, max_lost_frames=5)
    assert len(ids) == 1 and velocity[0, 0] > 2.0 and abs(velocity[0, 1]) < 0.5
    assert boxes[0, 0] > 100 + 4 * 10  # beyond where it was last seen, on its way
    before: list[np.ndarray] = [np.array(t.mean) for t in tr.lost_stracks]
    tr.lost_predicted(None, max_lost_frames=5)
    assert all(np.array_equal(a, t.mean) for a, t in zip(before, tr.lost_stracks))  # nothing moved for real
    for _ in range(6):
        tr.step(_det([]))
    assert len(tr.lost_predicted(None, max_lost_frames=5)[2]) == 0  # lost too long ago


def test_moving_tracks_are_predicted_tracked_first_then_the_most_recently_lost():
    tr = EgoCompensatedByteTrack(TrackerConfig())
    for k in range(10):  # a car driving right 4 px a frame, one standing, one driving down 3 px a frame
        seen = [[100 + 4 * k, 50, 130 + 4 * k, 62], [300, 300, 330, 312], [500, 100 + 3 * k, 512, 130 + 3 * k]]
        tr.step(_det(seen if k < 8 else seen[:2]))  # the third is lost from frame 8 on
    boxes = tr.moving_predicted(None, max_lost_frames=5, min_lengths_per_frame=0.05)  # 1.5 px a frame for 30 px
    assert len(boxes) == 2  # the standing one is not among them
    assert boxes[0, 0] > 100 + 4 * 9 and boxes[0, 1] < 60  # the driving car, tracked, on its way right
    assert boxes[1, 0] > 490 and boxes[1, 1] > 100 + 3 * 8  # the lost one, predicted on down its road
    assert len(tr.moving_predicted(None, max_lost_frames=5, min_lengths_per_frame=0.5)) == 0  # too slow for that
    # updated 10 times (the driving car and the standing one), 8 times (the lost one)
    assert len(tr.moving_predicted(None, max_lost_frames=5, min_lengths_per_frame=0.0, min_updates=9)) == 2


def test_tracks_last_seen_moving_diagonally_are_told_apart_from_those_along_the_axes_and_the_standing():
    tr = EgoCompensatedByteTrack(TrackerConfig())
    tr.heading_min_speed = 0.05  # lengths a frame
    for k in range(30):
        go = min(k, 15)  # the diagonal car drives down and right for 15 frames, then waits (a queue in a turn)
        seen = [
            [100 + 3 * go, 100 + 3 * go, 120 + 3 * go, 120 + 3 * go],  # diagonal, then standing
            [300 + 4 * k, 50, 330 + 4 * k, 62],  # along the x axis, driving
            [600, 400, 630, 412],  # standing from the start (a false track on a structure looks like this)
        ]
        tr.step(_det(seen))
    every = tr.moving_predicted(None, max_lost_frames=5, min_lengths_per_frame=0.0)
    assert len(every) == 3
    diagonal = tr.moving_predicted(None, max_lost_frames=5, min_lengths_per_frame=0.0, min_axis_angle_deg=20)
    assert len(diagonal) == 1 and abs(diagonal[0, 0] - (100 + 3 * 15)) < 5  # the one that went diagonally, waiting
    assert len(tr.moving_predicted(None, 5, 0.0, min_axis_angle_deg=46)) == 0  # no direction is more than 45 off


def test_no_heading_is_noted_unless_asked():
    tr = EgoCompensatedByteTrack(TrackerConfig())
    for k in range(10):
        tr.step(_det([[100 + 3 * k, 100 + 3 * k, 120 + 3 * k, 120 + 3 * k]]))
    assert not any(hasattr(t, "heading_seen") for t in tr.tracked_stracks)
    assert len(tr.moving_predicted(None, 5, 0.0, min_axis_angle_deg=20)) == 0


def _weak(boxes, score=0.27):
    return Detections(np.array(boxes, np.float32), np.full(len(boxes), score), np.zeros(len(boxes)))


def _ids(tr, frames) -> set[int]:
    """The ids reported over ``frames``, after one empty frame (ByteTrack confirms every track born on its first)."""
    seen: set[int] = set()
    for dets in [Detections(), *frames]:
        seen.update(tr.step(dets)[:, 4].astype(int).tolist())
    return seen


def test_a_vehicle_the_detector_boxes_only_weakly_gets_one_track():
    """A car scored 0.27 on every frame (above new_track_thresh, below the 0.3 that IoU x score needs to confirm a
    track in Ultralytics' ByteTrack) is tracked by the dual layer's tracker with ``weak_tracks``, under one id;
    Ultralytics' rule (the default, and the baseline whatever the setting) never confirms it."""
    frames = [_weak([[100 + 2 * k, 100, 130 + 2 * k, 115]]) for k in range(12)]
    weak = TrackerConfig(weak_tracks=True)
    assert len(_ids(EgoCompensatedByteTrack(weak, predict_new_tracks=True), frames)) == 1
    assert not _ids(EgoCompensatedByteTrack(TrackerConfig(), predict_new_tracks=True), frames)
    assert not _ids(EgoCompensatedByteTrack(weak), frames)  # the baseline: Ultralytics exactly


def test_a_weak_box_on_a_tracked_vehicle_starts_no_second_track():
    """The detector boxes a tracked car surely and, beside that box, weakly and a little looser (the any-heading
    detector's kind, IoU 0.6): with ``weak_tracks`` the weak box is that car, not a second vehicle."""
    frames = [
        Detections(
            np.array([[100 + 2 * k, 100, 130 + 2 * k, 115], [97 + 2 * k, 98, 133 + 2 * k, 117]], np.float32),
            np.array([0.9, 0.27]),
            np.zeros(2),
        )
        for k in range(12)
    ]
    assert len(_ids(EgoCompensatedByteTrack(TrackerConfig(weak_tracks=True), predict_new_tracks=True), frames)) == 1


WEAK = TrackerConfig(weak_match_iou=0.5)


def _reported(tr, frames) -> list[list[int]]:
    """The ids reported on each of ``frames`` (ByteTrack confirms the tracks born on its first frame at once)."""
    return [tr.step(dets)[:, 4].astype(int).tolist() for dets in frames]


# a queued car boxed surely, then only weakly by a box a little off and larger (itself with part of its neighbour:
# IoU 0.61 with the first, each side within 1.25 of it); a box scored 0.27 needs IoU 0.74 for Ultralytics'
# score-weighted first association
_SURE = [100, 100, 130, 115]
_LOOSE = [104, 100, 138, 117]


def test_a_weak_loose_box_keeps_a_standing_vehicles_track():
    frames = [_det([_SURE])] * 5 + [_weak([_LOOSE])] * 20
    ids = _reported(EgoCompensatedByteTrack(WEAK, predict_new_tracks=True), frames)
    assert all(len(i) == 1 for i in ids) and len({i[0] for i in ids}) == 1  # one track on every frame
    plain = _reported(EgoCompensatedByteTrack(TrackerConfig(), predict_new_tracks=True), frames)
    assert not any(plain[5:])  # Ultralytics' rule: lost on the first weak frame, and no weak box confirms a new one
    assert _reported(EgoCompensatedByteTrack(WEAK), frames) == plain  # the baseline: Ultralytics exactly


def _refinding(**kw) -> EgoCompensatedByteTrack:
    return EgoCompensatedByteTrack(
        TrackerConfig(weak_match_iou=0.5, weak_refind_lost=True, **kw), predict_new_tracks=True
    )


def test_a_standing_vehicle_missed_once_is_found_again_by_a_low_band_box():
    """Missed on one frame, the car is boxed at 0.2 (ByteTrack's low band, which only extends tracks still tracked):
    with ``weak_refind_lost`` its lost track is found again under its id."""
    frames = [_det([_SURE])] * 5 + [Detections()] + [_weak([_SURE], 0.2)] * 10
    ids = _reported(_refinding(), frames)
    assert ids[5] == [] and all(i == ids[0] for i in ids[6:])
    plain = _reported(EgoCompensatedByteTrack(TrackerConfig(), predict_new_tracks=True), frames)
    assert not any(plain[5:])


def test_a_weak_box_much_larger_than_the_track_does_not_extend_it():
    """A weak box over the waiting car and most of its neighbour (half as long again) does not extend the car's track:
    its box would grow over both."""
    frames = [_det([_SURE])] * 5 + [_weak([[100, 100, 145, 115]])] * 5
    assert not any(_reported(EgoCompensatedByteTrack(WEAK, predict_new_tracks=True), frames)[5:])


def test_a_low_band_box_finds_its_own_lost_track_among_several():
    """Two standing cars missed on one frame; then only one is boxed, at 0.2: it takes its own track back, the other
    stays lost (two lost tracks against one box)."""
    other = [200, 100, 230, 115]
    frames = [_det([_SURE, other])] * 5 + [Detections()] + [_weak([_SURE], 0.2)] * 5
    ids = _reported(_refinding(), frames)
    assert all(i == [ids[0][0]] for i in ids[6:])


def test_a_weak_box_far_from_a_lost_track_does_not_take_it():
    """A weak box half a car off the lost track's box (IoU under 0.5) is not that vehicle."""
    frames = [_det([_SURE])] * 5 + [Detections()] + [_weak([[115, 100, 145, 115]], 0.2)] * 5
    assert not any(_reported(_refinding(), frames)[5:])


def test_weak_boxes_extend_only_slow_tracks_when_asked():
    """With ``weak_match_max_speed`` (set by the pipeline from ``weak_match_standing_lengths_s``) a moving car's
    track is not extended by weak boxes; a standing one's is."""
    moving = [_det([[100 + 6 * k, 100, 130 + 6 * k, 115]]) for k in range(5)]
    moving += [_weak([[134 + 6 * k, 100, 168 + 6 * k, 117]]) for k in range(5, 10)]
    standing = [_det([_SURE])] * 5 + [_weak([_LOOSE])] * 5
    for frames, kept in ((moving, False), (standing, True)):
        tr = EgoCompensatedByteTrack(WEAK, predict_new_tracks=True)
        tr.weak_match_max_speed = 0.05  # box lengths a frame: 6 px a frame on a 30 px car is 0.2
        assert all(len(i) == 1 for i in _reported(tr, frames)[5:]) is kept


def test_weak_boxes_extend_only_the_tracks_named_when_asked():
    """With ``weak_match_ids`` (the pipeline's tracks that drove there, ``weak_match_moved_only``) only those."""
    frames = [_det([_SURE])] * 5 + [_weak([_LOOSE])] * 5
    for ids, kept in ((set(), False), ({1}, True)):
        tr = EgoCompensatedByteTrack(WEAK, predict_new_tracks=True)
        tr.weak_match_ids = ids
        assert all(len(i) == 1 for i in _reported(tr, frames)[5:]) is kept
