"""``python -m bench.real``: plain Ultralytics vs ``--baseline`` vs dual on every real sequence with ground truth.

For each sequence in ``../shared/data/mot`` (bench/real/sequences.py; the night sequence is scored on its first 240
frames only, its last frames may train the detector):

- **plain**: ``YOLO(weights).track(..., tracker="bytetrack.yaml", persist=True, conf=c, imgsz=640)``, conf swept over
  ``--plain-confs``; the best conf *on that sequence* is reported (the strongest plain a user could pick);
- **baseline**: ``airpatrol process --baseline`` with its defaults;
- **dual**: ``airpatrol process`` with each candidate setting of ``DUAL_CANDIDATES``; the setting reported on a
  sequence is the one with the best pooled MOTA on the *other* sequences (leave-one-sequence-out). The shipped
  default is scored too, marked in-sample when it was chosen with that sequence in view.

Writes ``--out`` (JSON, every run) and prints the markdown tables for docs/accuracy.md. Runs are cached in
``--cache`` by sequence, contender, setting and weights, so a re-run only computes what changed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import platform
import time
from pathlib import Path

from bench.real.contenders import RunResult, run_airpatrol, run_plain
from bench.real.scoring import score
from bench.real.sequences import NIGHT_SCORED_FRAMES, NIGHT_TRAIN_FRAMES, Sequence, real_sequences

# Settings of the dual layer the leave-one-out choice picks from: how strict the moving-blob gate is. {} = shipped.
DUAL_CANDIDATES: dict[str, dict] = {
    "default": {},
    "gate-loose": {"motion.gate.noise_factor": 0.5, "motion.gate.min_frames": 4, "motion.gate.min_straightness": 0.5},
    "gate-strict": {"motion.gate.noise_factor": 2.0, "motion.gate.min_frames": 7, "motion.gate.min_straightness": 0.7},
    "no-motion-blobs": {"motion.add_missed": False},
}


def _weights_tag(weights: Path) -> str:
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:12]


def _cached(cache: Path, key: dict, compute) -> dict:
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    path = cache / f"{name}.json"
    if path.is_file():
        return json.loads(path.read_text())
    value = compute()
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**value, "key": key}))
    return value


def _scored(seq: Sequence, result: RunResult) -> dict:
    gt, ignore = seq.ground_truth()
    return {**score(gt, ignore, result.pred, seq.frames), "ms_per_frame": result.ms_per_frame,
            "frames_run": result.frames, "stages": result.stages}


def evaluate(seqs: list[Sequence], weights: Path, plain_confs: list[float], cache: Path, log) -> dict:
    tag = _weights_tag(weights)
    out: dict = {"weights": str(weights), "weights_sha256_12": tag, "sequences": {}}
    for seq in seqs:
        entry: dict = {"frames": list(seq.frames), "condition": seq.condition, "view": seq.view, "plain": {},
                       "dual": {}}
        for conf in plain_confs:
            key = {"seq": seq.name, "frames": seq.frames, "contender": "plain", "conf": conf, "weights": tag}
            entry["plain"][str(conf)] = _cached(cache, key, lambda: _scored(seq, run_plain(seq, weights, conf)))
            log(seq.name, f"plain conf={conf}", entry["plain"][str(conf)])
        key = {"seq": seq.name, "frames": seq.frames, "contender": "baseline", "weights": tag}
        entry["baseline"] = _cached(cache, key, lambda: _scored(seq, run_airpatrol(seq, True, {"detector.weights": str(weights)})))
        log(seq.name, "baseline", entry["baseline"])
        for name, overrides in DUAL_CANDIDATES.items():
            key = {"seq": seq.name, "frames": seq.frames, "contender": "dual", "overrides": overrides, "weights": tag}
            entry["dual"][name] = _cached(cache, key, lambda: _scored(
                seq, run_airpatrol(seq, False, {**overrides, "detector.weights": str(weights)})))
            log(seq.name, f"dual {name}", entry["dual"][name])
        out["sequences"][seq.name] = entry
    return out


def leave_one_out(results: dict) -> dict:
    """Per sequence: the dual setting with the best MOTA over the other sequences (pooled by GT boxes)."""
    seqs = results["sequences"]
    choice = {}
    for held in seqs:
        others = [s for s in seqs if s != held]
        if not others:
            choice[held] = "default"
            continue

        def pooled(name: str) -> float:
            gt = sum(seqs[s]["dual"][name]["gt_boxes"] for s in others)
            return sum(seqs[s]["dual"][name]["mota"] * seqs[s]["dual"][name]["gt_boxes"] for s in others) / gt

        choice[held] = max(DUAL_CANDIDATES, key=pooled)
    return choice


def _pooled(rows: list[dict]) -> dict:
    gt = sum(r["gt_boxes"] for r in rows)
    fp, fn, sw = (sum(r[k] for r in rows) for k in ("fp", "fn", "idsw"))
    return {"mota": 100 * (1 - (fp + fn + sw) / gt), "fp": fp, "fn": fn, "idsw": sw, "gt_boxes": gt}


def markdown(results: dict, choice: dict) -> str:
    def f(v, nd=1):
        return "-" if v is None else f"{v:.{nd}f}"

    lines = ["| sequence | contender | MOTA | IDF1 | HOTA | FP | FN | ID sw. | ms/frame |", "|---|---|---|---|---|---|---|---|---|"]
    pooled = {"plain": [], "baseline": [], "dual": []}
    for name, e in results["sequences"].items():
        best_conf = max(e["plain"], key=lambda c: e["plain"][c]["mota"])
        rows = [(f"plain Ultralytics track, best conf ({best_conf})", e["plain"][best_conf], "plain"),
                ("`airpatrol process --baseline`", e["baseline"], "baseline"),
                (f"`airpatrol process` dual, leave-one-out setting ({choice[name]})", e["dual"][choice[name]], "dual")]
        if choice[name] != "default":
            rows.append(("dual, shipped default (in-sample)", e["dual"]["default"], None))
        for label, r, group in rows:
            if group:
                pooled[group].append(r)
            lines.append(f"| {name} ({e['condition']}, frames {e['frames'][0]}-{e['frames'][1]}) | {label} | "
                         f"{f(r['mota'])} | {f(r['idf1'])} | {f(r['hota'])} | {r['fp']} | {r['fn']} | {r['idsw']} | "
                         f"{f(r['ms_per_frame'], 0)} |")
    for group, rows in pooled.items():
        if rows:
            p = _pooled(rows)
            lines.append(f"| pooled | {group} | {f(p['mota'])} | | | {p['fp']} | {p['fn']} | {p['idsw']} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    ap = argparse.ArgumentParser(prog="python -m bench.real", description=__doc__.splitlines()[0])
    ap.add_argument("--weights", type=Path, default=DEFAULT_DETECTOR_WEIGHTS)
    ap.add_argument("--plain-confs", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.3])
    ap.add_argument("--sequences", nargs="*", help="names (default: all present)")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "airpatrol" / "bench_real")
    ap.add_argument("--out", type=Path, default=Path("docs/real_accuracy.json"))
    args = ap.parse_args(argv)
    seqs = [s for s in real_sequences() if not args.sequences or s.name in args.sequences]
    if not seqs:
        print("no real sequence with ground truth found (../shared/data/mot missing): nothing to measure")
        return 2
    t0 = time.perf_counter()

    def log(seq, what, r):
        print(f"[{time.perf_counter() - t0:6.0f} s] {seq:12s} {what:28s} MOTA {r['mota']:5.1f} IDF1 {r['idf1']:5.1f} "
              f"FP {r['fp']:5d} FN {r['fn']:5d} IDsw {r['idsw']:3d} {r['ms_per_frame']:6.0f} ms/frame", flush=True)

    results = evaluate(seqs, args.weights, args.plain_confs, args.cache, log)
    choice = leave_one_out(results)
    results.update(leave_one_out_choice=choice, candidates=DUAL_CANDIDATES,
                   night_split={"scored": NIGHT_SCORED_FRAMES, "detector_training": NIGHT_TRAIN_FRAMES},
                   machine={"python": platform.python_version(), "cpu_count": __import__("os").cpu_count()})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(markdown(results, choice))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
