"""A traffic study of a processed run scored against a synthetic scene's exact truth (``bench/study.py --e2e``).

The chain is video -> ``airpatrol process`` -> ``airpatrol study``; the truth is the generator's (``scene.json``:
arms, each vehicle's origin, destination, movement and lane, time-to-collision conflicts; ``gt/gt.txt`` boxes and
``gt/speeds.csv`` speeds). Study vehicles are tracks: each track is the truth vehicle it matched most often in the
MOT matching (IoU), and each truth vehicle's *primary* track is the track that matched it most often, so a vehicle
split into two tracks has one primary track that covers only part of its way.

Targets (issue 32): approaches = arms, each within 10 m of its arm; turning-movement counts within 10 % (±2 where
the truth is under 20); O-D cells' total absolute error <= 10 % of the crossings; >= 90 % of the crossing vehicles
with a complete and correct O-D.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tracking.evaluation.io import Boxes, GroundTruth
from tracking.evaluation.mot import Match, drop_ignored, mot_metrics

APPROACH_MAX_M = 10.0  # target: each approach within this distance of its arm
APPROACH_MATCH_M = 60.0  # beyond this an approach is not paired with an arm at all
APPROACH_MATCH_DEG = 50.0  # inbound headings must agree this well to pair
COUNT_REL_TOL = 0.10
COUNT_ABS_TOL = 2
COUNT_SMALL = 20  # truth counts below this use the absolute tolerance
CONFLICT_TOL_S = 2.0
STOPPED_KMH = 3.6  # < 1 m/s: a stopped or queued vehicle


@dataclass
class Arm:
    """A truth arm (``scene.json`` ``approaches``) or a study approach, in the scene's ground metres."""

    name: str
    x: float
    y: float
    heading_deg: float  # direction of travel into the junction, clockwise from north


@dataclass
class TruthVehicle:
    gt_id: int
    origin: str
    destination: str
    movement: str
    lane: int
    crossing: bool  # entered and left the view during the clip: a complete movement to count
    vehicle_class: str = "car"  # car, van, truck or bus


@dataclass
class StudyVehicle:
    track_id: int
    origin: str | None  # study approach id
    destination: str | None
    movement: str
    lane: int | None
    edge_of_flight: bool  # present at the flight's start or end: the study leaves it out of the counts
    origin_inferred: bool = False  # from its heading and lane at the flight's start (or an edge), not seen arriving
    destination_inferred: bool = False


@dataclass
class Conflict:
    a: int  # truth: gt ids; study: track ids
    b: int
    t: float
    scripted: bool = False


@dataclass
class ApproachScore:
    found: int
    arms: int
    distance_m: dict[str, float | None]  # arm name -> distance to its approach (None: no approach for it)
    approach_arm: dict[str, str]  # study approach id -> arm name

    @property
    def ok(self) -> bool:
        return (
            self.found == self.arms
            and bool(self.distance_m)
            and all(d is not None and d <= APPROACH_MAX_M for d in self.distance_m.values())
        )

    @property
    def worst_m(self) -> float:
        ds = [d for d in self.distance_m.values() if d is not None]
        return max(ds) if len(ds) == len(self.distance_m) and ds else math.inf


def heading_diff(a: float, b: float) -> float:
    return abs((a - b + 180.0) % 360.0 - 180.0)


def match_approaches(approaches: list[Arm], arms: list[Arm]) -> ApproachScore:
    """One-to-one pairing of study approaches with truth arms, nearest first, among pairs whose inbound headings
    agree within ``APPROACH_MATCH_DEG`` and that lie within ``APPROACH_MATCH_M``."""
    pairs = sorted(
        (math.hypot(a.x - r.x, a.y - r.y), i, j)
        for i, a in enumerate(approaches)
        for j, r in enumerate(arms)
        if heading_diff(a.heading_deg, r.heading_deg) < APPROACH_MATCH_DEG
    )
    used_a: set[int] = set()
    used_r: set[int] = set()
    dist: dict[str, float | None] = {r.name: None for r in arms}
    amap: dict[str, str] = {}
    for d, i, j in pairs:
        if d > APPROACH_MATCH_M or i in used_a or j in used_r:
            continue
        used_a.add(i)
        used_r.add(j)
        dist[arms[j].name] = d
        amap[approaches[i].name] = arms[j].name
    return ApproachScore(len(approaches), len(arms), dist, amap)


