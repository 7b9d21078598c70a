"""tracking.evaluation.link_audit: a run's links judged against truth, piece by piece."""

from __future__ import annotations

from tracking.evaluation.link_audit import audit_links
from tracking.evaluation.mot import Match


def _matches(track: int, gt: int, frames: range) -> list[Match]:
    return [Match(f, gt, track, 0.9) for f in frames]


def test_links_of_one_vehicle_are_right_of_two_wrong_of_none_unknown():
    pieces = [
        [1, 1, 0, 9],  # vehicle 1: truth 7 throughout, three pieces
        [4, 1, 15, 29],
        [9, 1, 40, 49],
        [2, 2, 0, 19],  # vehicle 2: truth 8, then truth 5 (the next car on its path)
        [6, 2, 30, 39],
        [3, 3, 0, 9],  # vehicle 3: a piece no truth box matches (a false track), then truth 6
        [8, 3, 20, 29],
        [5, 5, 0, 30],  # one piece: no link
    ]
    matches = (
        _matches(1, 7, range(0, 10))
        + _matches(1, 7, range(15, 30))
        + _matches(1, 7, range(40, 50))
        + _matches(2, 8, range(0, 20))
        + _matches(2, 5, range(30, 40))
        + _matches(3, 6, range(20, 30))
        + _matches(5, 9, range(0, 31))
    )
    audit = audit_links(pieces, matches)
    assert (audit.links, audit.right, audit.wrong, audit.unknown) == (4, 2, 1, 1)


def test_a_piece_with_too_few_matched_boxes_follows_nobody():
    matches = _matches(1, 7, range(0, 10)) + _matches(1, 8, range(20, 22))
    audit = audit_links([[1, 1, 0, 9], [2, 1, 20, 29]], matches)
    assert (audit.right, audit.wrong, audit.unknown) == (0, 0, 1)
