"""bench/compare_runs.py: two run folders are the same only when every output and every summary field but the
timings agree, and a difference is shown where it is."""

from __future__ import annotations

import json
import shutil

from bench.compare_runs import compare, headline

TRACKS = (
    "frame,t,track_id,class,x1,y1,x2,y2,score,moving,speed_kmh\n"
    "1,0.0,1,car,10,10,20,20,0.9,1,52.5\n"
    "2,0.04,1,car,11,10,21,20,0.9,1,53.0\n"
)


def run_folder(path, tracks=TRACKS, **summary):
    path.mkdir(parents=True)
    (path / "tracks.csv").write_text(tracks)
    (path / "tracks_mot.txt").write_text("1,1,10,10,10,10,0.9,-1,-1,-1\n")
    (path / "summary.json").write_text(
        json.dumps({"counts": {"frames": 2, "tracks": 1, "vehicles": 1}, "timings": {"wall_s": 1.0}, **summary})
    )
    return path


def test_same_outputs_with_other_timings_are_the_same(tmp_path):
    a = run_folder(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    (b / "summary.json").write_text(
        json.dumps({**json.loads((a / "summary.json").read_text()), "timings": {"wall_s": 9.0}})
    )
    assert compare(a, b) == []
    assert headline(a) == "frames 2, tracks 1, vehicles 1, speed rows 2, median 53.0 km/h"


def test_a_changed_speed_a_missing_file_and_a_changed_count_are_each_reported(tmp_path):
    a = run_folder(tmp_path / "a")
    b = run_folder(tmp_path / "b", TRACKS.replace("53.0", "53.1"), counts={"frames": 2, "tracks": 2, "vehicles": 1})
    (b / "tracks_mot.txt").unlink()
    diffs = "\n".join(compare(a, b))
    assert "tracks.csv differs" in diffs and "+2,0.04,1,car,11,10,21,20,0.9,1,53.1" in diffs
    assert "tracks_mot.txt: only in before" in diffs
    assert "counts.tracks: 1 -> 2" in diffs
