"""A recorded run's results linked over the whole flight: held without their images, pieces joined, gaps filled.

``process`` runs the pipeline over the video once, keeping each frame's result without its image (a road mask is
kept PNG-encoded, once per mask the road layer made), links the pieces of each vehicle's path
(:func:`tracking.linking.link_pieces`), fills the frames between linked pieces, gives each box its track's steady
size (``tracking.box_sizes``), and then feeds its sinks with the
images decoded again (``edge.runner``). Memory grows with the tracks reported, not with the frames' pixels: a few
hundred bytes per reported box.

Before the pieces are linked, tracks inside another track's box are resolved (``tracking.nested_tracks``); a piece
whose last boxes were not measured (predictions, the standing hold's matches) and fell behind its moving vehicle is
linked from its last measured box, and loses those boxes where it is linked (``linking.unmeasured_tail_s``).

A filled box is interpolated between the two ends in the first frame's pixels (the drone's own motion taken out),
like the short gaps ``tracking.track_starts`` fills, and carries no speed (speed flag ``interpolated``); a filled
box whose centre would lie outside the frame is left out.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import cv2
import numpy as np

from tracking.box_sizes import steady_box_sizes
from tracking.frame_rate import with_between
from tracking.linking import HEADING_MPS, STATE_S, LinkingConfig, Piece, link_pieces
from tracking.nested_tracks import NestedReport, merge_twins, resolve_nested
from tracking.still_boxes import still_boxes
from tracking.track_starts import _through, in_first_frame, interpolated
from tracking.types import FrameResult, TrackState
from vision.types import Frame

_NO_IMAGE = np.zeros((0, 0, 3), np.uint8)
STOOD_LENGTHS = 0.5  # two ends of a gap closer than this share of the vehicle's length: it stood in between
STALLED_SHARE = 0.5  # an unmeasured tail that covered less than this share of the way its speed would: fell behind


@dataclass
class LinkReport:
    """What linking changed, for ``summary.json`` → ``linking``."""

    tracks_before: int = 0
    tracks_after: int = 0
    links: int = 0
    filled_boxes: int = 0
    held_boxes: int = 0
    dropped_boxes: int = 0  # a tail that followed another vehicle before the vehicle was found again (tail_s)
    steadied_boxes: int = 0  # boxes given their track's median size (tracking/box_sizes.py)
    still_boxes: int = 0  # boxes of vehicles standing still given their window's median box (tracking/still_boxes.py)
    # tracks inside another's box (tracking/nested_tracks.py): [id kept, id merged into it] per vehicle boxed twice,
    # the tracks that boxed several vehicles at once, and the boxes dropped for either
    nested_merged: list[list[int]] = field(default_factory=list)
    group_tracks: list[int] = field(default_factory=list)
    nested_dropped_boxes: int = 0
    # two tracks that followed one vehicle at once (linking.twin_tracks): [id kept, id merged into it], and the later
    # one's boxes dropped where both reported
    twins: list[list[int]] = field(default_factory=list)
    twin_dropped_boxes: int = 0
    # pieces linked from their last measured box, their unmeasured last boxes dropped (linking.unmeasured_tail_s)
    unmeasured_tails_cut: int = 0
    # every piece the tracker reported: [its track id, the id it was given (its vehicle's first piece), first frame,
    # last frame]; what a link audit against truth needs (tracking/evaluation/link_audit.py)
    pieces: list[list[int]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class HeldResults:
    """Frame results without their images, in frame order; road masks compressed (``mask`` gives them back)."""

    results: list[FrameResult] = field(default_factory=list)
    _masks: dict[int, bytes] = field(default_factory=dict)  # result position -> encoded mask
    _last_mask: tuple[int, int] | None = None  # (id of the last mask array seen, its position)

    def add(self, result: FrameResult) -> None:
        mask = result.road_mask
        if mask is not None:
            if self._last_mask is None or self._last_mask[0] != id(mask):
                self._masks[len(self.results)] = _encode_mask(mask)
                self._last_mask = (id(mask), len(self.results))
            else:
                self._masks[len(self.results)] = self._masks[self._last_mask[1]]
        frame = Frame(result.frame.index, result.frame.t, _NO_IMAGE, result.frame.pose)
        self.results.append(dataclasses.replace(result, frame=frame, road_mask=None, withheld=[]))

    def mask(self, position: int) -> np.ndarray | None:
        data = self._masks.get(position)
        return _decode_mask(data) if data else None

    def with_between(self, between: list[Frame]) -> HeldResults:
        """These results with the frames the pipeline skipped (``tracking.frame_rate``) inserted, their tracks
        interpolated; each shows the road mask of the analysed frame before it."""
        if not between:
            return self
        results, owner = with_between(self.results, between)
        out = HeldResults(results)
        for position, k in enumerate(owner):
            if k in self._masks:
                out._masks[position] = self._masks[k]
        return out


# A road mask changes every frame (warped with the drone's motion) and is held for every frame of the flight. PNG
# cost 5-8 ms a 1080p frame in the frame loop; a 0/255 mask packed to bits and deflated at level 1 costs ~0.6 ms,
# and is smaller. Other masks (not seen from the road layer) keep PNG.
_BITS, _PNG = b"B", b"P"


def _encode_mask(mask: np.ndarray) -> bytes:
    if mask.dtype == np.uint8 and mask.ndim == 2 and bool(((mask == 0) | (mask == 255)).all()):
        h, w = mask.shape
        return _BITS + h.to_bytes(4, "little") + w.to_bytes(4, "little") + zlib.compress(np.packbits(mask).tobytes(), 1)
    ok, png = cv2.imencode(".png", mask)
    return _PNG + png.tobytes() if ok else b""


def _decode_mask(data: bytes) -> np.ndarray | None:
    if data[:1] == _BITS:
        h, w = int.from_bytes(data[1:5], "little"), int.from_bytes(data[5:9], "little")
        bits = np.unpackbits(np.frombuffer(zlib.decompress(data[9:]), np.uint8), count=h * w)
        return bits.reshape(h, w) * np.uint8(255)
    return cv2.imdecode(np.frombuffer(data[1:], np.uint8), cv2.IMREAD_UNCHANGED)


def hold(results: Iterable[FrameResult], progress=None) -> HeldResults:
    held = HeldResults()
    for r in results:
        held.add(r)
        if progress is not None:
            progress.update(1)
    return held


def pieces(
    results: list[FrameResult], width: int, height: int, cfg: LinkingConfig
) -> tuple[list[Piece], dict[int, float]]:
    """Each track's reported boxes as a :class:`Piece` (interpolated boxes included: they are its path), and the
    tracks whose piece leaves out its last boxes (``linking.unmeasured_tail_s``): track id -> the time of its last
    measured box."""
    by_id: dict[int, list[tuple[int, float, np.ndarray, float, tuple[float, float], bool, np.ndarray | None]]] = {}
    mx, my = cfg.border_frac * width, cfg.border_frac * height
    for r in results:
        for tr in r.tracks:
            x1, y1, x2, y2 = (float(v) for v in tr.xyxy)
            edge = (float(x2 >= width - mx) - float(x1 <= mx), float(y2 >= height - my) - float(y1 <= my))
            by_id.setdefault(tr.track_id, []).append(
                (r.frame.index, r.frame.t, in_first_frame(r, tr), max(x2 - x1, y2 - y1), edge, tr.measured, r.to_first)
            )
    looks: dict[int, list[np.ndarray]] = {}  # track id -> its colour samples (tracking/appearance.py)
    if cfg.appearance:
        for r in results:
            for tid, hist in r.appearance.items():
                looks.setdefault(tid, []).append(hist)
    out, trimmed = [], {}
    for tid, pts in by_id.items():
        keep = _without_unmeasured_tail(pts, cfg)
        if keep < len(pts):
            trimmed[tid] = pts[keep - 1][1]
            pts = pts[:keep]
        to_first = pts[-1][6]
        last = next((k for k in range(len(pts) - 1, -1, -1) if pts[k][5]), None)
        out.append(
            Piece(
                tid,
                np.array([p[0] for p in pts]),
                np.array([p[1] for p in pts], np.float64),
                np.array([p[2] for p in pts], np.float64).reshape(-1, 2),
                float(np.median([p[3] for p in pts])),
                edge_start=pts[0][4],
                edge_end=pts[-1][4],
                end_from_first=None if to_first is None else np.linalg.inv(to_first),
                lengths_px=np.array([p[3] for p in pts], np.float64),
                held_tail_s=0.0 if last is None else float(pts[-1][1] - pts[last][1]),
                appearance=np.mean(looks[tid], axis=0) if tid in looks else None,
                appearance_n=len(looks.get(tid, ())),
            )
        )
    return out, trimmed


def _without_unmeasured_tail(pts: list, cfg: LinkingConfig) -> int:
    """How many of a track's boxes its piece keeps: all but a last run of unmeasured ones (predictions, the standing
    hold's matches) up to ``unmeasured_tail_s`` long that fell behind the vehicle, moving at its last measured box
    (the run covered less than half the way its speed would), or that moved off the spot where it was last measured
    standing (``linking.carried_off_lengths``: it set off while held). Where the hold loses a moving vehicle, its
    last matches are often where the vehicle was, not where it went on to (the patch's background holds it as the
    vehicle turns): a piece judged from there looks like a vehicle that stopped, and the next piece metres on is out
    of its reach."""
    n = len(pts)
    last = next((k for k in range(n - 1, -1, -1) if pts[k][5]), -1)
    if last < 0 or last == n - 1 or pts[-1][1] - pts[last][1] > cfg.unmeasured_tail_s:
        return n
    window = [p for p in pts[: last + 1] if p[1] >= pts[last][1] - STATE_S and p[5]]
    if len(window) < 2 or window[-1][1] <= window[0][1]:
        return n
    length_px = max(float(np.median([p[3] for p in pts])), 1.0)
    metres_per_px = cfg.vehicle_length_m / length_px
    speed_px = float(np.hypot(*(window[-1][2] - window[0][2]))) / (window[-1][1] - window[0][1])
    tail_px = float(np.hypot(*(pts[-1][2] - pts[last][2])))  # how far the unmeasured boxes went
    if speed_px * metres_per_px < HEADING_MPS:
        # last measured standing, and the hold's matches moved off that spot: the vehicle set off while held, and
        # the matches trail it (a standing car's patch still resembles it half a length on; roundabout render: the
        # matches stalled some 20 px behind the car, the next track started on it, a standing end unable to reach it)
        carried = cfg.carried_off_lengths is not None and tail_px >= cfg.carried_off_lengths * length_px
        return last + 1 if carried else n
    # only a tail that falls behind: one that kept pace (the hold following the vehicle to the frame's edge) is its way
    behind = tail_px < STALLED_SHARE * speed_px * (pts[-1][1] - pts[last][1])
    return last + 1 if behind else n


def link_results(results: list[FrameResult], width: int, height: int, cfg: LinkingConfig | None = None) -> LinkReport:
    """Relabel ``results`` in place so each vehicle's pieces carry its first piece's id, fill the frames between
    linked pieces, and give each box its track's steady size (:func:`tracking.box_sizes.steady_box_sizes`)."""
    cfg = cfg or LinkingConfig()
    nested = resolve_nested(results, cfg.nested_min_s) if cfg.nested_tracks else NestedReport()
    if cfg.twin_tracks:
        merge_twins(results, cfg.nested_min_s, nested, cfg.short_twins)
    ps, trimmed = pieces(results, width, height, cfg)
    tails: dict[int, tuple[float, float]] = {}
    mapping = link_pieces(ps, cfg, tails)
    cut_tails = _cut_linked_tails(ps, mapping, trimmed, tails)
    report = LinkReport(tracks_before=len(ps), tracks_after=len(set(mapping.values())))
    report.nested_merged, report.group_tracks = nested.merged, nested.group_tracks
    report.nested_dropped_boxes = nested.dropped_boxes
    report.twins, report.twin_dropped_boxes = nested.twins, nested.twin_dropped_boxes
    report.unmeasured_tails_cut = cut_tails
    report.pieces = [
        [p.track_id, mapping.get(p.track_id, p.track_id), int(p.frames[0]), int(p.frames[-1])]
        for p in ps
        if len(p.frames)
    ]
    report.links = report.tracks_before - report.tracks_after
    report.held_boxes = sum(len(r.tracks) for r in results)
    if report.links or cfg.fill_standing_lost or cfg.fill_moving_lost:
        _relabel_and_fill(results, mapping, ps, width, height, cfg, report, tails)
    report.steadied_boxes = steady_box_sizes(results, cfg.steady_box_s, width, height, cfg.border_frac)
    report.still_boxes = still_boxes(results, cfg.still_box_s, cfg.still_radius)
    return report


