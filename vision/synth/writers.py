"""Output files of a synthetic scene: video, MOTChallenge ground truth, speeds, DJI SRT telemetry, road masks,
MOTChallenge seqinfo.ini, YOLO detection samples. Number formats are fixed so equal inputs give equal bytes."""

from __future__ import annotations

import math
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import cv2
import numpy as np

from vision.synth.camera import CameraTrack, focal_35mm_equivalent
from vision.synth.render import TruthBox
from vision.synth.scene import SceneConfig

EARTH_RADIUS_M = 6378137.0


class VideoWriter:
    """H.264 through the ffmpeg binary when there is one (readable everywhere), else OpenCV's MPEG-4 'mp4v'."""

    def __init__(self, path: Path, width: int, height: int, fps: float):
        self.path, self.size, self.fps = path, (width, height), fps
        self.proc = None
        self.cv = None
        self.codec = "mp4v"
        exe = shutil.which("ffmpeg")
        if exe:
            cmd = [
                exe,
                "-loglevel",
                "error",
                "-y",
                "-f",
                "rawvideo",
                "-pix_fmt",
                "bgr24",
                "-s",
                f"{width}x{height}",
                "-r",
                f"{fps:g}",
                "-i",
                "-",
                "-an",
                "-c:v",
                "libx264",
                "-preset",
                "veryfast",
                "-crf",
                "18",
                "-pix_fmt",
                "yuv420p",
                "-movflags",
                "+faststart",
                str(path),
            ]
            try:
                self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
                self.codec = "h264"
            except OSError:
                self.proc = None
        if self.proc is None:
            self.cv = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, (width, height))
            if not self.cv.isOpened():
                raise OSError(f"{path}: cannot open a video writer (no ffmpeg, OpenCV mp4v failed)")

    def write(self, img: np.ndarray) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None and self.proc.stderr is not None  # both are PIPEs
            try:
                self.proc.stdin.write(np.ascontiguousarray(img).tobytes())
                return
            except BrokenPipeError:
                err = self.proc.stderr.read().decode(errors="replace").strip()
                raise OSError(f"{self.path}: ffmpeg stopped: {err or 'broken pipe'}") from None
        assert self.cv is not None  # opened when ffmpeg is not used
        self.cv.write(img)

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None and self.proc.stderr is not None  # both are PIPEs
            self.proc.stdin.close()
            rc = self.proc.wait()
            err = self.proc.stderr.read().decode(errors="replace").strip()
            if rc != 0:
                raise OSError(f"{self.path}: ffmpeg failed (exit {rc}): {err}")
        if self.cv is not None:
            self.cv.release()


def mot_line(frame: int, b: TruthBox) -> str:
    """MOTChallenge gt row: frame,id,left,top,w,h,conf(1 = evaluate),class,visibility. Class = VEHICLE_CLASSES + 1."""
    return (
        f"{frame},{b.vid},{b.left:.2f},{b.top:.2f},{b.width:.2f},{b.height:.2f},1,{b.class_id + 1},{b.visibility:.3f}"
    )


def speed_line(frame: int, vid: int, speed_ms: float, x: float, y: float) -> str:
    kmh = speed_ms * 3.6
    return f"{frame},{vid},{kmh:.3f},{x:.3f},{y:.3f},{1 if kmh >= 1.0 else 0}"


SPEEDS_HEADER = "frame,id,speed_kmh,ground_x_m,ground_y_m,moving"


def enu_to_latlon(x: float, y: float, lat0: float, lon0: float) -> tuple[float, float]:
    lat = lat0 + math.degrees(y / EARTH_RADIUS_M)
    lon = lon0 + math.degrees(x / (EARTH_RADIUS_M * math.cos(math.radians(lat0))))
    return lat, lon


def _srt_time(t: float) -> str:
    ms = int(round(t * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"


def _deg(v: float) -> str:
    return f"{round(float(v), 1) + 0.0:.1f}"  # + 0.0: no "-0.0"


def srt_text(cfg: SceneConfig, cam: CameraTrack) -> str:
    """DJI Mavic 3 style per-frame subtitles (focal_len is 35 mm-equivalent, as DJI writes it).

    Positions keep 6 decimals (~0.1 m) and angles 1 decimal, like the drone; ``scene.json``/``gt/camera.csv``
    hold the exact values.
    """
    start = datetime.strptime(cfg.start_time, "%Y-%m-%d %H:%M:%S.%f")
    shutter = 1.0 / cfg.exposure
    focal = focal_35mm_equivalent(cfg)
    dt_ms = int(round(1000 / cfg.fps))
    out = []
    for i in range(len(cam)):
        t0, t1 = i / cfg.fps, (i + 1) / cfg.fps
        lat, lon = enu_to_latlon(cam.x[i], cam.y[i], cfg.origin_lat, cfg.origin_lon)
        stamp = (start + timedelta(seconds=t0)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        alt = cam.alt[i]
        out.append(
            f"{i + 1}\n{_srt_time(t0)} --> {_srt_time(t1)}\n"
            f'<font size="28">FrameCnt: {i + 1}, DiffTime: {dt_ms}ms\n{stamp}\n'
            f"[iso: 100] [shutter: 1/{shutter:.1f}] [fnum: 2.8] [ev: 0] [ct: 5500] [color_md : default] "
            f"[focal_len: {focal:.2f}] [latitude: {lat:.6f}] [longitude: {lon:.6f}] "
            f"[rel_alt: {alt:.3f} abs_alt: {alt + cfg.ground_elevation_m:.3f}] "
            f"[gb_yaw: {_deg(cam.heading[i])} gb_pitch: {_deg(cam.pitch[i])} gb_roll: {_deg(cam.roll[i])}] </font>\n"
        )
    return "\n".join(out)


def camera_csv(cam: CameraTrack, fps: float) -> str:
    """Exact per-frame camera: centre, angles, scale at the image centre, ground->image homography (row-major)."""
    rows = [
        "frame,t,cam_x_m,cam_y_m,alt_m,heading_deg,pitch_deg,roll_deg,metres_per_pixel,"
        + ",".join(f"h{k}" for k in range(9))
    ]
    for i in range(len(cam)):
        H = cam.ground_homography(i).ravel()
        rows.append(
            f"{i + 1},{i / fps:.4f},{cam.x[i]:.4f},{cam.y[i]:.4f},{cam.alt[i]:.4f},{cam.heading[i]:.5f},"
            f"{cam.pitch[i]:.5f},{cam.roll[i]:.5f},{cam.metres_per_pixel(i):.6f}," + ",".join(f"{v:.9g}" for v in H)
        )
    return "\n".join(rows) + "\n"


def seqinfo(name: str, cfg: SceneConfig) -> str:
    return (
        f"[Sequence]\nname={name}\nimDir=img1\nframeRate={cfg.fps:g}\nseqLength={cfg.frame_count}\n"
        f"imWidth={cfg.width}\nimHeight={cfg.height}\nimExt=.jpg\nvideo=video.mp4\n"
    )


def yolo_label(boxes: list[TruthBox], width: int, height: int, min_visibility: float) -> str:
    """YOLO rows (class cx cy w h, normalised); classes 0 car, 1 truck, 2 bus, 3 van."""
    rows = []
    for b in boxes:
        if b.visibility < min_visibility:
            continue
        rows.append(
            f"{b.class_id} {(b.left + b.width / 2) / width:.6f} {(b.top + b.height / 2) / height:.6f} "
            f"{b.width / width:.6f} {b.height / height:.6f}"
        )
    return "\n".join(rows) + ("\n" if rows else "")