def count_ok(truth: int, study: int) -> bool:
    """A count within the target: 10 % of the truth, or ±2 where the truth is under 20."""
    if truth < COUNT_SMALL:
        return abs(study - truth) <= COUNT_ABS_TOL
    return abs(study - truth) <= COUNT_REL_TOL * truth


@dataclass
class TrackTruth:
    """The MOT matching seen per track and per truth vehicle."""

    owner: dict[int, int]  # track id -> the truth id it matched most
    primary: dict[int, int]  # truth id -> the track that matched it most
    tracks: dict[int, Counter] = field(default_factory=dict)  # truth id -> track id -> matched frames


def track_truth(matches: Iterable[Match]) -> TrackTruth:
    by_track: dict[int, Counter] = {}
    by_truth: dict[int, Counter] = {}
    for m in matches:
        by_track.setdefault(m.track_id, Counter())[m.gt_id] += 1
        by_truth.setdefault(m.gt_id, Counter())[m.track_id] += 1
    # ties go to the lower id, so the result does not depend on the order of the matches
    owner = {t: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for t, c in by_track.items()}
    primary = {g: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for g, c in by_truth.items()}
    return TrackTruth(owner, primary, by_truth)


def subset_recall(keys: set[tuple[int, int]], matches: Iterable[Match]) -> tuple[int, int]:
    """Of the truth boxes ``keys`` (frame, gt id): how many a track matched, and how many there are."""
    hit = {(m.frame, m.gt_id) for m in matches} & keys
    return len(hit), len(keys)


def match_conflicts(
    truth: list[Conflict], study: list[Conflict], owner: dict[int, int], tol_s: float = CONFLICT_TOL_S
) -> tuple[int, int, int]:
    """Truth conflicts found (same pair of truth vehicles, through the tracks' owners, within ``tol_s``), study
    conflicts that match a truth conflict, and scripted truth conflicts found."""
    s_pairs = [({owner.get(c.a, -1 - c.a), owner.get(c.b, -1 - c.b)}, c.t) for c in study]
    found = 0
    scripted = 0
    used: set[int] = set()
    for tc in truth:
        hit = [k for k, (p, t) in enumerate(s_pairs) if p == {tc.a, tc.b} and abs(t - tc.t) <= tol_s]
        if hit:
            found += 1
            scripted += tc.scripted
            used.update(hit)
    return found, len(used), scripted


class _InferredEnds(Protocol):
    track_id: int
    origin: str | None
    destination: str | None
    origin_inferred: bool
    destination_inferred: bool


def inferred_ends(
    study: Iterable[_InferredEnds], arm_of: dict[str, str], truth_of: Callable[[int], tuple[str, str] | None]
) -> tuple[int, int]:
    """The study's inferred origins and destinations (``origin_inferred`` / ``destination_inferred``) against the
    truth: how many name the vehicle's real arm and how many do not. ``truth_of``: a track's truth (origin,
    destination) arms, None where it matched no truth vehicle (not scored)."""
    right = wrong = 0
    for s in study:
        truth = truth_of(s.track_id)
        if truth is None:
            continue
        for inferred, got, real in (
            (s.origin_inferred, s.origin, truth[0]),
            (s.destination_inferred, s.destination, truth[1]),
        ):
            if inferred:
                if arm_of.get(got or "") == real:
                    right += 1
                else:
                    wrong += 1
    return right, wrong


