"""bench.real.scale_agreement: a file that is not a video is one line naming it, and a non-zero exit."""

from bench.real.scale_agreement import main


def test_a_file_that_is_not_a_video_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video")
    assert main([str(bad)]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith(f"{bad}: ") and "video" in out[-1]
    assert main([str(tmp_path / "missing.mp4")]) == 2
