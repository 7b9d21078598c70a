"""Finding a run's inputs again (vision/run_inputs.py): the path relative to the run folder first, then the recorded
path, then - for an older run's relative path only - the run folder's parent and grandparent."""

from __future__ import annotations

import shutil

from vision.run_inputs import find, record, run_video


def test_a_copied_tree_uses_its_own_video_and_an_old_relative_path_is_found_from_the_run_folder(tmp_path, monkeypatch):
    for tree in ("a", "b"):
        (tmp_path / tree / "clip").mkdir(parents=True)
        (tmp_path / tree / "run").mkdir()
        (tmp_path / tree / "clip" / "video.mp4").write_bytes(b"x")
    path, from_run = record(tmp_path / "a" / "clip" / "video.mp4", tmp_path / "a" / "run")
    assert (path, from_run) == (str((tmp_path / "a" / "clip" / "video.mp4").resolve()), "../clip/video.mp4")
    summary = {"video": {"path": path, "path_from_run": from_run}}
    assert run_video(tmp_path / "a" / "run", summary) == (tmp_path / "a" / "clip" / "video.mp4").resolve()
    # b is a copy of a's tree: its run uses b's video, not the one its summary's absolute path names
    assert run_video(tmp_path / "b" / "run", summary) == (tmp_path / "b" / "clip" / "video.mp4").resolve()
    shutil.rmtree(tmp_path / "b" / "clip")  # ...and a's when b has none
    assert run_video(tmp_path / "b" / "run", summary) == (tmp_path / "a" / "clip" / "video.mp4").resolve()

    old = {"source": "clip/video.mp4", "video": {"path": "clip/video.mp4"}}  # as given to `process` in a
    monkeypatch.chdir(tmp_path)
    assert run_video(tmp_path / "a" / "run", old) == (tmp_path / "a" / "clip" / "video.mp4").resolve()
    (tmp_path / "a" / "runs" / "video").mkdir(parents=True)  # the default output folder: airpatrol-runs/<name>
    assert run_video(tmp_path / "a" / "runs" / "video", old) == (tmp_path / "a" / "clip" / "video.mp4").resolve()
    assert run_video(tmp_path / "b" / "run", old) is None  # b's parent has no clip/ any more
    assert find(tmp_path / "b" / "run", None) is None
