"""RoadSegmenter: U-Net scheduling and ego-motion warping, fixed masks, track fusion, tiles, errors."""

from pathlib import Path

import cv2
import numpy as np
import pytest

import vision.road.segmenter as segmenter_module
from tracking.config import RoadConfig
from vision.road.segmenter import RoadMaskFileError, RoadSegmenter
from vision.road.unet import RoadUNet, RoadWeightsError, save_checkpoint
from vision.types import Frame

W, H = 640, 360  # frame size; the segmenter's working size is the same (long side 640 <= 640)


def frame(i: int) -> Frame:
    return Frame(index=i, t=i / 25, image=np.zeros((H, W, 3), np.uint8))


def translation(dx: float, dy: float) -> np.ndarray:
    return np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1]], np.float64)


@pytest.fixture
def tiny_weights(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_road.pt"
    save_checkpoint(path, RoadUNet(4).eval(), 256, {})
    return path


@pytest.fixture
def square_unet(monkeypatch):
    """Replace the network output by a known probability map (a road square) and count the runs."""
    calls = []

    def fake_predict(model, image, long_side, device, out_size):
        calls.append(out_size)
        w, h = out_size
        prob = np.zeros((h, w), np.float32)
        prob[100:200, 200:300] = 0.9
        return prob

    monkeypatch.setattr(segmenter_module, "predict_proba", fake_predict)
    return calls


def bbox(mask: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(mask)
    return xs.min(), ys.min(), xs.max(), ys.max()


def test_unet_runs_every_n_frames_and_mask_follows_ego_motion(tiny_weights, square_unet):
    cfg = RoadConfig(weights=str(tiny_weights), every_n_frames=3, dilate_px=0, learn_from_tracks=False)
    seg = RoadSegmenter(cfg, device="cpu", work_long_side=640)
    m0 = seg.update(frame(0), None)
    assert m0.shape == (H, W) and m0.dtype == np.uint8 and set(np.unique(m0)) <= {0, 255}
    assert bbox(m0) == (200, 100, 299, 199)
    m1 = seg.update(frame(1), translation(30, 12))
    m2 = seg.update(frame(2), translation(30, 12))
    assert len(square_unet) == 1, "U-Net must not run between every_n_frames"
    # Ground brought into view (left 2*30 px, top 2*12 px) is road until the next run; look beyond it.
    x0, y0, x1, y1 = bbox(m2[30:, 70:])
    assert abs(x0 + 70 - 260) <= 1 and abs(y0 + 30 - 124) <= 1 and abs(x1 + 70 - 359) <= 1 and abs(y1 + 30 - 223) <= 1
    assert bbox(m1[20:, 40:])[0] + 40 == pytest.approx(230, abs=1)
    seg.update(frame(3), translation(30, 12))
    assert len(square_unet) == 2, "U-Net runs again on the every_n_frames-th frame"


def test_warped_in_border_counts_as_road_until_next_run(tiny_weights, square_unet):
    cfg = RoadConfig(weights=str(tiny_weights), every_n_frames=10, dilate_px=0, learn_from_tracks=False)
    seg = RoadSegmenter(cfg, device="cpu", work_long_side=640)
    seg.update(frame(0), None)
    mask = seg.update(frame(1), translation(-50, 0))  # camera pans right: new ground enters on the right edge
    assert mask[:, W - 40 :].min() == 255 and mask[:, : W - 60][:, :150].max() == 0


def test_dilation_grows_the_mask(tiny_weights, square_unet):
    seg = RoadSegmenter(RoadConfig(weights=str(tiny_weights), dilate_px=6, learn_from_tracks=False), "cpu", 640)
    x0, y0, x1, y1 = bbox(seg.update(frame(0), None))
    assert (x0, y0, x1, y1) == (194, 94, 305, 205)


def test_missing_weights_raise_clear_error(tmp_path):
    missing = tmp_path / "road_missing.pt"
    with pytest.raises(RoadWeightsError, match="road_missing.pt"):
        RoadSegmenter(RoadConfig(weights=str(missing)), device="cpu")


def test_mask_file_is_resized_to_the_frame(tmp_path):
    img = np.zeros((90, 160), np.uint8)
    img[:, 40:80] = 255  # a vertical road band, a quarter of the width
    path = tmp_path / "road_mask.png"
    cv2.imwrite(str(path), img)
    seg = RoadSegmenter(RoadConfig(mask_file=str(path), dilate_px=0, learn_from_tracks=False), device="cpu")
    mask = seg.update(frame(0), None)
    assert mask.shape == (H, W)
    assert mask[:, 170:310].min() == 255 and mask[:, :150].max() == 0 and mask[:, 330:].max() == 0
    assert seg.road_fraction == pytest.approx(0.25, abs=0.01)


def test_unreadable_mask_file_raises_clear_error(tmp_path):
    bad = tmp_path / "broken_mask.png"
    bad.write_text("not an image")
    with pytest.raises(RoadMaskFileError, match="broken_mask.png"):
        RoadSegmenter(RoadConfig(mask_file=str(bad)), device="cpu")
    with pytest.raises(ValueError, match="missing_mask.png"):
        RoadSegmenter(RoadConfig(mask_file=str(tmp_path / "missing_mask.png")), device="cpu")


def test_polygon_mode_and_road_tiles():
    poly = [(0, 0), (320, 0), (320, 360), (0, 360)]  # left half
    seg = RoadSegmenter(RoadConfig(polygon=poly, dilate_px=0, learn_from_tracks=False), device="cpu")
    mask = seg.update(frame(0), None)
    assert mask[:, :310].min() == 255 and mask[:, 330:].max() == 0
    assert seg.road_fraction == pytest.approx(0.5, abs=0.01)
    tiles = [(0, 0, 200, 200), (400, 0, 640, 360), (300, 100, 500, 300)]
    assert seg.road_tiles(tiles) == [True, False, True]
    assert seg.road_tiles([(310, 0, 640, 360)], min_fraction=0.1) == [False]


def test_moving_tracks_become_road_and_are_warped():
    # A polygon far from the track path, so everything else in the mask comes from tracks.
    cfg = RoadConfig(polygon=[(0, 0), (20, 0), (20, 20)], dilate_px=0, learn_from_tracks=True)
    seg = RoadSegmenter(cfg, device="cpu")
    path = [(100 + 10 * i, 250) for i in range(30)]
    for i, (x, y) in enumerate(path):
        seg.update(frame(i), None)
        # A second, standing vehicle must not paint road.
        seg.observe_tracks(np.array([[x, y], [500, 60]]), np.array([True, False]))
    mask = seg.update(frame(len(path)), None)
    assert all(mask[250, x] == 255 for x in range(110, 380, 10)), "the path of a moving track is road"
    assert mask[60, 500] == 0 and mask[150, 250] == 0
    shifted = seg.update(frame(len(path) + 1), translation(0, -100))
    assert shifted[150, 250] == 255 and shifted[250, 250] == 0, "the track heat map follows ego-motion"


def test_track_learning_can_be_disabled():
    cfg = RoadConfig(polygon=[(0, 0), (20, 0), (20, 20)], dilate_px=0, learn_from_tracks=False)
    seg = RoadSegmenter(cfg, device="cpu")
    for i in range(10):
        seg.update(frame(i), None)
        seg.observe_tracks(np.array([[300.0, 200.0]]), np.array([True]))
    assert seg.update(frame(10), None)[200, 300] == 0


def test_single_spurious_moving_detection_paints_nothing_and_paths_fade():
    cfg = RoadConfig(polygon=[(0, 0), (20, 0), (20, 20)], dilate_px=0, learn_from_tracks=True)
    seg = RoadSegmenter(cfg, device="cpu")
    seg.update(frame(0), None)
    seg.observe_tracks(np.array([[400.0, 100.0]]), np.array([True]))  # seen once, never again
    for i in range(1, 4):
        seg.update(frame(i), None)
        seg.observe_tracks(np.array([[100.0 + 3 * i, 300.0]]), np.array([True]))
    mask = seg.update(frame(4), None)
    assert mask[100, 400] == 0 and mask[300, 106] == 255
    for i in range(5, 5 + RoadSegmenter.TRACK_HALF_LIFE_FRAMES + 5):
        mask = seg.update(frame(i), None)
    assert mask[300, 106] == 0, "an old path decays out of the mask"


def test_where_traffic_drove_lately_is_known_until_its_path_fades():
    """``driven_within``: a lane moving vehicles drove along is known as driven for about as many frames as asked;
    beside it (a verge, a parking bay), or before anything drove, nothing is."""
    cfg = RoadConfig(polygon=[(0, 0), (20, 0), (20, 20)], dilate_px=0, learn_from_tracks=True)
    seg = RoadSegmenter(cfg, device="cpu")
    seg.update(frame(0), None)
    lane, verge = np.array([[160.0, 300.0]]), np.array([[160.0, 340.0]])
    assert not seg.driven_within(lane, 1000).any()
    for i in range(1, 40):
        seg.update(frame(i), None)
        seg.observe_tracks(np.array([[100.0 + 3 * i, 300.0]]), np.array([True]))
    assert seg.driven_within(lane, 100).all() and not seg.driven_within(verge, 1000).any()
    for i in range(40, 240):  # 200 frames without traffic
        seg.update(frame(i), None)
    assert not seg.driven_within(lane, 100).any() and seg.driven_within(lane, 300).all()
    assert (
        not RoadSegmenter(RoadConfig(polygon=cfg.polygon, learn_from_tracks=False), device="cpu")
        .driven_within(lane, 1000)
        .any()
    )


def test_reset_forgets_paths_and_reruns_the_unet(tiny_weights, square_unet):
    seg = RoadSegmenter(RoadConfig(weights=str(tiny_weights), every_n_frames=100, dilate_px=0), "cpu", 640)
    for i in range(3):
        seg.update(frame(i), None)
        seg.observe_tracks(np.array([[400.0 + 3 * i, 300.0]]), np.array([True]))
    assert seg.update(frame(3), None)[300, 403] == 255 and len(square_unet) == 1
    seg.reset()
    assert seg.mask is None and seg.road_fraction == 1.0
    mask = seg.update(frame(0), None)
    assert mask[300, 403] == 0 and len(square_unet) == 2
