"""Shared test helpers: where ../shared is, and small synthetic images."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("YOLO_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared")).resolve()


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the test process once pytest has reported, with pytest's exit status, without the interpreter's teardown.

    The tests load native libraries that keep threads of their own (Ray's gRPC and its workers' clients, torch's and
    OpenCV's thread pools, FFmpeg's decoders): once, in CI, the process crashed in that teardown after every test had
    passed (exit 139 after "907 passed"), which says nothing of the code under test and turned the run red. Threads
    still running are named first, so a test that leaks one shows. ``AIRPATROL_TEST_TEARDOWN=1``: the usual exit."""
    if not _EXIT_STATUS or os.environ.get("AIRPATROL_TEST_TEARDOWN") == "1":
        return
    alive = [t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
    if alive:
        print(f"tests: {len(alive)} thread(s) still running at exit: {', '.join(sorted(alive)[:12])}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1])


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test with the reason when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not available: {p} (set AIRPATROL_SHARED or place ../shared next to the repo)")
    return p


def textured_image(w: int = 640, h: int = 360, seed: int = 0) -> np.ndarray:
    """A ground-like random texture with structure at several scales (features for optical flow)."""
    import cv2

    rng = np.random.default_rng(seed)
    img = np.zeros((h, w), np.float32)
    for s in (4, 16, 64):
        noise = rng.random((h // s + 2, w // s + 2)).astype(np.float32)
        img += cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC) * s
    img = (img - img.min()) / (img.max() - img.min()) * 200 + 20
    return cv2.cvtColor(img.astype(np.uint8), cv2.COLOR_GRAY2BGR)


def panning_car_clip(path: Path, frames: int, car_grey: int, seed: int) -> Path:
    """An MJPG clip, 320x180 at 25 fps: the drone pans 4 px a frame over ``textured_image`` ground while one car
    (a filled box of grey level ``car_grey``) drives 9 px a frame across it."""
    import cv2

    ground = textured_image(480, 200, seed=seed)
    out = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 25, (320, 180))
    for k in range(frames):
        frame = ground[10:190, 4 * k : 4 * k + 320].copy()
        cv2.rectangle(frame, (40 + 9 * k, 80), (58 + 9 * k, 88), (car_grey,) * 3, -1)
        out.write(frame)
    out.release()
    return path


def make_test_clip(path: Path, frames: int = 100, fps: int = 25, size: str = "320x240", faststart: bool = True) -> Path:
    """An H.264 MP4 of FFmpeg's moving test pattern (keyframe every 10 frames; with ``faststart`` the index comes
    first, so a file cut short still declares every frame: what the damage tests need)."""
    cmd = ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate={fps}"]
    cmd += ["-frames:v", str(frames), "-c:v", "libx264", "-g", "10", "-pix_fmt", "yuv420p"]
    cmd += ["-movflags", "+faststart"] if faststart else []
    subprocess.run([*cmd, str(path)], check=True)
    return path
