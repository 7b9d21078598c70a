"""bench/detector_fit.py: how well the detector alone boxes a clip's truth, by class."""

from __future__ import annotations

import numpy as np

from bench.detector_fit import main, table
from vision.synth import SceneConfig, generate_scene


def test_the_table_counts_each_band_of_fit():
    lines = table({"car": np.array([0.9, 0.6, 0.4, 0.1]), "truck": np.array([0.2])})
    assert lines[0].split()[:2] == ["class", "boxes"]
    car = lines[1].split()
    assert car == ["car", "4", "0.500", "0.250", "0.250", "0.600"]
    truck = lines[2].split()
    assert truck == ["truck", "1", "0.000", "0.000", "1.000", "-"]


def test_a_render_is_scored_by_its_vehicle_classes(tmp_path, capsys):
    cfg = SceneConfig(
        scene="intersection",
        seed=4,
        width=320,
        height=180,
        fps=10.0,
        duration_s=1.0,
        altitude_m=40.0,
        gimbal_pitch_deg=-55.0,
        use_shared_data="off",
        road_mask_every=0,
    )
    out = generate_scene(cfg, tmp_path / "clip", progress=False).out_dir
    assert (
        main([str(out / "video.mp4"), str(out / "gt" / "gt.txt"), "--scene", str(out / "scene.json"), "--every", "5"])
        == 0
    )
    rows = [line.split() for line in capsys.readouterr().out.strip().splitlines()[1:]]
    assert rows and {r[0] for r in rows} <= {"car", "van", "truck", "bus"}
    truth = np.loadtxt(out / "gt" / "gt.txt", delimiter=",", ndmin=2)
    assert sum(int(r[1]) for r in rows) == int(np.isin(truth[:, 0], [1, 6]).sum())  # frames 1 and 6 sampled
    for r in rows:
        assert all(0.0 <= float(x) <= 1.0 for x in r[2:5]) and abs(sum(float(x) for x in r[2:5]) - 1.0) < 0.002


def test_a_missing_clip_or_a_file_that_is_not_a_scene_is_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "none.mp4"), str(tmp_path / "gt.txt")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'none.mp4'}: no such file or folder"
    (tmp_path / "v.mp4").write_bytes(b"")
    (tmp_path / "gt.txt").write_text("1,1,0,0,10,10,1,1,1\n")
    (tmp_path / "scene.json").write_text("[1, 2]")
    assert main([str(tmp_path / "v.mp4"), str(tmp_path / "gt.txt"), "--scene", str(tmp_path / "scene.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {tmp_path / 'scene.json'}: not a render's scene.json") and "\n" not in err
