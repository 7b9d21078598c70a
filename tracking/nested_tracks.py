"""Tracks whose boxes lie inside another track's box: part of that vehicle, or the parts of a box of several.

Seen from above, vehicles do not overlap: a box that stays inside another's box, moving with it, is either a part of
that vehicle or the other box is a group of vehicles. The detector boxes both: a truck's cab looks like a car from
above (on the rendered 4K ramp minute, seven trucks and buses had a second track on their cab or trailer, and the
study counted each twice), and two or three cars waiting side by side or nose to tail are now and then boxed as one
(on the three rendered five-minute junction flights 12, 10 and 6 such group tracks, over 9 to 300 frames, none of
them a vehicle). A recorded run sees every pair over the whole flight, so before its pieces are linked:

- a track that holds two others at once side by side (each nested for most of the frames they share, neither inside
  the other) is a group box: its boxes on the frames it holds any of them are dropped (all of them where that is most
  of its frames), the vehicles' own tracks stay. Two inner tracks one inside the other are parts of one vehicle (a
  car's roof and windscreen boxed besides it), not a group;
- a track that holds exactly one other, for most of the shorter one's life, and keeps its size outside those
  frames, is one vehicle with it: the two become one track (the earlier one's id) with the outer box on the frames
  both report (a part's box matches no vehicle).

A pair counts as nested where the inner box lies at least ``INSIDE_SHARE`` inside the outer one, the outer one at
least ``AREA_RATIO`` times its area, on ``NESTED_SHARE`` of the frames both report, over ``linking.nested_min_s``.

Two tracks of about one size can follow one vehicle at once too (:func:`merge_twins`): the tracker carried a car by
its appearance or by a loose box while the detector's next box, not matched to it, started a second track on the
car, and both then drove on together (on the rendered roundabout one pair for 41 s, their boxes at IoU 0.4-0.6 on
every frame; the study counted a second vehicle where one drove, and the car's match flipped between the two). Two
vehicles' boxes seen from above overlap little (a car in the next lane, the next car of a queue: IoU under 0.2). A
pair whose boxes overlap at IoU >= ``TWIN_IOU`` on ``NESTED_SHARE`` of the frames both report, over
``linking.nested_min_s``, for at least half the shorter one's life, is one vehicle: one track, the earlier one's id,
and on the frames both report the box of the one that was there first (on the renders' pairs it matched the vehicle
on 9 of 12). A track shorter than that whose whole life lay beside another at that overlap (``linking.short_twins``)
is a twin too: the detector boxed the vehicle twice for a few frames, and the second box took the vehicle's match
from its track and gave it back (two ID switches). On the three rendered junction flights 17 such tracks: 10 on the
vehicle the longer track followed, 6 on no vehicle, 1 the other way round (a passing car's 9 boxes beside a track
on a parked car, which kept its own); none on a second vehicle.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from tracking.types import FrameResult
from vision.detection import overlap_fraction

INSIDE_SHARE = 0.85  # of the inner box's area inside the outer box
AREA_RATIO = 1.3  # the outer box at least this many times the inner's area (a looser box of one car is about 1.1-1.25x)
NESTED_SHARE = 0.8  # of the frames both tracks report, the inner one lies inside on at least this share
ONE_VEHICLE_SHARE = 0.5  # one inner: the frames both report cover at least this share of the shorter track
APART_SHARE = 0.3  # two inner boxes overlapping less than this share of the smaller one are two vehicles
GROUP_MIN_FRAMES = 3  # a group box holds two vehicles side by side on at least this many frames
GROUP_WHOLE_SHARE = 0.5  # a group box on at least this share of its track's frames: the whole track is dropped
STEADY_SIZE_RATIO = 1.5  # one inner: the outer box's median area outside those frames within this factor of inside
TWIN_IOU = 0.3  # two tracks' boxes overlapping at least this much (IoU) may be one vehicle's


@dataclass
class NestedReport:
    """What :func:`resolve_nested` changed, for ``summary.json`` → ``linking``."""

    merged: list[list[int]] = field(default_factory=list)  # [id kept, id merged into it]
    group_tracks: list[int] = field(default_factory=list)  # tracks found to box several vehicles at once
    dropped_boxes: int = 0  # group boxes dropped, plus the inner boxes of a vehicle boxed twice
    twins: list[list[int]] = field(default_factory=list)  # [id kept, id merged into it] per twin pair (merge_twins)
    twin_dropped_boxes: int = 0  # the later twin's boxes on the frames both report


def _boxes(results: list[FrameResult]) -> dict[int, dict[int, np.ndarray]]:
    out: dict[int, dict[int, np.ndarray]] = defaultdict(dict)
    for k, r in enumerate(results):
        for tr in r.tracks:
            out[tr.track_id][k] = np.asarray(tr.xyxy, np.float64)
    return out


def _frames_with_pairs(results: list[FrameResult]) -> Iterator[tuple[int, list[int], np.ndarray, np.ndarray]]:
    """Each result position with at least two tracks: the position, their ids, boxes (xyxy) and areas."""
    for k, r in enumerate(results):
        if len(r.tracks) < 2:
            continue
        b = np.array([np.asarray(tr.xyxy, np.float64) for tr in r.tracks]).reshape(-1, 4)
        area = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
        yield k, [tr.track_id for tr in r.tracks], b, area


def _contained_pairs(results: list[FrameResult]) -> dict[tuple[int, int], list[int]]:
    """(inner id, outer id) -> the result positions where the inner box lies inside the outer one."""
    pairs: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k, ids, b, area in _frames_with_pairs(results):
        inside = (overlap_fraction(b, b) >= INSIDE_SHARE) & (area[None, :] >= AREA_RATIO * area[:, None])
        np.fill_diagonal(inside, False)
        for i, j in zip(*np.nonzero(inside & (area[:, None] > 0))):
            pairs[(ids[i], ids[j])].append(k)
    return pairs


def _find_nested(
    results: list[FrameResult], min_s: float
) -> tuple[dict[int, list[int]], dict[tuple[int, int], list[int]], dict]:
    """Nested pairs: outer id -> its inner ids, (inner, outer) -> the positions it lies inside, and each track's
    boxes by position."""
    boxes = _boxes(results)
    t = np.array([r.frame.t for r in results], np.float64)
    inners: dict[int, list[int]] = defaultdict(list)
    where: dict[tuple[int, int], list[int]] = {}
    for (a, b), contained in _contained_pairs(results).items():
        shared = set(boxes[a]) & set(boxes[b])
        if len(contained) < NESTED_SHARE * len(shared) or t[contained[-1]] - t[contained[0]] < min_s:
            continue
        inners[b].append(a)
        where[(a, b)] = contained
    return inners, where, boxes


def resolve_nested(results: list[FrameResult], min_s: float) -> NestedReport:
    """Drop group boxes and merge a vehicle's part into it, in ``results`` (in place): see the module's docstring."""
    report = NestedReport()
    inners, where, boxes = _find_nested(results, min_s)
    outer_of: dict[int, list[int]] = defaultdict(list)
    for b, ins in inners.items():
        for a in ins:
            outer_of[a].append(b)
    drop: set[tuple[int, int]] = set()  # (position, track id)
    rename: dict[int, int] = {}
    for b, ins in sorted(inners.items()):
        held = [set(where[(a, b)]) for a in ins]
        if _holds_two_vehicles(ins, held, boxes):
            report.group_tracks.append(b)
            grouped = set().union(*held)
            # mostly a group box: its few other boxes are no vehicle of their own either (left, they were linked on)
            drop.update((k, b) for k in (boxes[b] if len(grouped) >= GROUP_WHOLE_SHARE * len(boxes[b]) else grouped))
            continue
        if len(ins) != 1 or outer_of.get(b) or inners.get(ins[0]) or len(outer_of[ins[0]]) != 1:
            continue  # a chain or a part of several: left alone
        a = ins[0]
        shared = sorted(set(boxes[a]) & set(boxes[b]))
        if len(shared) < ONE_VEHICLE_SHARE * min(len(boxes[a]), len(boxes[b])) or not _steady(boxes[b], set(shared)):
            continue
        drop.update((k, a) for k in shared)  # the whole vehicle's box stays (a part's box matches no vehicle)
        first, second = sorted((a, b), key=lambda i: min(boxes[i]))
        rename[second] = first
        report.merged.append([first, second])
    if not drop and not rename:
        return report
    for k, r in enumerate(results):
        kept = []
        for tr in r.tracks:
            if (k, tr.track_id) in drop:
                report.dropped_boxes += 1
                continue
            kept.append(dataclasses.replace(tr, track_id=rename[tr.track_id]) if tr.track_id in rename else tr)
        r.tracks = kept
        if r.lost_ids & rename.keys():
            r.lost_ids = frozenset(rename.get(i, i) for i in r.lost_ids)
    return report


def _holds_two_vehicles(ins: list[int], held: list[set[int]], boxes: dict) -> bool:
    """Two of the inner tracks lie inside the outer box at once, side by side (not one inside the other: a car's
    windscreen and roof boxed besides the car are parts of one vehicle), on at least ``GROUP_MIN_FRAMES`` frames."""
    for x in range(len(ins)):
        for y in range(x + 1, len(ins)):
            both = held[x] & held[y]
            apart = sum(_overlap_of_smaller(boxes[ins[x]][k], boxes[ins[y]][k]) <= APART_SHARE for k in both)
            if apart >= GROUP_MIN_FRAMES:
                return True
    return False


def _overlap_of_smaller(a: np.ndarray, b: np.ndarray) -> float:
    both = np.stack([a, b])
    share = overlap_fraction(both, both)
    return float(max(share[0, 1], share[1, 0]))


def _steady(outer: dict[int, np.ndarray], shared: set[int]) -> bool:
    """The outer box keeps its size outside the shared frames (a group box that became one of its vehicles does not)."""
    area = {k: float(np.prod(np.clip(v[2:] - v[:2], 0, None))) for k, v in outer.items()}
    outside = [a for k, a in area.items() if k not in shared]
    if len(outside) < 3:
        return True
    ratio = np.median([area[k] for k in shared]) / max(float(np.median(outside)), 1e-9)
    return 1 / STEADY_SIZE_RATIO <= ratio <= STEADY_SIZE_RATIO


def _twin_pairs(results: list[FrameResult]) -> dict[tuple[int, int], list[int]]:
    """(id, id) -> the result positions where the two tracks' boxes overlap at IoU >= ``TWIN_IOU``."""
    pairs: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k, ids, b, area in _frames_with_pairs(results):
        inter = overlap_fraction(b, b) * area[:, None]  # of each row's box, the part inside each column's
        iou = inter / np.maximum(area[:, None] + area[None, :] - inter, 1e-9)
        for i, j in zip(*np.nonzero(np.triu(iou >= TWIN_IOU, 1))):
            pairs[(min(ids[i], ids[j]), max(ids[i], ids[j]))].append(k)
    return pairs


