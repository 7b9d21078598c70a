"""bench/cpu_stages.py: records the detector once, replays it in every timed run (the same run each time), prints
ms per frame per variant; bad input is one line."""

from __future__ import annotations

from bench.cpu_stages import main
from tests.conftest import panning_car_clip


def test_replayed_runs_print_each_variant(tmp_path, capsys):
    video = panning_car_clip(tmp_path / "pan.avi", frames=8, car_grey=250, seed=4)
    cache = tmp_path / "tape.pkl"
    args = ["--video", str(video), "--frames", "8", "--repeats", "2", "--cache", str(cache)]
    assert main([*args, "--variants", "default", "overlap_stages=false"]) == 0
    text = capsys.readouterr().out
    assert "detector calls" in text and cache.exists()
    assert text.count("default ") == 3 and text.count("overlap_stages=false ") == 3  # two runs and a median each
    # a second invocation replays the stored recording (a fresh process's detector state: the tape holds it)
    assert main([*args, "--variants", "default"]) == 0
    again = capsys.readouterr().out
    assert "detector calls" not in again and "median" in again


def test_missing_video_is_one_line_error(tmp_path, capsys):
    assert main(["--video", str(tmp_path / "nope.mp4")]) == 2
    err = capsys.readouterr().err
    assert "nope.mp4" in err and len(err.strip().splitlines()) == 1


def test_damaged_cache_is_one_line_error(tmp_path, capsys):
    video = panning_car_clip(tmp_path / "pan.avi", frames=3, car_grey=250, seed=4)
    cache = tmp_path / "tape.pkl"
    cache.write_bytes(b"not a pickle")
    assert main(["--video", str(video), "--frames", "3", "--cache", str(cache)]) == 2
    err = capsys.readouterr().err
    assert "tape.pkl" in err and len(err.strip().splitlines()) == 1
    assert cache.read_bytes() == b"not a pickle"  # left as it was
