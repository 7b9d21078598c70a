import numpy as np
import pytest

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


def _cars(length: float, rows: list[float], x0: float = 50.0) -> Detections:
    """Confident car boxes ``length`` px long (2:1), centred on ``rows``."""
    xyxy = np.array(
        [
            [x0 + 3 * length * i, y - length / 4, x0 + 3 * length * i + length, y + length / 4]
            for i, y in enumerate(rows)
        ],
        np.float32,
    )
    return Detections(xyxy, np.full(len(rows), 0.9, np.float32), np.zeros(len(rows), int))


def _auto_detector(**config):
    from tracking.config import DetectorConfig
    from vision.detection import VehicleDetector

    return VehicleDetector(DetectorConfig(runtime="torch", **config), "cpu")


def test_the_chosen_scale_goes_down_for_large_vehicles_and_up_for_small_ones():
    """'auto' brings the median vehicle to target_vehicle_px in the detector's input, within min/max scale."""
    big, small = _auto_detector(), _auto_detector(max_scale=2.0, max_input_pixels=16.0)
    big._measure(_cars(96, [100, 200, 300, 400, 450]))
    small._measure(_cars(16, [100, 200, 300, 400, 450]))
    (_, _, s_big), *rest_big = big._plan(1024, 540)
    (_, _, s_small), *rest_small = small._plan(1024, 540)
    assert not rest_big and not rest_small  # one size everywhere: one pass over the whole frame
    assert s_big == 0.5  # 96 px cars at 48 px
    assert s_small == 2.0  # 16 px cars would need 3x: capped at max_scale
    capped = _auto_detector(max_scale=2.0)  # the CPU budget: 2.6x the letterboxed frame's pixels -> native at most
    capped._measure(_cars(16, [100, 200, 300, 400, 450]))
    assert capped._plan(1024, 540)[0][2] == 1.0


def test_an_oblique_view_is_upscaled_in_its_far_rows_only_and_never_downscaled_below_its_small_vehicles():
    far, near = _cars(16, [20, 60, 100, 140, 170]), _cars(100, [380, 420, 460, 500, 530])
    det = _auto_detector(max_scale=2.0, max_input_pixels=16.0)
    det._measure(far)
    det._measure(near)
    plan = det._plan(1024, 540)
    assert plan[0][0] == 0 and plan[-1][1] == 540 and len(plan) >= 2
    assert plan[0][2] == 2.0 and plan[-1][2] == 1.0  # far rows upscaled; near rows native, not halved
    default = _auto_detector()  # max_scale 1: the far rows' small vehicles keep the whole frame native
    default._measure(far)
    default._measure(near)
    assert default._plan(1024, 540) == [(0, 540, 1.0)]


def test_a_720p_frame_of_small_vehicles_is_detected_at_native_resolution_either_way_up():
    """Frames up to native_up_to_px (1280) may run native when their vehicles need it (the toll plaza's 720x1280
    oblique clip: at the budget's 0.75x its ~34 px vehicles were missed and the uncalibrated speeds went wrong);
    larger frames stay within the CPU budget."""
    for width, height in ((720, 1280), (1280, 720)):
        det = _auto_detector()
        det._measure(_cars(34, [0.2 * height, 0.4 * height, 0.5 * height, 0.6 * height, 0.8 * height]))
        assert det._plan(width, height) == [(0, height, 1.0)]
    hd = _auto_detector()
    hd._measure(_cars(34, [200, 400, 500, 600, 800]))
    assert hd._plan(1920, 1080) == [(0, 1080, 0.5)]  # 2.6x the letterboxed pixels: half scale
    budget_only = _auto_detector(native_up_to_px=0)
    budget_only._measure(_cars(34, [256, 512, 640, 768, 1024]))
    assert budget_only._plan(720, 1280) == [(0, 1280, 0.75)]  # what the budget alone allows (the regression)


def test_a_4k_frame_gets_the_scale_its_vehicles_need_not_a_quarter():
    """A 4K frame keeps the input scale a 1920 px frame gets (half), not the same number of pixels (a quarter):
    at a quarter the ~100 px cars of a 120 m flight reached the detector at ~25 px and a junction's queues were lost
    (issue 32). ``budget_frame_px=0`` is the pixel budget alone."""
    rows = [300.0, 700.0, 1000.0, 1300.0, 1800.0]
    uhd = _auto_detector()
    uhd._measure(_cars(100, rows))
    assert uhd._plan(3840, 2160) == [(0, 2160, 0.5)]
    pixels_only = _auto_detector(budget_frame_px=0)
    pixels_only._measure(_cars(100, rows))
    assert pixels_only._plan(3840, 2160) == [(0, 2160, 0.25)]
    hd = _auto_detector()
    hd._measure(_cars(50, [200.0, 400.0, 500.0, 600.0, 800.0]))
    assert hd._plan(1920, 1080) == [(0, 1080, 0.5)]  # 1080p is unchanged


