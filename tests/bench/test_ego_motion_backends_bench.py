"""bench/ego_motion_backends.py: runs both backends on a clip and prints timings and agreement; bad input is one line."""

from __future__ import annotations

import cv2

from bench.ego_motion_backends import main
from tests.conftest import textured_image


def test_prints_both_backends_and_their_agreement(tmp_path, capsys):
    ground = textured_image(480, 200, seed=2)
    video = tmp_path / "pan.avi"
    out = cv2.VideoWriter(str(video), cv2.VideoWriter.fourcc(*"MJPG"), 25, (320, 180))
    for k in range(6):
        frame = ground[10:190, 4 * k : 4 * k + 320].copy()
        cv2.rectangle(frame, (40 + 9 * k, 80), (58 + 9 * k, 88), (90, 90, 90), -1)  # a car (not so bright that its
        # corners alone pass the 1 % quality floor: vehicles are masked out in the pipeline, not here)
        out.write(frame)
    out.release()
    assert main(["--video", str(video), "--frames", "6", "--torch-threads", "1", "--batch", "2", "--streams", "2"]) == 0
    text = capsys.readouterr().out
    assert "registration failures: opencv 0, torch 0 of 5 pairs" in text
    for line in (
        "ego opencv",
        "ego torch",
        "motion opencv",
        "motion torch",
        "frame-corner error",
        "register_sequence",
        "update_streams",
    ):
        assert line in text


def test_missing_video_is_one_line_error(tmp_path, capsys):
    assert main(["--video", str(tmp_path / "nope.mp4")]) == 2
    err = capsys.readouterr().err
    assert "nope.mp4" in err and len(err.strip().splitlines()) == 1