def merge_twins(results: list[FrameResult], min_s: float, report: NestedReport, short_twins: bool = True) -> None:
    """Make two tracks that followed one vehicle at once one track, in ``results`` (in place; see the module's
    docstring), noting them in ``report``."""
    boxes = _boxes(results)
    t = np.array([r.frame.t for r in results], np.float64)
    parent: dict[int, int] = {}

    def root(i: int) -> int:
        while parent.get(i, i) != i:
            i = parent[i]
        return i

    for (a, b), together in _twin_pairs(results).items():
        shared = set(boxes[a]) & set(boxes[b])
        shorter = min(len(boxes[a]), len(boxes[b]))
        if len(together) < NESTED_SHARE * len(shared) or len(shared) < ONE_VEHICLE_SHARE * shorter:
            continue
        # a track that lived only beside the other, however briefly, was never a vehicle of its own
        whole_life = short_twins and len(together) >= NESTED_SHARE * shorter
        if t[together[-1]] - t[together[0]] < min_s and not whole_life:
            continue
        ra, rb = root(a), root(b)
        if ra != rb:
            first, second = sorted((ra, rb), key=lambda i: min(boxes[i]))
            parent[second] = first
            report.twins.append([first, second])
    if not parent:
        return
    start = {i: min(pos) for i, pos in boxes.items()}
    for r in results:
        best: dict[int, int] = {}  # the vehicle's id -> the track there first, among those reporting this frame
        for tr in r.tracks:
            v = root(tr.track_id)
            if v not in best or start[tr.track_id] < start[best[v]]:
                best[v] = tr.track_id
        kept = []
        for tr in r.tracks:
            v = root(tr.track_id)
            if best[v] != tr.track_id:
                report.twin_dropped_boxes += 1
                continue
            kept.append(dataclasses.replace(tr, track_id=v) if v != tr.track_id else tr)
        r.tracks = kept
        if r.lost_ids & parent.keys():
            r.lost_ids = frozenset(root(i) for i in r.lost_ids)
