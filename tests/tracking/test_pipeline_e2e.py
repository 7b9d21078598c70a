"""End to end on a generated clip with exact truth: tracks found, ids stable, speeds right; and on real footage."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from edge.runner import process_video
from tests.conftest import shared_path
from tracking.config import PipelineConfig
from tracking.evaluation import evaluate_run
from vision.synth import SceneConfig, generate_scene


@pytest.fixture(scope="module")
def highway(tmp_path_factory):
    out = tmp_path_factory.mktemp("highway")
    cfg = SceneConfig(
        scene="highway",
        seed=11,
        duration_s=4.0,
        fps=25,
        width=1280,
        height=720,
        altitude_m=110,
        gimbal_pitch_deg=-90,
        use_shared_data="off",
        parked_vehicles=4,
        clutter_objects=4,
        road_mask_every=0,
    )
    generate_scene(cfg, out, progress=False)
    return out


@pytest.fixture(scope="module")
def dual_run(highway, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "dual"
    process_video(highway / "video.mp4", run, PipelineConfig(), progress=False)  # the .SRT beside it is found
    return run


def test_every_sink_is_written(dual_run):
    for name in (
        "annotated.mp4",
        "tracks_mot.txt",
        "tracks.csv",
        "tracks_summary.csv",
        "trajectories.geojson",
        "summary.json",
    ):
        assert (dual_run / name).stat().st_size > 0, name
    s = json.loads((dual_run / "summary.json").read_text())
    assert s["mode"] == "dual_layer" and s["telemetry"].endswith("video.SRT")
    assert s["counts"]["frames"] == 100
    geo = json.loads((dual_run / "trajectories.geojson").read_text())
    assert geo["properties"]["coordinate_system"] == "wgs84"  # the SRT carries GPS
    lon, lat = geo["features"][0]["geometry"]["coordinates"][0]
    assert abs(lat - 49.967) < 0.01 and abs(lon - 36.303) < 0.01


def test_tracks_ids_and_speeds_match_the_truth(dual_run, highway):
    # The procedural vehicles of a scene rendered without ../shared look unlike the real cars the shipped detector
    # learnt, so most boxes here come from the motion layer and recall is low (measured 0.26; docs/accuracy.md has
    # the full suite). What must hold regardless: what is found is real, identities hold, and speeds are right.
    ev = evaluate_run(dual_run, highway, write=False)
    assert ev["mot"]["recall"] > 0.08, ev["mot"]
    assert ev["mot"]["precision"] > 0.7, ev["mot"]
    assert ev["mot"]["num_switches"] <= 12, ev["mot"]  # measured 9 over ~20 vehicles in 100 frames
    assert ev["speed"]["n"] >= 50, ev["speed"]
    assert ev["speed"]["mae_kmh"] < 3.0, ev["speed"]


def test_parked_vehicles_are_not_moving_traffic(dual_run, highway):
    truth = pd.read_csv(highway / "gt" / "speeds.csv")
    parked_ids = set(truth.loc[truth.moving == 0, "id"])
    gt = np.loadtxt(highway / "gt" / "gt.txt", delimiter=",")
    runs = pd.read_csv(dual_run / "tracks.csv")
    last = runs[runs.frame == runs.frame.max()]
    gt_last = gt[(gt[:, 0] == runs.frame.max()) & np.isin(gt[:, 1], list(parked_ids))]
    assert len(gt_last), "the scene should show parked vehicles"
    for _, g in enumerate(gt_last):
        cx, cy = g[2] + g[4] / 2, g[3] + g[5] / 2
        near = last[(abs((last.x1 + last.x2) / 2 - cx) < g[4] / 2) & (abs((last.y1 + last.y2) / 2 - cy) < g[5] / 2)]
        assert not near.moving.astype(bool).any(), f"parked vehicle {int(g[1])} reported as moving"


def test_baseline_runs_on_the_same_clip_and_finds_less(highway, dual_run, tmp_path):
    out = process_video(
        highway / "video.mp4", tmp_path / "base", PipelineConfig(baseline=True), progress=False, write_video=False
    )
    assert out.summary["mode"] == "baseline" and out.summary["counts"]["frames"] == 100
    dual = json.loads((dual_run / "summary.json").read_text())
    # small vehicles seen from 110 m: the motion layer finds what the letterboxed detector alone misses
    assert dual["counts"]["tracks"] > out.summary["counts"]["tracks"]


@pytest.mark.slow
def test_nadir_interchange_real_footage(tmp_path):
    """The issue's acceptance run: real 1080p nadir footage, georeferenced corners as calibration."""
    video = shared_path("data", "real_video", "nadir_interchange", "drone.mp4")
    from tracking.scale import load_calibration

    cfg = PipelineConfig(calibration=load_calibration(str(video.parent / "georef_corners.json")))
    out = process_video(video, tmp_path / "run", cfg, progress=False, write_video=False, max_frames=100)
    summ = pd.read_csv(out.out_dir / "tracks_summary.csv")
    moving = summ[summ.moving & (summ.duration_s >= 1.0)]
    assert len(moving) >= 10
    med = moving.median_speed_kmh.median()
    assert 30 <= med <= 110, med  # highway traffic, 0.43 m/px


@pytest.mark.slow
def test_uavdt_sequence_runs_and_scores(tmp_path):
    seq = shared_path("data", "mot", "uavdt_M1303")
    n = 90
    # ground truth of the processed frames only, UAVDT ignore regions as MOTChallenge conf-0 rows
    gt = np.loadtxt(seq / "gt" / "gt_mot.txt", delimiter=",")
    ign = np.loadtxt(seq / "gt" / "M1303_gt_ignore.txt", delimiter=",")
    ign_rows = np.column_stack(
        [ign[:, 0], -np.ones(len(ign)), ign[:, 2:6], np.zeros(len(ign)), -np.ones((len(ign), 2))]
    )
    rows = np.vstack([gt[gt[:, 0] <= n], ign_rows[ign_rows[:, 0] <= n]])
    (tmp_path / "gt" / "gt").mkdir(parents=True)
    np.savetxt(tmp_path / "gt" / "gt" / "gt.txt", rows, fmt="%d", delimiter=",")
    out = process_video(seq, tmp_path / "run", PipelineConfig(), progress=False, write_video=False, max_frames=n)
    ev = evaluate_run(out.out_dir, tmp_path / "gt", write=False)
    assert ev["mot"]["mota"] > 0.4, ev["mot"]
    assert ev["mot"]["idf1"] > 0.5, ev["mot"]
