"""Does a change alter what `airpatrol process` writes? Run two source trees on the same clips and diff the outputs.

Each tree's code runs in its own subprocess (``PYTHONPATH=<tree> python3 -m edge.cli process ...``), so a refactor
can be checked against ``main`` before merging. For every clip it compares every output file byte for byte
(``tracks.csv``: every track, box, speed and lat/lon of every frame; the MOT file, the per-track summary, the
GeoJSON) and ``summary.json`` field by field except its ``timings``, the one part that differs between two runs of
the same code. It prints one line per clip with the counts and speeds, and for a difference the first differing
lines / fields. Exit status 0 when every clip is the same, 1 when not. ``--no-video`` is always passed: the
annotated video is not compared.

    python3 bench/compare_runs.py --before /work/main --after . --frames 150
    python3 bench/compare_runs.py --before /work/main --after . --out /tmp/cmp --reuse   # diff existing outputs

Clips (from ``../shared`` or ``AIRPATROL_SHARED``): the nadir interchange (georeferenced with its frame corners) and
the toll plaza (oblique, constant scale from the size prior). ``--device``/extra ``process`` options pass through.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(os.environ.get("AIRPATROL_SHARED", Path(__file__).resolve().parents[2] / "shared"))
CLIPS = {  # name -> (video, extra process options)
    "nadir_interchange": (
        "data/real_video/nadir_interchange/drone.mp4",
        ["--calibration", "{shared}/data/real_video/nadir_interchange/georef_corners.json"],
    ),
    "toll_plaza": ("data/real_video/toll_plaza/247589_medium.mp4", []),
}
# summary.json fields that differ between two runs of the same code: how long it took.
VOLATILE = {"timings"}


def run_tree(tree: Path, clip: str, out: Path, frames: int, extra: list[str]) -> float:
    video, opts = CLIPS[clip]
    cmd = [
        sys.executable,
        "-m",
        "edge.cli",
        "process",
        str(SHARED / video),
        "--out",
        str(out),
        "--max-frames",
        str(frames),
        "--no-video",
        "--quiet",
        *[o.format(shared=SHARED) for o in opts],
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(tree), "YOLO_OFFLINE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{tree}: `airpatrol process` on {clip} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def _stable(value):
    """summary.json without the fields that change between two runs of the same code."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _flat(value, prefix=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            yield from _flat(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def compare(before: Path, after: Path, show: int = 8) -> list[str]:
    """Differences between two run folders, as lines ([] when the same): every output file byte for byte (the
    first differing lines of a text file), summary.json field by field without :data:`VOLATILE`."""
    diffs = []
    names = sorted({p.name for d in (before, after) for p in d.iterdir() if p.is_file()} - {"summary.json"})
    for name in names:
        if not (before / name).is_file() or not (after / name).is_file():
            diffs.append(f"{name}: only in {'after' if (after / name).is_file() else 'before'}")
            continue
        a, b = (before / name).read_bytes(), (after / name).read_bytes()
        if a == b:
            continue
        if name.endswith((".csv", ".txt", ".geojson", ".json")):
            la, lb = a.decode().splitlines(), b.decode().splitlines()
            rows = list(difflib.unified_diff(la, lb, f"before/{name}", f"after/{name}", n=0, lineterm=""))
            diffs.append(f"{name} differs ({len(la)} vs {len(lb)} lines):")
            diffs += [f"    {ln}" for ln in rows[2 : 2 + show]]
        else:
            diffs.append(f"{name} differs ({len(a)} vs {len(b)} bytes)")
    sa = dict(_flat(_stable(json.loads((before / "summary.json").read_text()))))
    sb = dict(_flat(_stable(json.loads((after / "summary.json").read_text()))))
    fields = [k for k in sorted(sa.keys() | sb.keys()) if sa.get(k, "<absent>") != sb.get(k, "<absent>")]
    if fields:
        diffs.append(f"summary.json differs in {len(fields)} field(s):")
        diffs += [f"    {k}: {sa.get(k, '<absent>')!r} -> {sb.get(k, '<absent>')!r}" for k in fields[:show]]
    return diffs


def headline(run_dir: Path) -> str:
    """The counts and speeds a reader would check first."""
    s = json.loads((run_dir / "summary.json").read_text())
    counts = s.get("counts") or {}
    with open(run_dir / "tracks.csv", newline="") as fh:
        speeds = [float(r["speed_kmh"]) for r in csv.DictReader(fh) if r["speed_kmh"] not in ("", "nan")]
    med = sorted(speeds)[len(speeds) // 2] if speeds else float("nan")
    return (
        f"frames {counts.get('frames')}, tracks {counts.get('tracks')}, vehicles {counts.get('vehicles')}, "
        f"speed rows {len(speeds)}, median {med:.1f} km/h"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="source tree of the reference (e.g. /work/main)")
    ap.add_argument("--after", type=Path, required=True, help="source tree of the change")
    ap.add_argument("--frames", type=int, default=150, help="frames per clip (default 150)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/airpatrol-compare"), help="where the runs are written")
    ap.add_argument("--clips", nargs="+", choices=sorted(CLIPS), default=sorted(CLIPS))
    ap.add_argument("--reuse", action="store_true", help="diff existing outputs under --out instead of running")
    ap.add_argument("--only", choices=("before", "after"), help="run one side only (e.g. the reference, ahead)")
    args, extra = ap.parse_known_args(argv)
    if not SHARED.is_dir():
        print(f"{SHARED}: shared clips not found (set AIRPATROL_SHARED)", file=sys.stderr)
        return 2
    same = True
    for clip in args.clips:
        dirs = {side: args.out / side / clip for side in ("before", "after")}
        for side, tree in (("before", args.before), ("after", args.after)):
            if args.only and side != args.only:
                continue
            if args.reuse and (dirs[side] / "summary.json").is_file():
                continue
            secs = run_tree(tree.resolve(), clip, dirs[side], args.frames, extra)
            print(f"{clip}: {side} ({tree}) ran in {secs:.0f} s")
        if args.only:
            continue
        diffs = compare(dirs["before"], dirs["after"])
        same &= not diffs
        print(
            f"{clip}: {'SAME' if not diffs else 'DIFFERENT'} - before: {headline(dirs['before'])}; "
            f"after: {headline(dirs['after'])}"
        )
        for line in diffs:
            print(f"  {line}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
