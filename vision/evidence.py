"""Evidence per violation: a snapshot of the vehicle at the moment of its violation, kept with the run.

For every violation of a run, the frame at its video time is read from the run's annotated video (it shows the
measured speed and the violator mark) - or from the source video when the run has none - and cut around the vehicle's
box from ``tracks.csv`` (with room around it to see the place), then saved as ``evidence/violation_<track>.jpg`` in
the run folder. With it goes a short clip (``evidence/violation_<track>.mp4``, H.264, from ``CLIP_BEFORE_S`` before
to ``CLIP_AFTER_S`` after the violation, the vehicle ringed in every frame where the tracker had it), cut with PyAV.
The run page and the map show them; the ``violations`` export zips them with a CSV of the violations.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

from vision.run_inputs import run_video

EVIDENCE_DIR = "evidence"
CLIP_BEFORE_S, CLIP_AFTER_S = 2.0, 2.0  # a violation is measured over about 1 s: the clip shows the approach too
CLIP_MAX_WIDTH = 1280  # clips are evidence to look at in a browser, not the full-resolution record
MIN_CROP_PX = 240  # the cut-out is at least this tall (or the whole frame), so the place can be recognised
CONTEXT = 4.0  # ... and this many vehicle sizes around the vehicle


@dataclass
class Wanted:
    track_no: int
    t_s: float


def snapshot_name(track_no: int) -> str:
    return f"violation_{int(track_no)}.jpg"


def clip_name(track_no: int) -> str:
    return f"violation_{int(track_no)}.mp4"


def evidence_video(run_dir: Path) -> Path | None:
    """The annotated video (it shows the measured speeds and the violator mark), else the source video."""
    video = run_dir / "annotated.mp4"
    if not video.is_file():
        try:
            summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        found = run_video(run_dir, summary)
        return found if found is not None and found.is_file() else None
    return video


def _boxes(tracks_csv: Path, wanted: dict[tuple[int, int], Wanted]) -> dict[tuple[int, int], np.ndarray]:
    """(track_no, frame index) -> box, for the wanted frames."""
    out = {}
    with open(tracks_csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            key = (int(row["track_id"]), int(row["frame"]) - 1)
            if key in wanted:
                out[key] = np.array([float(row[k]) for k in ("x1", "y1", "x2", "y2")])
    return out


def _crop(img: np.ndarray, box: np.ndarray) -> np.ndarray:
    """A 16:9 cut-out centred on the vehicle (black beyond the frame's edges), with a ring around the vehicle so
    the right one is obvious in dense traffic."""
    h, w = img.shape[:2]
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    ch = int(min(max(MIN_CROP_PX, CONTEXT * max(box[2] - box[0], box[3] - box[1])), h))
    cw = int(min(ch * 16 / 9, w))
    x1, y1 = int(round(cx - cw / 2)), int(round(cy - ch / 2))
    crop = np.zeros((ch, cw, 3), np.uint8)
    sx1, sy1, sx2, sy2 = max(0, x1), max(0, y1), min(w, x1 + cw), min(h, y1 + ch)
    if sx2 > sx1 and sy2 > sy1:
        crop[sy1 - y1 : sy2 - y1, sx1 - x1 : sx2 - x1] = img[sy1:sy2, sx1:sx2]
    bx1, by1, bx2, by2 = (int(round(v)) for v in (box[0] - x1, box[1] - y1, box[2] - x1, box[3] - y1))
    pad = max(4, (bx2 - bx1) // 3)
    cv2.rectangle(crop, (bx1 - pad, by1 - pad), (bx2 + pad, by2 + pad), (49, 48, 214), 2, cv2.LINE_AA)
    return crop


def make_snapshots(run_dir: str | Path, violations: list[Wanted], fps: float) -> dict[int, Path]:
    """Snapshots of the given violations (track_no -> file); violations whose frame or box is missing are skipped."""
    import av

    run_dir = Path(run_dir)
    video = evidence_video(run_dir)
    if not violations or video is None:
        return {}
    wanted = {(v.track_no, int(round(v.t_s * fps))): v for v in violations}
    boxes = _boxes(run_dir / "tracks.csv", wanted)
    by_frame: dict[int, list[int]] = {}
    for track_no, frame_no in boxes:
        by_frame.setdefault(frame_no, []).append(track_no)
    if not by_frame:
        return {}
    folder = run_dir / EVIDENCE_DIR
    folder.mkdir(exist_ok=True)
    written, last, source_wh = {}, max(by_frame), summary_size(run_dir)
    with av.open(str(video)) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i in by_frame:
                img = frame.to_ndarray(format="bgr24")
                for track_no in by_frame[i]:
                    box = _scale_box(boxes[(track_no, i)], source_wh, img.shape[1::-1])
                    path = folder / snapshot_name(track_no)
                    if cv2.imwrite(str(path), _crop(img, box), [cv2.IMWRITE_JPEG_QUALITY, 90]):
                        written[track_no] = path
            if i >= last:
                break
    return written


def summary_size(run_dir: Path) -> tuple[int, int] | None:
    try:
        v = json.loads((run_dir / "summary.json").read_text(encoding="utf-8")).get("video") or {}
        return (int(v["width"]), int(v["height"])) if v.get("width") and v.get("height") else None
    except (OSError, ValueError, KeyError):
        return None


def _scale_box(box: np.ndarray, source_wh: tuple[int, int] | None, image_wh: tuple[int, int]) -> np.ndarray:
    """Boxes are in source pixels; the annotated video may be smaller (it is capped at 1920 px wide)."""
    if not source_wh or tuple(source_wh) == tuple(image_wh):
        return box
    sx, sy = image_wh[0] / source_wh[0], image_wh[1] / source_wh[1]
    return box * np.array([sx, sy, sx, sy])


def _track_boxes(tracks_csv: Path, track_nos: set[int]) -> dict[tuple[int, int], np.ndarray]:
    """(track_no, frame index) -> box for every frame of the given tracks."""
    out = {}
    with open(tracks_csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if int(row["track_id"]) in track_nos:
                box = [float(row[k]) for k in ("x1", "y1", "x2", "y2")]
                out[(int(row["track_id"]), int(row["frame"]) - 1)] = np.array(box)
    return out


def _ring(img: np.ndarray, box: np.ndarray) -> None:
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    pad = max(4, (x2 - x1) // 3)
    cv2.rectangle(img, (x1 - pad, y1 - pad), (x2 + pad, y2 + pad), (49, 48, 214), 2, cv2.LINE_AA)


def make_clips(run_dir: str | Path, violations: list[Wanted], fps: float) -> dict[int, Path]:
    """A short H.264 clip around each violation (track_no -> file). The video is opened once and sought to each
    clip's start (its keyframe before it), so a late violation in a long flight does not decode the whole video."""
    import av

    run_dir = Path(run_dir)
    video = evidence_video(run_dir)
    if not violations or video is None:
        return {}
    boxes = (
        _track_boxes(run_dir / "tracks.csv", {v.track_no for v in violations})
        if (run_dir / "tracks.csv").is_file()
        else {}
    )
    folder = run_dir / EVIDENCE_DIR
    folder.mkdir(exist_ok=True)
    source_wh, written = summary_size(run_dir), {}
    with av.open(str(video)) as src:
        vs = src.streams.video[0]
        rate = vs.average_rate or Fraction(fps).limit_denominator(1001)
        assert vs.time_base is not None  # FFmpeg gives every decoded stream a time base
        t0 = float((vs.start_time or 0) * vs.time_base)
        for v in violations:
            start, end = max(0.0, v.t_s - CLIP_BEFORE_S), v.t_s + CLIP_AFTER_S
            path = folder / clip_name(v.track_no)
            src.seek(int((t0 + start) / vs.time_base), stream=vs, backward=True, any_frame=False)
            out, ostream, n = None, None, 0
            try:
                for frame in src.decode(vs):
                    t = float(frame.pts * vs.time_base) - t0 if frame.pts is not None else None
                    if t is None or t < start - 0.5 / fps:
                        continue
                    if t > end:
                        break
                    img: np.ndarray = frame.to_ndarray(format="bgr24")
                    box = boxes.get((v.track_no, int(round(t * fps))))
                    if box is not None:
                        _ring(img, _scale_box(box, source_wh, img.shape[1::-1]))
                    if out is None:
                        scale = min(1.0, CLIP_MAX_WIDTH / img.shape[1])
                        size = (int(img.shape[1] * scale) // 2 * 2, int(img.shape[0] * scale) // 2 * 2)
                        # faststart: the clip plays in the browser before it is all loaded
                        out = av.open(str(path), "w", options={"movflags": "+faststart"})
                        try:
                            ostream = out.add_stream("libx264", rate=rate)
                            ostream.options = {"crf": "28", "preset": "veryfast"}
                        except (av.error.FFmpegError, ValueError):  # an FFmpeg build without libx264
                            ostream = out.add_stream("mpeg4", rate=rate)
                        ostream.width, ostream.height = size
                        ostream.pix_fmt = "yuv420p"
                    assert ostream is not None  # opened with `out` above
                    if (img.shape[1], img.shape[0]) != (ostream.width, ostream.height):
                        img = cv2.resize(img, (ostream.width, ostream.height), interpolation=cv2.INTER_AREA)
                    for packet in ostream.encode(av.VideoFrame.from_ndarray(img, format="bgr24")):
                        out.mux(packet)
                    n += 1
                if out is not None and ostream is not None:
                    for packet in ostream.encode():
                        out.mux(packet)
            finally:
                if out is not None:
                    out.close()
            if n:
                written[v.track_no] = path
            else:
                path.unlink(missing_ok=True)
    return written


def clip_path(run_dir: Path | None, track_no: int) -> Path | None:
    if run_dir is None:
        return None
    path = Path(run_dir) / EVIDENCE_DIR / clip_name(track_no)
    return path if path.is_file() else None


def snapshot_path(run_dir: Path | None, track_no: int) -> Path | None:
    if run_dir is None:
        return None
    path = Path(run_dir) / EVIDENCE_DIR / snapshot_name(track_no)
    return path if path.is_file() else None
