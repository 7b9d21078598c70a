"""`airpatrol batch` on this machine: a spawned process pool over generated flights, skips, failures, retries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edge.batch.cli import run_batch
from edge.batch.local import run_local
from edge.batch.plan import BatchItem, discover, sha256_file
from edge.batch.worker import BatchJob
from edge.cli import app
from tests.edge.batch.conftest import CLIP_FPS

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow  # worker processes import torch: tens of seconds on a busy 2-core machine


@pytest.fixture(scope="module")
def library(clip_library, tmp_path_factory) -> Path:
    """The three generated flights plus a file that is not a video."""
    root = tmp_path_factory.mktemp("lib") / "flights"
    shutil.copytree(clip_library, root)
    (root / "a" / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 40)
    return root


@pytest.fixture(scope="module")
def first_run(library, lean_config, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    args = [
        "batch",
        str(library),
        "--out",
        str(out),
        "--workers",
        "2",
        "--weights",
        lean_config.detector.weights,
        "--device",
        "cpu",
        "--no-road",
        "--detector-runtime",
        "torch",
        "--retries",
        "1",
        "--quiet",
    ]
    result = CliRunner().invoke(app, args)
    return result, out


def test_every_flight_is_processed_and_a_corrupt_file_fails_alone(first_run, library):
    result, out = first_run
    assert result.exit_code == 1, result.output  # one file failed
    assert "4 files: 3 done, 0 skipped, 1 failed" in result.output, result.output
    broken = next(line for line in result.output.splitlines() if "broken.mp4" in line)
    assert broken.startswith("failed") and "not a readable video" in broken
    assert broken.split()[2] == "1", "bad input is not retried"
    manifests = {json.loads(p.read_text())["video"]: json.loads(p.read_text()) for p in out.glob("*/batch.json")}
    videos = [v for v in discover([library]) if v.name != "broken.mp4"]
    assert sorted(manifests) == sorted(str(v.video) for v in videos)
    for v in videos:
        m = manifests[str(v.video)]
        assert m["sha256"] == sha256_file(v.video)
        folder = out / f"{v.video.stem}-{m['sha256'][:12]}"
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["counts"]["frames"] == 2 * CLIP_FPS
        assert summary["telemetry"].endswith(f"{v.video.stem}.SRT")  # the sidecar flight log was used
        assert (folder / "tracks_mot.txt").is_file() and not (folder / "annotated.mp4").exists()


def test_rerun_skips_flights_by_content(first_run, library, lean_config, tmp_path):
    _, out = first_run
    copy = tmp_path / "renamed_copy.mp4"  # same bytes, new name and folder: still done
    shutil.copyfile(library / "east.mp4", copy)
    results = run_batch([library / "east.mp4", library / "a", copy], lean_config, out, workers=1, progress=False)
    by_name = {Path(r.video).name: r for r in results}
    assert by_name["broken.mp4"].status == "failed"
    for name in ("east.mp4", "north.mp4", "south.mp4"):
        assert by_name[name].status == "skipped" and by_name[name].attempts == 0, by_name[name]  # no worker needed
    assert by_name["renamed_copy.mp4"].status == "skipped", by_name["renamed_copy.mp4"]
    assert by_name["renamed_copy.mp4"].sha256 == by_name["east.mp4"].sha256


def test_transient_failures_are_retried_then_reported(tmp_path, clip_library, lean_config):
    """A database that is down is not the file's fault: retried, then failed with the error."""
    job = BatchJob(
        config=lean_config.model_dump(mode="json"),
        out_root=str(tmp_path),
        database_url="mysql+pymysql://nobody:x@127.0.0.1:9/none",
    )  # port 9: nothing listens
    [r] = run_local([BatchItem(clip_library / "east.mp4")], job, workers=1, retries=2, progress=False)
    assert r.status == "failed" and r.attempts == 3 and r.retryable, r
    assert "OperationalError" in r.error


def test_a_dying_worker_is_replaced_and_its_file_retried(tmp_path, monkeypatch):
    from tests.edge.batch.faults import crash_first_attempt, flaky

    monkeypatch.syspath_prepend(str(REPO))  # spawned workers import the stand-in tasks from the tests folder
    items = [BatchItem(tmp_path / "a_crash.mp4"), BatchItem(tmp_path / "b.mp4"), BatchItem(tmp_path / "c.mp4")]
    job = BatchJob(config={}, out_root=str(tmp_path))
    results = run_local(items, job, workers=2, retries=1, progress=False, task=crash_first_attempt)
    assert [r.status for r in results] == ["done", "done", "done"]
    assert results[0].attempts == 2
    results = run_local(items[1:], job, workers=1, retries=1, progress=False, task=flaky)
    assert [(r.status, r.attempts) for r in results] == [("failed", 2), ("failed", 2)]  # needed 3 tries, had 2


def test_a_truncated_flight_is_done_but_reported_incomplete(clip_library, lean_config, tmp_path):
    """Half a flight (file cut, index intact): processed as far as it goes, flagged INCOMPLETE, exit code 3."""
    import subprocess

    folder = tmp_path / "cut"
    folder.mkdir()
    whole = tmp_path / "whole.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-i",
            str(clip_library / "east.mp4"),
            "-c",
            "copy",
            "-movflags",
            "+faststart",
            str(whole),
        ],
        check=True,
    )  # the index first, as cameras write it
    data = whole.read_bytes()
    (folder / "east.mp4").write_bytes(data[: len(data) // 2])
    shutil.copy(clip_library / "east.SRT", folder / "east.SRT")
    args = [
        "batch",
        str(folder),
        "--out",
        str(tmp_path / "runs"),
        "--workers",
        "1",
        "--weights",
        lean_config.detector.weights,
        "--device",
        "cpu",
        "--no-road",
        "--detector-runtime",
        "torch",
        "--quiet",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    row = next(line for line in result.output.splitlines() if "east.mp4" in line)
    assert row.startswith("done") and "INCOMPLETE" in row and "decoding ended early" in row
    assert "1 files: 1 done" in result.output
