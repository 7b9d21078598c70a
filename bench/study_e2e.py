"""End-to-end traffic-study benchmark: rendered hovering drone flights -> ``airpatrol process`` -> ``airpatrol study``,
scored against the scene generator's exact truth (``python3 bench/study.py --e2e [--quick]``).

Every step runs the real command as a subprocess with its defaults (``process`` without the annotated video, which
does not change its results). Renders are cached in ``--work DIR/<case>/synth`` (rendered again only when the case's
scene settings or the generator's source, vision/synth/*.py, differ from the cached render's), runs in
``DIR/<case>/run``; ``--skip-render`` uses any cached render of the case's settings and never renders,
``--skip-process`` rescores the runs already there (``airpatrol study`` again), ``--runs-dir DIR`` scores run folders
made elsewhere (``DIR/<case>``, e.g. a branch's ``airpatrol process`` of the cached videos).

Scoring (``tracking/evaluation/study_score.py``): study approaches are placed in the scene's ground frame through the
run's own georeference (tracks.csv lat/lon -> the generator's east/north metres around its origin; a run without
lat/lon is placed by a similarity fit of its ground x/y to the matched truth positions, marked ``~``), paired with
the truth arms; study vehicles are tracks, mapped to truth vehicles by the MOT matching (IoU >= 0.5).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tracking.evaluation.io import GroundTruth, load_ground_truth, read_mot
from tracking.evaluation.link_audit import audit_links
from tracking.evaluation.mot import Match
from tracking.evaluation.study_score import (
    Arm,
    Conflict,
    StudyVehicle,
    TruthVehicle,
    class_recall,
    detector_share,
    score_study,
    stopped_keys,
    subset_recall,
    tracking_scores,
)
from vision.synth.writers import EARTH_RADIUS_M

# A study flight hovers in position hold (as bench/study.py's truth mode): no yaw, drift well under a metre.
HOVER_DRIFT_MPS = 0.02
REPO = Path(__file__).resolve().parents[1]

ToWorld = Callable[[float, float, float], tuple[float, float, float]]


@dataclass(frozen=True)
class Case:
    scene: str
    pitch: float
    altitude: float
    width: int
    height: int
    seconds: float
    fps: float = 15.0
    seed: int = 1
    # the camera's exposure (s); None: the generator's 180-degree shutter (half the frame interval). A flight filmed
    # at 10 fps to save compute is not filmed with a 1/20 s shutter: daylight survey footage is exposed far shorter
    exposure_s: float | None = None

    @property
    def view(self) -> str:
        return "nadir" if self.pitch <= -89.9 else f"oblique{-self.pitch:g}"

    @property
    def name(self) -> str:
        seed = "" if self.seed == 1 else f"_seed{self.seed}"  # seed 1 (the set's own) keeps its cache names
        return f"{self.scene}_{self.view}_{self.altitude:g}m_{self.height}p_{self.seconds:g}s{self._fps}{seed}"

    @property
    def label(self) -> str:
        size = "4K" if self.height >= 2160 else f"{self.height}p"
        seed = "" if self.seed == 1 else f" seed {self.seed}"
        return (
            f"{self.scene} {self.view} {self.altitude:g}m {size} {self.seconds:g}s{self._fps.replace('_', ' ')}{seed}"
        )

    @property
    def _fps(self) -> str:
        return "" if self.fps == 15.0 else f"_{self.fps:g}fps"

    def scene_config(self) -> dict:
        return {
            "scene": self.scene,
            "seed": self.seed,
            "duration_s": self.seconds,
            "fps": self.fps,
            "width": self.width,
            "height": self.height,
            "altitude_m": self.altitude,
            "gimbal_pitch_deg": self.pitch,
            "drift_mps": HOVER_DRIFT_MPS,
            "yaw_rate_dps": 0.0,
            "near_misses": max(1, round(self.seconds / 30)),
            **({"exposure_s": self.exposure_s} if self.exposure_s is not None else {}),
            # real car, van, bus and truck crops (../shared, or $AIRPATROL_SHARED): without them the generator would
            # fall back to drawn vehicles that no detector sees, and the benchmark would score the wrong thing
            "use_shared_data": "on",
        }


QUICK = [
    Case("intersection", -90.0, 80.0, 1920, 1080, 60.0),
    Case("roundabout", -55.0, 100.0, 1920, 1080, 60.0),
    # one minute of the full set's 4K ramp (its exposure below): fast traffic and a 4K frame in the quick set too
    Case("ramp", -90.0, 100.0, 3840, 2160, 60.0, fps=10.0, exposure_s=0.002),
]
# every scene, view and image size at least once, 60-120 m, 5-minute flights; the 4K flight at 10 fps: at 15 fps
# it alone would take about as long as the whole set should (rendering and processing cost ~7x a 1080p frame)
FULL = [
    Case("intersection", -90.0, 60.0, 1920, 1080, 300.0),
    Case("roundabout", -55.0, 120.0, 1920, 1080, 300.0),
    Case("intersection", -55.0, 100.0, 1920, 1080, 300.0),
    # 1/500 s: at the 180-degree shutter of 10 fps (1/20 s) a motorway car smears 1.5 m (~40 px at 4K) and the
    # detector missed most of them (60 s ramp, docs/study.md: recall 0.27 against 0.55 at 1/500 s)
    Case("ramp", -90.0, 100.0, 3840, 2160, 300.0, fps=10.0, exposure_s=0.002),
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def generator_key() -> str:
    """A digest of the scene generator's source (vision/synth/*.py): a render made by other generator code (new
    sprites, say) is rendered again; a change of the detector or tracker is not a reason to."""
    h = hashlib.sha1()
    for p in sorted((REPO / "vision" / "synth").glob("*.py")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:16]


def _cached(synth: Path, case: Case, key: str | None) -> bool:
    """A finished render of this case's settings (and, given ``key``, of the same generator code)."""
    meta = synth / "scene.json"
    if not (meta.is_file() and (synth / "video.mp4").is_file()):
        return False
    try:
        cfg = json.loads(meta.read_text())["config"]
    except (ValueError, KeyError):
        return False
    if key is not None:
        stamp = synth.parent / "generator_key.txt"
        if not stamp.is_file() or stamp.read_text().strip() != key:
            return False
    return all(cfg.get(k) == v for k, v in case.scene_config().items())


