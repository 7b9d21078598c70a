"""Test doubles shared by the service tests and the subprocess they start (importable by module name).

``make_pipeline`` is a real ``tracking.pipeline.Pipeline`` (ego-motion, motion layer, ByteTrack, speed) whose
detector is a bright-box finder, so tests run anywhere without weights. The clips have a textured ground and
bright rectangles ("vehicles") moving at known speeds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import cv2
import numpy as np

from tracking.config import PipelineConfig, RoadConfig
from tracking.pipeline import Pipeline
from vision.types import Detections

W, H, FPS = 320, 240, 25
VEHICLES = ((0, 50, 3.0), (60, 120, 2.0), (150, 185, -2.5))  # x0, y, px per frame
METRES_PER_PIXEL = 0.2  # the tests' calibration: 3 px/frame = 54 km/h, 2 px/frame = 36 km/h


class BrightBoxDetector:
    """Finds white rectangles (grey > 230): what the test clips draw as vehicles."""

    weights = "test:bright-boxes"
    tiling_active = False  # whole frames, never tiles (the pipeline scales motion blobs by this)

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.tiles_run = 0

    def reset(self) -> None:
        pass

    def detect(self, image, road_mask=None, tiling=None) -> Detections:
        if self.delay_s:
            time.sleep(self.delay_s)  # a slower "model": lets tests catch a job mid-way
        grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        n, _, stats, _ = cv2.connectedComponentsWithStats((grey > 230).astype(np.uint8))
        boxes = [(x, y, x + w, y + h) for x, y, w, h, area in stats[1:] if area >= 40]
        k = len(boxes)
        return Detections(
            np.array(boxes, np.float32).reshape(-1, 4), np.full(k, 0.9, np.float32), np.zeros(k, np.int32)
        )


def make_pipeline(config: PipelineConfig) -> Pipeline:
    delay = float(os.environ.get("AIRPATROL_TEST_DETECT_DELAY_S", "0"))
    config = config.model_copy(update={"road": RoadConfig(enabled=False), "device": "cpu"})
    return Pipeline(config, detector=BrightBoxDetector(delay))


_GROUND: dict[tuple[int, int], np.ndarray] = {}


def ground(w: int = W, h: int = H) -> np.ndarray:
    if (w, h) not in _GROUND:
        rng = np.random.default_rng(7)
        img = np.zeros((h, w), np.float32)
        for s in (4, 16, 48):
            noise = rng.random((h // s + 2, w // s + 2)).astype(np.float32)
            img += cv2.resize(noise, (w, h), interpolation=cv2.INTER_CUBIC) * s
        img = (img - img.min()) / (img.max() - img.min()) * 110 + 20  # darker than any vehicle
        _GROUND[(w, h)] = cv2.cvtColor(img.astype(np.uint8), cv2.COLOR_GRAY2BGR)
    return _GROUND[(w, h)]


def render(i: int, w: int = W, h: int = H) -> np.ndarray:
    img = ground(w, h).copy()
    for x0, y, v in VEHICLES:
        x = int(round(x0 + v * i)) % (w - 30)
        cv2.rectangle(img, (x, y), (x + 24, y + 12), (255, 255, 255), -1)
    return img


def write_clip(path: Path, frames: int, fps: int = FPS, w: int = W, h: int = H, gop: int = 10) -> Path:
    """H.264 MP4 (short GOP so a stream joined mid-way decodes quickly)."""
    import av

    with av.open(str(path), "w") as out:
        st = out.add_stream("libx264", rate=fps)
        st.width, st.height, st.pix_fmt = w, h, "yuv420p"
        st.options = {"g": str(gop), "preset": "ultrafast", "tune": "zerolatency"}
        for i in range(frames):
            for pkt in st.encode(av.VideoFrame.from_ndarray(render(i, w, h), format="bgr24")):
                out.mux(pkt)
        for pkt in st.encode():
            out.mux(pkt)
    return path


def jpeg(i: int, w: int = W, h: int = H) -> bytes:
    ok, buf = cv2.imencode(".jpg", render(i, w, h), [cv2.IMWRITE_JPEG_QUALITY, 85])
    return buf.tobytes()


def write_dji_srt(
    path: Path, frames: int, fps: int = FPS, lat: float = 47.3769, lon: float = 8.5417, rel_alt_m: float = 60.0
) -> Path:
    """A DJI-style per-frame subtitle flight log (Mavic 3 layout) for a hovering drone over the test clip."""

    def tc(s: float) -> str:
        ms = int(round(s * 1000))
        return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"

    entries = []
    for i in range(frames):
        entries.append(
            f"{i + 1}\n{tc(i / fps)} --> {tc((i + 1) / fps)}\n"
            f'<font size="28">FrameCnt: {i + 1}, DiffTime: {1000 // fps}ms\n2024-05-01 10:00:{i / fps:06.3f}\n'
            f"[iso: 100] [shutter: 1/1000.0] [fnum: 2.8] [ev: 0] [focal_len: 24.00] [latitude: {lat:.6f}] "
            f"[longitude: {lon:.6f}] [rel_alt: {rel_alt_m:.3f} abs_alt: {rel_alt_m + 400:.3f}] </font>\n"
        )
    path.write_text("\n".join(entries))
    return path
