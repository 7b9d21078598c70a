import numpy as np

from vision.detection import cut_by_tile_edge, merge_tiled, tile_grid
from vision.types import Detections


def test_tile_grid_covers_the_frame_with_the_overlap():
    tiles = tile_grid(1920, 1080, 640, 0.15)
    covered = np.zeros((1080, 1920), bool)
    for x1, y1, x2, y2 in tiles:
        assert x2 - x1 == 640 and y2 - y1 == 640
        covered[y1:y2, x1:x2] = True
    assert covered.all()
    xs = sorted({t[0] for t in tiles})
    assert min(b - a for a, b in zip(xs, xs[1:])) <= 640 * (1 - 0.15)
    assert tile_grid(500, 400, 640, 0.15) == [(0, 0, 500, 400)]


def test_only_inner_tile_edges_cut_boxes():
    boxes = np.array(
        [
            [0, 100, 40, 130],  # touches the left edge: the frame border for the first tile
            [600, 100, 640, 130],  # touches the right edge, which is inside the frame
            [100, 100, 140, 130],
        ],
        np.float32,
    )
    assert cut_by_tile_edge(boxes, (0, 0, 640, 640), 1920, 1080).tolist() == [False, True, False]
    assert cut_by_tile_edge(boxes, (427, 0, 1067, 640), 1920, 1080).tolist() == [True, True, False]


def test_fragment_at_a_tile_border_is_merged_into_the_whole_vehicle():
    whole = [500, 200, 580, 240]  # seen whole in the left tile
    fragment = [540, 201, 580, 240]  # right part, cut by the right tile's left edge at x=540
    other_car = [585, 200, 660, 240]  # a different vehicle right behind, whole in its tile
    dets = Detections(np.array([whole, fragment, other_car], np.float32), np.array([0.8, 0.6, 0.7]), np.zeros(3))
    merged = merge_tiled(dets, np.array([False, True, False]), iou=0.5)
    assert len(merged) == 2
    np.testing.assert_allclose(merged.xyxy, [whole, other_car])
    # without the cut flag the fragment is a separate box (plain NMS keeps it: IoU 0.5 is not exceeded)
    assert len(merge_tiled(dets, np.zeros(3, bool), iou=0.6)) == 3


def test_two_fragments_of_a_long_vehicle_become_its_union():
    left = [300, 100, 496, 140]  # left tile ends at 496: the truck is cut there
    right = [400, 102, 560, 141]  # right tile starts at 400 (96 px = 15 % overlap)
    dets = Detections(np.array([left, right], np.float32), np.array([0.5, 0.7]), np.array([1, 1]))
    merged = merge_tiled(dets, np.array([True, True]), iou=0.5)
    assert len(merged) == 1
    np.testing.assert_allclose(merged.xyxy[0], [300, 100, 560, 141])
    assert merged.score[0] == np.float32(0.7)


def test_road_bounding_box_grows_by_the_margin_and_stays_in_the_frame():
    from vision.detection import road_bounding_box

    mask = np.zeros((540, 1024), np.uint8)
    assert road_bounding_box(mask, 32) == (0, 0, 0, 0)
    mask[100:300, 5:900] = 255
    assert road_bounding_box(mask, 32) == (0, 68, 932, 332)


def test_native_pass_runs_once_on_the_road_and_maps_boxes_back_to_the_frame():
    """tiling 'on' with a frame under single_pass_max: one detector pass over the road's bounding box, at its own
    resolution (a stride multiple), boxes in frame coordinates; no road at all means nothing to detect."""
    from tracking.config import DetectorConfig
    from vision.detection import VehicleDetector

    det = VehicleDetector(DetectorConfig(tiling="on", runtime="torch", road_margin_px=16, crop_to_road=True), "cpu")
    calls = []

    def fake_predict(images, imgsz=None):
        calls.append((images[0].shape, imgsz))
        return [Detections(np.array([[10, 10, 30, 20]], np.float32), np.array([0.9]), np.array([0]))]

    det._predict = fake_predict  # type: ignore[method-assign]  # the model call, replaced for the test
    image = np.zeros((540, 1024, 3), np.uint8)
    road = np.zeros((540, 1024), np.uint8)
    road[200:400, :] = 255
    out = det.detect(image, road)
    assert calls == [((232, 1024, 3), 1024)]
    np.testing.assert_allclose(out.xyxy, [[10, 194, 30, 204]])
    assert det.tiles_run == 1
    assert len(det.detect(image, np.zeros_like(road))) == 0 and len(calls) == 1


def test_fp16_argument_is_one_the_installed_ultralytics_takes_without_a_deprecation():
    """8.4 renamed 'half' to 'quantize' (and warns on every predict given 'half'); 8.3 only has 'half'."""
    from ultralytics.cfg import DEFAULT_CFG_DICT

    from vision.detection import fp16_predict_args

    (key, value), *rest = fp16_predict_args().items()
    assert not rest and key in DEFAULT_CFG_DICT
    assert (key, value) == (("quantize", 16) if "quantize" in DEFAULT_CFG_DICT else ("half", True))