def test_a_recorded_run_gets_the_scale_its_vehicles_need_within_the_recorded_budget():
    """A recording has a cost target, not a frame rate: its budget (recorded_max_input_pixels, 1080p at 0.75) lets
    ~50 px cars of an oblique 100 m flight reach the detector at ~38 px instead of ~25, where it boxed the cars
    crossing a junction that half scale lost (issue 32). Live keeps half scale; large vehicles cost nothing more."""
    rows = [200.0, 400.0, 500.0, 600.0, 800.0]
    live, recorded = _auto_detector(), _auto_detector()
    recorded.recorded = True
    for det in (live, recorded):
        det._measure(_cars(50, rows))
    assert live._plan(1920, 1080) == [(0, 1080, 0.5)]
    assert recorded._plan(1920, 1080) == [(0, 1080, 0.75)]
    large = _auto_detector()
    large.recorded = True
    large._measure(_cars(100, rows))
    assert large._plan(1920, 1080) == [(0, 1080, 0.5)]  # 100 px cars at 50 px: no more than they need
    off = _auto_detector(recorded_max_input_pixels=None)
    off.recorded = True
    off._measure(_cars(50, rows))
    assert off._plan(1920, 1080) == [(0, 1080, 0.5)]
    for det in (live, recorded):
        det._planned(np.zeros((1080, 1920, 3), np.uint8), None)
    # the share of the live budget a pass uses sets the detector's stride: a recorded run's larger pass counts as it
    # would live (UAVDT's 1024x540 recordings, native either way, keep their stride)
    assert recorded.budget_share == pytest.approx(live.budget_share * 0.75**2 / 0.5**2)
    recorded.reset()
    assert not recorded.recorded  # each run says what it is


def test_a_faster_runtime_gets_more_pixels_in_a_recorded_run_only(monkeypatch):
    """The recorded budget is in pixels ONNX Runtime detects in its time: OpenVINO at bfloat16, measured 1.8x as fast
    in `process`, runs a 1080p recording's ~50 px cars at native scale for the cost 0.75 had; at float32 (a CPU without
    bfloat16) it was no faster and gets no more. The live budget is not scaled."""
    import vision.runtime

    monkeypatch.setattr(vision.runtime, "openvino_runs_bf16", lambda: True)
    assert vision.runtime.pixels_per_onnx_pixel("openvino") == pytest.approx(1.8)
    assert vision.runtime.pixels_per_onnx_pixel("onnx") == vision.runtime.pixels_per_onnx_pixel("torch") == 1.0
    monkeypatch.setattr(vision.runtime, "openvino_runs_bf16", lambda: False)
    assert vision.runtime.pixels_per_onnx_pixel("openvino") == 1.0
    rows = [200.0, 400.0, 500.0, 600.0, 800.0]
    faster, live_faster = _auto_detector(), _auto_detector()
    for det in (faster, live_faster):
        det.runtime_pixels = 1.8  # as the detector sets it on OpenVINO at bfloat16
        det._measure(_cars(50, rows))
    faster.recorded = True
    assert faster._plan(1920, 1080) == [(0, 1080, 1.0)]
    assert live_faster._plan(1920, 1080) == [(0, 1080, 0.5)]
    assert _auto_detector().runtime_pixels == 1.0  # PyTorch: ONNX Runtime's budget


def test_the_pipeline_tells_its_detector_whether_it_runs_a_recording():
    from tracking.config import DetectorConfig, PipelineConfig
    from tracking.pipeline import Pipeline
    from vision.detection import VehicleDetector

    pipe = Pipeline(PipelineConfig(detector=DetectorConfig(runtime="torch")))
    detector = pipe.detector
    assert isinstance(detector, VehicleDetector)
    pipe.reset(1920, 1080, 30.0, recorded=True)
    assert detector.recorded
    pipe.reset(1920, 1080, 30.0)  # a live stream, or a caller that does not say
    assert not detector.recorded


def test_the_toll_plaza_portrait_clip_gets_the_scale_its_vehicles_need():
    """Real portrait oblique footage (720x1280, vehicles ~30-50 px long at native resolution): 'auto' measures them
    and detects the frame at native resolution, where it finds them (at 0.75x it missed about 4 in 10 of the middle
    rows' vehicles, docs/detector_scale.md)."""
    from tests.conftest import shared_path
    from vision.source import open_source

    clip = shared_path("data", "real_video", "toll_plaza", "247589_medium.mp4")
    with open_source(clip, max_frames=60) as src:
        frames = [f.image for f in src if f.index % 20 == 0]
    det = _auto_detector()
    for image in frames:
        det.detect(image)
    assert frames[0].shape[:2] == (1280, 720)
    lengths = np.concatenate(list(det._sizes))[:, 1]
    assert len(lengths) >= 10 and np.median(lengths) < det.config.target_vehicle_px  # small: they need >= 1x
    assert [e["scale"] for e in det.scale_log] == [1.0]


