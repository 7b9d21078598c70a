"""Right and wrong links of a recorded run, against truth: did the whole-flight linking join pieces of one vehicle?

``summary.json`` -> ``linking`` -> ``pieces`` lists each piece the tracker reported (its id, the id it was given, its
first and last frame). A piece's boxes are the linked track's boxes within its frames; the truth vehicle a piece
follows is the one most of those boxes match (``tracking.evaluation.mot.Match``, at least ``min_boxes``). Each pair
of consecutive pieces given one id is a link: right when both follow the same truth vehicle, wrong when they follow
two, unknown when either follows none (a piece on a parked car in an ignore region, a false track).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from tracking.evaluation.mot import Match


@dataclass
class LinkAudit:
    links: int = 0
    right: int = 0
    wrong: int = 0
    unknown: int = 0


def audit_links(pieces: Iterable[list[int]], matches: Iterable[Match], min_boxes: int = 3) -> LinkAudit:
    """``pieces``: [piece id, linked id, first frame, last frame]; ``matches``: the linked run's boxes matched to truth."""
    by_track: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for m in matches:
        by_track[m.track_id].append((m.frame, m.gt_id))
    vehicles: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # linked id -> (first, last, piece id)
    for piece, linked, first, last in pieces:
        vehicles[linked].append((first, last, piece))
    audit = LinkAudit()
    for linked, ps in vehicles.items():
        owners = []
        for first, last, _ in sorted(ps):
            votes = Counter(g for f, g in by_track.get(linked, ()) if first <= f <= last)
            best = votes.most_common(1)
            owners.append(best[0][0] if best and best[0][1] >= min_boxes else None)
        for a, b in zip(owners, owners[1:]):
            audit.links += 1
            if a is None or b is None:
                audit.unknown += 1
            elif a == b:
                audit.right += 1
            else:
                audit.wrong += 1
    return audit
