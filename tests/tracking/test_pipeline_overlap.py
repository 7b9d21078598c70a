"""pipeline.overlap_ego_motion: the ego-motion in a second thread while the detector runs gives the same tracks."""

import numpy as np

from tests.conftest import shared_path
from tracking.config import PipelineConfig
from tracking.pipeline import Pipeline
from vision.source import open_source


def _tracks(frames, overlap: bool) -> tuple[list, Pipeline]:
    pipe = Pipeline(PipelineConfig(device="cpu", overlap_ego_motion=overlap))
    h, w = frames[0].image.shape[:2]
    pipe.reset(w, h, 30.0)
    out = []
    for f in frames:
        r = pipe.step(f)
        out.append([(t.track_id, *np.round(t.xyxy, 3), t.class_id, round(t.speed_kmh or -1.0, 3)) for t in r.tracks])
    return out, pipe


def test_overlapped_ego_motion_gives_the_same_tracks():
    """Real oblique footage from a moving drone (UAVDT M1303, 1024x540, 6 frames): default pipeline (road U-Net, dual layer),
    with and without the overlap; every frame's tracks, boxes and speeds equal, and the threaded path was taken."""
    root = shared_path("data", "mot", "uavdt_M1303")
    with open_source(root, max_frames=6) as src:
        frames = list(src)
    plain, _ = _tracks(frames, overlap=False)
    overlapped, pipe = _tracks(frames, overlap=True)
    assert pipe._ego_pool is not None  # the detector frames ran beside the ego-motion thread
    assert sum(len(t) for t in plain) > 0
    assert overlapped == plain
