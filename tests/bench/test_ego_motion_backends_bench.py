"""bench/ego_motion_backends.py: runs both backends on a clip and prints timings and agreement; bad input is one line."""

from __future__ import annotations

from bench.ego_motion_backends import main
from tests.conftest import panning_car_clip


def test_prints_both_backends_and_their_agreement(tmp_path, capsys):
    # a grey car: not so bright that its corners alone pass the 1 % quality floor (vehicles are masked out in the
    # pipeline, not here)
    video = panning_car_clip(tmp_path / "pan.avi", frames=6, car_grey=90, seed=2)
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
