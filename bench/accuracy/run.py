"""Accuracy report: dual-layer pipeline vs. plain YOLOv8 + ByteTrack on a fixed synthetic suite and UAVDT M1303.

    python3 -m bench.accuracy                    # full suite -> docs/accuracy_synthetic.md, .json, docs/img/
    python3 bench/accuracy/run.py --quick        # three short clips, to try the bench out
    python3 -m bench.accuracy --weights W.pt --workdir /tmp/acc --frames 75 --only highway-080m-720p

Clips are rendered into --workdir (reused when their config is unchanged), run in both modes with the same detector
weights, scored with ``tracking.evaluation.evaluate_run``, and the report is written into --out. See docs/accuracy_synthetic.md (secondary: real footage leads, docs/accuracy.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: make `bench.accuracy` importable
    sys.path.insert(0, str(REPO))
os.environ.setdefault("YOLO_OFFLINE", "1")

from bench.accuracy import suite as suite_mod  # noqa: E402
from bench.accuracy.execute import MODES, RunSettings, prepare, run_mode  # noqa: E402
from bench.accuracy.report import write_report  # noqa: E402

DEFAULT_WEIGHTS = REPO / "vision" / "weights" / "airpatrol_yolov8n.pt"
DEFAULT_ROAD_WEIGHTS = REPO / "vision" / "weights" / "road_unet.pt"


class BenchInputError(ValueError):
    """A bench option that cannot be used (missing weights file, bad path)."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_state() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (f" + uncommitted changes ({len(dirty)} paths)" if dirty else " (clean)")


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        cpu = next(
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        kb = int(
            next(ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal"))
        )
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{platform.node()}: {cpu}, {os.cpu_count()} CPU threads{mem}; {platform.platform()}"


def load_average() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _file_line(path: Path | None, what: str, used: Path | None = None) -> str:
    """``path`` as the user named it, with the hash and size of ``used`` (the copy actually read; default path)."""
    if path is None:
        return f"none ({what})"
    try:
        shown = path.resolve().relative_to(REPO)
    except ValueError:
        shown = path
    used = used or path
    return f"{shown} (sha256 {sha256(used)}, {used.stat().st_size / 1e6:.1f} MB)"


def _hash_in(line: str | None) -> str | None:
    """The sha256 in a weights line of the report (None: no weights, e.g. road layer disabled)."""
    m = re.search(r"sha256 ([0-9a-f]{64})", line or "")
    return m.group(1) if m else None


def snapshot(path: Path, workdir: Path) -> Path:
    """A private copy of a weights file for the whole run: the shipped files may be replaced by a training job while
    the suite runs, and every sequence and both modes must use the same weights. Same file name (caches key on it)."""
    digest = sha256(path)
    dst = workdir / "weights" / digest[:16] / path.name
    if not dst.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dst.with_suffix(".partial"))
        os.replace(dst.with_suffix(".partial"), dst)
    return dst


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m bench.accuracy", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="three short clips (+ a short UAVDT cut), for development")
    p.add_argument("--out", type=Path, default=REPO / "docs", help="report folder (default: docs/)")
    p.add_argument(
        "--weights",
        type=Path,
        default=None,
        help=f"detector weights for BOTH modes (default: {DEFAULT_WEIGHTS.relative_to(REPO)})",
    )
    p.add_argument(
        "--road-weights",
        type=Path,
        default=None,
        help=f"road U-Net weights (default: {DEFAULT_ROAD_WEIGHTS.relative_to(REPO)}; road layer off when missing)",
    )
    p.add_argument("--no-road", action="store_true", help="run the dual-layer pipeline without the road U-Net")
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/airpatrol-accuracy"),
        help="rendered clips, truncated UAVDT ground truth and run folders (default: /tmp/airpatrol-accuracy)",
    )
    p.add_argument(
        "--frames",
        type=int,
        default=None,
        help=f"frames per synthetic clip (default {suite_mod.DEFAULT_FRAMES}, --quick {suite_mod.QUICK_FRAMES})",
    )
    p.add_argument(
        "--uavdt-frames",
        type=int,
        default=None,
        help=f"first N frames of UAVDT M1303 (default {suite_mod.UAVDT_DEFAULT_FRAMES}; --quick: --frames)",
    )
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these sequences")
    p.add_argument(
        "--videos",
        nargs="*",
        default=[],
        metavar="NAME",
        help="write the annotated video for these sequences (slower; 'all' for every one)",
    )
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=JSON",
        dest="dual_set",
        help="dual-mode setting, e.g. detector.every_n_frames=1 (the report is then not the shipped default)",
    )
    p.add_argument(
        "--shared",
        type=Path,
        default=Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared")),
        help="shared data folder holding data/mot/uavdt_M1303 (default: $AIRPATROL_SHARED or ../shared)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep sequences already scored in --workdir/results.json (same weights, suite and frames), "
        "e.g. after an interrupted run, and run only the rest",
    )
    p.add_argument("--render-only", action="store_true", help="render the suite's clips into --workdir and stop")
    p.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="re-write the report from a saved accuracy.json / workdir results.json, running nothing",
    )
    return p.parse_args(argv)


