import pytest

from edge.rundir import RunDirectory


def test_only_a_complete_run_appears(tmp_path):
    final = tmp_path / "run"
    with RunDirectory(final) as tmp:
        (tmp / "a.txt").write_text("x")
        assert not final.exists()
        rd_final = final
    # not committed: nothing left, not even the temporary folder
    assert not rd_final.exists() and list(tmp_path.iterdir()) == []


def test_commit_replaces_previous_result(tmp_path):
    final = tmp_path / "run"
    final.mkdir()
    (final / "old.txt").write_text("old")
    rd = RunDirectory(final)
    with rd as tmp:
        (tmp / "new.txt").write_text("new")
        rd.commit()
    assert sorted(p.name for p in final.iterdir()) == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_failure_keeps_previous_result(tmp_path):
    final = tmp_path / "run"
    final.mkdir()
    (final / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with RunDirectory(final) as tmp:
            (tmp / "half.txt").write_text("half")
            raise RuntimeError("killed")
    assert sorted(p.name for p in final.iterdir()) == ["old.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_output_path_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "out"
    f.write_text("")
    with pytest.raises(ValueError, match="not a folder"):
        with RunDirectory(f):
            pass
