"""``python -m bench.real.scale_agreement VIDEO``: what the detector loses below native resolution, on footage
without ground truth.

On every ``--every``-th frame the confident native-resolution boxes (score >= 0.4) are the reference; at each scale
of ``--scales`` the detector runs on the whole frame (conf 0.25) and a reference box counts as found when a box
overlaps it at IoU > 0.5. Per scale and row band (thirds of the frame): the reference vehicles' median long side
(native px), the share found, and the median width and height of the found boxes over their reference's (a box
biased at a lower scale would move a size fit that uses box widths). Written for the toll-plaza regression
(docs/detector_scale.md): were its vehicles missed or boxed differently at the budget's 0.75x?
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ix = (np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])).clip(0)
    iy = (np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])).clip(0)
    inter = ix * iy
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a[:, None] + area_b[None] - inter)


def agreement(video: Path, scales: list[float], every: int, bands: int = 3) -> list[dict]:
    """One row per scale and band (see the module's docstring)."""
    from tracking.config import DetectorConfig
    from vision.detection import VehicleDetector
    from vision.source import open_source

    det = VehicleDetector(DetectorConfig())
    rows = []  # (scale, row, width, height, found, width ratio, height ratio)
    height = 0
    with open_source(video) as src:
        for frame in src:
            if frame.index % every:
                continue
            image = frame.image
            height = image.shape[0]
            ref = det._pass(image, None, 0, height, 1.0)
            ref = ref[ref.score >= 0.4]
            if not len(ref):
                continue
            for s in scales:
                d = det._pass(image, None, 0, height, s)
                d = d[d.score >= 0.25]
                iou = _iou(ref.xyxy, d.xyxy) if len(d) else np.zeros((len(ref), 1))
                best = iou.argmax(1)
                found = iou.max(1) > 0.5
                for k, b in enumerate(ref.xyxy):
                    m = d.xyxy[best[k]] if found[k] else None
                    rows.append(
                        (
                            s,
                            (b[1] + b[3]) / 2,
                            b[2] - b[0],
                            b[3] - b[1],
                            found[k],
                            (m[2] - m[0]) / (b[2] - b[0]) if m is not None else np.nan,
                            (m[3] - m[1]) / (b[3] - b[1]) if m is not None else np.nan,
                        )
                    )
    r = np.array(rows, np.float64).reshape(-1, 7)
    edges = np.linspace(0, height, bands + 1).round().astype(int)
    out = []
    for s in scales:
        for y0, y1 in zip(edges[:-1], edges[1:]):
            b = r[(r[:, 0] == s) & (r[:, 1] >= y0) & (r[:, 1] < y1)]
            if not len(b):
                continue
            ok = b[b[:, 4] > 0]
            out.append(
                {
                    "scale": s,
                    "rows": [int(y0), int(y1)],
                    "vehicles": len(b),
                    "median_long_side_px": float(np.median(np.maximum(b[:, 2], b[:, 3]))),
                    "found": float(b[:, 4].mean()),
                    "width_ratio": float(np.median(ok[:, 5])) if len(ok) else None,
                    "height_ratio": float(np.median(ok[:, 6])) if len(ok) else None,
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.real.scale_agreement", description=__doc__.splitlines()[0])
    ap.add_argument("video", type=Path)
    ap.add_argument("--scales", type=float, nargs="+", default=[0.5, 0.625, 0.75, 0.875])
    ap.add_argument("--every", type=int, default=25, help="every N-th frame")
    args = ap.parse_args(argv)
    from vision.source import SourceError

    try:
        rows = agreement(args.video, args.scales, args.every)
    except SourceError as exc:
        print(exc)
        return 2
    for r in rows:
        ratio = "-" if r["width_ratio"] is None else f"{r['width_ratio']:.3f} / {r['height_ratio']:.3f}"
        print(
            f"scale {r['scale']:.3f} rows {r['rows'][0]}-{r['rows'][1]}: {r['vehicles']} vehicles, median long side "
            f"{r['median_long_side_px']:.1f} px native, found {100 * r['found']:.0f} %, width / height vs native {ratio}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