def _cut_linked_tails(
    ps: list[Piece], mapping: dict[int, int], trimmed: dict[int, float], tails: dict[int, tuple[float, float]]
) -> int:
    """A piece linked without its unmeasured last boxes loses them up to its successor's start (the frames between
    are filled as any gap between linked pieces); unlinked, it keeps them."""
    starts: dict[int, list[float]] = {}
    for p in ps:
        starts.setdefault(mapping.get(p.track_id, p.track_id), []).append(float(p.t[0]))
    n = 0
    for tid, t_end in trimmed.items():
        later = [t for t in starts.get(mapping.get(tid, tid), []) if t > t_end]
        if later and tid not in tails:
            tails[tid] = (t_end, min(later))
            n += 1
    return n


def _relabel_and_fill(
    results: list[FrameResult],
    mapping: dict[int, int],
    ps: list[Piece],
    width: int,
    height: int,
    cfg: LinkingConfig,
    report: LinkReport,
    tails: dict[int, tuple[float, float]] | None = None,
) -> None:
    span = {p.track_id: float(p.t[-1] - p.t[0]) for p in ps}  # each piece's duration (s)
    # a tail that followed another vehicle (tracking/linking.py _tail_restart): the vehicle's boxes there are dropped
    cuts: dict[int, list[tuple[float, float]]] = {}
    for tid, span_s in (tails or {}).items():
        cuts.setdefault(mapping.get(tid, tid), []).append(span_s)
    last_seen: dict[int, tuple[int, TrackState, int]] = {}  # linked id -> (position, box, piece id) so far
    for k, r in enumerate(results):
        # one box per vehicle and frame: where two overlapping pieces both report it, the later piece's box stays
        unique: dict[int, tuple[TrackState, int]] = {}
        for tr in r.tracks:
            new = mapping.get(tr.track_id, tr.track_id)
            if any(a < r.frame.t < b for a, b in cuts.get(new, ())):
                report.dropped_boxes += 1
                continue
            unique[new] = (tr if new == tr.track_id else dataclasses.replace(tr, track_id=new), tr.track_id)
        r.tracks = [tr for tr, _ in unique.values()]
        for tr, piece in unique.values():
            prev = last_seen.get(tr.track_id)
            if prev is not None and prev[0] < k - 1:
                if prev[2] != piece:  # the gap between two linked pieces
                    if min(span[prev[2]], span[piece]) >= cfg.min_fill_piece_s:
                        report.filled_boxes += _fill(results, prev[0], prev[1], k, tr, width, height, cfg)
                elif (cfg.fill_standing_lost or cfg.fill_moving_lost) and all(
                    piece in results[j].lost_ids for j in range(prev[0] + 1, k)
                ):
                    # one piece the tracker lost and found again (no rule hid it): filled where it stood, and where
                    # it moved as between two linked pieces
                    which = {"standing_only": not cfg.fill_moving_lost, "stood_ok": cfg.fill_standing_lost}
                    report.filled_boxes += _fill(results, prev[0], prev[1], k, tr, width, height, cfg, **which)
            last_seen[tr.track_id] = (k, tr, piece)