def resolve_weights(args: argparse.Namespace) -> tuple[Path, Path | None, list[str]]:
    notes = []
    weights = args.weights or DEFAULT_WEIGHTS
    if not weights.is_file():
        raise BenchInputError(f"{weights}: detector weights not found (pass --weights)")
    road = None
    if not args.no_road:
        road = args.road_weights or DEFAULT_ROAD_WEIGHTS
        if not road.is_file():
            if args.road_weights:
                raise BenchInputError(f"{road}: road U-Net weights not found")
            notes.append(
                f"road U-Net weights {road.relative_to(REPO)} missing: dual-layer pipeline ran WITHOUT the "
                "road layer (motion layer, ego-motion and per-frame scale only)"
            )
            road = None
    else:
        notes.append("--no-road: dual-layer pipeline ran without the road layer")
    return weights, road, notes


def run_suite(args: argparse.Namespace) -> dict:
    from tqdm import tqdm

    weights, road, notes = resolve_weights(args)
    shared = args.shared if args.shared.is_dir() else None
    seqs = suite_mod.build_suite(args.quick, args.frames, shared, args.uavdt_frames, args.only)
    if shared is None:
        notes.append(f"{args.shared} absent: the real UAVDT M1303 sequence was skipped")
    if not seqs:
        raise BenchInputError("no sequence to run")
    videos = frozenset(s.name for s in seqs) if "all" in args.videos else frozenset(args.videos)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    weights_copy, road_copy = snapshot(weights, workdir), (snapshot(road, workdir) if road else None)
    weights_line = _file_line(weights, "?", weights_copy)
    road_line = _file_line(road, "road layer disabled", road_copy)
    dual_overrides = tuple((k, json.loads(v)) for k, v in (item.split("=", 1) for item in args.dual_set))
    settings = RunSettings(weights_copy, road_copy, workdir, args.device, videos, dual_overrides)
    notes.append(
        f"weights were copied into {workdir / 'weights'} at the start and read from there, so every run "
        "used the files hashed above even if the shipped ones changed meanwhile"
    )
    meta: dict[str, Any] = {
        "command": shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "weights": weights_line,
        "road_weights": road_line,
        "git": git_state(),
        "suite": f"version {suite_mod.SUITE_VERSION}, {'quick' if args.quick else 'full'}, {len(seqs)} sequences",
        "design": suite_mod.design_markdown(seqs),
        "notes": notes,
        "workdir": str(settings.workdir),
    }
    done: dict[str, dict] = {}
    previous = settings.workdir / "results.json"
    if args.resume and previous.is_file():
        old = json.loads(previous.read_text())
        om = old.get("meta", {})
        if om.get("suite") == meta["suite"] and all(
            _hash_in(om.get(k)) == _hash_in(meta[k]) for k in ("weights", "road_weights")
        ):
            done = {r["name"]: r for r in old.get("sequences", [])}
            now_git = meta["git"]
            for k in ("date", "command", "weights", "road_weights", "git", "machine"):  # the earlier run, continued
                meta[k] = om.get(k, meta[k])
            if now_git != meta["git"]:
                notes.append(f"the code changed between the first part and the resumed part: resumed at {now_git}")
            notes.append(
                f"resumed {dt.datetime.now().astimezone().isoformat(timespec='seconds')} with "
                f"`{shlex.join(getattr(sys, 'orig_argv', sys.argv))}` after an interrupted run; "
                f"{len(done)} sequences scored before were kept"
            )
        else:
            notes.append("--resume: earlier results.json used other weights or another suite; everything was re-run")
    load0 = load_average()
    if args.render_only:
        for spec in tqdm(seqs, desc="render suite", unit="clip"):
            prepare(spec, settings.workdir)
        return {"meta": meta, "sequences": []}
    t0 = time.perf_counter()
    timing = {"generate_s": 0.0, **{f"{m}_s": 0.0 for m in MODES}}
    records: list[dict[str, Any]] = []
    bar = tqdm(total=len(seqs) * (1 + len(MODES)), desc="accuracy suite", unit="step", dynamic_ncols=True)
    for spec in seqs:
        if spec.name in done and done[spec.name].get("frames") == spec.frames:
            records.append(done[spec.name])
            bar.update(1 + len(MODES))
            continue
        bar.set_postfix_str(f"{spec.name}: render")
        prep = prepare(spec, settings.workdir)
        timing["generate_s"] += prep.generated_s
        bar.update(1)
        rec: dict[str, Any] = {
            "name": spec.name,
            "kind": spec.kind,
            "group": spec.group,
            "factors": spec.factors,
            "frames": spec.frames,
            "assets": prep.assets,
            "modes": {},
            "run_s": {},
        }
        for mode in MODES:
            bar.set_postfix_str(f"{spec.name}: {mode}")
            t = time.perf_counter()
            rec["modes"][mode] = run_mode(spec, mode, prep, settings)
            rec["run_s"][mode] = round(time.perf_counter() - t, 1)
            timing[f"{mode}_s"] += time.perf_counter() - t
            bar.update(1)
        records.append(rec)
        (settings.workdir / "results.json").write_text(json.dumps({"meta": meta, "sequences": records}, indent=2))
    bar.close()
    used = {m.get("weights") for r in records for m in r["modes"].values()}
    if len(used) > 1:  # cannot happen with the snapshot; kept as a guard for the report's honesty
        notes.append(f"WARNING: runs used different detector weights: {sorted(map(str, used))}")
    timing["total_s"] = time.perf_counter() - t0
    pipeline_min = {m: sum(r["modes"][m].get("wall_s") or 0 for r in records) / 60 for m in MODES}
    meta["runtime"] = (
        f"pipeline runs (process_video wall time, model loading included, scoring not): dual-layer "
        f"{pipeline_min['dual']:.1f} min + baseline {pipeline_min['baseline']:.1f} min = "
        f"{sum(pipeline_min.values()):.1f} min; this invocation {timing['total_s'] / 60:.1f} min in all, "
        f"of it rendering {timing['generate_s'] / 60:.1f} min (0 when clips were reused)"
    )
    meta["timing_s"] = {k: round(v, 1) for k, v in timing.items()}
    if load0 is not None:
        meta["load_average"] = (
            f"{load0:.1f} at start, {load_average():.1f} at end (1-minute; other jobs share "
            f"the {os.cpu_count()} CPU threads, so times per frame vary with them)"
        )
    return {"meta": meta, "sequences": records}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.from_json:
            try:
                results = json.loads(args.from_json.read_text())
            except (OSError, ValueError) as exc:
                raise BenchInputError(f"{args.from_json}: cannot read results ({exc})") from None
            results = {"meta": results.get("meta", {}), "sequences": results["sequences"]}
        else:
            results = run_suite(args)
            if args.render_only:
                print(f"rendered into {args.workdir}")
                return 0
        written = write_report(results, args.out)
    except ValueError as exc:  # BenchInputError, SuiteError and the pipeline's own input errors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from bench.accuracy.report import aggregates, check_targets, sequence_table

    agg = aggregates(results["sequences"])
    print(sequence_table(results, agg))
    for t in check_targets(agg):
        print(f"{t['status']:4}  {t['target']}: {t['measured']}")
    print("written:", ", ".join(str(p) for p in written.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
