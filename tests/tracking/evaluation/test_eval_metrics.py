"""`airpatrol eval`: metric values on hand-computed cases, input errors, and a round trip on a generated clip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tracking.evaluation import EvalInputError, evaluate_run, load_ground_truth, mot_metrics, speed_errors
from tracking.evaluation.io import Boxes, read_mot
from tracking.evaluation.masks import road_mask_iou
from tracking.evaluation.mot import drop_ignored
from tracking.evaluation.report import cli_eval


def boxes(rows) -> Boxes:
    a = np.array(rows, float).reshape(-1, 6)
    return Boxes(a[:, 0].astype(int), a[:, 1].astype(int), a[:, 2:6])


A1, B1 = (0, 0, 10, 10), (50, 50, 10, 10)
A2, B2 = (2, 0, 10, 10), (52, 50, 10, 10)


def test_mota_idf1_by_hand():
    """2 frames, 2 objects (A, B). Frame 1: track 1 on A, track 2 on B, track 3 on nothing (FP).
    Frame 2: track 1 on A, track 4 on B (B changed identity: one ID switch).

    GT boxes = 4, FN = 0, FP = 1, IDSW = 1  ->  MOTA = 1 - (0 + 1 + 1) / 4 = 0.5
    IDF1: best one-to-one id mapping A<->1 (2 frames), B<->2 or 4 (1 frame): IDTP = 3;
    predictions = 5 -> IDFP = 2; GT = 4 -> IDFN = 1;  IDF1 = 2*3 / (2*3 + 2 + 1) = 6/9.
    """
    gt = boxes([(1, 1, *A1), (1, 2, *B1), (2, 1, *A2), (2, 2, *B2)])
    pred = boxes([(1, 1, *A1), (1, 2, *B1), (1, 3, 200, 200, 10, 10), (2, 1, *A2), (2, 4, *B2)])
    m, matches = mot_metrics(gt, pred)
    assert m["num_false_positives"] == 1 and m["num_misses"] == 0 and m["num_switches"] == 1
    assert m["mota"] == pytest.approx(0.5)
    assert m["idf1"] == pytest.approx(6 / 9)
    assert m["fp_per_frame"] == pytest.approx(0.5)
    assert sorted((mt.frame, mt.gt_id, mt.track_id) for mt in matches) == [(1, 1, 1), (1, 2, 2), (2, 1, 1), (2, 2, 4)]


def test_hota_by_hand_when_trackeval_is_installed():
    """Same case as above; all matched IoUs are 1, so every alpha gives the same value.
    DetA = TP / (TP + FN + FP) = 4 / 5.  AssA = mean over the 4 TPs of TPA / (TPA + FNA + FPA):
    (A,1) x2 -> 2/2 each, (B,2) -> 1/2, (B,4) -> 1/2  =>  AssA = 3/4.  HOTA = sqrt(0.8 * 0.75)."""
    pytest.importorskip("trackeval", reason="TrackEval not installed (optional)")
    from tracking.evaluation.mot import hota

    gt = boxes([(1, 1, *A1), (1, 2, *B1), (2, 1, *A2), (2, 2, *B2)])
    pred = boxes([(1, 1, *A1), (1, 2, *B1), (1, 3, 200, 200, 10, 10), (2, 1, *A2), (2, 4, *B2)])
    assert hota(gt, pred) == pytest.approx(np.sqrt(0.8 * 0.75))
    assert hota(gt, gt) == pytest.approx(1.0)


def test_iou_threshold_decides_a_match():
    """A box shifted by 5 of 10 px overlaps IoU = 50/150 = 1/3: a miss plus a false positive at IoU 0.5."""
    gt = boxes([(1, 1, 0, 0, 10, 10)])
    pred = boxes([(1, 7, 5, 0, 10, 10)])
    m, _ = mot_metrics(gt, pred, iou_threshold=0.5)
    assert (m["num_misses"], m["num_false_positives"], m["mota"]) == (1, 1, pytest.approx(-1.0))
    m, _ = mot_metrics(gt, pred, iou_threshold=0.3)
    assert (m["num_misses"], m["num_false_positives"], m["mota"]) == (0, 0, pytest.approx(1.0))


def test_ignore_regions_drop_boxes_by_centre():
    region = boxes([(1, 0, 100, 100, 50, 50)])
    pred = boxes([(1, 1, 110, 110, 10, 10), (1, 2, 140, 140, 20, 20), (2, 3, 110, 110, 10, 10)])
    kept, n = drop_ignored(pred, region)
    # centre (115, 115) inside; centre (150, 150) on the edge counts as inside; frame 2 has no region
    assert n == 2 and kept.ids.tolist() == [3]


def test_speed_errors_by_hand():
    """Track 5 matches GT 1 in frames 1-40 at 30 fps; it is >= 1 s old from frame 31 on (10 frames).
    Predicted speed = true + 2 km/h in those frames -> MAE 2, RMSE 2, bias +2, 2/50 = 4 %."""
    from tracking.evaluation.mot import Match

    matches = [Match(f, 1, 5, 0.9) for f in range(1, 41)]
    true = {(f, 1): 50.0 for f in range(1, 41)}
    pred = {(f, 5): 52.0 for f in range(1, 41)}
    pred[(35, 5)] = 52.0
    out = speed_errors(matches, pred, true, None, {5: 1}, fps=30.0, min_track_s=1.0)
    assert out["n"] == 10 and out["eligible_matches"] == 10 and out["coverage"] == 1.0
    assert out["mae_kmh"] == pytest.approx(2.0) and out["rmse_kmh"] == pytest.approx(2.0)
    assert out["bias_kmh"] == pytest.approx(2.0) and out["mape_pct"] == pytest.approx(4.0)
    assert out["moving"]["n"] == 10 and out["standing"]["n"] == 0


def test_road_mask_iou_by_hand(tmp_path):
    import cv2

    (tmp_path / "gt").mkdir()
    (tmp_path / "pred").mkdir()
    g = np.zeros((10, 10), np.uint8)
    g[:, :5] = 255  # 50 px
    p = np.zeros((20, 20), np.uint8)  # other size: resized to 10x10 (nearest)
    p[:, 6:14] = 255  # -> columns 3..6: 40 px, 20 of them on the road
    cv2.imwrite(str(tmp_path / "gt" / "000001.png"), g)
    cv2.imwrite(str(tmp_path / "pred" / "frame_1.png"), p)
    out = road_mask_iou(tmp_path / "pred", tmp_path / "gt")
    assert out["frames"] == 1
    assert out["iou"] == pytest.approx(20 / 70)


def test_garbled_and_missing_inputs_name_the_file(tmp_path):
    bad = tmp_path / "gt.txt"
    bad.write_text("1,1,0,0,10,10,1,1,1\n2,1,zero,0,10,10,1,1,1\n")
    with pytest.raises(EvalInputError, match=r"gt\.txt: line 2"):
        read_mot(bad)
    with pytest.raises(EvalInputError, match="not found"):
        evaluate_run(tmp_path / "nope", bad)
    run = tmp_path / "run"
    run.mkdir()
    good = tmp_path / "good.txt"
    good.write_text("1,1,0,0,10,10,1,1,1\n")
    with pytest.raises(EvalInputError, match="tracks_mot.txt: file not found"):
        evaluate_run(run, good)
    (run / "tracks_mot.txt").write_text("1,1,0,0,10\n")
    with pytest.raises(EvalInputError, match="tracks_mot.txt: line 1 has 5 columns"):
        evaluate_run(run, good)


def test_uavdt_layout_with_ignore_file(tmp_path):
    (tmp_path / "X_gt_whole.txt").write_text("1,1,0,0,10,10,1,1,1\n1,2,100,100,10,10,1,1,2\n")
    (tmp_path / "X_gt_ignore.txt").write_text("1,9,95,95,30,30,1,-1,-1\n")
    run = tmp_path / "run"
    run.mkdir()
    # track 1 on object 1; track 8 sits in the ignore region (no FP), object 2 there is not a miss
    (run / "tracks_mot.txt").write_text("1,1,0,0,10,10,0.9,-1,-1,-1\n1,8,104,104,10,10,0.8,-1,-1,-1\n")
    res = evaluate_run(run, tmp_path)
    assert res["ground_truth_format"] == "uavdt"
    assert res["ignored"] == {"ground_truth_boxes": 1, "predicted_boxes": 1, "regions": 1, "parked": "ignore"}
    m = res["mot"]
    assert (m["num_objects"], m["num_false_positives"], m["num_misses"], m["mota"]) == (1, 0, 0, 1.0)
    assert json.loads((run / "eval.json").read_text())["mot"]["mota"] == 1.0


def test_parked_vehicles_of_a_scene_are_distractors_unless_counted(tmp_path):
    scene = tmp_path / "scene"
    (scene / "gt").mkdir(parents=True)
    (scene / "scene.json").write_text(
        json.dumps({"fps": 10, "vehicles": {"1": {"kind": "moving"}, "2": {"kind": "parked"}, "3": {"kind": "parked"}}})
    )
    (scene / "gt" / "gt.txt").write_text("1,1,0,0,10,10,1,1,1\n1,2,100,100,10,10,1,1,1\n1,3,200,200,10,10,1,1,1\n")
    run = tmp_path / "run"
    run.mkdir()
    # the moving vehicle and parked vehicle 2 are found; parked vehicle 3 is not
    (run / "tracks_mot.txt").write_text("1,1,0,0,10,10,0.9,-1,-1,-1\n1,5,101,100,10,10,0.8,-1,-1,-1\n")
    ignored = evaluate_run(run, scene)["mot"]
    assert (ignored["num_objects"], ignored["num_false_positives"], ignored["num_misses"]) == (1, 0, 0)
    counted = evaluate_run(run, scene, parked="count")["mot"]
    assert (counted["num_objects"], counted["num_false_positives"], counted["num_misses"]) == (3, 0, 1)
    with pytest.raises(EvalInputError, match="parked"):
        evaluate_run(run, scene, parked="sometimes")


# ------------------------------------------------------------------------------------------------ generated clip
@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    from vision.synth import SceneConfig, generate_scene

    cfg = SceneConfig(
        scene="highway",
        seed=11,
        width=320,
        height=180,
        fps=15.0,
        duration_s=3.0,
        altitude_m=45.0,
        use_shared_data="off",
        write_video=False,
        road_mask_every=5,
    )
    out = tmp_path_factory.mktemp("clip")
    generate_scene(cfg, out, progress=False)
    return out


def make_run(
    clip: Path,
    run: Path,
    drop_every: int = 0,
    swap_at: int | None = None,
    speed_offset: float = 0.0,
    mask_shift: int = 0,
) -> None:
    """A fake `airpatrol process` run made from the ground truth (optionally damaged)."""
    import cv2

    run.mkdir()
    gt = np.loadtxt(clip / "gt/gt.txt", delimiter=",", ndmin=2)
    sp = {(int(f), int(i)): v for f, i, v, *_ in np.loadtxt(clip / "gt/speeds.csv", delimiter=",", skiprows=1, ndmin=2)}
    mot, csv_rows = [], ["frame,t,track_id,class,speed_kmh"]
    for k, (f, i, l, t, w, h, *_rest) in enumerate(gt):
        f, i = int(f), int(i)
        if drop_every and k % drop_every == 0:
            continue
        tid = i + 1000 if (swap_at is not None and f >= swap_at and i == 1) else i
        mot.append(f"{f},{tid},{l:.2f},{t:.2f},{w:.2f},{h:.2f},0.9,-1,-1,-1")
        csv_rows.append(f"{f},{(f - 1) / 15:.4f},{tid},car,{sp[(f, i)] + speed_offset:.3f}")
    (run / "tracks_mot.txt").write_text("\n".join(mot) + "\n")
    (run / "tracks.csv").write_text("\n".join(csv_rows) + "\n")
    (run / "summary.json").write_text(json.dumps({"timings": {"ms_per_frame": 42.5}}))
    (run / "road_mask").mkdir()
    for p in sorted((clip / "road_mask").glob("*.png")):
        m = cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)
        cv2.imwrite(str(run / "road_mask" / p.name), np.roll(m, mask_shift, axis=1))


def test_eval_of_ground_truth_is_perfect(clip, tmp_path):
    make_run(clip, tmp_path / "run")
    res = evaluate_run(tmp_path / "run", clip)
    m = res["mot"]
    assert m["mota"] == 1.0 and m["idf1"] == 1.0 and m["num_switches"] == 0 and m["num_false_positives"] == 0
    assert res["fps"] == 15.0 and res["fps_from"] == "ground truth"
    assert res["speed"]["n"] > 50 and res["speed"]["mae_kmh"] == pytest.approx(0.0, abs=1e-3)
    assert res["road_mask"]["frames"] == 9 and res["road_mask"]["iou"] == 1.0
    assert res["timing"]["ms_per_frame"] == 42.5
    assert (tmp_path / "run" / "eval.json").is_file()


def test_eval_of_damaged_run(clip, tmp_path):
    make_run(clip, tmp_path / "run", drop_every=10, swap_at=20, speed_offset=5.0, mask_shift=3)
    res = evaluate_run(tmp_path / "run", clip)
    gt_rows = len(np.loadtxt(clip / "gt/gt.txt", delimiter=",", ndmin=2))
    m = res["mot"]
    dropped = len(range(0, gt_rows, 10))
    assert m["num_misses"] == dropped and m["num_false_positives"] == 0
    assert m["num_switches"] == 1
    assert m["mota"] == pytest.approx(1 - (dropped + 1) / gt_rows)
    assert m["idf1"] < 1.0
    assert res["speed"]["mae_kmh"] == pytest.approx(5.0, abs=2e-3) and res["speed"]["bias_kmh"] > 4.99
    assert 0.5 < res["road_mask"]["iou"] < 1.0


def test_cli_prints_table_and_fails_cleanly(clip, tmp_path):
    import typer

    app = typer.Typer()
    app.command()(cli_eval)
    make_run(clip, tmp_path / "run")
    runner = CliRunner()
    ok = runner.invoke(app, [str(tmp_path / "run"), str(clip)])
    assert ok.exit_code == 0, ok.output
    assert "MOTA" in ok.output and "1.000" in ok.output and "eval.json" in ok.output
    shutil.rmtree(tmp_path / "run")
    bad = runner.invoke(app, [str(tmp_path / "run"), str(clip)])
    assert bad.exit_code == 2 and "error:" in bad.output and "run folder not found" in bad.output


def test_load_ground_truth_finds_speeds_and_masks(clip):
    gt = load_ground_truth(clip)
    assert gt.kind == "mot" and gt.speeds and gt.road_mask_dir is not None and gt.fps == 15.0
    assert load_ground_truth(clip / "gt" / "gt.txt").speeds == gt.speeds
