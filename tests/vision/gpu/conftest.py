"""Helpers for the torch backend's tests: devices to run on, real frames, and one torch thread while they run.

On a loaded two-core machine torch's intra-op threads spin against each other and its CPU kernels slow down ten-fold;
one thread keeps these tests fast and does not change what they check."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from tests.conftest import shared_path

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")),
]


@pytest.fixture(autouse=True)
def one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def nadir_frames(indices: list[int]) -> list[np.ndarray]:
    """Frames of the real 1080p nadir clip (skips when ../shared is absent)."""
    cap = cv2.VideoCapture(str(shared_path("data", "real_video", "nadir_interchange", "drone.mp4")))
    out: list[np.ndarray] = []
    k = 0
    while len(out) < len(indices):
        ok, img = cap.read()
        if not ok:
            break
        if k in indices:
            out.append(img)
        k += 1
    cap.release()
    assert len(out) == len(indices)
    return out


def m1303_frames(indices: list[int]) -> list[np.ndarray]:
    """Frames (1-based) of UAVDT M1303: oblique view, moving drone."""
    folder = shared_path("data", "mot", "uavdt_M1303", "img")
    return [cv2.imread(str(folder / f"img{i:06d}.jpg")) for i in indices]


def corner_error(H_a: np.ndarray, H_b: np.ndarray, w: int, h: int) -> float:
    """Largest distance (px) between where two homographies put the frame's corners."""
    c = np.array([[0, 0, 1], [w, 0, 1], [w, h, 1], [0, h, 1.0]]).T
    a, b = H_a @ c, H_b @ c
    return float(np.linalg.norm(a[:2] / a[2] - b[:2] / b[2], axis=0).max())