def test_a_roof_boxed_inside_its_car_is_not_measured_as_a_vehicle():
    det = _auto_detector()
    cars = _cars(80, [100, 200, 300, 400, 500])
    roofs = Detections(cars.xyxy + np.array([20, 5, -20, -5], np.float32), cars.score, cars.class_id)
    det._measure(Detections.concat([cars, roofs]))
    assert det._plan(1024, 540)[0][2] == 0.625  # 48 / 80, the roofs (40 px) left out


@pytest.mark.slow
def test_large_vehicles_are_detected_at_a_smaller_scale_with_fewer_false_boxes():
    """Real nadir frames at low altitude (UAVDT M0703, cars 40-100 px): 'auto' measures the cars and detects them
    downscaled, which finds the same cars with far fewer boxes that match no vehicle than native resolution does."""
    from scipy.optimize import linear_sum_assignment

    from tests.conftest import shared_path
    from tracking.evaluation.io import load_ground_truth
    from tracking.evaluation.mot import iou_xywh
    from vision.source import open_source

    root = shared_path("data", "mot", "uavdt_M0703_nadir_dev")
    gt = load_ground_truth(root / "gt" / "M0703_gt_whole.txt").boxes
    with open_source(root / "video.mp4", max_frames=200) as src:
        frames = [(f.index + 1, f.image) for f in src if f.index % 40 == 0]

    def matched_and_false(det) -> tuple[int, int]:
        tp = fp = 0
        for number, image in frames:
            d = det.detect(image)
            d = d[d.score >= 0.25]
            xywh = np.column_stack([d.xyxy[:, :2], d.wh])
            iou = iou_xywh(gt.xywh[gt.frame == number], xywh)
            rows, cols = linear_sum_assignment(-iou)
            ok = int((iou[rows, cols] >= 0.5).sum())
            tp, fp = tp + ok, fp + len(d) - ok
        return tp, fp

    native_tp, native_fp = matched_and_false(_auto_detector(tiling="on"))
    auto = _auto_detector()
    auto_tp, auto_fp = matched_and_false(auto)
    assert auto.scale_log and all(e["scale"] < 1.0 for e in auto.scale_log)  # the cars measured large: downscaled
    assert auto_fp < native_fp and auto_tp >= 0.95 * native_tp  # measured: 19 vs 24 false boxes, 115 vs 114 found


def _recording(det) -> list[tuple[int, int]]:
    """The input shapes (h, w) the detector asks Ultralytics for, recorded on the way to the real model."""
    shapes: list[tuple[int, int]] = []
    predict = det.model.predict

    def recorded(*args, **kwargs):
        shapes.append(tuple(kwargs["imgsz"]))
        return predict(*args, **kwargs)

    det.model.predict = recorded
    return shapes


def test_every_input_shape_a_run_uses_is_one_the_warm_up_ran():
    """On CUDA each new input shape's first call is slow, so warm_up() runs every shape the scale plan can use at the
    start. Here the CUDA shape rule is switched on for a CPU detector; vehicles of several sizes move the plan around."""
    det = _auto_detector()
    assert det.warm_up(1024, 540) == 0  # on the CPU: nothing is run
    det._fixed_shapes = True
    shapes = _recording(det)
    ran = det.warm_up(1024, 540)
    assert ran == len(det.warmed_shapes) == len(set(shapes)) >= 5  # one pass per shape, each scale step of the plan
    assert det.tiles_run == 0 and not det.scale_log  # blank frames: no stream state kept
    shapes.clear()
    blank = np.zeros((540, 1024, 3), np.uint8)
    for length in (96, 30, 60, 200):
        det._measure(_cars(length, [100, 200, 300, 400, 450]))
        det.detect(blank)
    assert len({e["scale"] for e in det.scale_log}) >= 3 and set(shapes) <= det.warmed_shapes


def test_the_input_shapes_of_banded_plans_are_all_enumerated():
    """max_scale > 1 with room in the budget: bands of their own scale, whose grown heights vary with the neighbours'
    scales. Every shape such a run asks for is among warm_up_passes()."""
    det = _auto_detector(max_scale=2.0, max_input_pixels=16.0)
    det._fixed_shapes = True
    known = set(det.warm_up_passes(1024, 540))
    shapes = _recording(det)
    blank = np.zeros((540, 1024, 3), np.uint8)
    det._measure(Detections.concat([_cars(16, [20, 60, 100, 140, 170]), _cars(100, [380, 420, 460, 500, 530])]))
    det.detect(blank)
    assert len(det.scale_log) >= 2  # banded
    assert shapes and set(shapes) <= known