def _fill(
    results: list[FrameResult],
    k0: int,
    before: TrackState,
    k1: int,
    after: TrackState,
    width: int,
    height: int,
    cfg: LinkingConfig,
    standing_only: bool = False,
    stood_ok: bool = True,
) -> int:
    """Boxes between positions ``k0`` and ``k1`` of one vehicle (its box on neither), as track_starts fills: where it
    stood (unless not ``stood_ok``), or across a short gap (``cfg.fill_moving_s``; not when ``standing_only``)."""
    a, b = results[k0], results[k1]
    length = max(float(np.max(before.xyxy[2:] - before.xyxy[:2])), 1.0)
    # judged in frame a's pixels (the box lengths'), not in the first frame's: the chained ego-motion of a long flight
    # drifts, and only its part over the gap belongs here
    after_in_a = in_first_frame(b, after)
    if a.to_first is not None:
        after_in_a = _through(np.linalg.inv(a.to_first), after_in_a)
    stood = float(np.hypot(*(after_in_a - np.array(before.center, np.float64)))) < STOOD_LENGTHS * length
    if (not stood and (standing_only or b.frame.t - a.frame.t > cfg.fill_moving_s)) or (stood and not stood_ok):
        return 0
    ends = None
    if a.to_first is not None and b.to_first is not None:
        ends = (in_first_frame(a, before), in_first_frame(b, after))
    ta, tb = a.frame.t, b.frame.t
    moving = not stood and (before.moving or after.moving)  # it stood there: a label, it is reported either way
    n = 0
    for r in results[k0 + 1 : k1]:
        w = (r.frame.t - ta) / (tb - ta) if tb > ta else 0.5
        centre = None
        if ends is not None and r.to_first is not None:
            centre = _through(np.linalg.inv(r.to_first), (1 - w) * ends[0] + w * ends[1])
        box = interpolated(before, after, w, centre)
        cx, cy = box.center
        if not (0 <= cx < width and 0 <= cy < height):
            continue
        box.moving = moving
        r.tracks.append(box)
        n += 1
    return n


def with_images(held: HeldResults, frames: Iterable[Frame]) -> Iterator[FrameResult]:
    """The held results again with their images (and road masks), from the video decoded a second time. A frame the
    second decode does not give (it should give every one) reuses the previous image."""
    it = iter(frames)
    image = None
    frame = next(it, None)
    for k, r in enumerate(held.results):
        while frame is not None and frame.index < r.frame.index:
            frame = next(it, None)
        if frame is not None and frame.index == r.frame.index:
            image = frame.image
        if image is None:
            continue
        # a new result for the sinks (the video sink encodes in a thread of its own): the held one stays lightweight
        yield dataclasses.replace(r, frame=Frame(r.frame.index, r.frame.t, image, r.frame.pose), road_mask=held.mask(k))
