"""``study.png``: paths coloured by their vehicle's origin, approaches drawn where they are, north up."""

import dataclasses

import cv2
import numpy as np

from tracking.study import StudyConfig, compute_study, write_study
from tracking.study.picture import NO_ORIGIN_BGR, approach_colour, ground_to_picture, study_picture

MAP_PX = 1000


def _study(junction):
    trajs, _ = junction
    return compute_study(trajs, None, StudyConfig(bin_s=60))


def _pixels_of(img: np.ndarray, bgr) -> np.ndarray:
    """(x, y) of the map's pixels exactly this colour (the approaches' arrows are drawn 5 px thick: their inside is)."""
    ys, xs = np.nonzero((img[:, :MAP_PX] == np.array(bgr, np.uint8)).all(axis=2))
    return np.column_stack([xs, ys])


def _colour_on_inbound_lane(img, study, px, approach_id: str) -> np.ndarray:
    """The picture's colour on the inbound lanes of one arm, halfway between the edge of the view and the junction:
    only vehicles that came from that arm drive there."""
    a = next(a for a in study.approaches if a.id == approach_id)
    ids = [v.track_id for v in study.vehicles if v.origin == approach_id and v.movement == "through"]
    xy = np.vstack([study.smoothed[t].xy for t in ids])
    mid = np.array([a.x, a.y]) + a.inbound * 0.5 * float(np.hypot(a.x, a.y))  # the junction's centre is (0, 0)
    near = xy[np.argsort(np.hypot(*(xy - mid).T))[:20]]
    return np.array([img[y, x] for x, y in px(near)], np.float64).mean(0)


def test_the_study_writes_its_picture(junction, tmp_path):
    paths = write_study(_study(junction), tmp_path)
    assert tmp_path / "study.png" in paths
    img = cv2.imread(str(tmp_path / "study.png"))
    assert img is not None and img.shape[0] == MAP_PX and img.shape[1] > MAP_PX


def test_approaches_are_drawn_where_they_are_north_up(junction):
    study = _study(junction)
    img = study_picture(study, MAP_PX)
    for k, a in enumerate(study.approaches):
        arrow = _pixels_of(img, approach_colour(k)).mean(0)  # its arrow (and its label, beside it)
        north, east = a.y > 0 and abs(a.y) > abs(a.x), a.x > 0 and abs(a.x) > abs(a.y)
        south, west = a.y < 0 and abs(a.y) > abs(a.x), a.x < 0 and abs(a.x) > abs(a.y)
        assert (arrow[1] < MAP_PX / 3) == north and (arrow[1] > 2 * MAP_PX / 3) == south, (a.name, arrow)
        assert (arrow[0] > 2 * MAP_PX / 3) == east and (arrow[0] < MAP_PX / 3) == west, (a.name, arrow)


def test_each_path_has_its_origins_colour_and_grey_without_one(junction):
    study = _study(junction)
    px, _ = ground_to_picture(study, MAP_PX)
    img = study_picture(study, MAP_PX)
    for k, a in enumerate(study.approaches):
        seen = _colour_on_inbound_lane(img, study, px, a.id)
        palette = [np.array(approach_colour(j), np.float64) for j in range(len(study.approaches))]
        # anti-aliased 1 px lines blend with the background: the nearest in hue, not the exact colour
        hue = [np.linalg.norm((seen - seen.mean()) - (c - c.mean())) for c in palette]
        assert int(np.argmin(hue)) == k, (a.name, seen)
    # the same vehicles without an origin (entered in mid-view) are grey
    lost = dataclasses.replace(study, vehicles=[dataclasses.replace(v, origin=None) for v in study.vehicles])
    img = study_picture(lost, MAP_PX)
    a = study.approaches[0]
    seen = _colour_on_inbound_lane(img, study, px, a.id)
    assert np.ptp(seen) < 12 and seen.mean() < 235, seen  # grey on the near-white background
    assert np.array(NO_ORIGIN_BGR).mean() < 235


def test_a_study_with_nothing_in_it_still_gets_its_picture(tmp_path):
    # a flight too short or empty for approaches and vehicles (the real toll plaza's 10 s found none): the picture
    # says so instead of failing the whole study
    from tracking.study import Study
    from tracking.study.picture import write_study_picture

    empty = Study(approaches=[], vehicles=[], smoothed={}, tables={}, conflicts=[], warnings=[])
    path = write_study_picture(empty, tmp_path / "study.png")
    img = cv2.imread(str(path))
    assert img is not None and img.shape[0] == MAP_PX