def run_cmd(cmd: list[str], log_path: Path) -> float:
    """Run a command (nice'd), its output into ``log_path``; seconds it took; a failure stops the benchmark."""
    t0 = time.perf_counter()
    with open(log_path, "w") as fh:
        rc = subprocess.call(["nice", "-n", "5", *cmd], stdout=fh, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({rc}): {' | '.join(tail)}")
    return time.perf_counter() - t0


def render(case: Case, synth: Path, skip: bool) -> float | None:
    """Render the case into ``synth`` unless a render of the same settings and generator code is there (None);
    with ``skip``, any finished render of the same settings is used."""
    key = generator_key()
    if _cached(synth, case, None if skip else key):
        return None
    if skip:
        raise RuntimeError(f"{synth}: no cached render of {case.label} (--skip-render)")
    if synth.exists():
        shutil.rmtree(synth)
    synth.mkdir(parents=True)
    cfg = synth.parent / "synth_config.json"
    cfg.write_text(json.dumps(case.scene_config(), indent=1))
    log(f"[{case.name}] rendering {case.seconds:g} s at {case.width}x{case.height} {case.fps:g} fps ...")
    took = run_cmd(["airpatrol", "synth", str(synth), "--config", str(cfg), "--quiet"], synth.parent / "synth.log")
    (synth.parent / "generator_key.txt").write_text(key + "\n")
    return took


def process(case: Case, synth: Path, run: Path) -> float:
    if run.exists():
        shutil.rmtree(run)
    log(f"[{case.name}] airpatrol process ...")
    return run_cmd(
        ["airpatrol", "process", str(synth / "video.mp4"), "--out", str(run), "--no-video", "-q"],
        run.parent / f"{run.name}_process.log",
    )


def study(case: Case, run: Path) -> float:
    log(f"[{case.name}] airpatrol study ...")
    return run_cmd(["airpatrol", "study", str(run)], run.parent / f"{run.name}_study.log")


# --- reading the truth and the outputs ------------------------------------------------------------------------


def load_truth(synth: Path) -> tuple[list[Arm], list[TruthVehicle], list[Conflict], dict]:
    meta = json.loads((synth / "scene.json").read_text())
    arms = [Arm(a["name"], a["x_m"], a["y_m"], a["heading_deg"]) for a in meta["approaches"]]
    vehicles = []
    for k, v in meta["vehicles"].items():
        st = v.get("study")
        if v.get("kind") == "parked" or not st:
            continue
        vehicles.append(
            TruthVehicle(
                int(k),
                st["origin"],
                st["destination"],
                st["movement"],
                int(st["lane"]),
                bool(st["entered_during_clip"] and st["left_during_clip"]),
                v.get("class", "car"),
            )
        )
    conflicts = [
        Conflict(c["id_a"], c["id_b"], c["t"], bool(c["scripted"]))
        for c in meta["conflicts"]
        if c["kind"] == "ttc" and c["id_a"] is not None and c["id_b"] is not None
    ]
    return arms, vehicles, conflicts, meta


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def load_study(study_dir: Path) -> tuple[list[Arm], list[StudyVehicle], list[Conflict]]:
    """Approaches in the run's ground frame (x_m, y_m, heading), vehicles, TTC conflicts."""
    gj = json.loads((study_dir / "study.geojson").read_text())
    approaches = [
        Arm(p["id"], p["x_m"], p["y_m"], p["heading_deg"])
        for p in (f["properties"] for f in gj["features"])
        if p.get("kind") == "approach"
    ]
    vehicles = [
        StudyVehicle(
            int(r["track_id"]),
            r["origin"] or None,
            r["destination"] or None,
            r["movement"],
            int(r["lane"]) if r["lane"] else None,
            r["present_at_start"] == "1" or r["present_at_end"] == "1",
            r.get("origin_inferred") == "1",
            r.get("destination_inferred") == "1",
        )
        for r in _read_csv(study_dir / "vehicles.csv")
    ]
    conflicts = [
        Conflict(int(r["track_a"]), int(r["track_b"]), float(r["t"]))
        for r in _read_csv(study_dir / "conflicts.csv")
        if r["kind"] == "ttc"
    ]
    return approaches, vehicles, conflicts


def fit_similarity(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Scale s, rotation R, translation t with dst ~ s R src + t (least squares, Umeyama)."""
    ms, md = src.mean(0), dst.mean(0)
    a, b = src - ms, dst - md
    u, d, vt = np.linalg.svd(b.T @ a / len(src))
    sign = np.diag([1.0, np.sign(np.linalg.det(u @ vt))])
    rot = u @ sign @ vt
    scale = float(np.trace(np.diag(d) @ sign) / max((a**2).sum() / len(src), 1e-12))
    return scale, rot, md - scale * rot @ ms


def run_to_world(run: Path, synth: Path, meta: dict, matches: list[Match]) -> tuple[ToWorld, str]:
    """A function (x, y, heading) run ground frame -> scene ground frame, and how it was found."""
    rows = _read_csv(run / "tracks.csv")
    lat0, lon0 = meta["config"]["origin_lat"], meta["config"]["origin_lon"]
    src, dst = [], []
    for r in rows[:: max(1, len(rows) // 5000)]:
        if r.get("ground_x_m") and r.get("lat") and r.get("lon"):
            src.append((float(r["ground_x_m"]), float(r["ground_y_m"])))
            lat, lon = float(r["lat"]), float(r["lon"])
            dst.append(
                (
                    math.radians(lon - lon0) * EARTH_RADIUS_M * math.cos(math.radians(lat0)),
                    math.radians(lat - lat0) * EARTH_RADIUS_M,
                )
            )
    how = "georef"
    if len(src) < 3:  # no lat/lon: place the run by its matched positions (hides a scale error: marked)
        how = "fit"
        ground = {(int(r["frame"]), int(r["track_id"])): r for r in rows if r.get("ground_x_m")}
        truth_xy = {}
        with open(synth / "gt" / "speeds.csv", newline="") as fh:
            for r in csv.DictReader(fh):
                truth_xy[(int(r["frame"]), int(r["id"]))] = (float(r["ground_x_m"]), float(r["ground_y_m"]))
        src, dst = [], []
        for m in matches:
            g = ground.get((m.frame, m.track_id))
            if g is not None and (m.frame, m.gt_id) in truth_xy:
                src.append((float(g["ground_x_m"]), float(g["ground_y_m"])))
                dst.append(truth_xy[(m.frame, m.gt_id)])
        if len(src) < 3:
            return (lambda x, y, h: (x, y, h)), "none"
    s, rot, t = fit_similarity(np.array(src), np.array(dst))
    dh = math.degrees(math.atan2(rot[0, 1], rot[0, 0]))  # heading is clockwise from north: minus the CCW angle

    def apply(x: float, y: float, h: float) -> tuple[float, float, float]:
        p = s * rot @ np.array([x, y]) + t
        return float(p[0]), float(p[1]), (h + dh) % 360.0

    return apply, how


DETECTOR_EVERY = 15  # frames between the detector-alone passes that define the queued vehicles it boxes
DETECTOR_CONF = 0.25  # a box ByteTrack would start a track from (track_high_thresh)
CLASS_ORDER = ["car", "van", "truck", "bus"]  # the verbose table's order of the renders' vehicle classes


def detector_ious(det, image: np.ndarray, truth_xywh: np.ndarray) -> np.ndarray:
    """Each truth box's best IoU with the boxes ``det`` (a ``VehicleDetector``) scores >= ``DETECTOR_CONF`` on
    ``image`` (0 where it gives none)."""
    from tracking.evaluation.mot import iou_xywh

    d = det.detect(image)
    d = d[d.score >= DETECTOR_CONF]
    if not len(d) or not len(truth_xywh):
        return np.zeros(len(truth_xywh))
    xyxy = d.xyxy.astype(np.float64)
    return iou_xywh(truth_xywh, np.column_stack([xyxy[:, :2], xyxy[:, 2:] - xyxy[:, :2]])).max(1)


def detector_boxed(synth: Path, gt: GroundTruth, every: int = DETECTOR_EVERY) -> set[tuple[int, int]]:
    """Truth boxes (frame, id) the shipped detector alone boxes (IoU >= 0.5, conf >= 0.25) at the frame's native
    resolution, on every ``every``-th frame: the issue's "queued vehicles the detector alone boxes" are the stopped
    ones among them. Cached beside the render, by detector weights."""
    from tracking.config import DetectorConfig
    from vision.detection import VehicleDetector
    from vision.source import open_source

    det = VehicleDetector(DetectorConfig(tiling="on"), "cpu")
    weights = Path(det.weights)
    cache = synth / f"detector_alone_{weights.stem}_{weights.stat().st_size}_every{every}.json"
    if cache.is_file():
        return {(int(f), int(i)) for f, i in json.loads(cache.read_text())}
    by_frame = gt.boxes.by_frame()
    boxed: set[tuple[int, int]] = set()
    log(f"[{synth.parent.name}] the detector alone on every {every}th frame ...")
    with open_source(synth / "video.mp4") as source:
        for frame in source:
            f = frame.index + 1  # MOTChallenge frames are 1-based
            if frame.index % every or f not in by_frame:
                continue
            rows = by_frame[f]
            best = detector_ious(det, frame.image, gt.boxes.xywh[rows])
            boxed.update((f, int(i)) for i, b in zip(gt.boxes.ids[rows], best) if b >= 0.5)
    cache.write_text(json.dumps(sorted(boxed)))
    return boxed


def score_case(case: Case, synth: Path, run: Path) -> dict:
    arms, truth, t_conf, meta = load_truth(synth)
    gt = load_ground_truth(synth)
    pred, _ = read_mot(run / "tracks_mot.txt")
    trk, matches = tracking_scores(gt, pred)
    boxed = detector_boxed(synth, gt)
    stopped_boxed = boxed & stopped_keys(gt)
    hit, n = subset_recall(stopped_boxed, matches)
    trk["stopped_detector_boxes"] = n
    trk["stopped_detector_recall"] = hit / n if n else math.nan
    approaches, vehicles, s_conf = load_study(run / "study")
    to_world, how = run_to_world(run, synth, meta, matches)
    placed = [Arm(a.name, *to_world(a.x, a.y, a.heading_deg)) for a in approaches]
    res = score_study(arms, truth, placed, vehicles, matches, t_conf, s_conf)
    res["tracking"] = trk
    classes = {int(k): v.get("class", "car") for k, v in meta["vehicles"].items()}
    res["by_class"] = class_recall(gt, classes, boxed, matches, DETECTOR_EVERY)
    # each O-D miss: on how many of its sampled frames the detector alone boxed it
    res["miss_detector"] = detector_share(gt, (m[0] for m in res["od_misses"]), boxed, DETECTOR_EVERY)
    res["placed_by"] = how
    res["study_vehicles"] = len(vehicles)
    linking = json.loads((run / "summary.json").read_text()).get("linking") if (run / "summary.json").exists() else None
    pieces = (linking or {}).get("pieces")  # runs before the link audit, or unlinked: none
    res["links"] = audit_links(pieces, matches) if pieces is not None else None
    return res


# --- the table ----------------------------------------------------------------------------------------------------

HEADER = (
    f"{'case':36} {'cross':>5} {'appr':>5} {'worst m':>7} {'cells ok':>8} {'O-D err':>7} {'O-D ok':>6} "
    f"{'lane':>6} {'conf T/S/hit':>12} {'recall':>6} {'stop rec':>8} {'stop det':>8} {'IDsw/v':>6} {'frag/v':>6} "
    f"{'sw/stop':>7} {'fr/stop':>7} {'trk/v':>5} {'links r/w':>9} {'infer r/w':>9}"
)


def _pct(v: float) -> str:
    return "   -  " if v != v else f"{v:5.1f}%"


def format_row(label: str, r: dict) -> str:
    ap, t = r["approaches"], r["tracking"]
    audit = r.get("links")
    links = "-" if audit is None else f"{audit.right}/{audit.wrong}"
    worst = f"{ap.worst_m:6.1f}{'~' if r['placed_by'] != 'georef' else ' '}" if math.isfinite(ap.worst_m) else "   -   "
    return (
        f"{label:36} {r['crossings']:5d} {ap.found:2d}/{ap.arms:<2d} {worst:>7} "
        f"{r['cells_ok']:>3d}/{len(r['cells']):<4d} {_pct(r['od_error_pct']):>7} {_pct(r['od_correct_pct']):>6} "
        f"{_pct(r['lane_correct_pct']):>6} {r['conflicts_truth']:3d}/{r['conflicts_study']:3d}/{r['conflicts_found']:<4d} "
        f"{t['recall']:6.3f} {t['stopped_recall']:8.3f} {t['stopped_detector_recall']:8.3f} "
        f"{t['switches_per_vehicle']:6.3f} "
        f"{t['fragments_per_vehicle']:6.3f} {t['stopped_switches_per_vehicle']:7.3f} "
        f"{t['stopped_fragments_per_vehicle']:7.3f} {r['tracks_per_vehicle']:5.2f} {links:>9} "
        f"{r['inferred_right']:>4d}/{r['inferred_wrong']:<4d}"
    )


def format_cells(r: dict) -> list[str]:
    out = [f"    ({o} -> {d} {m}): truth {t} study {s}{'' if ok else '  <- off'}" for (o, d, m), t, s, ok in r["cells"]]
    seen = r.get("miss_detector") or {}
    out += [
        f"    vehicle {g} {c} ({t}): study {s}, {n} track(s)"
        + (f"; detector alone on {seen[g][0]} of its {seen[g][1]} sampled frames" if g in seen else "")
        for g, t, s, n, c in r["od_misses"]
    ]
    by_class = r.get("by_class") or {}
    if by_class:
        parts = [
            f"{c} {n}: {d / n:.2f} / {t / n:.2f}"
            for c in CLASS_ORDER + sorted(set(by_class) - set(CLASS_ORDER))
            if c in by_class
            for n, d, t in [by_class[c]]
        ]
        out.append(
            f"    by class, every {DETECTOR_EVERY}th frame (truth boxes: detector alone / tracks): " + ", ".join(parts)
        )
    dist = ", ".join(f"{k} {'-' if v is None else f'{v:.1f} m'}" for k, v in r["approaches"].distance_m.items())
    out.append(f"    arms: {dist}; study vehicles {r['study_vehicles']}, incomplete (not counted) {r['incomplete']}")
    return out


def main_e2e(args) -> int:
    cases = QUICK if args.quick else FULL
    # another seed draws another scene (layout, traffic, vehicles) for every case: the figures' spread, and the check
    # that nothing was tuned to the set's own seed
    cases = [dataclasses.replace(c, seed=getattr(args, "seed", 1)) for c in cases]
    if getattr(args, "film_fps", None):  # the same flights filmed at a drone's frame rate (tracking/frame_rate.py)
        cases = [dataclasses.replace(c, fps=args.film_fps) for c in cases]
    if args.cases:
        cases = [c for c in cases if any(s in c.name for s in args.cases)]
    work = Path(args.work)
    rows = []
    t_all = time.perf_counter()
    print(HEADER, flush=True)
    for case in cases:
        base = work / case.name
        synth = base / "synth"
        run = Path(args.runs_dir) / case.name if args.runs_dir else base / "run"
        times = {}
        try:
            t = render(case, synth, args.skip_render)
            times["render"] = t
            if not args.runs_dir and not args.skip_process:
                times["process"] = process(case, synth, run)
            elif not (run / "tracks_mot.txt").is_file():
                raise RuntimeError(f"{run}: not a processed run (no tracks_mot.txt)")
            times["study"] = study(case, run)
            r = score_case(case, synth, run)
        except (RuntimeError, ValueError, OSError) as exc:  # a failed step or an unreadable output: next case
            log(f"[{case.name}] {exc}")
            continue
        took = ", ".join(f"{k} {'cached' if v is None else f'{v:.0f} s'}" for k, v in times.items())
        log(f"[{case.name}] done: {took}")
        rows.append((case, r, times))
        print(format_row(case.label, r), flush=True)
        if args.verbose:
            print("\n".join(format_cells(r)), flush=True)
    log(f"{len(rows)} of {len(cases)} cases in {time.perf_counter() - t_all:.0f} s")
    return 0 if len(rows) == len(cases) else 1
