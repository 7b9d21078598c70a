"""An orthophoto of a georeferenced run, made from its own video: real imagery under the tracks, offline.

Frames along the flight are projected to the ground and mosaicked into one north-up image with lon/lat bounds, so
the map can lay the place the drone saw under the trajectories without any base map or internet.

The projection of each frame is the pipeline's own: every tracked vehicle in ``tracks.csv`` has its reference point
(the box centre, in pixels) and the lon/lat the pipeline computed for it with that frame's image-to-ground homography
(telemetry pose or calibration, composed with the ego-motion). A homography fitted to those pairs (RANSAC, in local
metres) recovers that mapping; frames with fewer than ``MIN_POINTS`` georeferenced vehicles, or whose fit disagrees
with the pipeline by more than ``MAX_RMS_M``, are skipped. Later frames are drawn over earlier ones.

Written into the run folder as ``ortho.png`` (RGBA, transparent where no frame reached) and ``ortho.json`` (bounds
``[[south, west], [north, east]]``, resolution, frames used); the dashboard serves them (``/runs/{id}/ortho.png``).
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from vision.camera import enu_to_lonlat, lonlat_to_enu
from vision.run_inputs import recorded_video, run_video

MIN_POINTS = 6
MAX_RMS_M = 1.5
MAX_FRAMES = 40
MAX_SIDE_PX = 4096
ORTHO_PNG, ORTHO_JSON = "ortho.png", "ortho.json"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")


class OrthophotoError(ValueError):
    """No orthophoto can be made for this run (the message says why)."""


@dataclass
class Orthophoto:
    png: Path
    bounds: list[list[float]]  # [[south, west], [north, east]]
    metres_per_pixel: float
    frames: int


def _georeferenced_points(tracks_csv: Path) -> dict[int, np.ndarray]:
    """frame index (0-based) -> array of (x_px, y_px, lon, lat) of its georeferenced vehicles."""
    per_frame: dict[int, list] = defaultdict(list)
    with open(tracks_csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if not row.get("lat") or not row.get("lon"):
                continue
            try:
                x = (float(row["x1"]) + float(row["x2"])) / 2
                y = (float(row["y1"]) + float(row["y2"])) / 2
                per_frame[int(row["frame"]) - 1].append((x, y, float(row["lon"]), float(row["lat"])))
            except (KeyError, ValueError):
                continue
    return {f: np.array(p, np.float64) for f, p in per_frame.items() if len(p) >= MIN_POINTS}


def _pick_frames(candidates: list[int], fps: float, every_s: float) -> list[int]:
    picked, last = [], -1e9
    for f in sorted(candidates):
        if f - last >= every_s * fps:
            picked.append(f)
            last = f
    if len(picked) > MAX_FRAMES:
        picked = [picked[round(i * (len(picked) - 1) / (MAX_FRAMES - 1))] for i in range(MAX_FRAMES)]
    return picked


def _frames(source: Path, wanted: set[int]):
    """(index, BGR image) of the wanted frames of a video file or an image-sequence folder, in order."""
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        for i in sorted(wanted):
            if i < len(files) and (img := cv2.imread(str(files[i]))) is not None:
                yield i, img
        return
    import av

    last = max(wanted)
    with av.open(str(source)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i in wanted:
                yield i, frame.to_ndarray(format="bgr24")
            if i >= last:
                break


def _fit(points: np.ndarray, lon0: float, lat0: float) -> tuple[np.ndarray, float] | None:
    """Homography image px -> local metres (east, north) and its RMS error in metres against the pipeline."""
    e, n = lonlat_to_enu(points[:, 2], points[:, 3], lon0, lat0)
    ground = np.column_stack([e, n])
    H, inliers = cv2.findHomography(points[:, :2], ground, cv2.RANSAC, 1.0)
    if H is None or inliers is None or inliers.sum() < MIN_POINTS:
        return None
    proj = cv2.perspectiveTransform(points[:, None, :2], H)[:, 0]
    err = np.linalg.norm(proj - ground, axis=1)[inliers.ravel() > 0]
    return H, float(np.sqrt(np.mean(err**2)))


def make_orthophoto(run_dir: str | Path, every_s: float = 1.0) -> Orthophoto:
    """Build ``ortho.png`` / ``ortho.json`` in a processed run folder; raises :class:`OrthophotoError` when it cannot."""
    run_dir = Path(run_dir)
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OrthophotoError(f"{run_dir / 'summary.json'}: cannot read ({exc})") from None
    video = summary.get("video") or {}
    found = run_video(run_dir, summary)
    if found is None:
        raise OrthophotoError(f"{recorded_video(summary)}: the run's video is not there any more")
    source = found
    fps = float(video.get("fps") or 25.0)
    points = _georeferenced_points(run_dir / "tracks.csv")
    if not points:
        raise OrthophotoError(
            f"{run_dir}: no frame with {MIN_POINTS} georeferenced vehicles (the run has no scale "
            "from telemetry or a georeferenced calibration)"
        )
    all_pts = np.concatenate(list(points.values()))
    lon0, lat0 = float(np.median(all_pts[:, 2])), float(np.median(all_pts[:, 3]))
    fits = {}
    for f in _pick_frames(list(points), fps, every_s):
        fit = _fit(points[f], lon0, lat0)
        if fit is not None and fit[1] <= MAX_RMS_M:
            fits[f] = fit[0]
    if not fits:
        raise OrthophotoError(f"{run_dir}: no frame's vehicles fit one ground projection within {MAX_RMS_M} m")
    frames = dict(_frames(source, set(fits)))
    fits = {f: H for f, H in fits.items() if f in frames}
    if not fits:
        raise OrthophotoError(f"{source}: cannot read the frames to project")

    # canvas: the union of the projected frames, at the median ground resolution of their centres
    corners, resolutions = [], []
    for f, H in fits.items():
        h, w = frames[f].shape[:2]
        quad = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float64)[:, None]
        corners.append(cv2.perspectiveTransform(quad, H)[:, 0])
        c = cv2.perspectiveTransform(np.array([[[w / 2, h / 2], [w / 2 + 1, h / 2]]], np.float64), H)[0]
        resolutions.append(float(np.linalg.norm(c[1] - c[0])))
    corners_all = np.concatenate(corners)
    (e_min, n_min), (e_max, n_max) = corners_all.min(axis=0), corners_all.max(axis=0)
    res = max(float(np.median(resolutions)), max(e_max - e_min, n_max - n_min) / MAX_SIDE_PX)
    size = (int(math.ceil((e_max - e_min) / res)), int(math.ceil((n_max - n_min) / res)))
    to_canvas = np.array([[1 / res, 0, -e_min / res], [0, -1 / res, n_max / res], [0, 0, 1]])
    canvas = np.zeros((size[1], size[0], 4), np.uint8)
    for f in sorted(fits):
        img = frames[f]
        M = to_canvas @ fits[f]
        warped = cv2.warpPerspective(img, M, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
        mask = cv2.warpPerspective(np.full(img.shape[:2], 255, np.uint8), M, size, flags=cv2.INTER_NEAREST) > 0
        canvas[mask, :3] = warped[mask]
        canvas[mask, 3] = 255
    png = run_dir / ORTHO_PNG
    if not cv2.imwrite(str(png), canvas):
        raise OrthophotoError(f"{png}: cannot write")
    bounds = _bounds(e_min, e_max, n_min, n_max, lon0, lat0)
    meta = {
        "bounds": bounds,
        "metres_per_pixel": round(res, 4),
        "frames": sorted(fits),
        "source": str(source),
        "method": "frames projected with the pipeline's per-frame image-to-ground mapping (homography fitted "
        "to its georeferenced vehicles), later frames on top",
    }
    (run_dir / ORTHO_JSON).write_text(json.dumps(meta), encoding="utf-8")
    return Orthophoto(png, bounds, res, len(fits))


def _bounds(e_min, e_max, n_min, n_max, lon0, lat0) -> list[list[float]]:
    lons, lats = enu_to_lonlat(np.array([e_min, e_max]), np.array([n_min, n_max]), lon0, lat0)
    return [[float(lats[0]), float(lons[0])], [float(lats[1]), float(lons[1])]]


def read_orthophoto(run_dir: Path | None) -> dict | None:
    """The run folder's orthophoto metadata, when it has one."""
    if run_dir is None:
        return None
    meta, png = Path(run_dir) / ORTHO_JSON, Path(run_dir) / ORTHO_PNG
    if not (meta.is_file() and png.is_file()):
        return None
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
        return data if isinstance(data.get("bounds"), list) else None
    except (OSError, ValueError):
        return None
