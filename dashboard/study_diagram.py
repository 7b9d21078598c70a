"""The printable report's movement diagram: an arrow per movement (width = volume) and the approaches, drawn as SVG
on the run's orthophoto (or on a plain background with the trajectories when the run has none), in the picture's
pixels. Plain SVG, no map tiles: it prints as shown."""

from __future__ import annotations

import struct

import numpy as np

from dashboard import study_view as sv
from vision.orthophoto import ORTHO_PNG, read_orthophoto


def png_size(path) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    w, h = struct.unpack(">II", head[16:24])
    return w, h


def movement_diagram(out_dir, result: sv.StudyResult) -> dict:
    """The movement diagram as SVG drawing data: the orthophoto (when the run has one) with the approaches and an
    arrow per movement whose width is its volume; coordinates in the picture's pixels."""
    s, frame = result.study, result.frame
    assert s is not None and frame is not None
    meta = read_orthophoto(out_dir)
    size = png_size(out_dir / ORTHO_PNG) if meta else None
    arrows = sv.movement_arrows(s)
    pts_m = [np.array([[a.x, a.y] for a in s.approaches])] + [m["xy"] for m in arrows]
    if meta and size:
        (south, west), (north, east) = meta["bounds"]
        w, h = size

        def px(xy: np.ndarray) -> np.ndarray:
            lon = frame.lon0 + xy[:, 0] / frame.kx
            lat = frame.lat0 + xy[:, 1] / frame.ky
            return np.column_stack([(lon - west) / (east - west) * w, (north - lat) / (north - south) * h])

        image = True  # the run's orthophoto route (the template writes its URL)
    else:
        allpts = np.vstack(pts_m + [t.xy for t in list(s.smoothed.values())[:300]])
        lo, hi = allpts.min(axis=0) - 20, allpts.max(axis=0) + 20
        scale = 1000.0 / max(1.0, float((hi - lo).max()))
        w, h = int((hi[0] - lo[0]) * scale) + 1, int((hi[1] - lo[1]) * scale) + 1

        def px(xy: np.ndarray) -> np.ndarray:
            return np.column_stack([(xy[:, 0] - lo[0]) * scale, (hi[1] - xy[:, 1]) * scale])

        image = False
    unit = max(w, h) / 900.0  # stroke widths in picture pixels for a ~900 px wide print
    paths = [
        {
            "d": "M " + " L ".join(f"{x:.1f},{y:.1f}" for x, y in px(m["xy"])),
            "head": " ".join(f"{x:.1f},{y:.1f}" for x, y in px(sv.arrow_head(m["xy"], 2.0 + 6.0 * m["width"]))),
            "width": round((2 + 14 * m["width"]) * unit, 1),
            "label": f"{m['origin']}→{m['destination']} {m['movement']}: {m['vehicles']}",
            "movement": m["movement"],
            "vehicles": m["vehicles"],
            "mid": [round(float(v), 1) for v in px(m["xy"][len(m["xy"]) // 2 : len(m["xy"]) // 2 + 1])[0]],
        }
        for m in sorted(arrows, key=lambda m: -m["vehicles"])
    ]
    tracks = [
        " ".join(f"{x:.0f},{y:.0f}" for x, y in px(t.xy[:: max(1, len(t.xy) // 30)]))
        for t in list(s.smoothed.values())[:300]
    ]
    approaches = [
        {"key": a.id, "name": a.name, "x": round(float(p[0]), 1), "y": round(float(p[1]), 1)}
        for a, p in zip(s.approaches, px(np.array([[a.x, a.y] for a in s.approaches]).reshape(-1, 2)))
    ]
    return {
        "width": w,
        "height": h,
        "image": image,
        "paths": paths,
        "tracks": tracks,
        "approaches": approaches,
        "unit": round(unit, 2),
    }