def score_study(
    arms: list[Arm],
    truth: list[TruthVehicle],
    approaches: list[Arm],
    study: list[StudyVehicle],
    matches: list[Match],
    truth_conflicts: list[Conflict] | None = None,
    study_conflicts: list[Conflict] | None = None,
) -> dict:
    """The study's figures against the truth (see the module doc); ``approaches`` in the truth's ground frame."""
    ap = match_approaches(approaches, arms)
    tt = track_truth(matches)
    arm_of = ap.approach_arm
    crossing = [v for v in truth if v.crossing]
    t_cells = Counter((v.origin, v.destination, v.movement) for v in crossing)
    s_cells: Counter = Counter()
    incomplete = 0
    for s in study:
        if s.edge_of_flight or s.movement == "stationary":
            continue
        o, d = arm_of.get(s.origin or ""), arm_of.get(s.destination or "")
        if o is None or d is None:
            incomplete += 1
            continue
        s_cells[(o, d, s.movement)] += 1
    cells = sorted(set(t_cells) | set(s_cells))
    cell_rows = [
        (c, t_cells.get(c, 0), s_cells.get(c, 0), count_ok(t_cells.get(c, 0), s_cells.get(c, 0))) for c in cells
    ]
    t_od = Counter((o, d) for o, d, _ in t_cells.elements())
    s_od = Counter((o, d) for o, d, _ in s_cells.elements())
    od_abs = sum(abs(t_od.get(k, 0) - s_od.get(k, 0)) for k in set(t_od) | set(s_od))
    by_track = {s.track_id: s for s in study}

    def study_of(v: TruthVehicle) -> StudyVehicle | None:
        tid = tt.primary.get(v.gt_id)
        return by_track.get(tid) if tid is not None else None

    od_ok = 0
    od_misses = []  # why a crossing's O-D is not right: what its primary track became in the study
    for v in crossing:
        sv = study_of(v)
        if (
            sv is not None
            and arm_of.get(sv.origin or "") == v.origin
            and arm_of.get(sv.destination or "") == v.destination
        ):
            od_ok += 1
            continue
        got = "no track" if sv is None else f"{arm_of.get(sv.origin or '', '?')} -> "
        if sv is not None:
            got += f"{arm_of.get(sv.destination or '', '?')} {sv.movement}"
        od_misses.append(
            (
                v.gt_id,
                f"{v.origin} -> {v.destination} {v.movement}",
                got,
                len(tt.tracks.get(v.gt_id, {})),
                v.vehicle_class,
            )
        )
    lanes = []
    for v in truth:
        sv = study_of(v)
        if sv is not None and sv.lane is not None and arm_of.get(sv.origin or "") == v.origin:
            lanes.append(sv.lane == v.lane)
    by_gt = {v.gt_id: v for v in truth}

    def truth_of(tid: int) -> tuple[str, str] | None:
        v = by_gt.get(tt.owner.get(tid, -1))
        return None if v is None else (v.origin, v.destination)

    inferred_right, inferred_wrong = inferred_ends(study, arm_of, truth_of)
    t_conf, s_conf = truth_conflicts or [], study_conflicts or []
    found, precise, scripted = match_conflicts(t_conf, s_conf, tt.owner)
    return {
        "approaches": ap,
        "cells": cell_rows,
        "cells_ok": sum(r[3] for r in cell_rows),
        "crossings": len(crossing),
        "incomplete": incomplete,
        # the study's inferred origins / destinations (vehicles in view at the flight's start or end, or entering /
        # leaving at an edge mid-turn) that name the right arm, and those that do not
        "inferred_right": inferred_right,
        "inferred_wrong": inferred_wrong,
        "od_abs_error": od_abs,
        "od_error_pct": 100.0 * od_abs / len(crossing) if crossing else math.nan,
        "od_correct_pct": 100.0 * od_ok / len(crossing) if crossing else math.nan,
        "od_misses": od_misses,  # (gt id, truth, study of its primary track, tracks of the vehicle, class)
        "lane_correct_pct": 100.0 * sum(lanes) / len(lanes) if lanes else math.nan,
        "lane_n": len(lanes),
        "conflicts_truth": len(t_conf),
        "conflicts_study": len(s_conf),
        "conflicts_found": found,
        "conflicts_precise": precise,
        "scripted_truth": sum(c.scripted for c in t_conf),
        "scripted_found": scripted,
        "tracks_per_vehicle": (sum(len(c) for g, c in tt.tracks.items()) / len(tt.tracks) if tt.tracks else math.nan),
    }


def stopped_keys(gt: GroundTruth) -> set[tuple[int, int]]:
    """Truth boxes (frame, id) outside the ignore regions whose vehicle moves under 1 m/s in that frame (stopped or
    queued)."""
    if gt.speeds is None:
        return set()
    boxes, _ = drop_ignored(gt.boxes, gt.ignore)
    speeds = gt.speeds
    return {
        (f, i) for f, i in zip(boxes.frame.tolist(), boxes.ids.tolist()) if speeds.get((f, i), math.inf) < STOPPED_KMH
    }


