"""The torch ego-motion and motion layer of streams stepped together meet in one ``update_streams`` call per step,
and every stream gets what it would have computed alone: the same tracks, ego-motion and motion blobs."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch ego-motion backend needs torch")
pytest.importorskip("kornia", reason="the torch ego-motion backend needs kornia")

from edge.batch.batched import step_streams  # noqa: E402
from tests.edge.batch.test_batched import same_results  # noqa: E402
from tracking.config import PipelineConfig  # noqa: E402
from tracking.pipeline import Pipeline  # noqa: E402
from vision.gpu import ego_motion as gpu_ego  # noqa: E402
from vision.gpu import motion as gpu_motion  # noqa: E402
from vision.gpu.ego_motion import TorchEgoMotionEstimator  # noqa: E402
from vision.gpu.motion import TorchMotionDetector  # noqa: E402
from vision.source import open_source  # noqa: E402
from vision.types import Frame  # noqa: E402

N_FRAMES = 5


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread: three streams' threads on two shared cores, and a quicker, steadier test."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def feeds(detector_video) -> list[list[Frame]]:
    """Three different streams from one clip: as it is, mirrored, upside down."""
    with open_source(detector_video, max_frames=N_FRAMES) as src:
        frames = list(src)
    flips = [lambda im: im, lambda im: im[:, ::-1], lambda im: im[::-1]]
    return [[Frame(f.index, f.t, np.ascontiguousarray(flip(f.image))) for f in frames] for flip in flips]


@pytest.fixture(scope="module")
def torch_config(lean_config) -> PipelineConfig:
    return lean_config.model_copy(
        update={
            "ego_motion": lean_config.ego_motion.model_copy(update={"backend": "torch"}),
            "detector": lean_config.detector.model_copy(update={"conf": 0.01, "every_n_frames": 1}),
        }
    )


def record_alone(p: Pipeline, egos: list, fields: list) -> None:
    """Keep what ``p``'s own ego-motion and motion ``update`` return (instance attributes over the methods)."""
    ego_update, motion_update = p.ego.update, p.motion.update

    def ego(*a, **k):
        egos.append(r := ego_update(*a, **k))
        return r

    def motion(*a, **k):
        fields.append(r := motion_update(*a, **k))
        return r

    p.ego.update, p.motion.update = ego, motion


def test_streams_share_torch_ego_motion_and_motion_passes(one_thread, torch_config, feeds, monkeypatch):
    alone = [Pipeline(torch_config) for _ in feeds]
    assert all(isinstance(p.ego, TorchEgoMotionEstimator) for p in alone)
    assert all(isinstance(p.motion, TorchMotionDetector) for p in alone)
    alone_egos: list[list] = [[] for _ in feeds]
    alone_fields: list[list] = [[] for _ in feeds]
    expected = []
    for p, feed, egos, fields in zip(alone, feeds, alone_egos, alone_fields):
        record_alone(p, egos, fields)
        expected.append([p.step(f) for f in feed])

    # count the batched calls, and keep each stream's answers from them
    ego_calls: list[int] = []
    motion_calls: list[int] = []
    shared_egos: dict[int, list] = defaultdict(list)
    shared_fields: dict[int, list] = defaultdict(list)
    real_ego, real_motion = gpu_ego.update_streams, gpu_motion.update_streams

    def counting_ego(estimators, *a, **k):
        ego_calls.append(len(estimators))
        out = real_ego(estimators, *a, **k)
        for est, r in zip(estimators, out):
            shared_egos[id(est)].append(r)
        return out

    def counting_motion(detectors, *a, **k):
        motion_calls.append(len(detectors))
        out = real_motion(detectors, *a, **k)
        for det, r in zip(detectors, out):
            shared_fields[id(det)].append(r)
        return out

    monkeypatch.setattr(gpu_ego, "update_streams", counting_ego)
    monkeypatch.setattr(gpu_motion, "update_streams", counting_motion)
    streams = [Pipeline(torch_config) for _ in feeds]
    together = list(zip(*[step_streams(streams, list(step)) for step in zip(*feeds)]))

    assert sum(same_results(list(t), e) for t, e in zip(together, expected)) > 0, "no tracks: nothing compared"
    # one call per step for each stage, carrying all three streams
    assert ego_calls == [len(feeds)] * len(alone_egos[0]), ego_calls
    assert motion_calls and motion_calls == [len(feeds)] * len(alone_fields[0]), motion_calls
    for i, p in enumerate(streams):
        assert "update" not in vars(p.ego) and "update" not in vars(p.motion)  # restored after each step
        got_egos, got_fields = shared_egos[id(p.ego)], shared_fields[id(p.motion)]
        assert len(got_egos) == len(alone_egos[i]) and len(got_fields) == len(alone_fields[i])
        assert sum(e.ok for e in got_egos) >= 2, "no ego-motion estimated: nothing compared"
        for a, b in zip(alone_egos[i], got_egos):
            assert a.ok == b.ok
            np.testing.assert_allclose(b.H, a.H, atol=1e-4)
        for a, b in zip(alone_fields[i], got_fields):
            # the batched ego-motion differs from one stream's in the last digits (above), and the background's
            # anchor is registered from it (vision.motion.BackgroundAnchor): a pixel at the threshold may flip,
            # no blob changes
            assert np.count_nonzero(b.mask != a.mask) <= 1e-4 * a.mask.size
            np.testing.assert_array_equal(p.motion.blobs(b), alone[i].motion.blobs(a))


def test_stage_settings_are_serialised_once_per_config(monkeypatch):
    """The shared-pass key's settings JSON is made once per config object, not at every step of every stream."""
    from edge.batch.batched import stage_settings
    from vision.config import EgoMotionConfig

    dumps: list[int] = []
    real_dump = EgoMotionConfig.model_dump_json

    def counting_dump(self, *a, **k):
        dumps.append(1)
        return real_dump(self, *a, **k)

    monkeypatch.setattr(EgoMotionConfig, "model_dump_json", counting_dump)
    ego = TorchEgoMotionEstimator(EgoMotionConfig())
    first = stage_settings(ego)
    assert all(stage_settings(ego) is first for _ in range(50)) and len(dumps) == 1
    assert first == real_dump(ego.config)
    # a new config object (another stream's settings, or the stage reconfigured) gets its own key
    ego.config = ego.config.model_copy(update={"backend": "torch"})
    changed = stage_settings(ego)
    assert len(dumps) == 2 and changed == real_dump(ego.config) and changed != first
