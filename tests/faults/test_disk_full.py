"""The disk fills up while `airpatrol process` writes its results: one error line naming the output folder, exit
code 4, no traceback, the previous results in that folder byte for byte as they were, no temporary folder left.

Two ways to run out of room, both with the real CLI in its own process:

* ``tmpfs``: a real full file system - a 256 KiB tmpfs mounted in a private mount namespace (``unshare
  --map-root-user --mount``: needs no root, only unprivileged user namespaces), filled up but for 4 KiB, so
  writes fail with ENOSPC. Skipped where user namespaces are not allowed (many containers).
* ``rlimit``: where that is impossible, ``RLIMIT_FSIZE`` on the process - the kernel refuses to grow any file
  past 4 KiB with EFBIG (Python ignores SIGXFSZ, so the write fails instead of killing the process). Same code
  path in AirPatrol (an ``OSError`` from a write); it differs from a full disk in that other files can still grow.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _userns_tmpfs_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(
        ["unshare", "--map-root-user", "--mount", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs $d"],
        capture_output=True,
        timeout=20,
    )
    return probe.returncode == 0


def _previous_results(folder: Path) -> dict[str, str]:
    """An earlier run's output folder (its files' SHA-256 by name)."""
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text('{"status": "complete", "note": "the previous run"}\n')
    (folder / "tracks.csv").write_text("frame,t,track_id\n1,0.0,1\n")
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


CLI = [sys.executable, "-m", "edge.cli", "process"]
ARGS = ["--max-frames", "15", "-q", "--calibration", "0.2"]  # the annotated MP4 alone needs ~8 KB


@pytest.mark.slow
@pytest.mark.parametrize("how", ["tmpfs", "rlimit"])
def test_disk_full_while_writing_results(clip, tmp_path, how):
    env = {**os.environ, "PYTHONPATH": str(REPO), "YOLO_OFFLINE": "1"}
    if how == "tmpfs":
        if not _userns_tmpfs_works():
            pytest.skip(
                "unprivileged user namespaces (unshare --map-root-user --mount) are not allowed here; "
                "the rlimit variant covers the same code path"
            )
        staged = tmp_path / "staged"
        before = _previous_results(staged / "out")
        disk, after = tmp_path / "disk", tmp_path / "after"
        disk.mkdir()
        after.mkdir()
        # in the namespace: mount, put the previous results there, fill the disk but for 4 KiB, run, copy back
        script = f"""
            mount -t tmpfs -o size=256k tmpfs {disk} && cp -r {staged}/out {disk}/out &&
            (dd if=/dev/zero of={disk}/filler bs=4k 2>/dev/null; true) && truncate -s -4K {disk}/filler &&
            "$@"; code=$?; cp -r {disk}/out {after}/out; ls -A {disk} > {after}/listing; exit $code"""
        proc = subprocess.run(
            [
                "unshare",
                "--map-root-user",
                "--mount",
                "sh",
                "-c",
                script,
                "sh",
                *CLI,
                str(clip),
                "--out",
                str(disk / "out"),
                *ARGS,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        out_shown, kept = disk / "out", _hashes(after / "out")
        listing = (after / "listing").read_text().split()
    else:
        out = tmp_path / "out"
        before = _previous_results(out)

        def limit_file_size():  # in the child only
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

        proc = subprocess.run(
            [*CLI, str(clip), "--out", str(out), *ARGS],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limit_file_size,
        )
        out_shown, kept = out, _hashes(out)
        listing = os.listdir(tmp_path)

    print(f"\n{how}: {proc.stderr.strip()}")
    assert proc.returncode == 4, (proc.returncode, proc.stderr[-3000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    reason = "no space left on device" if how == "tmpfs" else "file too large"
    assert lines[0].startswith(f"airpatrol: error: {out_shown}") and reason in lines[0], lines[0]
    assert "previous results there are untouched" in lines[0]
    assert kept == before  # the earlier results, byte for byte
    assert not [n for n in listing if ".partial" in n or ".old" in n], listing  # no half-written folder left


@pytest.mark.slow
def test_job_on_a_full_disk_fails_with_the_reason_and_no_result(settings_factory, clip, tmp_path):
    """`airpatrol serve` with its data folder on a small tmpfs: the upload (93 KB) fits, the job's results do not.
    The job is failed at once (not retried into the same full disk) with the one-line reason, its database run is
    ``failed`` - never complete - no half-written run folder is left, and the service goes on serving."""
    if not _userns_tmpfs_works():
        pytest.skip("unprivileged user namespaces (unshare --map-root-user --mount) are not allowed here")
    import httpx
    from service_helpers import DEVICE_TOKENS, wait_for
    from sqlalchemy import select

    from db.engine import session_scope
    from db.models import ProcessingRun
    from tests.faults.fault_helpers import serve_logged

    settings = settings_factory()
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    room = (clip.stat().st_size // 4096 + 1) * 4096 + 20 * 1024  # the upload and 20 KiB more
    wrap = [
        "unshare",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        f'mount -t tmpfs -o size={room} tmpfs {data_dir} && exec "$@"',
        "sh",
    ]
    device = {"Authorization": f"Bearer {DEVICE_TOKENS['DRONE-1']}"}
    data = clip.read_bytes()
    with serve_logged(settings, tmp_path, wrap=wrap) as (proc, base, log):
        up = httpx.post(
            f"{base}/api/uploads",
            headers=device,
            json={
                "kind": "video",
                "filename": "flight.mp4",
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            },
        ).json()
        r = httpx.patch(
            f"{base}{up['upload_url']}",
            content=data,
            headers={**device, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"},
        )
        assert r.status_code == 204, r.text
        job = httpx.post(f"{base}{up['upload_url']}/complete", headers=device, json={}, timeout=60).json()["job"]
        final = wait_for(
            lambda: (
                (j := httpx.get(f"{base}/api/jobs/{job['id']}", headers=device).json())["status"]
                in ("complete", "failed")
                and j
            ),
            60,
            "the job to finish",
        )
        assert final["status"] == "failed" and final["attempts"] == 1, final
        runs = data_dir / "runs"
        assert final["error"].startswith(f"{runs / ('job-' + str(job['id']))}: no space left on device"), final["error"]
        assert "\n" not in final["error"]
        assert httpx.get(f"{base}/readyz").status_code == 200  # the service itself goes on
        if shutil.which("nsenter"):  # look inside the service's mount namespace: no run folder, whole or partial
            listing = subprocess.run(
                [
                    "nsenter",
                    f"--target={proc.pid}",
                    "--mount",
                    "--user",
                    "--preserve-credentials",
                    "ls",
                    "-A",
                    str(runs),
                ],
                capture_output=True,
                text=True,
            )
            assert listing.returncode == 0 and listing.stdout.split() == [], (listing.stdout, listing.stderr)
    with session_scope(settings.database_url) as s:
        run = s.get(ProcessingRun, final["run_id"])
        assert run.status == "failed" and "no space left on device" in run.error
        assert s.scalar(select(ProcessingRun.id).where(ProcessingRun.status == "complete")) is None
