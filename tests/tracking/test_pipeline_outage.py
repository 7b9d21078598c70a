"""A source outage (a live link cut, a damaged stretch of video) is a jump in the frames' times that ByteTrack, which
counts steps, would not see: past the lost-track buffer the tracks end, as they would had the frames arrived with
nothing detected, and a vehicle at the old place after it gets a new id (never a reused one); a live run that is merely
slow (every frame more than a second apart) keeps its tracks."""

from __future__ import annotations

import numpy as np

from tests.tracking.test_pipeline_lost_gaps import MissingDetector, _config, _image
from tests.tracking.test_pipeline_motion_frames import FPS, H, W, _ground
from tracking.pipeline import Pipeline
from vision.types import Frame


def _ids(times: list[float], positions: list[int]) -> tuple[list[set[int]], int]:
    p = Pipeline(_config(fill=False), detector=MissingDetector(missed=set()))
    p.reset(W, H, FPS)
    ground = _ground()
    out = []
    for i, (t, x) in enumerate(zip(times, positions)):
        r = p.step(Frame(i, t, _image(ground, x)))
        out.append({tr.track_id for tr in r.tracks})
    return out, p.outages


def test_a_vehicle_at_the_same_place_after_an_outage_gets_a_new_id():
    # 20 frames of a vehicle, a 3 s cut (the buffer is 30 frames = 1.2 s at 25 fps), then a vehicle on the same spot:
    # had the frames arrived with nothing detected on them, ByteTrack would have ended the track; it must not be
    # handed on to whatever stands there now (a looping publisher's first vehicle, the next car of a queue)
    times = [i / FPS for i in range(20)] + [19 / FPS + 3.0 + i / FPS for i in range(20)]
    ids, outages = _ids(times, [10] * 40)
    before, after = set().union(*ids[:20]), set().union(*ids[20:])
    assert outages == 1
    assert len(before) == 1 and len(after) == 1
    assert min(after) > max(before), "the vehicle after the outage must get a new id, never an old one"


def test_without_the_outage_the_same_frames_keep_one_id():
    # the control: the same frames with no jump in time stay one track
    ids, outages = _ids([i / FPS for i in range(40)], [10] * 40)
    assert outages == 0
    assert len(set().union(*ids[3:])) == 1


def test_a_slow_live_run_every_frame_far_apart_is_not_an_outage():
    # an overloaded run: each frame handed over 1.6 s after the last (past the 1.2 s buffer), the vehicle standing
    times = [1.6 * i for i in range(25)]
    ids, outages = _ids(times, [10] * 25)
    assert outages == 0
    assert len(set().union(*ids[6:])) == 1
    assert np.all([len(s) == 1 for s in ids[6:]])
