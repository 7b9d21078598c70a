"""bench/relink.py: a run's results before linking, linked again with other settings, written as process writes
them."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from bench.relink import main, settings
from tracking.types import FrameResult, TrackState
from vision.types import Frame

FPS = 10.0
W, H = 1000, 600


def _waiting_car_in_two_pieces() -> list[FrameResult]:
    """A car that waits at x=500 for 25 s, its track broken after 3 s (piece 1) and found again where it stood
    (piece 2): one vehicle across a 25 s gap."""
    out = []
    for f in range(330):
        tid = 1 if f < 30 else 2 if f >= 280 else None
        box = np.array([480, 290, 520, 310], np.float32)
        tracks = [TrackState(tid, box, 0.9, 0, moving=False)] if tid is not None else []
        out.append(FrameResult(Frame(f, f / FPS, np.zeros((0, 0, 3), np.uint8)), tracks, to_first=np.eye(3)))
    return out


def _ids(run: Path) -> set[int]:
    return {int(line.split(",")[1]) for line in (run / "tracks_mot.txt").read_text().splitlines()}


def test_relink_writes_the_linked_tracks_and_settings_change_them(tmp_path):
    prelink = tmp_path / "run.prelink.pkl"
    with open(prelink, "wb") as fh:
        pickle.dump((_waiting_car_in_two_pieces(), W, H), fh)
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"video": {"path": "x.mp4", "fps": FPS}, "linking": None}))
    (run / "study").mkdir()  # a study of the old tracks is not copied
    assert main(["relink", str(prelink), str(run), str(tmp_path / "linked"), "--no-study"]) == 0
    linked = tmp_path / "linked"
    assert _ids(linked) == {1} and not (linked / "study").exists()
    assert len((linked / "tracks_mot.txt").read_text().splitlines()) == 330  # the wait filled in between
    summary = json.loads((linked / "summary.json").read_text())
    assert summary["linking"]["links"] == 1 and summary["video"]["path"] == "x.mp4"
    # a wait longer than max_gap_s and max_wait_s is not linked: the same results, other settings, two tracks
    out = tmp_path / "short_gaps"
    short = ["--set", "linking.max_gap_s=10", "--set", "max_wait_s=10"]
    assert main(["relink", str(prelink), str(run), str(out), "--no-study", *short]) == 0
    assert _ids(out) == {1, 2}


def test_settings_are_linking_keys_with_yaml_values_and_a_bad_pair_says_so():
    cfg = settings(["max_gap_s=12.5", "linking.driven_through=false", "carried_off_lengths=null"])
    assert cfg.max_gap_s == 12.5 and cfg.driven_through is False and cfg.carried_off_lengths is None
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        settings(["max_gap_s"])
    with pytest.raises(SystemExit, match="--set max_gaps_s: Extra inputs are not permitted"):
        settings(["max_gaps_s=3"])


def test_relink_names_a_missing_input(tmp_path, capsys):
    assert main(["relink", str(tmp_path / "none.pkl"), str(tmp_path), str(tmp_path / "out")]) == 2
    assert "none.pkl: not found" in capsys.readouterr().err
    broken = tmp_path / "broken.pkl"
    broken.write_bytes(b"not a pickle")
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(SystemExit, match="broken.pkl: not a file of results before linking"):
        main(["relink", str(broken), str(tmp_path), str(tmp_path / "out"), "--no-study"])
