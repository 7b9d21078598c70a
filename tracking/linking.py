"""Whole-flight track linking for recorded runs: the pieces of one vehicle's path joined into one track.

An online tracker (ByteTrack) gives up on a vehicle it has not matched for ``tracker.track_buffer`` frames: a car
waiting at a red light that the detector misses for a second or two, a vehicle hidden by a bus or a tree, a turn
the Kalman filter does not follow. When the vehicle is found again it starts a new track, so a junction study sees
two half vehicles (one without a destination, one without an origin). A recorded run knows the whole flight, so it
can do what offline trackers do (tracklet association): each piece's end is matched to another piece's start by
where the vehicle can be after the gap, in one assignment over the flight (scipy's ``linear_sum_assignment``), and
the frames between are filled.

Where a vehicle can be after a gap of ``g`` seconds: on its lane, ahead of where it was last seen, by anything from
nothing (it stood, e.g. at a red light) to a little more than its speed times ``g`` (it kept going, hidden). So a
start matches an end when it lies within ``lateral_m`` of the end's heading line (the lane), not behind it, and not
farther than the faster of the two pieces could go; among the starts that qualify, the assignment prefers the
shortest displacement (a queue: each car's restart is where it stopped, not where the car in front stopped). Two
standing pieces match only where they stand at the same place. A piece moving at both ends is not joined across a
gap it hardly moved over (``min_gap_speed_share``): that start is the next vehicle on the same path reaching the
place seconds later (on a rendered roundabout these were 8 of the 11 wrong links, none of the right ones).
Where either end is slow (a queue), the boxes' sizes at the link must agree (``linking.max_size_ratio``): the
detector now and then boxes two waiting cars as one, and that box is neither car. Over a gap longer than
``max_moving_gap_s``, two slow ends at one place are a vehicle that stood there (``linking.stood_m``; not where
another vehicle drove through that place in the gap, ``linking.driven_through``), and two
pieces of a truck or a bus (far longer than the vehicles around them, of one size) may be one that drove on unseen
(``linking.large_lengths``): the detector loses those for longer, and few vehicles look like them.
Pieces that end at the frame's edge moving left the view and pieces that start there moving entered it: neither is
linked there. Standing there, they are a queue reaching beyond the view's edge (its boxes cut by the edge), and are
linked like any standing piece. Over gaps longer than a turn's arc reaches, a start may also lie on a way the
flight's other vehicles drove on from the end (``linking.flow_paths``, tracking/flow_paths.py): half a roundabout on,
or turned off after waiting at a stop line. A slow end (a car setting off from a queue, lost as it left) may also
reach a start that only a departure explains: on the way it came, one turn, on along the start's heading, in the
time a car takes from standstill (``linking.departure_max_mps``); a standing end, after a wait longer than
``max_moving_gap_s``, to a start that drives off along a way through where it stood, unless another vehicle took
that place before it could have left, and a lane's cars leave in their order (``linking.waited_departures``). A
piece's last seconds may not be its vehicle: a waiting car's track now and then takes the car driving off ahead of
it (or a box of both) for it, follows that for a second and is lost, and the waiting car is found again where it
stood. So a start standing where the previous piece stood within its last ``linking.tail_s`` seconds, and left
from, is that vehicle, and the piece's boxes after it stood there are dropped (``_tail_restart``).

Positions are the box centres in the first frame's pixels (``FrameResult.to_first``: the drone's own motion taken
out), and each link is judged in the earlier piece's last frame (``Piece.end_from_first``: the chained ego-motion
drifts over a long flight, by hundreds of pixels over five minutes of hovering, and only its part over the gap
belongs to the link), measured in vehicle lengths (the pieces' median box length counts as ``vehicle_length_m``),
so the same thresholds hold for nadir and oblique views, low and high altitude, with or without a ground scale.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from pydantic import Field
from scipy.optimize import linear_sum_assignment

from tracking.appearance import distance as appearance_distance
from tracking.flow_paths import WINDOW_S, FlowSamples, along_path
from vision.config_base import StageConfig


class LinkingConfig(StageConfig):
    enabled: bool = Field(
        True,
        description="recorded runs: join the pieces of one vehicle's path over the whole flight (tracking/linking.py) "
        "and fill the frames between them; the live feed cannot wait and links nothing",
    )
    max_gap_s: float = Field(30.0, gt=0, description="longest gap between two pieces that is linked (a red light)")
    max_wait_s: float = Field(
        90.0,
        gt=0,
        description="longest gap linked where the vehicle stood through it: the earlier piece ends standing, the later "
        "starts within stood_m of that place, neither at the frame's edge - a red light's wait the detector lost "
        "throughout (the renders' reds last 39-66 s, a real junction's up to about 90); gaps up to max_gap_s are "
        "judged by the other rules",
    )
    max_moving_gap_s: float = Field(
        10.0,
        gt=0,
        description="longest gap linked unless the vehicle stood at both ends (a queue): moving at an end, a piece "
        "found again later is more often another vehicle (two 5-minute renders: 55 of 70 such links wrong, docs/study.md)",
    )
    lateral_m: float = Field(2.0, gt=0, description="how far a piece's start may lie beside the previous one's lane")
    back_m: float = Field(1.0, ge=0, description="how far behind the previous piece's end a start may lie")
    max_cost: float = Field(2.5, gt=0, description="largest accepted link cost (metres of unexplained displacement)")
    min_fill_piece_s: float = Field(
        0.5,
        ge=0,
        description="the frames between two linked pieces are filled only when both last this long: a piece of a "
        "few boxes has no measured heading or speed, and may be a flicker where a vehicle stood earlier rather than "
        "that vehicle (it is still linked: its id follows the better match, which costs nothing where it is wrong)",
    )
    overlap_s: float = Field(
        10.0,
        ge=0,
        description="pieces overlapping in time up to this long may still be one vehicle: where their boxes coincide "
        "on the frames both report (centres within half a vehicle length at the median, never a whole one apart), the "
        "tracker started a second track on a vehicle it still followed (a truck boxed whole and in part, a re-start "
        "beside a drifting prediction; on the rendered roundabout such pairs overlapped 0.2-7 s). Up to 0.5 s (the "
        "previous default) also a re-start at the end's place (the end and the start half a length apart)",
    )
    turn_gap_s: float = Field(2.0, ge=0, description="gaps up to this long may hide a turn (heading change <= 120 deg)")
    fill_moving_s: float = Field(
        2.0,
        ge=0,
        description="the frames between two linked pieces are filled where the vehicle stood (both ends at one "
        "place: a queue), and where it moved only across gaps up to this long: over a longer one a straight line "
        "between the ends is a guess (it braked, stopped, turned). On the three rendered junction flights the "
        "straight line lands on the vehicle (centre within a quarter of its length) on 98-100 % of the frames of "
        "1-2 s gaps, 59-80 % of 2-4 s ones; UAVDT M1303 MOTA +0.5 with 2 s instead of 1 s, the others unchanged "
        "(docs/study.md)",
    )
    fill_standing_lost: bool = Field(
        True,
        description="also fill the frames a standing vehicle's track was lost on and found again at the same place "
        "(no rule hid it): a car waiting at a red light that the detector misses now and then is reported on every "
        "frame (tracker.fill_lost_gaps fills moving tracks only, within its one-second hold-back)",
    )
    fill_moving_lost: bool = Field(
        True,
        description="also fill the frames a moving vehicle's track was lost on and found again, across gaps up to "
        "fill_moving_s, as between two linked pieces: the tracker's hold-back fills only a second, and a car the "
        "detector missed for 1-2 s in a roundabout's turn kept its id but was reported on none of those frames. "
        "False: only where it stood (the previous behaviour)",
    )
    min_gap_speed_share: float = Field(
        0.5,
        ge=0,
        description="a vehicle moving at both ends of a gap (slower end >= 1.5 m/s) covers at least this share of "
        "the slower end's speed across it: the next vehicle on the same path reaches the place where the piece ended "
        "seconds later at speed, and is not the vehicle (that one would have had to stop, unseen, and set off again "
        "at once). A vehicle slow at either end may have stood in between (a queue)",
    )
    gap_shortfall_cost: float = Field(
        0.2,
        ge=0,
        description="a vehicle moving at both ends of a gap (slower end >= 1.5 m/s) whose start lies short of what "
        "the slower end's speed covers across it: the cost of each metre short (as of each metre beyond what the faster "
        "covers). A queue's cars all lie on one line: at green, a car lost as it set off was joined to the car behind "
        "it, found 4 s later 11 m on, where it would have been 18 m on. 0: only min_gap_speed_share's limit",
    )
    flow_paths: bool = Field(
        True,
        description="a later piece may also start on the way the flight's other vehicles drove on from where a piece "
        "ended (tracking/flow_paths.py): a vehicle hidden for seconds on a roundabout or in a turn comes back where "
        "neither a straight line nor its arc reaches",
    )
    vehicle_ways: bool = Field(
        True,
        description="a moving piece's end is also followed along each other vehicle's own way from there (the "
        "nearest 12 that passed it heading its way), not only along the traffic's mean way: where the flows part (a "
        "roundabout's exit, a junction's turns) the mean way keeps to one branch, and a vehicle lost as it turned off "
        "comes back on the other (rendered roundabout, docs/study.md: 92 right / 5 wrong links -> 95 / 3). False: "
        "each vehicle's way only from ends where the vehicle stood (a car that waited at a light and turned off)",
    )
    steady_turns: bool = Field(
        True,
        description="across a gap up to turn_gap_s, a piece moving at both ends is also judged turning at the steady "
        "rate its two headings imply (the end driven on half the gap on that arc, the start driven back half, and how "
        "far apart they land, across the way): the rate measured over a piece's last second is noisy on a short "
        "piece (and clipped at 1 rad/s), and a hidden turn needs 30 deg or more, while a car leaving a roundabout "
        "turns 15-40 deg in a second or two. Only between pieces followed steady_turn_min_s or more (a glimpse's "
        "heading is noise). False: the measured rates only",
    )
    steady_turn_min_s: float = Field(
        0.3,
        ge=0,
        description="steady_turns only between pieces followed this long or longer: six boxes at 15 fps (0.33 s) "
        "fit a heading; the roundabout's flicker pieces of a car circling (0.3-0.5 s between the detector's misses) are "
        "that short (1.0 before, docs/study.md)",
    )
    hidden_turns: bool = Field(
        True,
        description="a piece moving at both ends may also be joined across a turn hidden in the gap (heading turned "
        "30-120 deg, the two ends on one circular arc that the speeds cover; tracking/linking.py ``_turn_cost``): the "
        "detector loses cars while they turn, where neither the straight line nor the traffic's mean way reaches",
    )
    rounds: int = Field(
        2,
        ge=1,
        description="linking rounds: the pieces one round joined are one piece in the next, their ends measured over "
        "the joined path (a piece of a few boxes between two gaps has no heading of its own)",
    )
    turn_run_m: float = Field(
        12.0,
        ge=0,
        description="a hidden turn may also have a straight run before or after its arc, up to this long (a car "
        "that set off from a stop line and was lost as it turned, found again further on): the widest arc that "
        "fits, the speeds covering arc and run. 0: only turns on one arc tangent to both headings",
    )
    departure_max_mps: float = Field(
        3.0,
        ge=0,
        description="a piece ending slower than this (setting off from a stop line or a queue) may be joined to a "
        "start seen driving that only a departure hidden in the gap explains: on the way it came, one turn, on along "
        "the start's heading, in the time a car takes from standstill (tracking/linking.py ``_departure_cost``). "
        "0: none",
    )
    steady_turn_ends: bool = Field(
        True,
        description="a short gap's steady turn (steady_turns) is also judged from the headings at the end's very "
        "end and the start's very start (each fitted heading turned on at its piece's measured turn rate for half "
        "the second it was fitted over): a line fitted over a turning piece heads as the vehicle did halfway "
        "through that second. false: from the fitted headings alone",
    )
    held_departures: bool = Field(
        True,
        description="a departure (departure_max_mps) from a piece whose last boxes were not measured (the standing "
        "hold's matches) may have begun up to unmeasured_tail_s before its end: a car setting off from a stop line "
        "while held leaves its patch's matches behind on the spot for a second or two (roundabout render: cars at "
        "the yield line, the next piece 3-8 m on 0.1-0.7 s after the held piece's end). false: from its end",
    )
    queue_step_m: float = Field(
        10.0,
        ge=0,
        description="a piece ending slow (< 2 m/s) may be joined to one starting slow up to this far ahead on the "
        "way it came and within lateral_m of it, any time later within max_gap_s: a queued vehicle that moved up a "
        "place (a car length and the gap, ~7 m, with slack) while the detector missed it, and was found standing "
        "again. Not at the frame's edge (a cut box's centre moves). 0: only ends that stood within stood_m",
    )
    driven_through: bool = Field(
        True,
        description="a link whose two ends are slow at one place (a vehicle that stood there through the gap) is "
        "refused where another vehicle of its size (within 1.5x) came within 0.35 of its length of that place in the "
        "gap, having driven 1.5 lengths or more to or from it: two vehicles are never in one place at once (on the "
        "rendered roundabout five such links, four of them between two vehicles by their truth, the fifth between a "
        "truck and a box that held it and a car). A queued car that moved up a place starts elsewhere and is not "
        "judged. False: the previous behaviour",
    )
    waited_departures: bool = Field(
        True,
        description="a piece ending standing (slower than 1 m/s over its last second, not at the frame's edge) may also "
        "be joined to a start seen driving off after a gap longer than max_moving_gap_s, up to max_wait_s, where a "
        "departure explains it: on the way it came, one turn, on along the way the start drove off (straight on along "
        "that way where the piece stood all its life). The vehicle waited unseen, the detector and the standing hold "
        "having lost it in a queue, and drove off at green. Refused where another vehicle of its size drove through "
        "its place, or stood there a second, between its end and that departure; two such links out of one lane's "
        "order (the car ahead found later and further back) are swapped; seed 3's oblique intersection render: 16 more "
        "right links, 2 fewer wrong, O-D error 11.2 -> 9.3 % (docs/study.md). False: departures only across gaps up "
        "to max_moving_gap_s (the previous behaviour)",
    )
    turned_back_deg: float = Field(
        135.0,
        gt=0,
        le=180,
        description="an end and a start whose ways differ by more than this are two vehicles, also where either stood "
        "(its way: how it came to its end over its last length, how it drove off from its start over its first "
        "one): on the rendered oblique intersection a car that drove off north past the junction was joined to a car "
        "waiting 12 m on in the lane beside, which then drove off south. 180: off (only two moving ends are judged "
        "by their headings, in link_cost)",
    )
    stood_m: float = Field(
        2.0,
        ge=0,
        description="over a gap longer than max_moving_gap_s, two ends slower than 2 m/s whose places are this close "
        "are a vehicle that stood there (a creeping queue, a short piece's jittery boxes that measure 1-1.7 m/s), "
        "like two ends measured standing; one that kept moving would be metres on. 0: only ends measured standing",
    )
    tail_s: float = Field(
        2.0,
        ge=0,
        description="a piece's last seconds may follow another vehicle: where a car stands, the tracker now and then "
        "takes the car driving off ahead of it, or a box of it and its neighbour, for it, follows that for a second "
        "and loses it, and the car is found again where it stood. A piece starting standing where the previous "
        "piece stood within its last tail_s seconds (and left from) is that vehicle; the previous piece's boxes after "
        "that are dropped. 0: ends only",
    )
    max_size_ratio: float = Field(
        1.6,
        ge=1,
        description="two pieces whose boxes differ more than this in size where one ends and the other starts (long "
        "side, median over a second) are not one vehicle: a car's box does not double across a gap, but where the "
        "detector boxed two queued cars as one, or a bus, the next piece of either looks like a link. Between 1.25x "
        "(SIZE_FREE_RATIO) and this, each 10 % more costs ``size_cost``. Only where either end is slower than 2 "
        "m/s (a queue): a moving vehicle's box changes size as it comes out from under a tree, partly hidden. Not "
        "for ends cut by the frame's edge. Large: sizes not compared",
    )
    size_cost: float = Field(
        0.3, ge=0, description="cost per 10 % of size difference beyond 1.25x (see max_size_ratio)"
    )
    steady_box_s: float = Field(
        1.0,
        ge=0,
        description="each reported box keeps its centre and takes its track's median width and height over this "
        "many seconds around its frame (tracking/box_sizes.py): a vehicle's size changes over seconds, the "
        "detector's box of it jitters from frame to frame; positions, speeds and studies are unchanged. Boxes cut "
        "by the frame's edge keep theirs. Part of the whole-flight step: not with enabled false. 0: boxes as detected",
    )
    still_box_s: float = Field(
        1.0,
        ge=0,
        description="a vehicle standing still (its measured box centres over this many seconds before and after a "
        "frame, the drone's own motion removed, within still_radius of its size of their median, and the same before "
        "as after) is reported at that window's median box (tracking/still_boxes.py): a queued car's box no longer "
        "jitters, nor grows over its neighbour for a few frames. Part of the whole-flight step: not with enabled "
        "false. 0: boxes as detected",
    )
    still_radius: float = Field(
        0.1,
        gt=0,
        description="still_box_s: how far (share of the box's shorter side) the centres may lie from their median",
    )
    large_lengths: float = Field(
        1.5,
        ge=0,
        description="a piece whose box is at least this many times as long as the median of the pieces in its rows "
        "is a large vehicle (a truck, a bus): two large pieces whose sizes agree (within SIZE_FREE_RATIO) may be "
        "joined over gaps up to max_gap_s though they move (max_moving_gap_s holds for the rest): few of the flight's "
        "vehicles look like it, where a car found again 12 s later is more often another car. The detector loses "
        "trucks and buses for longer than cars (on the rendered roundabout it boxes a fifth of the trucks). 0: none",
    )
    nested_tracks: bool = Field(
        True,
        description="before linking, a track whose boxes lie inside another track's box is resolved "
        "(tracking/nested_tracks.py): one that holds two tracks at once side by side is a box of several queued "
        "vehicles and its boxes there are dropped; one that holds exactly one, for most of the shorter one's life, is "
        "one vehicle with it (a truck and its cab boxed as a car) and the two become one track with the outer box",
    )
    twin_tracks: bool = Field(
        True,
        description="before linking, two tracks of about one size that followed one vehicle at once (boxes at IoU >= "
        "0.3 on most frames both report, for at least nested_min_s and half the shorter one's life) become one track, "
        "the earlier one's id and box (tracking/nested_tracks.py, merge_twins)",
    )
    short_twins: bool = Field(
        True,
        description="with twin_tracks, a track shorter than nested_min_s whose whole life lay beside another "
        "track's boxes (IoU >= 0.3 on most of its frames) is that track's twin too: a box the detector gave the "
        "vehicle twice for a few frames, which took the vehicle's match from its track and back (two ID switches). "
        "False: twins only over nested_min_s (the previous behaviour)",
    )
    nested_min_s: float = Field(
        1.0, ge=0, description="a track lies inside another's box (or follows its vehicle with it) at least this long"
    )
    unmeasured_tail_s: float = Field(
        2.0,
        ge=0,
        description="a track whose last boxes, up to this long, were not measured (the standing hold's matches, "
        "predictions) and fell behind the vehicle it had last measured moving (covering less than half the way at its "
        "speed) is linked from its last measured box, and loses those boxes where it is linked: where the hold loses "
        "a moving vehicle, its last matches are often where it was (the oblique renders' vehicles lost in a turn). "
        "0: from its last box",
    )
    carried_off_lengths: float | None = Field(
        0.2,
        ge=0,
        description="a track last measured standing whose unmeasured last boxes (up to unmeasured_tail_s) moved this "
        "many of its lengths off that spot is linked from there and loses those boxes where it is linked: the vehicle "
        "set off while the standing hold carried it, and the hold's matches trail it, then stall (roundabout render: "
        "some 20 px behind the car, the next track starting on it). None: only tails that fell behind a "
        "moving vehicle (the previous behaviour)",
    )
    edge_waits: bool = Field(
        True,
        description="a track that ended standing at a frame edge (partly outside the view, where the standing hold "
        "lets go) is linked to a track that drives away along a way passing where it stood, up to max_gap_s later: "
        "the vehicle waited there (nadir intersection render: car 56, 17 s half out of the bottom edge). False: such "
        "a gap is linked only as any other (the previous behaviour)",
    )
    appearance: bool = Field(
        True,
        description="recorded runs sample each track's measured boxes' colours about once a second "
        "(appearance_every_s; tracking/appearance.py), and a link between two pieces whose colour histograms differ is "
        "dearer (appearance_cost) or, beyond appearance_max, refused: where two vehicles could each be the one found "
        "again, the one that looks like it is. False: links by position and motion alone (the previous behaviour)",
    )
    appearance_every_s: float = Field(1.0, gt=0, description="seconds between a track's colour samples")
    appearance_free: float = Field(
        0.25, ge=0, le=1, description="histograms this close (Bhattacharyya distance) cost a link nothing"
    )
    appearance_cost: float = Field(
        4.0, ge=0, description="metres of link cost per unit of histogram distance beyond appearance_free"
    )
    appearance_max: float = Field(
        0.6, ge=0, le=1, description="pieces whose histograms are further apart than this are not one vehicle"
    )
    border_frac: float = Field(0.01, ge=0, description="a box within this share of the frame of its edge touches it")
    vehicle_length_m: float = Field(4.5, gt=0, description="what a median box length counts as")


MOVING_MPS = 1.0  # slower than this a piece counts as standing at its end (no heading)
HEADING_MPS = 2.0  # both faster than this: their headings must agree
MOVING_ON_MPS = 1.5  # both ends faster than this: the vehicle did not stand in the gap
STATE_S = 1.0  # a piece's end (start) state is measured over its last (first) second
MAX_TURN_RATE = 1.0  # rad/s: a tight turn at walking pace; a measured rate beyond is noise
TERMINAL_S = 0.3  # a piece's terminal speed: over its last (first) 0.3 s
PATH_PENALTY_M = 0.5  # added to a link only a flow path (or only a turn) explains
TURN_MIN_DEG, TURN_MAX_DEG = 30.0, 120.0  # heading changes a hidden turn may explain (less: the line's rules judge it)
TURN_UNEVEN_SHARE = 0.2  # a turn's two tangent lengths may differ by lateral_m and this share of the longer
MIN_TURN_RADIUS_M = 4.0  # the tightest turn a car drives at a junction (its kerb-to-kerb circle is ~10-12 m)
TURN_RUN_COST = 0.04  # cost per metre of straight run a hidden turn needs beside its arc
SIZE_FREE_RATIO = 1.25  # box sizes this close at a link cost nothing (detector jitter, a turn in an oblique view)
MAX_PATH_M = 200.0  # a flow path is followed this far at most (across a junction and out)
EDGE_WAIT_LENGTHS = 1.0  # a start driving away at most this many lengths on from where a piece stood at an edge
SAME_PLACE_LENGTHS = 0.5  # a start this close (the end's lengths) to where a slow end was: it stood there
THROUGH_LENGTHS = 0.35  # another vehicle's centre this close (the stander's lengths) to that place: it drove through
THROUGH_AWAY_LENGTHS = 1.5  # ... having come from or gone on this far (the stander's lengths) in the gap
THROUGH_SIZE_RATIO = 1.5  # ... and of about its size (a bus passing in front of a car in an oblique view is not)
DEPART_ACCEL = 2.0  # m/s^2: a car setting off from a stop line (~0-50 km/h in 7 s)
DEPART_WAIT_COST = 0.1  # per second a departure link leaves unexplained (the vehicle waited unseen)
WAITED_DEPARTURE_COST = 0.5  # added to a departure after a wait beyond max_moving_gap_s (linking.waited_departures)
TAIL_GAP_S = 1.0  # a piece starting up to this long after the previous one's end may be found where its tail left
RESTART_OVERLAP_S = 0.5  # pieces overlapping less than this may be a re-start at the end's place (end to start)
LARGE_ROWS_LENGTHS = 3.0  # a piece is large against the pieces within this many median box lengths of its rows


@dataclass
class Piece:
    """One track as a recorded run reported it: frame indices, times, box centres in the first frame's pixels."""

    track_id: int
    frames: np.ndarray  # (n,) ints, increasing
    t: np.ndarray  # (n,) seconds
    xy: np.ndarray  # (n, 2) first-frame pixels
    length_px: float  # median box long side
    # the frame edges the first (last) box touches, as their outward direction in that frame's pixels (x: -1 left,
    # +1 right; y: -1 top, +1 bottom; both at a corner); (0, 0): it touches none
    edge_start: tuple[float, float] = (0.0, 0.0)
    edge_end: tuple[float, float] = (0.0, 0.0)
    # first-frame pixels -> this piece's last frame's pixels (the inverse of its ``to_first`` there); None: the two
    # are the same (no ego-motion). Links are judged in the earlier piece's last frame: the chained ego-motion of a
    # long flight drifts (hundreds of pixels over five minutes of hovering), and only its part over the gap matters
    end_from_first: np.ndarray | None = None
    # each box's long side (px), in frame order; None: every box ``length_px`` long
    lengths_px: np.ndarray | None = None
    # seconds its last boxes were not measured (the standing hold's matches, predictions): 0 where its last is
    held_tail_s: float = 0.0
    # the mean colour histogram of its measured boxes' samples (tracking/appearance.py) and how many; None: none
    appearance: np.ndarray | None = None
    appearance_n: int = 0

    def size_at(self, at_end: bool) -> float:
        """The box long side over the piece's last (first) ``STATE_S`` seconds (median, px)."""
        if self.lengths_px is None or not len(self.lengths_px):
            return self.length_px
        sel = self.t >= self.t[-1] - STATE_S if at_end else self.t <= self.t[0] + STATE_S
        return float(np.median(self.lengths_px[sel]))

    @property
    def touches_border_start(self) -> bool:
        return self.edge_start != (0.0, 0.0)

    @property
    def touches_border_end(self) -> bool:
        return self.edge_end != (0.0, 0.0)


