"""Finding the files of a batch, content checksums, run folder names, the final table."""

from __future__ import annotations

import hashlib
import os

import pytest

from edge.batch.plan import BatchInputError, ChecksumCache, ItemResult, discover, format_table, run_folder, sha256_file


def test_discovery_is_recursive_ordered_and_deduplicated(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("a/b/z.MP4", "a/x.mov", "c.mp4", "a/notes.txt", "a/.hidden/y.mp4"):
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    items = discover([tmp_path, tmp_path / "c.mp4"])
    assert [i.video.relative_to(tmp_path).as_posix() for i in items] == ["a/b/z.MP4", "a/x.mov", "c.mp4"]


def test_bad_paths_are_clear_errors(tmp_path):
    with pytest.raises(BatchInputError, match="missing: no such file"):
        discover([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(BatchInputError, match="empty: no video files"):
        discover([tmp_path / "empty"])
    with pytest.raises(BatchInputError, match="no input"):
        discover([])


def test_checksum_and_cache(tmp_path):
    video = tmp_path / "v.mp4"
    video.write_bytes(os.urandom(5 << 20))  # more than one read chunk
    sha = sha256_file(video)
    assert sha == hashlib.sha256(video.read_bytes()).hexdigest()
    assert run_folder(tmp_path, video, sha, False).name == f"v-{sha[:12]}"
    assert run_folder(tmp_path, video, sha, True).name.endswith("-baseline")
    cache = ChecksumCache(tmp_path / "out")
    cache.put(video, sha)
    cache.save()
    assert ChecksumCache(tmp_path / "out").get(video) == sha
    video.write_bytes(b"changed")  # size/mtime change: must be hashed again
    assert ChecksumCache(tmp_path / "out").get(video) is None


def test_table_counts_every_status():
    text = format_table(
        [
            ItemResult("/v/a.mp4", "done", 1, out_dir="/o/a", frames=20, tracks=3, fps=4.5, run_id=7),
            ItemResult("/v/b.mp4", "skipped", 0, note="already done: /o/b"),
            ItemResult("/v/c.mp4", "failed", 3, error="/v/c.mp4: not a readable video"),
        ]
    )
    assert "run 7: /o/a" in text and "already done: /o/b" in text and "/v/c.mp4: not a readable video" in text
    assert text.splitlines()[-1] == "3 files: 1 done, 1 skipped, 1 failed"


def test_segments_need_ray(tmp_path):
    from edge.batch.cli import run_batch
    from tracking.config import PipelineConfig

    with pytest.raises(ValueError, match="needs --ray"):
        run_batch([tmp_path], PipelineConfig(), tmp_path / "out", segment_s=600)