def class_recall(
    gt: GroundTruth, classes: dict[int, str], boxed: set[tuple[int, int]], matches: Iterable[Match], every: int
) -> dict[str, tuple[int, int, int]]:
    """Per vehicle class, over the truth boxes (outside the ignore regions) of the frames the detector alone was run
    on (every ``every``-th, from the first): how many there are, how many the detector alone boxed (``boxed``, frame
    and id), how many a track matched. What the detector cannot see, the tracks rarely find: this tells a miss of
    the detector from one of the tracking."""
    hit = {(m.frame, m.gt_id) for m in matches}
    out: dict[str, tuple[int, int, int]] = {}
    for f, i in sampled_keys(gt, every):
        c = classes.get(i, "car")
        n, d, t = out.get(c, (0, 0, 0))
        out[c] = (n + 1, d + ((f, i) in boxed), t + ((f, i) in hit))
    return out


def detector_share(
    gt: GroundTruth, ids: Iterable[int], boxed: set[tuple[int, int]], every: int
) -> dict[int, tuple[int, int]]:
    """Per truth vehicle of ``ids``: on how many of its sampled frames (as :func:`class_recall`) the detector alone
    boxed it, and how many there are."""
    out = {i: (0, 0) for i in ids}
    for f, i in sampled_keys(gt, every):
        if i in out:
            d, n = out[i]
            out[i] = (d + ((f, i) in boxed), n + 1)
    return out


def sampled_keys(gt: GroundTruth, every: int) -> list[tuple[int, int]]:
    """Truth boxes (frame, id) outside the ignore regions on every ``every``-th frame from the first: the frames the
    detector alone is run on."""
    boxes, _ = drop_ignored(gt.boxes, gt.ignore)
    return [(f, i) for f, i in zip(boxes.frame.tolist(), boxes.ids.tolist()) if (f - 1) % every == 0]


def tracking_scores(gt: GroundTruth, pred: Boxes, iou_threshold: float = 0.5) -> tuple[dict, list[Match]]:
    """The tracking figures behind the study's: recall, ID switches and fragmentations per truth vehicle
    (motmetrics), recall of stopped and queued vehicles (truth boxes whose vehicle moves under 1 m/s in that frame;
    parked vehicles are ignore regions, as in ``airpatrol eval``), ID switches and fragmentations per vehicle over
    those stopped boxes alone (the issue's targets for queued and stopped vehicles; a vehicle's frames while it
    drives are left out, so a turn it was lost in does not count), and the matches."""
    gt_boxes, _ = drop_ignored(gt.boxes, gt.ignore)
    pred_boxes, _ = drop_ignored(pred, gt.ignore)
    mot, matches = mot_metrics(gt_boxes, pred_boxes, iou_threshold)
    n_veh = max(int(mot["num_unique_objects"] or 0), 1)
    stopped = stopped_keys(gt)
    hit, n = subset_recall(stopped, matches)
    keep = np.array([(f, i) in stopped for f, i in zip(gt_boxes.frame.tolist(), gt_boxes.ids.tolist())], bool)
    stop_mot, _ = mot_metrics(gt_boxes.subset(keep), pred_boxes, iou_threshold) if keep.any() else ({}, [])
    n_stop = int(stop_mot.get("num_unique_objects") or 0)
    return {
        "recall": mot["recall"],
        "mota": mot["mota"],
        "idf1": mot["idf1"],
        "vehicles": int(mot["num_unique_objects"] or 0),
        "switches_per_vehicle": (mot["num_switches"] or 0) / n_veh,
        "fragments_per_vehicle": (mot["num_fragmentations"] or 0) / n_veh,
        "stopped_boxes": n,
        "stopped_recall": hit / n if n else math.nan,
        "stopped_vehicles": n_stop,
        "stopped_switches_per_vehicle": (stop_mot.get("num_switches") or 0) / n_stop if n_stop else math.nan,
        "stopped_fragments_per_vehicle": (stop_mot.get("num_fragmentations") or 0) / n_stop if n_stop else math.nan,
    }, matches