def _state(t: np.ndarray, xy: np.ndarray, at_end: bool) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Position (px), velocity (px/s), turn rate (rad/s) and terminal speed (px/s) at a piece's end (or start): its
    last (first) few boxes, the velocity of a line fitted over its last (first) second, how its heading turned over
    that second (halves compared; 0 where it hardly moved), and its speed over the last (first) ``TERMINAL_S`` alone
    (a vehicle that stopped short of its piece's end has a fitted velocity but no terminal speed)."""
    sel = t >= t[-1] - STATE_S if at_end else t <= t[0] + STATE_S
    ts, ps = t[sel], xy[sel]
    if len(ts) < 2 or ts[-1] - ts[0] < 1e-6:
        return (xy[-1] if at_end else xy[0]).astype(np.float64), np.zeros(2), 0.0, 0.0
    A = np.column_stack([ts - ts.mean(), np.ones(len(ts))])
    coef, *_ = np.linalg.lstsq(A, ps, rcond=None)
    # where it was last (first) seen, not the fitted line's end: a vehicle that stopped within that second would
    # be placed beyond its stop by the line, and its next piece, starting where it stood, would seem to lie behind
    p = xy[-3:].mean(0) if at_end else xy[:3].mean(0)
    near = ts >= ts[-1] - TERMINAL_S if at_end else ts <= ts[0] + TERMINAL_S
    tn, pn = ts[near], ps[near]
    terminal = float(np.hypot(*(pn[-1] - pn[0]))) / (tn[-1] - tn[0]) if tn[-1] - tn[0] > 1e-6 else 0.0
    return p.astype(np.float64), coef[0], _turn_rate(ts, ps), terminal


def _turn_rate(ts: np.ndarray, ps: np.ndarray) -> float:
    """Heading change per second between the two halves of a short path (a roundabout, a turn); 0 with too few
    points or too little motion to tell."""
    if len(ts) < 6:
        return 0.0
    h = len(ts) // 2
    a, b = ps[h - 1] - ps[0], ps[-1] - ps[h]
    la, lb = float(np.hypot(*a)), float(np.hypot(*b))
    step = float(np.median(np.hypot(*np.diff(ps, axis=0).T)))
    if min(la, lb) < 3 * max(step, 1e-9) or min(la, lb) < 1e-6:
        return 0.0
    dt = 0.5 * (ts[-1] + ts[h]) - 0.5 * (ts[h - 1] + ts[0])
    turn = float(np.arctan2(a[0] * b[1] - a[1] * b[0], a @ b))
    return float(np.clip(turn / max(dt, 1e-6), -MAX_TURN_RATE, MAX_TURN_RATE))


def _arc(v: np.ndarray, w: float, tau: float) -> np.ndarray:
    """Displacement over ``tau`` seconds from velocity ``v`` turning at ``w`` rad/s (a straight line for w = 0)."""
    if abs(w * tau) < 1e-6:
        return v * tau
    s, c = np.sin(w * tau), np.cos(w * tau)
    return np.array([s * v[0] - (1 - c) * v[1], (1 - c) * v[0] + s * v[1]]) / w


def _rotate(v: np.ndarray, angle: float) -> np.ndarray:
    s, c = np.sin(angle), np.cos(angle)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def _to_frame(H: np.ndarray | None, p: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity (first-frame pixels) in the pixels of a frame ``H`` maps them to (its Jacobian at p)."""
    if H is None:
        return p, v
    q = H @ np.array([p[0], p[1], 1.0])
    w = q[2] if abs(q[2]) > 1e-12 else 1e-12
    x, y = q[0] / w, q[1] / w
    J = np.array([[H[0, 0] - x * H[2, 0], H[0, 1] - x * H[2, 1]], [H[1, 0] - y * H[2, 0], H[1, 1] - y * H[2, 1]]]) / w
    return np.array([x, y]), J @ v


def link_cost(
    end_p: np.ndarray,
    end_v: np.ndarray,
    start_p: np.ndarray,
    start_v: np.ndarray,
    gap_s: float,
    cfg: LinkingConfig,
    end_w: float = 0.0,
    start_w: float = 0.0,
    end_terminal: float | None = None,
    start_terminal: float | None = None,
    paths: list[np.ndarray] | None = None,
    end_arrival: np.ndarray | None = None,
    steady: bool = False,
    end_held_s: float = 0.0,
    lags: tuple[float, float] | None = None,
) -> float:
    """Metres of displacement a link from a piece's end (position, velocity, metres; turn rate, rad/s; terminal
    speed, m/s, default the velocity's) to another's start after ``gap_s`` seconds leaves unexplained; ``inf`` where
    the vehicle cannot have got there. ``paths``: ways the flight's other vehicles drove on from the end (metres, the
    same frame), which a start may lie on instead of the end's line or arc; a start none of them explains may still
    end a turn hidden in the gap (``linking.hidden_turns``, :func:`_turn_cost`)."""
    d = start_p - end_p
    sa, sb = float(np.hypot(*end_v)), float(np.hypot(*start_v))
    dist = float(np.hypot(*d))
    if gap_s <= 0:  # overlapping pieces: one vehicle only where they nearly coincide
        return dist if dist <= 0.5 * cfg.vehicle_length_m else np.inf
    # at its very end (start): a vehicle that stopped a moment before its piece ended may have stood in the gap
    slower = min(
        sa if end_terminal is None else min(sa, end_terminal), sb if start_terminal is None else min(sb, start_terminal)
    )
    best = np.inf
    if paths and gap_s > cfg.turn_gap_s and sb >= HEADING_MPS:
        # hidden longer than a turn's arc reaches, seen driving again: along a way the flight's other vehicles drove
        # on from here (tracking/flow_paths.py), heading along it. Not to a slow start: that may be the next vehicle
        # of a queue, which starts on the same way too
        for path in paths:
            s, off, tangent = along_path(path, start_p)
            if off <= cfg.lateral_m and float(start_v @ tangent) >= np.cos(np.radians(45)) * sb:
                # a way learnt from other vehicles is weaker evidence than the vehicle's own line: a start the line
                # or arc also explains keeps that link
                best = min(best, _judged(s, off, sa, sb, slower, gap_s, cfg) + PATH_PENALTY_M)
    if sa >= HEADING_MPS and sb >= HEADING_MPS:
        cos = float(end_v @ start_v) / (sa * sb)
        if cos < (np.cos(np.radians(120)) if gap_s <= cfg.turn_gap_s else np.cos(np.radians(45))):
            return _or_unseen(best, end_p, end_v, end_arrival, start_p, start_v, gap_s, cfg, end_held_s)
    heading = end_v / sa if sa >= MOVING_MPS else start_v / sb if sb >= MOVING_MPS else None
    if heading is None:  # standing at both ends: the same place
        along, lateral = 0.0, dist
    else:
        along, lateral = _along_across(d, heading)
    end_lateral = np.inf  # across the way from the headings at the very end and start (linking.steady_turn_ends)
    if gap_s <= cfg.turn_gap_s and heading is not None:
        # a short gap may hide a turn: judge it by where it would have gone at constant velocity too, and on the arcs
        # both pieces were turning on (a roundabout, a bend): the end driven on for half the gap, the start driven back
        # for half, and how far apart they land
        lateral = min(lateral, float(np.hypot(*(start_p - (end_p + end_v * gap_s)))))
        half = 0.5 * gap_s
        if end_w or start_w:  # the rates both pieces were measured turning at
            ahead = end_p + _arc(end_v, end_w, half)
            back = start_p - _arc(_rotate(start_v, -start_w * half), start_w, half)
            lateral = min(lateral, float(np.hypot(*(ahead - back))))
        if steady and sa >= HEADING_MPS and sb >= HEADING_MPS:
            # the steady turn the two headings imply (linking.steady_turns); judged across the way only, as the line
            # is: how far along it the vehicle got is the speeds' question (``_judged``), and a piece's end position
            # is its last boxes' mean, a frame or so before its end
            w = float(np.arctan2(end_v[0] * start_v[1] - end_v[1] * start_v[0], float(end_v @ start_v))) / gap_s
            ahead = end_p + _arc(end_v, w, half)
            back = start_p - _arc(_rotate(start_v, -w * half), w, half)
            u = _rotate(end_v, w * half) / sa  # the heading halfway
            d = ahead - back
            lateral = min(lateral, _along_across(d, u)[1])
            if lags is not None:
                # the same from the headings at the very end and start: a line fitted over a turning piece's last
                # (first) second heads as the vehicle did halfway through it (linking.steady_turn_ends)
                ev, sv = _rotate(end_v, end_w * lags[0]), _rotate(start_v, -start_w * lags[1])
                w = float(np.arctan2(ev[0] * sv[1] - ev[1] * sv[0], float(ev @ sv))) / gap_s
                d = end_p + _arc(ev, w, half) - (start_p - _arc(_rotate(sv, -w * half), w, half))
                end_lateral = _along_across(d, _rotate(ev, w * half) / sa)[1]
    cost = _or_unseen(
        min(best, _judged(along, lateral, sa, sb, slower, gap_s, cfg)),
        end_p,
        end_v,
        end_arrival,
        start_p,
        start_v,
        gap_s,
        cfg,
        end_held_s,
    )
    # one more way to explain the link, never one less (a feasible but dear turn must not hide a cheaper rule's)
    return min(cost, _judged(along, end_lateral, sa, sb, slower, gap_s, cfg)) if end_lateral < lateral else cost


def _departure_cost(
    end_p: np.ndarray, arrival: np.ndarray, start_p: np.ndarray, start_v: np.ndarray, gap_s: float, cfg: LinkingConfig
) -> float:
    """The cost of a link from a slow end (a vehicle setting off from a stop line or a queue, lost as it left) to a
    start seen driving: on from the end the way it came (``arrival``), then, after one turn of up to 120 deg, along
    the start's heading to the start; the two straight runs as long as they need to be (the car may have turned at
    once or after crossing the junction: its own slow end says neither its speed nor where it turns). The gap must
    hold the drive from standstill (``DEPART_ACCEL`` up to the start's speed; 30 % slack for the measured speeds);
    each second it leaves over is a wait the link does not explain (``DEPART_WAIT_COST``), so among a queue's cars
    the start goes to the one that left in time to get there. ``inf`` where no such drive fits."""
    sb = float(np.hypot(*start_v))
    if sb < HEADING_MPS or gap_s > cfg.max_moving_gap_s:
        return np.inf
    path, unexplained, drive_s = _departure_drive(end_p, arrival, start_p, start_v, sb, cfg)
    if not np.isfinite(drive_s) or gap_s < 0.7 * drive_s:
        return np.inf
    return unexplained + PATH_PENALTY_M + DEPART_WAIT_COST * max(0.0, gap_s - drive_s) + 0.02 * path


def _departure_drive(
    end_p: np.ndarray,
    arrival: np.ndarray | None,
    start_p: np.ndarray,
    start_way: np.ndarray,
    start_mps: float,
    cfg: LinkingConfig,
    on_start_way: bool = False,
) -> tuple[float, float, float]:
    """A departure's drive (:func:`_departure_cost`) from a slow end to a start driving off along ``start_way`` at
    ``start_mps``: its path (metres), how far the start lies off it (metres) and the seconds it takes from
    standstill; ``inf`` seconds where no drive reaches the start: on the way the end came (``arrival``), one turn of
    up to 120 deg and on along the start's way, or, where the end's way is not known (a piece that stood all its
    life), straight on along the start's way. ``on_start_way``: a straight drive's start is judged across its own
    way traced back (measured on the moving car) rather than across the way the end came."""
    u1 = start_way / max(float(np.hypot(*start_way)), 1e-9)
    d = start_p - end_p
    u0 = u1 if arrival is None else arrival / max(float(np.hypot(*arrival)), 1e-9)
    theta = float(np.degrees(np.arccos(np.clip(u0 @ u1, -1.0, 1.0))))
    if theta > TURN_MAX_DEG:
        return 0.0, 0.0, np.inf
    if theta < TURN_MIN_DEG:  # straight on: the start on the end's lane
        along, lateral = _along_across(d, u1 if on_start_way else u0)
        if along < -cfg.back_m or lateral > cfg.lateral_m + 0.05 * abs(along):
            return 0.0, 0.0, np.inf
        path, unexplained = max(along, 0.0), lateral
    else:  # end + ahead * u0 = start - behind * u1: where the two ways cross is where it turned
        ahead, behind = np.linalg.solve(np.column_stack([u0, u1]), d)
        if ahead < -cfg.back_m or behind < 0:
            return 0.0, 0.0, np.inf
        path, unexplained = max(float(ahead), 0.0) + float(behind), 0.5 * cfg.lateral_m
    sb = start_mps
    speed_up = sb * sb / (2 * DEPART_ACCEL)  # metres it takes to reach the start's speed
    drive_s = sb / DEPART_ACCEL + (path - speed_up) / sb if path > speed_up else float(np.sqrt(2 * path / DEPART_ACCEL))
    return path, unexplained, drive_s


def _waited_at_edge(end_p: np.ndarray, start_p: np.ndarray, start_v: np.ndarray, length_px: float) -> float:
    """How far (px) a piece's standing end at a frame edge lies off the way a later start drives away on, where that
    way, traced back, passes it: the vehicle waited there, partly outside the view, where the detector often misses
    a car the edge cuts and the standing hold lets go, for as long as a red light (the nadir intersection's car 56: 17
    s half out of the bottom edge, then on into the view). The end's box, cut by the edge, has its centre
    pulled inwards, so only the way's line is asked for: the end behind the start on it, at most
    ``EDGE_WAIT_LENGTHS`` of its lengths, and off it by what is the cost. ``inf`` where the start is not driving or
    the end is not behind it."""
    speed = float(np.hypot(*start_v))
    if speed <= 0:
        return np.inf
    along, across = _along_across(end_p - start_p, start_v / speed)
    if along > 0 or -along > EDGE_WAIT_LENGTHS * length_px:
        return np.inf
    return across


def _along_across(d: np.ndarray, u: np.ndarray) -> tuple[float, float]:
    """A displacement ``d`` along the unit direction ``u`` and how far across it (unsigned)."""
    return float(d @ u), abs(float(d[0] * u[1] - d[1] * u[0]))


def _moved_up(end_p: np.ndarray, came: np.ndarray, start_p: np.ndarray, cfg: LinkingConfig) -> float:
    """The cost of a link from a slow end to a slow start ahead on the way it came (``came``, metres): a queued
    vehicle that moved up unseen (``linking.queue_step_m``); ``inf`` where the start is not there."""
    u = came / max(float(np.hypot(*came)), 1e-9)
    d = start_p - end_p
    along, lateral = _along_across(d, u)
    if along < -cfg.back_m or along > cfg.queue_step_m or lateral > cfg.lateral_m:
        return np.inf
    return lateral + PATH_PENALTY_M + 0.05 * max(along, 0.0)


def _or_unseen(
    cost: float,
    end_p: np.ndarray,
    end_v: np.ndarray,
    arrival: np.ndarray | None,
    start_p: np.ndarray,
    start_v: np.ndarray,
    gap_s: float,
    cfg: LinkingConfig,
    held_s: float = 0.0,
) -> float:
    """``cost``, or where nothing else explains the link (``inf``) the cost of what the gap may have hidden, if it
    fits within ``max_cost``: a turn (``linking.hidden_turns``), else, from a slow end (``arrival``: the way it came,
    ``linking.departure_max_mps``), a departure, which may have begun ``held_s`` before the end."""
    if np.isfinite(cost):
        return cost
    unseen = _turn_cost(end_p, end_v, start_p, start_v, gap_s, cfg) if cfg.hidden_turns else np.inf
    if unseen > cfg.max_cost and arrival is not None:
        unseen = _departure_cost(end_p, arrival, start_p, start_v, gap_s + held_s, cfg)
    return unseen if unseen <= cfg.max_cost else cost


def _turn_cost(
    end_p: np.ndarray, end_v: np.ndarray, start_p: np.ndarray, start_v: np.ndarray, gap_s: float, cfg: LinkingConfig
) -> float:
    """The cost of a link that only a turn explains: a vehicle moving at both ends, its heading turned by 30-120 deg
    across the gap (the detector loses a car while it turns: on the rendered roundabout and intersection it scored
    turning cars 0.05-0.2 for seconds, docs/study.md), the two ends joined by one circular arc tangent to both
    headings: the end's heading line and the start's meet ahead of the one and behind the other, about as far from
    each (a circle's two tangents are equally long), and the arc is as long as the pieces' speeds cover in the gap.
    Neither the end's own turn rate (measured over a second, noisy on a short piece) nor the traffic's mean way (the
    flows part at a junction) is needed. ``inf`` where no such turn fits."""
    sa, sb = float(np.hypot(*end_v)), float(np.hypot(*start_v))
    if gap_s <= 0 or min(sa, sb) < HEADING_MPS:
        return np.inf
    u0, u1 = end_v / sa, start_v / sb
    theta = float(np.arccos(np.clip(u0 @ u1, -1.0, 1.0)))
    if not np.radians(TURN_MIN_DEG) <= theta <= np.radians(TURN_MAX_DEG):
        return np.inf
    ahead, behind = np.linalg.solve(np.column_stack([u0, u1]), start_p - end_p)  # end + ahead u0 = start - behind u1
    if ahead <= 0 or behind <= 0:
        return np.inf
    uneven = abs(ahead - behind)
    half_tan = float(np.tan(0.5 * theta))
    if uneven <= cfg.lateral_m + TURN_UNEVEN_SHARE * max(ahead, behind):
        path = 0.5 * (ahead + behind) / half_tan * theta  # one arc
        cost = 0.5 * uneven
    elif cfg.turn_run_m > 0 and min(ahead, behind) >= MIN_TURN_RADIUS_M * half_tan and uneven <= cfg.turn_run_m:
        # a straight run before or after the arc: a car that set off from a stop line and was lost as it turned
        # drives on a few metres before it turns, and one found again after a turn may have driven on straight for
        # a while unseen. The widest arc that fits, the rest straight; looser evidence than one arc, so it costs more
        radius = min(ahead, behind) / half_tan
        path = uneven + radius * theta
        cost = 0.5 * cfg.lateral_m + TURN_RUN_COST * uneven  # one arc's cost ends near 0.5 lateral_m
    else:
        return np.inf
    if (
        path > 1.5 * max(sa, sb) * gap_s + cfg.lateral_m
        or path + cfg.back_m < cfg.min_gap_speed_share * min(sa, sb) * gap_s
    ):
        return np.inf
    return cost + 0.02 * path + PATH_PENALTY_M


def _judged(
    along: float, lateral: float, sa: float, sb: float, slower: float, gap_s: float, cfg: LinkingConfig
) -> float:
    """The cost of a start ``along`` metres on from a piece's end and ``lateral`` beside its way (``inf``: it
    cannot be that vehicle)."""
    reach = 1.5 * max(sa, sb, MOVING_MPS) * gap_s + cfg.lateral_m
    if along < -cfg.back_m or along > reach or lateral > cfg.lateral_m + 0.05 * abs(along):
        return np.inf
    if slower >= MOVING_ON_MPS and along + cfg.back_m < cfg.min_gap_speed_share * slower * gap_s:
        return np.inf  # moving at both ends but hardly farther: the next vehicle on its path, not this one
    beyond = max(0.0, along - max(sa, sb) * gap_s)  # farther than its speed explains
    # moving at both ends and not as far on as the slower speed covers: it slowed unseen and sped up again, or it is
    # the vehicle behind on the same line (the line alone cannot tell a queue's cars apart)
    short = max(0.0, min(sa, sb) * gap_s - along) if slower >= MOVING_ON_MPS else 0.0
    return lateral + 0.2 * beyond + cfg.gap_shortfall_cost * short + 0.02 * abs(along) + 0.01 * gap_s


def _flow_paths(
    samples: FlowSamples, a: Piece, i: int, end_v: np.ndarray, m: float, t_end: float, cfg: LinkingConfig
) -> list[np.ndarray]:
    """The ways on from piece ``a``'s end (first-frame px): the traffic's streamline and each other vehicle's own way
    from there. Heading: the end's, or where it stood there, the way it came (a car that waited at a light and turned
    off unseen); none for a piece that never moved."""
    moving = float(np.hypot(*end_v)) * m >= HEADING_MPS
    heading = end_v if moving else _arrival(a)
    if heading is None:
        return []
    reach_px = min(1.5 * max(float(np.hypot(*end_v)) * m, HEADING_MPS) * cfg.max_gap_s, MAX_PATH_M) / m
    window = (t_end - WINDOW_S, t_end + cfg.max_gap_s + WINDOW_S)
    p = a.xy[-3:].mean(0)
    stream = samples.path(p, heading, a.length_px, reach_px, i, *window)
    # The mean way follows one branch where the flows part; each other vehicle's own way from there follows its own
    # (linking.vehicle_ways; for an end where the vehicle stood, always: it may have turned off the mean way)
    ways = samples.witnesses(p, heading, a.length_px, reach_px, i, *window) if cfg.vehicle_ways or not moving else []
    return [w for w in [stream, *ways] if len(w) > 1]


def _large(pieces: list[Piece], lengths: float) -> np.ndarray:
    """Which pieces are large vehicles: at least ``lengths`` times the median box length of the pieces whose rows lie
    within ``LARGE_ROWS_LENGTHS`` median lengths of theirs (an oblique view's far rows show every vehicle smaller)."""
    if lengths <= 0 or not pieces:
        return np.zeros(len(pieces), bool)
    size = np.array([p.length_px for p in pieces])
    row = np.array([float(np.median(p.xy[:, 1])) for p in pieces])
    window = LARGE_ROWS_LENGTHS * float(np.median(size))
    return np.array([size[k] >= lengths * np.median(size[np.abs(row - row[k]) <= window]) for k in range(len(pieces))])


def _coinciding(a: Piece, b: Piece, m: float, length_m: float) -> float:
    """Two pieces that overlap in time, on the frames both report: the median distance of their centres (metres) where
    they follow one vehicle (within half its length at the median, never a whole length apart: two cars side by side
    are a lane apart, a queue's cars a length), ``inf`` where they do not or share no frame."""
    common, ia, ib = np.intersect1d(a.frames, b.frames, return_indices=True)
    if not len(common):
        return np.inf
    d = np.hypot(*(a.xy[ia] - b.xy[ib]).T) * m
    median = float(np.median(d))
    return median if median <= 0.5 * length_m and float(d.max()) <= length_m else np.inf


def _cheaper(cost: np.ndarray, cut: np.ndarray, i: int, j: int, c: float) -> None:
    """Link i -> j at cost ``c`` where that is cheaper than its tail link (which then cuts nothing)."""
    if c < cost[i, j]:
        cost[i, j], cut[i, j] = c, np.nan


def _tail_restart(a: Piece, b: Piece, start_xy: np.ndarray, m: float, cfg: LinkingConfig) -> tuple[float, float]:
    """Piece ``b``, standing at ``start_xy`` where it starts, found where ``a`` stood within its last
    ``linking.tail_s`` (and left from: its tail followed another vehicle): the distance (metres) and the time from
    which ``a``'s boxes are not its vehicle; ``(inf, nan)`` where not."""
    t0 = float(b.t[0])
    if t0 < a.t[-1] - cfg.tail_s or t0 > a.t[-1] + TAIL_GAP_S:
        return np.inf, np.nan
    near = cfg.stood_m / m  # px
    tail = np.flatnonzero((a.t >= a.t[-1] - cfg.tail_s) & (a.t <= t0))
    d = np.hypot(*(a.xy[tail] - start_xy).T)
    at = np.flatnonzero(d <= 0.5 * near)  # the tail's last box on the place (not one already leaving it)
    if not len(at):
        return np.inf, np.nan
    k = int(tail[at[-1]])  # the last box of a where b starts
    if float(np.hypot(*(a.xy[k:] - a.xy[k]).T).max()) <= near:
        return np.inf, np.nan  # a never left that place: its end is where b starts, for the other rules
    # a stood there: its boxes over the second before hardly moved
    before = (a.t >= a.t[k] - STATE_S) & (a.t <= a.t[k])
    if float(np.hypot(*(a.xy[before] - a.xy[k]).T).max()) > near:
        return np.inf, np.nan
    sizes = sorted((float(np.median(_lengths(a)[before])), b.size_at(False)))
    if sizes[1] / max(sizes[0], 1.0) > cfg.max_size_ratio:
        return np.inf, np.nan
    return float(d[at[-1]]) * m, float(a.t[k])


def _crosses(edge: tuple[float, float], v: np.ndarray) -> int:
    """Whether a box at the frame's ``edge`` (:attr:`Piece.edge_end`) moving at ``v`` (px/s, that frame) is leaving
    the view through it (1), entering it (-1) or neither (0: no edge, or moving along it). A vehicle is often lost
    at an edge it is not crossing: in an oblique view the near row's long boxes touch the bottom edge while cars
    drive up into the view, and the detector loses them there as anywhere (on the oblique renders 3 of a vehicle's
    pieces ended at the bottom edge 1-2 s before the next began a few metres on)."""
    toward = float(np.asarray(edge, np.float64) @ v)
    return 1 if toward > 0 else -1 if toward < 0 else 0


def _arrival(a: Piece, lengths: float = 2.0) -> np.ndarray | None:
    """The direction a piece came from to where it ended: from the last place ``lengths`` of its lengths before its
    end."""
    d = np.hypot(*(a.xy - a.xy[-1]).T)
    far = np.flatnonzero(d >= lengths * a.length_px)
    return None if not len(far) else a.xy[-1] - a.xy[far[-1]]


def _turned_back(way_a: np.ndarray | None, way_b: np.ndarray | None, cos_max: float) -> bool:
    """Two ways (first-frame pixels; the drone's motion over a gap turns them by little) more opposed than ``cos_max``."""
    if way_a is None or way_b is None:
        return False
    na, nb = float(np.hypot(*way_a)), float(np.hypot(*way_b))
    return na > 0 and nb > 0 and float(way_a @ way_b) < cos_max * na * nb


def _departure(b: Piece, lengths: float = 1.0) -> np.ndarray | None:
    """The direction a piece drove off from where it started: to the first place ``lengths`` of its lengths on."""
    d = np.hypot(*(b.xy - b.xy[0]).T)
    far = np.flatnonzero(d >= lengths * b.length_px)
    return None if not len(far) else b.xy[far[0]] - b.xy[0]


def link_pieces(
    pieces: list[Piece], cfg: LinkingConfig | None = None, tails: dict[int, tuple[float, float]] | None = None
) -> dict[int, int]:
    """Track id -> the id of the first piece of its vehicle (every id, linked or not).

    In rounds (``linking.rounds``): the pieces a round joined are one piece in the next, whose ends are measured over
    the joined path. A piece of a few boxes has no measured heading or speed at its start, so the piece before it
    may not reach it (a car lost in a turn, seen for three frames, lost again) although the vehicle's next long piece
    would have been reached; joined to that one, its start has the heading and speed of the vehicle driving on."""
    cfg = cfg or LinkingConfig()
    mapping = {p.track_id: p.track_id for p in pieces}
    current = [p for p in pieces if len(p.t)]
    scale = [cfg.vehicle_length_m / max(p.length_px, 1.0) for p in current]
    # the traffic's ways come from the pieces as the tracker reported them: a joined piece has no boxes in its gaps,
    # and a way interpolated across one would cut the corner it hid
    samples = FlowSamples.of(current, scale, MOVING_MPS) if cfg.flow_paths else None
    owner = np.arange(len(current))  # the current piece each original piece (sample owner) is part of
    for _ in range(cfg.rounds):
        round_samples = None if samples is None else dataclasses.replace(samples, vehicle=owner[samples.owner])
        step = _link_once(current, cfg, round_samples, tails)
        if all(step[p.track_id] == p.track_id for p in current):
            break
        for tid in mapping:
            mapping[tid] = step.get(mapping[tid], mapping[tid])
        current, chain_of = _joined(current, step)
        owner = chain_of[owner]
    return mapping


def _joined(pieces: list[Piece], step: dict[int, int]) -> tuple[list[Piece], np.ndarray]:
    """The pieces ``step`` maps to one head joined into one piece each (in time order), and for each given piece the
    index of the joined piece it is part of."""
    groups: dict[int, list[int]] = {}
    for k, p in enumerate(pieces):
        groups.setdefault(step.get(p.track_id, p.track_id), []).append(k)
    out: list[Piece] = []
    chain_of = np.zeros(len(pieces), int)
    for head, members in groups.items():
        parts = sorted((pieces[k] for k in members), key=lambda p: p.t[0])
        for k in members:
            chain_of[k] = len(out)
        if len(parts) == 1:
            out.append(parts[0])
            continue
        t = np.concatenate([p.t for p in parts])
        order = np.argsort(t, kind="stable")
        last = max(parts, key=lambda p: p.t[-1])
        out.append(
            Piece(
                head,
                np.concatenate([p.frames for p in parts])[order],
                t[order],
                np.concatenate([p.xy for p in parts])[order],
                float(np.median(np.concatenate([np.full(len(p.t), p.length_px) for p in parts]))),
                edge_start=parts[0].edge_start,
                edge_end=last.edge_end,
                end_from_first=last.end_from_first,
                lengths_px=np.concatenate([_lengths(p) for p in parts])[order],
                held_tail_s=last.held_tail_s,
                **_pooled_appearance(parts),
            )
        )
    return out, chain_of


def _pooled_appearance(parts: list[Piece]) -> dict:
    """The joined piece's appearance: its parts' means weighted by their samples."""
    seen = [(p.appearance, p.appearance_n) for p in parts if p.appearance is not None and p.appearance_n > 0]
    if not seen:
        return {}
    n = sum(k for _, k in seen)
    return {"appearance": np.sum([look * (k / n) for look, k in seen], axis=0), "appearance_n": n}


def _lengths(p: Piece) -> np.ndarray:
    return p.lengths_px if p.lengths_px is not None else np.full(len(p.t), p.length_px)


def _link_once(
    ok: list[Piece],
    cfg: LinkingConfig,
    samples: FlowSamples | None,
    tails: dict[int, tuple[float, float]] | None = None,
) -> dict[int, int]:
    """One round of :func:`link_pieces`: track id -> the id of the first piece of its chain; ``tails`` gets, for
    each piece linked by its tail (:func:`_tail_restart`), the times between which its boxes are not its vehicle (from
    where the next piece found it standing to that piece's start)."""
    mapping = {p.track_id: p.track_id for p in ok}
    if len(ok) < 2:
        return mapping
    scale = [cfg.vehicle_length_m / max(p.length_px, 1.0) for p in ok]  # metres per first-frame pixel, per piece
    ends = [_state(p.t, p.xy, True) for p in ok]
    starts = [_state(p.t, p.xy, False) for p in ok]
    end_size = [p.size_at(True) for p in ok]
    start_size = [p.size_at(False) for p in ok]
    end_mps = [float(np.hypot(*e[1])) * m for e, m in zip(ends, scale)]
    start_mps = [float(np.hypot(*s[1])) * m for s, m in zip(starts, scale)]
    t0 = np.array([p.t[0] for p in ok])
    t1 = np.array([p.t[-1] for p in ok])
    n = len(ok)
    cost = np.full((n, n), np.inf)
    cut = np.full((n, n), np.nan)  # where a tail link is the cheaper: the time from which i's boxes are dropped
    large = _large(ok, cfg.large_lengths)

    def standing(state: tuple, m: float) -> bool:
        return float(np.hypot(*state[1])) * m < MOVING_MPS and state[3] * m < MOVING_MPS

    def slow_at(i: int, j: int) -> bool:
        """Piece i's end or piece j's start slower than ``HEADING_MPS``: where box sizes are compared. In a queue the
        detector now and then boxes two waiting cars as one; a moving vehicle's box changes size as it comes out from
        under a tree or a bridge, partly hidden (on the real nadir sequence M0703, a car's 45 px box became 77 px)."""
        return min(end_mps[i], start_mps[j]) < HEADING_MPS

    def stood(i: int, j: int, d_m: float) -> bool:
        """Piece i's end and piece j's start ``d_m`` metres apart are one vehicle standing there through the gap:
        both standing, or both slow (a creeping queue, or a short piece's jittery boxes: on the oblique renders such
        ends measured 1-1.7 m/s) with the start within ``linking.stood_m`` of the end, where a vehicle that kept
        moving would be metres on."""
        if standing(ends[i], scale[i]) and standing(starts[j], scale[j]):
            return True
        return max(end_mps[i], start_mps[j]) < HEADING_MPS and d_m <= cfg.stood_m

    # each piece's way at its end and at its start: how it came over its last length, how it drove off over its
    # first. Not the velocity fitted over a second: at a piece's end it may point back where a box jumped as the
    # detector lost the car (seed 2's intersection: 3 m/s back, on a car that came 2 lengths forward)
    end_way = [_arrival(p, 1.0) for p in ok]
    start_way = [_departure(p, 1.0) for p in ok]
    turned_back = np.cos(np.radians(cfg.turned_back_deg))
    departures: dict[tuple[int, int], tuple[float, float]] = {}  # waited departures: (i, j) -> (set off at, cost)

    for i, a in enumerate(ok):
        H = a.end_from_first  # every link from a is judged in a's last frame: only the ego-motion over the gap counts
        end_p, end_v = _to_frame(H, ends[i][0], ends[i][1])
        if not standing(ends[i], scale[i]) and _crosses(a.edge_end, end_v) > 0:
            continue  # it left the view (one at the edge moving into the view was lost there, as anywhere)
        paths = _flow_paths(samples, a, i, ends[i][1], scale[i], t1[i], cfg) if samples is not None else []
        paths = [np.array([_to_frame(H, q, np.zeros(2))[0] for q in way]) for way in paths]
        # a slow end may be a vehicle setting off unseen (linking.departure_max_mps): the way it came, for a departure
        arrival = _arrival(a) if end_mps[i] < cfg.departure_max_mps else None
        if arrival is not None:
            arrival = _to_frame(H, ends[i][0], arrival)[1]
        held_s = min(a.held_tail_s, cfg.unmeasured_tail_s) if cfg.held_departures else 0.0
        # a queue's car moves up a place in a few seconds: the way it came over its last length is its lane
        came = _arrival(a, 1.0) if cfg.queue_step_m > 0 and end_mps[i] < HEADING_MPS else None
        if came is not None:
            came = _to_frame(H, ends[i][0], came)[1]
        gaps = t0 - t1[i]
        cand = np.flatnonzero((gaps > -cfg.overlap_s) & (gaps <= max(cfg.max_gap_s, cfg.max_wait_s)) & (t1 > t1[i]))
        for j in cand.tolist():
            b = ok[j]
            if j == i or b.t[0] <= a.t[0]:
                continue
            start_p, start_v = _to_frame(H, starts[j][0], starts[j][1])
            if cfg.turned_back_deg < 180 and _turned_back(end_way[i], start_way[j], turned_back):
                continue  # it would have turned back where it was lost: another vehicle
            # a vehicle that waited unseen and drove off (linking.waited_departures), judged below
            waited = (
                cfg.waited_departures
                and gaps[j] > cfg.max_moving_gap_s
                and end_mps[i] < MOVING_MPS
                and start_mps[j] >= MOVING_MPS
                and not (a.touches_border_end or b.touches_border_start)
            )
            if (
                gaps[j] > cfg.max_gap_s
                and not waited
                and not (
                    standing(ends[i], scale[i])
                    and float(np.hypot(*(start_p - end_p))) * 0.5 * (scale[i] + scale[j]) <= cfg.stood_m
                    and not (a.touches_border_end or b.touches_border_start)
                )
            ):
                continue  # beyond max_gap_s only a wait at one place (linking.max_wait_s)
            looks = 0.0  # what the two pieces' colours add to the link's cost (linking.appearance)
            if cfg.appearance and a.appearance is not None and b.appearance is not None:
                apart = appearance_distance(a.appearance, b.appearance)
                if apart > cfg.appearance_max:
                    continue  # another vehicle
                looks = cfg.appearance_cost * max(0.0, apart - cfg.appearance_free)
            if cfg.tail_s > 0 and start_mps[j] < MOVING_MPS:  # b starts standing (its terminal speed aside)
                d_tail, t_cut = _tail_restart(a, b, starts[j][0], 0.5 * (scale[i] + scale[j]), cfg)
                if np.isfinite(d_tail):
                    cost[i, j], cut[i, j] = d_tail + looks, t_cut
            if (
                cfg.edge_waits
                and a.touches_border_end
                and gaps[j] > 0
                and standing(ends[i], scale[i])
                and not standing(starts[j], scale[j])
            ):
                waited = _waited_at_edge(end_p, start_p, start_v, max(a.length_px, b.length_px))
                _cheaper(cost, cut, i, j, waited * 0.5 * (scale[i] + scale[j]) + PATH_PENALTY_M + looks)
            if not standing(starts[j], scale[j]) and _crosses(b.edge_start, start_v) < 0:
                continue  # it entered the view
            size_penalty = looks
            ratio = max(end_size[i], start_size[j]) / max(min(end_size[i], start_size[j]), 1.0)
            if slow_at(i, j) and not (a.touches_border_end or b.touches_border_start):  # an edge cuts a box short
                if ratio > cfg.max_size_ratio:
                    continue  # two cars boxed as one, a bus: not this vehicle
                size_penalty += cfg.size_cost * max(0.0, ratio - SIZE_FREE_RATIO) / 0.1
            m = 0.5 * (scale[i] + scale[j])
            if (
                came is not None
                and start_mps[j] < HEADING_MPS
                and gaps[j] > 0
                and not (a.touches_border_end or b.touches_border_start)
            ):
                _cheaper(cost, cut, i, j, _moved_up(end_p * m, came * m, start_p * m, cfg) + size_penalty)
            if waited:
                # the end's way: how it came, where it drove (None: it stood all its life); the start's: how it
                # drove off over its first length (a car setting off measures slow, its fitted heading is noise)
                way_in, way_out = end_way[i], start_way[j]
                came_to = None if way_in is None else _to_frame(H, ends[i][0], way_in)[1]
                off_way = start_v if way_out is None else _to_frame(H, starts[j][0], way_out)[1]
                path, off, drive_s = _departure_drive(
                    end_p * m, came_to, start_p * m, off_way, start_mps[j], cfg, on_start_way=True
                )
                if np.isfinite(drive_s) and gaps[j] >= 0.7 * drive_s:
                    # a way measured over one length is good to a few degrees: that much offset costs nothing
                    off = max(0.0, off - 0.05 * path)
                    waited_cost = off + PATH_PENALTY_M + WAITED_DEPARTURE_COST + 0.02 * path + size_penalty
                    if waited_cost < cost[i, j]:
                        _cheaper(cost, cut, i, j, waited_cost)
                        departures[(i, j)] = (float(t0[j]) - drive_s, waited_cost)
            if (
                gaps[j] > cfg.max_moving_gap_s
                and not stood(i, j, float(np.hypot(*(start_p - end_p))) * m)
                and not (large[i] and large[j] and ratio <= SIZE_FREE_RATIO)
            ):
                continue  # over a long gap a piece moving at an end is more often another vehicle: only a queue's wait,
                # or a truck or a bus that no other vehicle looks like
            if gaps[j] <= 0:
                # the frames both report decide (the end and the start may be seconds apart); where they do not
                # coincide, an overlap of a few frames may still be a re-start at the end's place (link_cost)
                both = _coinciding(a, b, m, cfg.vehicle_length_m)
                if np.isfinite(both):
                    _cheaper(cost, cut, i, j, both + size_penalty)
                    continue
                if gaps[j] <= -RESTART_OVERLAP_S:
                    continue
            _cheaper(
                cost,
                cut,
                i,
                j,
                link_cost(
                    end_p * m,
                    end_v * m,
                    start_p * m,
                    start_v * m,
                    float(gaps[j]),
                    cfg,
                    ends[i][2],
                    starts[j][2],
                    ends[i][3] * m,
                    starts[j][3] * m,
                    [way * m for way in paths],
                    None if arrival is None else arrival * m,
                    cfg.steady_turns and min(a.t[-1] - a.t[0], b.t[-1] - b.t[0]) >= cfg.steady_turn_min_s,
                    held_s,
                    (
                        0.5 * min(STATE_S, float(a.t[-1] - a.t[0])),
                        0.5 * min(STATE_S, float(b.t[-1] - b.t[0])),
                    )
                    if cfg.steady_turn_ends
                    else None,
                )
                + size_penalty,
            )
    if cfg.driven_through:
        _veto_driven_through(ok, cost, cfg, ends, starts, t0, t1, end_mps, start_mps)
    _veto_taken_place(ok, cost, ends, t0, t1, departures)
    feasible = np.isfinite(cost) & (cost <= cfg.max_cost)
    if not feasible.any():
        return mapping
    rows, cols = np.flatnonzero(feasible.any(1)), np.flatnonzero(feasible.any(0))
    sub = np.where(feasible[np.ix_(rows, cols)], cost[np.ix_(rows, cols)], 1e6)
    ri, ci = linear_sum_assignment(sub)
    successor = {int(rows[r]): int(cols[c]) for r, c in zip(ri, ci) if sub[r, c] < 1e6}
    if departures:
        ways = [state[1] if way is None else way for state, way in zip(starts, start_way)]
        _first_in_first_out(successor, departures, cost, cfg, ok, ends, starts, ways, scale)
    if tails is not None:
        for i, j in successor.items():
            if np.isfinite(cut[i, j]):
                tails[ok[i].track_id] = (float(cut[i, j]), float(ok[j].t[0]))
    has_predecessor = set(successor.values())
    for head in range(n):
        if head in has_predecessor:
            continue
        k = head
        while k in successor:
            k = successor[k]
            mapping[ok[k].track_id] = ok[head].track_id
    return mapping


def _first_in_first_out(
    successor: dict[int, int],
    departures: dict[tuple[int, int], tuple[float, float]],
    cost: np.ndarray,
    cfg: LinkingConfig,
    ok: list[Piece],
    ends: list,
    starts: list,
    ways: list[np.ndarray],
    scale: list[float],
) -> None:
    """Waited departures (``linking.waited_departures``) of two cars that stood one behind the other in a lane keep
    their order: the car ahead cannot be found later *and* further back than the car behind was found (it would
    have been ahead of that place by then, and cars do not drive backwards). Where the assignment says so and the
    two starts the other way round are waited departures too, they are swapped. The cost alone cannot tell: the two
    pairings' displacements add up to about the same."""

    def waited(i: int, j: int) -> bool:
        """The link i -> j is a waited departure (no other rule explains it more cheaply)."""
        return (i, j) in departures and departures[(i, j)][1] == cost[i, j]

    for _ in range(len(successor)):  # each swap puts one pair in order
        linked = [(i, j) for i, j in successor.items() if waited(i, j)]
        pair = next(
            (
                (i, j, k, l)
                for i, j in linked
                for k, l in linked
                if k != i
                and ok[j].t[0] > ok[l].t[0]
                and _ahead_in_lane(ends[i][0], ends[k][0], ways[j], ok[i].length_px, cfg.lateral_m / scale[i])
                and _ahead_in_lane(starts[l][0], starts[j][0], ways[j], ok[j].length_px, np.inf)
                and waited(i, l)
                and cost[i, l] <= cfg.max_cost
                and waited(k, j)
                and cost[k, j] <= cfg.max_cost
            ),
            None,
        )
        if pair is None:
            return
        i, j, k, l = pair
        successor[i], successor[k] = l, j


def _ahead_in_lane(p: np.ndarray, q: np.ndarray, way: np.ndarray, length_px: float, lateral_px: float) -> bool:
    """Place ``p`` half a vehicle length or more ahead of ``q`` along ``way``, in its lane (``lateral_px``)."""
    along, across = _along_across(p - q, way / max(float(np.hypot(*way)), 1e-9))
    return along >= 0.5 * length_px and across <= lateral_px


def _veto_taken_place(
    ok: list[Piece],
    cost: np.ndarray,
    ends: list,
    t0: np.ndarray,
    t1: np.ndarray,
    departures: dict[tuple[int, int], tuple[float, float]],
) -> None:
    """A waited departure (``linking.waited_departures``: piece i stood unseen at its end's place until it drove
    off, and is piece j) is refused where, between i's end and that departure, another vehicle of its size drove
    through the place, or stood in it for a second: two vehicles are never in one place at once. In a queue this is
    what tells the cars apart: the car behind moves up through the place of the car that left first."""
    for (i, j), (set_off, waited_cost) in departures.items():
        if cost[i, j] == waited_cost and _place_taken(ok, t0, t1, i, j, ends[i][0], set_off, STATE_S):
            cost[i, j] = np.inf  # (where another rule explains the link, that rule judged it)


def _veto_driven_through(
    ok: list[Piece],
    cost: np.ndarray,
    cfg: LinkingConfig,
    ends: list,
    starts: list,
    t0: np.ndarray,
    t1: np.ndarray,
    end_mps: list[float],
    start_mps: list[float],
) -> None:
    """A link that says a vehicle stood at one place through its gap (both ends slow, the start where the end
    was) is refused where another vehicle of its size drove through that place in the gap: two vehicles are never in
    one place at once. (A queued car that moved up a place unseen starts elsewhere: the car behind it may well have
    taken its place.)"""
    pairs = [
        (i, j)
        for i, j in zip(*np.nonzero(np.isfinite(cost) & (cost <= cfg.max_cost)))
        if t0[j] > t1[i]
        and end_mps[i] < HEADING_MPS
        and start_mps[j] < HEADING_MPS
        and np.hypot(*(starts[j][0] - ends[i][0])) <= SAME_PLACE_LENGTHS * ok[i].length_px
    ]
    for i, j in pairs:
        if _place_taken(ok, t0, t1, i, j, ends[i][0], float(t0[j])):
            cost[i, j] = np.inf


def _place_taken(
    ok: list[Piece],
    t0: np.ndarray,
    t1: np.ndarray,
    i: int,
    j: int,
    point: np.ndarray,
    until: float,
    stood_s: float = np.inf,
) -> bool:
    """Whether another vehicle of piece i's size (not piece j) came within reach of ``point``, where i ended,
    between i's end and ``until``, and drove there or away from it (not a box standing by), or stood there
    ``stood_s`` or longer."""
    a, reach = ok[i], THROUGH_LENGTHS * ok[i].length_px
    for k in np.flatnonzero((t0 < until) & (t1 > t1[i])).tolist():
        b = ok[k]
        if k in (i, j) or max(a.length_px, b.length_px) > THROUGH_SIZE_RATIO * min(a.length_px, b.length_px):
            continue
        sel = (b.t > t1[i]) & (b.t < until)
        if not sel.any():
            continue
        d = np.hypot(*(b.xy[sel] - point).T)
        near = b.t[sel][d <= reach]
        if near.size and (d.max() >= THROUGH_AWAY_LENGTHS * a.length_px or near[-1] - near[0] >= stood_s):
            return True
    return False
