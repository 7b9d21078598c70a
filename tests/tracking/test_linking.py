"""Whole-flight linking (tracking/linking.py, tracking/linked_run.py): the pieces of one vehicle joined, and only
those; the frames between filled where the vehicle stood or the gap was short."""

from __future__ import annotations

import dataclasses

import numpy as np

from tracking.linked_run import hold, link_results, with_images
from tracking.linking import LinkingConfig, Piece, link_pieces
from tracking.types import INTERPOLATED, FrameResult, TrackState
from vision.types import Frame

FPS = 10.0
W, H = 1000, 600
CAR = 40.0  # px long (4.5 m): 0.1125 m per px


def _results(n_frames: int, paths: dict[int, dict[int, tuple[float, float]]]) -> list[FrameResult]:
    """``paths``: track id -> {frame: box centre}; a hovering drone (to_first = identity)."""
    out = []
    for f in range(n_frames):
        tracks = [
            TrackState(tid, np.array([x - CAR / 2, y - CAR / 4, x + CAR / 2, y + CAR / 4], np.float32), 0.9, 0)
            for tid, path in paths.items()
            if f in path
            for x, y in [path[f]]
        ]
        out.append(FrameResult(Frame(f, f / FPS, np.zeros((1, 1, 3), np.uint8)), tracks, to_first=np.eye(3)))
    return out


def _ids_by_frame(results: list[FrameResult]) -> dict[int, set[int]]:
    return {r.frame.index: {tr.track_id for tr in r.tracks} for r in results}


def _drive(frames: range, x0: float, y: float, px_per_frame: float) -> dict[int, tuple[float, float]]:
    return {f: (x0 + px_per_frame * (f - frames.start), y) for f in frames}


def test_a_car_waiting_at_a_red_light_is_one_track_reported_on_every_frame():
    # arrives moving, stops at x=500 for 25 s (the detector loses it: the track breaks), then drives off
    arrive = {f: (100 + 8 * f, 300.0) for f in range(0, 50)}  # 8 px/frame = 9 m/s, stops at x=500 at f=50
    stand_a = {f: (500.0, 300.0) for f in range(50, 80)}
    stand_b = {f: (500.0, 300.5) for f in range(330, 360)}  # found again 25 s later where it stood
    leave = {f: (500 + 8 * (f - 360), 300.0) for f in range(360, 400)}
    results = _results(400, {1: arrive | stand_a, 2: stand_b | leave})
    report = link_results(results, W, H)
    assert report.links == 1 and report.tracks_after == 1
    ids = _ids_by_frame(results)
    assert all(ids[f] == {1} for f in range(400)), "one id on every frame from arrival to departure"
    filled = [tr for r in results[80:330] for tr in r.tracks]
    assert len(filled) == 250 and all(tr.speed_flag == INTERPOLATED and tr.speed_kmh is None for tr in filled)
    assert all(abs(tr.center[0] - 500) < 1 for tr in filled)  # where it stood


def test_a_car_lost_for_its_whole_50_s_wait_is_one_track_where_it_stood_and_only_there():
    """A red light's wait longer than ``max_gap_s`` (the renders' reds last 39-66 s): a car that stood where it was
    lost and set off from there 50 s later is one vehicle (``linking.max_wait_s``). Not over that gap: a piece that
    ended moving, a start 3 m from where it stood (the car behind, moved up), a wait at the frame's edge."""
    stand_a = {f: (180.0 + 8 * f, 300.0) for f in range(0, 40)} | {f: (500.0, 300.0) for f in range(40, 80)}
    leave = {f: (500.0 + 8 * max(0, f - 600), 300.0) for f in range(580, 640)}  # found 50 s later, sets off 2 s on
    results = _results(640, {1: stand_a, 2: leave})
    assert link_results(results, W, H).links == 1 and _ids_by_frame(results)[639] == {1}
    assert all(_ids_by_frame(results)[f] == {1} for f in range(80, 580)), "reported where it stood through the wait"
    assert link_results(_results(640, {1: stand_a, 2: leave}), W, H, LinkingConfig(max_wait_s=30.0)).links == 0
    moving = {f: (180.0 + 8 * f, 300.0) for f in range(0, 80)}  # drove through x=500 and on, out of sight
    assert link_results(_results(640, {1: moving, 2: leave}), W, H).links == 0
    moved_up = {f: (x + 27.0, y) for f, (x, y) in leave.items()}  # 3 m on: within max_gap_s the queue rule's
    assert link_results(_results(640, {1: stand_a, 2: moved_up}), W, H).links == 0
    at_edge = {f: (500.0, H - CAR / 8) for f in range(40, 80)}  # its box cut by the bottom edge
    edge_leave = {f: (500.0 + 8 * max(0, f - 600), H - CAR / 8) for f in range(580, 640)}
    assert link_results(_results(640, {1: at_edge, 2: edge_leave}), W, H).links == 0


def test_a_queue_of_broken_tracks_is_joined_car_by_car():
    # three cars queued 60 px apart (nose to tail), each track broken during the wait; restarts in the same places
    results = _results(
        300,
        {
            1: {f: (500.0, 300.0) for f in range(0, 40)},
            2: {f: (440.0, 300.0) for f in range(0, 45)},
            3: {f: (380.0, 300.0) for f in range(0, 50)},
            11: {f: (500.0 + 6 * max(0, f - 250), 300.0) for f in range(200, 300)},
            12: {f: (440.0 + 6 * max(0, f - 255), 300.0) for f in range(210, 300)},
            13: {f: (380.0 + 6 * max(0, f - 260), 300.0) for f in range(220, 300)},
        },
    )
    report = link_results(results, W, H)
    assert report.links == 3
    ids = _ids_by_frame(results)
    assert ids[299] == {1, 2, 3}
    lead = next(tr for tr in results[299].tracks if tr.center[0] > 600)
    assert lead.track_id == 1  # the car in front kept its own id, not the one behind's


def test_pieces_that_leave_or_enter_the_view_or_go_the_other_way_are_not_joined():
    results = _results(
        200,
        {
            1: _drive(range(0, 60), 700, 300, 5.0),  # leaves through the right edge (x >= 1000) ...
            2: _drive(range(80, 140), 980, 300, -5.0),  # ... another enters there, going the other way
            3: _drive(range(0, 50), 100, 100, 5.0),  # eastbound, lost at x=345
            4: _drive(range(70, 120), 400, 100, -5.0),  # westbound from x=400: not the same vehicle turned round
        },
    )
    report = link_results(results, W, H)
    assert report.links == 0
    assert report.tracks_after == 4


def test_a_vehicle_hidden_for_three_seconds_keeps_its_id_and_the_long_gap_is_not_guessed():
    hidden = _drive(range(0, 100), 50, 400, 6.0)
    results = _results(
        100, {1: {f: p for f, p in hidden.items() if f < 40}, 2: {f: p for f, p in hidden.items() if f >= 70}}
    )
    report = link_results(results, W, H, LinkingConfig(fill_moving_s=1.0))
    assert report.links == 1 and report.filled_boxes == 0  # moving across 3 s: joined, not filled
    assert report.pieces == [[1, 1, 0, 39], [2, 1, 70, 99]]  # for an audit against truth (summary.json)
    assert _ids_by_frame(results)[99] == {1}
    short = _results(
        100, {1: {f: p for f, p in hidden.items() if f < 40}, 2: {f: p for f, p in hidden.items() if f >= 46}}
    )
    report = link_results(short, W, H, LinkingConfig(fill_moving_s=1.0))
    assert report.filled_boxes == 6  # frames 40-45 (0.6 s): filled on its path
    for r in short[40:46]:
        (tr,) = r.tracks
        assert abs(tr.center[0] - hidden[r.frame.index][0]) < 1e-3
    # by default gaps up to 2 s are filled: 1.5 s here (frames 40-54)
    medium = _results(
        100, {1: {f: p for f, p in hidden.items() if f < 40}, 2: {f: p for f, p in hidden.items() if f >= 55}}
    )
    assert link_results(medium, W, H).filled_boxes == 15
    assert link_results(medium, W, H, LinkingConfig(fill_moving_s=1.0)).filled_boxes == 0


def test_the_next_vehicle_on_the_path_is_not_joined_to_the_one_that_drove_out_of_sight():
    """Two cars on one lane, 5 s apart, both lost at the same place (a tree, the detector's far limit): the second
    reaches where the first's piece ended 5 s later at speed. The first cannot have stood there unseen and set off
    again at once, so the pieces stay apart; a car slow at the end of its piece (a queue) may have stood."""
    first = _drive(range(0, 30), 100, 300, 6.0)  # 6 px per frame: 6.75 m/s, lost at x=274
    second = _drive(range(80, 120), 280, 300, 6.0)  # from x=280, 5 s later, at the same speed
    report = link_results(_results(130, {1: first, 2: second}), W, H)
    assert report.links == 0
    report = link_results(_results(130, {1: first, 2: second}), W, H, LinkingConfig(min_gap_speed_share=0.0))
    assert report.links == 0  # without the rule, the distance it lies short of the speed still costs too much
    no_rules = LinkingConfig(min_gap_speed_share=0.0, gap_shortfall_cost=0.0)
    report = link_results(_results(130, {1: first, 2: second}), W, H, no_rules)
    assert report.links == 1  # without either: the follower took the first car's id
    crawling = _drive(range(0, 30), 100, 300, 0.5)  # a queue creeping at 0.56 m/s: it may have stood in between
    report = link_results(_results(130, {1: crawling, 2: _drive(range(80, 120), 117, 300, 6.0)}), W, H)
    assert report.links == 1


def test_a_car_found_again_at_once_beside_its_line_is_not_given_up_for_one_on_its_line_but_too_far_back():
    """A car driving on at 4.5 m/s is lost for 0.6 s and found again 1 m beside the line it drove on (the boxes'
    noise); 4 s after it was lost, a car that followed it 6 m behind is first boxed on that line. The follower lies
    12 m on from where the lost car's piece ended, where that car would be 18 m on: it would have had to slow down
    unseen and speed up again. Judged by the line alone the follower was the cheaper link (``linking.gap_shortfall_cost``
    charges the distance a start lies short of what the slower of the two speeds covers in the gap)."""
    lost = _drive(range(0, 100), 100, 300, 4.0)  # 4 px per frame: 4.5 m/s, lost at x=496
    found = _drive(range(106, 160), 524, 309, 4.0)  # itself, 0.6 s later, 9 px (1 m) beside its line
    follower = {f: (47 + 4.0 * f, 300.0) for f in range(140, 200)}  # 53 px (6 m) behind it, first boxed at f=140
    paths = {1: lost, 2: found, 3: follower}
    results = _results(200, paths)
    assert link_results(results, W, H).links == 1
    ids = _ids_by_frame(results)
    assert 1 in ids[120] and 3 in ids[150], "the car found again keeps its id, the follower its own"
    results = _results(200, paths)
    link_results(results, W, H, LinkingConfig(gap_shortfall_cost=0.0))
    ids = _ids_by_frame(results)
    assert 2 in ids[120] and 1 in ids[150], "without the charge the follower took the lost car's id"


def test_a_vehicle_hidden_while_driving_for_longer_than_max_moving_gap_is_not_joined_but_a_waiting_one_is():
    """Moving at both ends, a gap of 15 s is more often the next vehicle than the same one (the 5-minute roundabout
    render: most links over such gaps were wrong); standing at both ends, a queue, it is still joined."""
    path = _drive(range(0, 230), 100, 300, 2.0)  # 2 px per frame: 2.25 m/s, hidden from frame 40 to 190 (15 s)
    pieces = {1: {f: p for f, p in path.items() if f < 40}, 2: {f: p for f, p in path.items() if f >= 190}}
    assert link_results(_results(230, pieces), W, H).links == 0
    assert link_results(_results(230, pieces), W, H, LinkingConfig(max_moving_gap_s=30.0)).links == 1
    waiting = {1: {f: (500.0, 300.0) for f in range(0, 40)}, 2: {f: (500.0, 300.0) for f in range(190, 230)}}
    assert link_results(_results(230, waiting), W, H).links == 1


def test_a_truck_hidden_while_driving_for_longer_than_max_moving_gap_is_joined_where_a_car_is_not():
    """A truck or a bus is lost for longer than a car (the detector boxes a fifth of the rendered roundabout's trucks),
    and no other vehicle of the flight looks like it: two pieces 2.2 cars long, of one size, are joined across 15 s of
    driving where two car-sized ones are not (``linking.large_lengths``). A later truck of another size is not it."""

    def piece(tid: int, frames: range, x0: float, y: float, length: float) -> Piece:
        n = len(frames)
        t = np.array(frames) / FPS
        xy = np.column_stack([x0 + 40.0 * (t - t[0]), np.full(n, y)])  # 40 px/s: on at that pace through the gap
        return Piece(tid, np.array(frames), t, xy, length, lengths_px=np.full(n, length))

    cars = [piece(10 + k, range(20 * k, 20 * k + 40), 100.0, 340.0, CAR) for k in range(6)]  # the other lane's cars
    truck = [piece(1, range(0, 40), 100.0, 300.0, 2.2 * CAR), piece(2, range(190, 230), 860.0, 300.0, 2.2 * CAR)]
    assert link_pieces(truck + cars)[2] == 1
    assert link_pieces(truck + cars, LinkingConfig(large_lengths=0.0))[2] == 2
    car = [piece(1, range(0, 40), 100.0, 300.0, CAR), piece(2, range(190, 230), 860.0, 300.0, CAR)]
    assert link_pieces(car + cars)[2] == 2
    other = [truck[0], piece(2, range(190, 230), 860.0, 300.0, 1.6 * 2.2 * CAR)]
    assert link_pieces(other + cars)[2] == 2


def test_a_second_track_on_a_vehicle_still_followed_is_joined_and_a_car_beside_or_behind_it_is_not():
    """The tracker now and then starts a second track on a vehicle it still follows (a truck boxed whole and in part):
    the two pieces overlap for seconds, their boxes coinciding on every frame both report, and are one vehicle with
    one box a frame (``linking.overlap_s``). A car in the next lane (3.5 m beside it) or a length behind, driving
    with it, is not."""
    path = _drive(range(0, 200), 100, 300, 4.0)  # 4.5 m/s
    first = {f: p for f, p in path.items() if f < 120}
    second = {f: (x + 3.0, y + 2.0) for f, (x, y) in path.items() if f >= 80}  # 4 s of overlap, 0.4 m off
    results = _results(200, {1: first, 2: second})
    assert link_results(results, W, H).links == 1
    assert all(ids == {1} for ids in _ids_by_frame(results).values())
    assert all(len(r.tracks) == 1 for r in results)  # one box a frame where both reported it
    assert link_results(_results(200, {1: first, 2: second}), W, H, LinkingConfig(overlap_s=0.5)).links == 0
    for dx, dy in ((0.0, 3.5 / 0.1125), (-CAR - 5.0, 0.0)):  # the next lane; a length (and a gap) behind
        other = {f: (x + dx, y + dy) for f, (x, y) in path.items() if f >= 80}
        assert link_results(_results(200, {1: first, 2: other}), W, H).links == 0


def test_a_car_creeping_in_a_queue_is_joined_across_a_long_wait_and_one_found_metres_on_is_not():
    """A piece that ends creeping (1.2 m/s: a queue closing up, or a short piece's jittery boxes) is not measured as
    standing, yet its next piece 20 s later starts where it was: it stood there (``linking.stood_m``). A start 6 m
    on is not that: a vehicle still moving would be 24 m on, one that stood would be where it was (unless it moved
    up a place in the queue: ``linking.queue_step_m``, off here and tested below)."""
    creep = 1.07  # px per frame: 1.2 m/s
    arrive = {f: (100.0 + 8 * f, 300.0) for f in range(0, 40)}  # 9 m/s, then creeps for 1.5 s
    arrive |= {f: (420.0 + creep * (f - 40), 300.0) for f in range(40, 55)}
    end_x = 420.0 + creep * 14
    no_steps = LinkingConfig(queue_step_m=0.0)
    for start_x, joined in ((end_x + 4.0, True), (end_x + 53.0, False)):  # 0.45 m and 6 m on
        leave = {f: (start_x + creep * (f - 255), 300.0) for f in range(255, 270)}
        leave |= {f: (start_x + creep * 15 + 8 * (f - 270), 300.0) for f in range(270, 300)}
        pieces = {1: arrive, 2: leave}
        assert link_results(_results(300, pieces), W, H, no_steps).links == int(joined)
        assert link_results(_results(300, pieces), W, H, no_steps.model_copy(update={"stood_m": 0.0})).links == 0


def test_a_queued_car_that_moved_up_a_place_unseen_is_joined_and_one_in_the_next_lane_is_not():
    """Car 2 waits behind car 1 at a light, its track lost; car 1 drives off, car 2 moves up its place (60 px: 6.75
    m) unseen and is found standing there: one vehicle (``linking.queue_step_m``). Car 3 behind it, followed all
    along, keeps its own track; a car standing a lane beside that place is not car 2."""
    front = {f: (600.0, 300.0) for f in range(0, 100)} | {f: (600.0 + 8 * (f - 100), 300.0) for f in range(100, 150)}
    second = {f: (100.0 + 8 * f, 300.0) for f in range(0, 55)} | {f: (540.0, 300.0) for f in range(55, 90)}
    third = {f: (100.0 + 8 * (f - 10), 300.0) for f in range(10, 58)} | {f: (480.0, 300.0) for f in range(58, 115)}
    third |= {f: (480.0 + 6 * (f - 114), 300.0) for f in range(115, 125)} | {f: (540.0, 300.0) for f in range(125, 250)}
    for y, joined in ((300.0, True), (330.0, False)):  # on its lane; 3.4 m beside it
        found = {f: (600.0, y) for f in range(150, 250)}
        results = _results(250, {1: front, 2: second, 3: third, 12: found})
        report = link_results(results, W, H)
        assert report.links == int(joined)
        ids = _ids_by_frame(results)
        assert ids[200] == ({2, 3} if joined else {12, 3})
        assert (
            link_results(
                _results(250, {1: front, 2: second, 3: third, 12: found}), W, H, LinkingConfig(queue_step_m=0.0)
            ).links
            == 0
        )


def test_a_car_that_left_unseen_is_not_joined_to_the_one_that_later_stood_where_it_had():
    """Car 1 waits at x=500 and leaves unseen; 7 s later car 3 drives along its lane through that place; 22 s after
    car 1 was last seen, car 2 stands there: car 1 did not stand there through the gap (``linking.driven_through``).
    A car driving by a lane beside it (40 px: 4.5 m) says nothing of the place."""
    wait = {f: (500.0, 300.0) for f in range(50, 80)}
    later = {f: (500.0, 300.5) for f in range(300, 330)}
    for y, joined in ((300.0, False), (340.0, True)):
        through = _drive(range(150, 200), 300.0, y, 8.0)  # passes x=500 at frame 175
        results = _results(330, {1: wait, 3: through, 2: later})
        assert link_results(results, W, H).links == int(joined)
        assert _ids_by_frame(results)[310] == ({1} if joined else {2})
        unchecked = _results(330, {1: wait, 3: through, 2: later})
        assert link_results(unchecked, W, H, LinkingConfig(driven_through=False)).links == 1


def test_a_box_of_two_queued_cars_is_not_taken_for_the_car_that_waits_there():
    """The detector now and then boxes two queued cars as one (a box twice a car's length, centred near the front
    one): the car's next piece is its own next box, not that one (``linking.max_size_ratio``)."""

    def standing(tid: int, frames: range, length: float) -> Piece:
        n = len(frames)
        xy = np.column_stack([np.full(n, 500.0), np.full(n, 300.0)])
        return Piece(tid, np.array(frames), np.array(frames) / FPS, xy, length, lengths_px=np.full(n, length))

    car, two_cars, car_again = (
        standing(1, range(0, 50), CAR),
        standing(2, range(60, 100), 2 * CAR),
        standing(3, range(110, 200), CAR),
    )
    mapping = link_pieces([car, two_cars, car_again])
    assert mapping == {1: 1, 2: 2, 3: 1}
    unsized = link_pieces([car, two_cars, car_again], LinkingConfig(max_size_ratio=100.0, size_cost=0.0))
    assert len(set(unsized.values())) == 1  # sizes not compared: the box of two cars joins the chain


def test_a_track_that_followed_the_car_ahead_off_for_a_second_is_cut_back_and_joined_where_the_car_waits():
    """A car waiting behind another: as the one ahead drives off, the waiting car's track takes it for its car and
    follows it 1.5 s before it is lost; the waiting car is found again where it stood. Its next piece is joined where
    the track stood (``linking.tail_s``), and the boxes on the car ahead are dropped from it (the frames between
    filled where it stood); the car ahead keeps its own track. Judged by its end alone, the piece was a car driving
    away, and the waiting one's restart behind it was never joined."""
    ahead = {f: (545.0, 300.0) for f in range(0, 80)} | {f: (545.0 + 8 * (f - 80), 300.0) for f in range(80, 130)}
    waiting = {f: (500.0, 300.0) for f in range(0, 86)}
    hijacked = {f: ahead[f] for f in range(86, 101)}  # on the car ahead, driving off, then lost
    found_again = {f: (500.0, 300.3) for f in range(104, 160)} | {
        f: (500 + 8 * (f - 160), 300.0) for f in range(160, 200)
    }
    paths = {1: waiting | hijacked, 3: found_again, 5: ahead}
    results = _results(200, paths)
    report = link_results(results, W, H)
    boxes = {(r.frame.index, tr.track_id): tr.center[0] for r in results for tr in r.tracks}
    assert report.dropped_boxes == 15
    assert all(abs(boxes[(f, 1)] - 500.0) < 1 for f in range(0, 160)), "car 1 where it waits, on every frame"
    assert all(abs(boxes[(f, 5)] - ahead[f][0]) < 1 for f in range(0, 130)), "the car ahead keeps its own track"
    unlinked = _results(200, paths)
    link_results(unlinked, W, H, LinkingConfig(tail_s=0.0))
    assert any(tr.track_id == 3 for r in unlinked for tr in r.tracks)


def test_a_moving_car_whose_box_grows_as_it_comes_out_from_under_a_tree_is_still_joined():
    """Sizes are compared only where an end is slow (a queue): a car driving out from under a tree is first boxed
    in part, and its box nearly doubles across the gap (the real nadir sequence M0703 has such a car)."""
    t = np.arange(20) / FPS
    xy = np.column_stack([100.0 + 80 * t, np.full(20, 300.0)])  # 80 px/s: 9 m/s
    hidden = Piece(1, np.arange(20), t, xy, 0.55 * CAR, lengths_px=np.full(20, 0.55 * CAR))
    out = Piece(2, np.arange(30, 50), t + 3.0, xy + 240.0 * np.array([1.0, 0.0]), CAR, lengths_px=np.full(20, CAR))
    assert link_pieces([hidden, out]) == {1: 1, 2: 1}


def test_a_car_lost_on_a_roundabout_is_joined_along_its_arc():
    """A car circling a roundabout (radius 20 m, 5 m/s: 14 degrees a second) is lost for 1.6 s; where it is found
    lies 3.5 m off the straight line it was on (more than a lane's width): the arc both pieces turn on joins them."""
    radius_px, w = 20 / 4.5 * CAR, 5.0 / 20  # 178 px, 0.25 rad/s

    def circle(frames: range, sign: float = 1.0) -> dict[int, tuple[float, float]]:
        return {
            f: (500 + radius_px * np.cos(sign * w * f / FPS), 300 + radius_px * np.sin(sign * w * f / FPS))
            for f in frames
        }

    car = circle(range(0, 120))
    results = _results(120, {1: {f: p for f, p in car.items() if f < 40}, 2: {f: p for f, p in car.items() if f >= 56}})
    assert link_results(results, W, H).links == 1
    assert _ids_by_frame(results)[100] == {1}


def test_a_car_lost_while_it_turned_steadily_off_a_roundabout_is_joined():
    """A car at 11 m/s drives straight, turns 28 degrees on a steady arc over 1.8 s unseen (leaving a roundabout), and
    drives on straight: both pieces were measured turning at no rate, the start lies ~5 m off the end's line and its
    heading is under a hidden turn's 30 degrees; the steady turn the two headings imply joins them (both pieces
    followed ``linking.steady_turn_min_s`` or more: ``linking.steady_turns``)."""
    speed = 11.0 / 4.5 * CAR / FPS  # px a frame (9.8)
    theta, hidden = np.radians(28.0), 18  # the arc over frames 40-58, no box on 40-57
    radius = speed * hidden / theta
    path = {f: (100.0 + speed * f, 300.0) for f in range(0, 40)}
    x0 = 100.0 + speed * 40
    corner = (x0 + radius * np.sin(theta), 300.0 + radius * (1 - np.cos(theta)))
    path |= {
        f: (corner[0] + speed * (f - 58) * np.cos(theta), corner[1] + speed * (f - 58) * np.sin(theta))
        for f in range(58, 100)
    }
    before = {f: p for f, p in path.items() if f < 40}
    after = {f: p for f, p in path.items() if f >= 58}
    assert link_results(_results(100, {1: before, 2: after}), W, H).links == 1
    assert link_results(_results(100, {1: before, 2: after}), W, H, LinkingConfig(steady_turns=False)).links == 0
    # five boxes (0.4 s) fit a heading: a car circling a roundabout flickers into such pieces between the detector's
    # misses; three (0.2 s) do not (a glimpse's boxes jitter), nor five where a second is asked for
    short = {f: p for f, p in after.items() if f < 63}
    assert link_results(_results(100, {1: before, 2: short}), W, H).links == 1
    assert link_results(_results(100, {1: before, 2: short}), W, H, LinkingConfig(steady_turn_min_s=1.0)).links == 0
    glimpse = {f: p for f, p in after.items() if f < 61}
    assert link_results(_results(100, {1: before, 2: glimpse}), W, H).links == 0


def test_a_car_lost_in_a_tight_turn_is_judged_from_its_headings_at_the_ends():
    """A car at 6 m/s drives east and turns right by 60 degrees on a 6 m arc; its track ends halfway round and the
    next starts 1.3 s later on the straight after the turn. A line fitted over the first piece's last second heads
    as the car did half a second before its end: nearly east, though it was turning. Judged from that heading the
    steady turn to the start misses it by more than a lane; turned on at the rate the piece was measured turning
    at, to the heading at its very end, it meets it (``linking.steady_turn_ends``)."""
    m = CAR / 4.5
    speed, radius, turn = 6.0 * m / FPS, 6.0 * m, np.radians(60.0)
    arc_frames = int(round(turn * radius / speed))
    path = {}
    for f in range(0, 140):
        if f <= 40:
            path[f] = (100.0 + speed * f, 150.0)
        elif f <= 40 + arc_frames:
            a = (f - 40) * speed / radius
            path[f] = (100.0 + speed * 40 + radius * np.sin(a), 150.0 + radius * (1 - np.cos(a)))
        else:
            x0, y0 = 100.0 + speed * 40 + radius * np.sin(turn), 150.0 + radius * (1 - np.cos(turn))
            k = f - 40 - arc_frames
            path[f] = (x0 + speed * k * np.cos(turn), y0 + speed * k * np.sin(turn))
    before = {f: p for f, p in path.items() if f < 46}
    after = {f: p for f, p in path.items() if f >= 58}
    assert link_results(_results(140, {1: before, 2: after}), W, H).links == 1
    off = LinkingConfig(steady_turn_ends=False)
    assert link_results(_results(140, {1: before, 2: after}), W, H, off).links == 0


def _turning_left(hidden: range) -> tuple[dict, dict]:
    """A car at 6 m/s drives east, turns left (north) on a quarter circle of 12 m radius and drives on north; the
    frames ``hidden`` (the turn) have no box. Its two pieces: before and after."""
    speed, radius = 6.0 / 4.5 * CAR / FPS, 12 / 4.5 * CAR  # px a frame (5.3), px (107)
    turn_frames = int(round(np.pi / 2 * radius / speed))
    path = {}
    for f in range(0, 200):
        if f <= 75:
            path[f] = (100 + speed * f, 300.0)
        elif f <= 75 + turn_frames:
            a = (f - 75) * speed / radius  # angle turned so far
            path[f] = (100 + speed * 75 + radius * np.sin(a), 300.0 - radius * (1 - np.cos(a)))
        else:
            x_end, y_end = 100 + speed * 75 + radius, 300.0 - radius
            path[f] = (x_end, y_end - speed * (f - 75 - turn_frames))
    before = {f: p for f, p in path.items() if f < hidden.start}
    after = {f: p for f, p in path.items() if f >= hidden.stop}
    return before, after


def test_a_car_lost_for_its_whole_turn_at_a_junction_is_one_track():
    """Hidden for the whole 3-second left turn: more than a turn's arc at its measured rate reaches (it drove
    straight until the turn) and no other vehicle shows the way; one circular arc tangent to both headings does."""
    before, after = _turning_left(range(76, 108))
    for turns, links in ((True, 1), (False, 0)):
        results = _results(200, {1: before, 2: after})
        assert link_results(results, W, H, LinkingConfig(hidden_turns=turns)).links == links


def test_a_car_that_sets_off_and_turns_unseen_with_a_straight_run_after_the_turn_is_one_track():
    """A car sets off at 4 m/s, is lost as it turns left (a quarter circle of 6 m radius) and found again after 8 m
    more straight north at 6 m/s: the two heading lines meet 6 m ahead of the one and 14 m behind the other, which
    no single arc tangent to both explains; the widest arc that fits with a straight run after it does."""
    m = CAR / 4.5  # px per metre
    east = {f: (100 + 4 * m / FPS * f, 400.0) for f in range(0, 40)}
    ex, ey = east[39]
    north = {f: (ex + 6 * m, ey - 14 * m - 6 * m / FPS * (f - 75)) for f in range(75, 120)}
    for run_m, links in ((LinkingConfig().turn_run_m, 1), (0.0, 0)):
        results = _results(200, {1: east, 2: north})
        assert link_results(results, W, H, LinkingConfig(turn_run_m=run_m)).links == links
    # the same car found again where only an arc tighter than a car turns would have taken it (2 m ahead) is not it
    tight = {f: (ex + 2 * m, y) for f, (_, y) in north.items()}
    assert link_results(_results(200, {1: east, 2: tight}), W, H).links == 0


def _sets_off_and_turns_left(gap_frames: int) -> tuple[dict, dict]:
    """A car drives east at 6 m/s, waits 5 s at a stop line, sets off at 2.5 m/s and is lost after 1.5 s; found
    again ``gap_frames`` later driving north at 6 m/s, 2.5 m on and 14 m to the left of where it was lost (it turned
    left somewhere between: where, its slow end does not say)."""
    m = CAR / 4.5  # px per metre
    arrive = {f: (100 + 6 * m / FPS * f, 400.0) for f in range(0, 30)}
    x_stop = arrive[29][0] + 6 * m / FPS
    wait = {f: (x_stop, 400.0) for f in range(30, 80)}
    off = {f: (x_stop + 2.5 * m / FPS * (f - 79), 400.0) for f in range(80, 95)}
    ex, ey = off[94]
    start = 95 + gap_frames
    north = {f: (ex + 2.5 * m, ey - 14 * m - 6 * m / FPS * (f - start)) for f in range(start, start + 40)}
    return arrive | wait | off, north


def test_a_car_that_sets_off_from_a_stop_line_and_turns_unseen_is_one_track():
    """Its start lies 14 m beside the end's lane and only 2.5 m on: no line, no arc a car drives (nor one with a
    straight run up to ``turn_run_m``) explains the link; a departure does: on the way it came, one turn, on north,
    16.5 m from standstill to 6 m/s in the 6 s it was unseen. Not in 1.5 s, and not with departures off."""
    for gap_frames, cfg, links in (
        (60, LinkingConfig(), 1),
        (60, LinkingConfig(departure_max_mps=0), 0),
        (15, LinkingConfig(), 0),
    ):
        before, after = _sets_off_and_turns_left(gap_frames)
        results = _results(300, {1: before, 2: after})
        assert link_results(results, W, H, cfg).links == links, (gap_frames, cfg.departure_max_mps)


def test_two_queued_cars_that_set_off_and_turn_unseen_keep_their_own_ways():
    """Two cars wait nose to tail at a stop line; each track ends as its car sets off (the second 0.5 s after the
    first has gone), and each is found again driving north after the turn, the second 4.5 s after the first. Each
    departure joins its own car's way on: the second car's end could reach the first car's start too, but then the
    first car would be left without one."""
    m = CAR / 4.5
    first, north_1 = _sets_off_and_turns_left(60)
    x_wait = first[30][0] - 7 * m  # behind the first car at the stop line
    second = {f: (x - 7 * m, y) for f, (x, y) in first.items() if f < 30}  # it arrived right behind
    second |= {f: (x_wait, 400.0) for f in range(30, 100)}
    second |= {f: (x_wait + 2.5 * m / FPS * (f - 99), 400.0) for f in range(100, 115)}
    north_2 = {f + 45: p for f, p in north_1.items()}
    results = _results(300, {1: first, 2: north_1, 3: second, 4: north_2})
    report = link_results(results, W, H)
    assert report.links == 2
    ids = _ids_by_frame(results)
    assert ids[160] == {1} and ids[210] == {3}


def test_a_piece_of_a_few_boxes_with_a_wrong_heading_does_not_cut_a_vehicle_in_two():
    """A car lost in its turn is seen for three frames whose boxes give a heading 25 degrees off (a turning car's
    box jitters), lost again, then found for good. The first piece cannot reach the three-frame piece as measured;
    once a first round has joined that one to the piece after it, its start carries the heading of the car driving
    on, and the second round joins the whole vehicle."""
    before, after = _turning_left(range(76, 110))
    glimpse_frames, rest = range(110, 113), {f: p for f, p in after.items() if f >= 115}
    x0, y0 = after[110]
    step = 6.0 / 4.5 * CAR / FPS
    off = np.radians(25)
    glimpse = {f: (x0 + np.sin(off) * step * k, y0 - np.cos(off) * step * k) for k, f in enumerate(glimpse_frames)}
    for rounds, heads in ((1, 2), (2, 1)):
        results = _results(200, {1: before, 2: glimpse, 3: rest})
        link_results(results, W, H, LinkingConfig(rounds=rounds, turn_run_m=0))
        assert len({tid for r in results for tr in r.tracks for tid in [tr.track_id]}) == heads


def test_a_car_on_the_crossing_road_is_not_taken_for_a_hidden_turn():
    """A car that drives on east out of sight is not joined to one that appears heading north on the crossing road
    behind where it was lost, nor to one far ahead that no single turn of its speed reaches."""
    east = {f: (100 + 5.3 * f, 300.0) for f in range(0, 76)}
    north_behind = {f: (450.0, 250 - 5.3 * (f - 100)) for f in range(100, 160)}
    north_far = {f: (900.0, 100 - 5.3 * (f - 100)) for f in range(100, 115)}
    for other in (north_behind, north_far):
        results = _results(200, {1: east, 2: other})
        assert link_results(results, W, H).links == 0


def test_a_queue_reaching_beyond_the_frame_edge_stays_one_track_per_car():
    """A car waiting at the bottom edge of the view (its box cut by the edge), lost for 8 s and found again at the
    same place, is one vehicle; a car that drives out through that edge and one that drives in there are not joined."""
    y = H - CAR / 8  # box centre: its lower quarter is below the frame
    waiting = {f: (300.0, y) for f in range(0, 200)}
    results = _results(
        200, {1: {f: p for f, p in waiting.items() if f < 60}, 2: {f: p for f, p in waiting.items() if f >= 140}}
    )
    report = link_results(results, W, H)
    assert report.links == 1 and _ids_by_frame(results)[150] == {1}
    leaving = {f: (600.0, 400 + 6.0 * f) for f in range(0, 40)}  # down and out through the bottom edge
    entering = {f: (600.0, H - 6.0 * (f - 100)) for f in range(100, 140)}  # up and in, 6 s later
    assert link_results(_results(200, {1: leaving, 2: entering}), W, H).links == 0


def test_a_car_lost_at_a_frame_edge_it_is_not_crossing_is_joined():
    """A box at the frame's edge means the vehicle left (or entered) the view only where it moves out through (in
    from) that edge: a car driving up into the view from the bottom edge, lost while its box still touches the edge,
    and one driving along the edge are joined to their next pieces like any other car lost for 1.5 s."""
    into_view = {f: (200.0 + 5 * f, H - 2.0 - 1.0 * f) for f in range(0, 60)}  # up and right, 5.6 m/s
    along_edge = {f: (100.0 + 6 * f, H - 4.0) for f in range(100, 160)}  # its box cut by the bottom edge throughout
    results = _results(
        200,
        {
            1: {f: p for f, p in into_view.items() if f < 8},  # ends at y=592: its box reaches 602 (the edge)
            2: {f: p for f, p in into_view.items() if f >= 23},
            3: {f: p for f, p in along_edge.items() if f < 120},
            4: {f: p for f, p in along_edge.items() if f >= 135},
        },
    )
    report = link_results(results, W, H)
    assert report.links == 2 and _ids_by_frame(results)[40] == {1} and _ids_by_frame(results)[150] == {3}


def test_links_are_judged_in_the_frames_not_in_a_drifted_first_frame():
    """Over a long flight the chained ego-motion (``to_first``) drifts: here it has come to double distances (and
    shift them 300 px) while the drone hovered. A car waits at one place, lost for 10 s; its box on the restart lies
    11 px (1.2 m) from where it was. In first-frame pixels, measured in its own box lengths, that is 2.5 m (more than
    the 2 m a standing car may shift); judged in the frame's own pixels it is 1.2 m, and its pieces are joined."""
    drift = np.array([[2.0, 0.0, 300.0], [0.0, 2.0, -200.0], [0.0, 0.0, 1.0]])
    first = {f: (400.0, 300.0) for f in range(0, 60)}
    second = {f: (411.0, 300.0) for f in range(160, 200)}
    results = _results(200, {1: first, 2: second})
    for r in results:
        r.to_first = drift
    report = link_results(results, W, H)
    assert report.links == 1
    assert report.filled_boxes == 100  # it stood: frames 60-159 filled, where it was


def test_link_pieces_prefers_the_short_displacement_and_needs_time_order():
    t = np.arange(10) / FPS
    a = Piece(1, np.arange(10), t, np.column_stack([np.full(10, 100.0), np.full(10, 50.0)]), CAR)
    b = Piece(2, np.arange(100, 110), t + 10, np.column_stack([np.full(10, 100.0), np.full(10, 50.0)]), CAR)
    before = Piece(3, np.arange(10), t - 20, np.column_stack([np.full(10, 100.0), np.full(10, 50.0)]), CAR)
    mapping = link_pieces([a, b, before])
    assert mapping[2] in (1, 3) and mapping[1] in (1, 3)
    assert len(set(mapping.values())) == 1  # standing at one place throughout: one vehicle, three pieces
    far = Piece(4, np.arange(100, 110), t + 10, np.column_stack([np.full(10, 400.0), np.full(10, 50.0)]), CAR)
    assert link_pieces([a, far]) == {1: 1, 4: 4}  # standing pieces 34 m apart are two vehicles


def test_held_results_give_back_their_images_and_masks():
    results = _results(5, {1: {f: (100.0 + f, 100.0) for f in range(5)}})
    mask = np.zeros((H, W), np.uint8)
    mask[100:200] = 255
    for r in results:
        r.road_mask = mask
    held = hold(results)
    assert all(r.frame.image.size == 0 and r.road_mask is None for r in held.results)
    frames = [Frame(f, f / FPS, np.full((H, W, 3), f, np.uint8)) for f in range(5)]
    seen = [
        (int(r.frame.image[0, 0, 0]), r.road_mask is not None and bool((r.road_mask == mask).all()))
        for r in with_images(held, frames)
    ]  # each image is let go once the sinks have had it
    assert seen == [(f, True) for f in range(5)]


def _with_unmeasured(results: list[FrameResult], tid: int, frames: range) -> list[FrameResult]:
    for r in results:
        if r.frame.index in frames:
            r.tracks = [dataclasses.replace(tr, measured=False) if tr.track_id == tid else tr for tr in r.tracks]
    return results


def test_a_moving_piece_whose_last_boxes_lag_behind_is_linked_from_its_last_measured_box():
    # a car at 6 px/frame (6.75 m/s); from frame 40 the standing hold's matches stay where it was (the patch's
    # background holds them back) until the track is lost at frame 47; the car's next track starts at frame 50,
    # where it has driven on to: 60 px (6.75 m) beyond the lagging end, 3 px/frame from it
    first = {f: (100.0 + 6 * min(f, 40), 300.0) for f in range(0, 48)}
    second = _drive(range(50, 100), 100 + 6 * 50, 300, 6.0)
    results = _with_unmeasured(_results(100, {1: first, 2: second}), 1, range(41, 48))
    report = link_results(results, W, H)
    assert report.links == 1
    ids = _ids_by_frame(results)
    assert all(ids[f] == {1} for f in range(0, 100))  # one vehicle on every frame
    for f in (44, 47, 49):  # the lagging boxes gave way to the vehicle's way between its measured boxes
        (box,) = results[f].tracks
        assert abs(box.center[0] - (100 + 6 * f)) <= 1.0
    # unmeasured boxes are only left out of a moving piece's end: without the option the end stands still there
    plain = _with_unmeasured(_results(100, {1: first, 2: second}), 1, range(41, 48))
    assert link_results(plain, W, H, LinkingConfig(unmeasured_tail_s=0.0)).links == 0


def test_a_car_held_while_it_waits_keeps_its_held_boxes_for_linking():
    # arrives, stops at x=500 (frame 50); the detector misses it as it waits: the hold carries it for 20 s, and it is
    # found again where it stood 5 s later: one vehicle, the held boxes are where it stood
    arrive = {f: (100 + 8 * f, 300.0) for f in range(0, 50)}
    held = {f: (500.0, 300.0) for f in range(50, 250)}
    found = {f: (500.0, 300.0) for f in range(300, 330)}
    leave = {f: (500 + 8 * (f - 330), 300.0) for f in range(330, 360)}
    results = _with_unmeasured(_results(360, {1: {**arrive, **held}, 2: {**found, **leave}}), 1, range(50, 250))
    report = link_results(results, W, H)
    assert report.links == 1 and sum(len(r.tracks) for r in results[50:250]) == 200


def test_an_unmeasured_tail_that_keeps_pace_with_the_vehicle_is_its_way():
    # the hold follows a car at 6 px/frame from frame 41 to the frame's edge... (its matches keep pace): the piece
    # ends there, beyond a car that starts standing at x=355 at frame 50, and is not linked to it. Judged from its
    # last measured box (x=340 at frame 40) instead, that car would look like where it stopped
    first = _drive(range(0, 48), 100, 300, 6.0)
    waiting = {f: (355.0, 300.0) for f in range(50, 150)}
    results = _with_unmeasured(_results(150, {1: first, 2: waiting}), 1, range(41, 48))
    assert link_results(results, W, H).links == 0
    assert sum(len(r.tracks) for r in results[41:48]) == 7  # its boxes stay


def test_a_car_that_set_off_while_held_is_linked_from_where_it_was_last_measured_standing():
    # it stands at x=500 (measured) until frame 100 and sets off; the standing hold's matches follow it 12 px (0.3 of
    # its length) and stall there, behind it (the patch still resembles the car half a length back; frames 101-115,
    # unmeasured), until the track is lost; its next track starts on it at frame 116, 20 px (half a length) beyond
    # the stalled matches and driving 4.5 m/s. From the stalled matches, a standing end 0.1 s before, no car gets
    # there; from where it was last measured standing, 1.6 s before, it does (the roundabout render's car 70)
    arrive = {f: (100 + 8 * f, 300.0) for f in range(0, 50)}
    stand = {f: (500.0, 300.0) for f in range(50, 101)}
    trailing = {f: (500.0 + min(3.0 * (f - 100), 12.0), 300.0) for f in range(101, 116)}
    again = {f: (532.0 + 4.0 * (f - 116), 300.0) for f in range(116, 160)}
    results = _with_unmeasured(_results(160, {1: {**arrive, **stand, **trailing}, 2: again}), 1, range(101, 116))
    report = link_results(results, W, H)
    assert report.links == 1
    assert all(_ids_by_frame(results)[f] == {1} for f in range(160))
    for f in (108, 115):  # the stalled matches gave way to the way from where it stood to where it was found
        (box,) = results[f].tracks
        assert abs(box.center[0] - (500 + (f - 100) / 16 * 32)) <= 1.0
    plain = _with_unmeasured(_results(160, {1: {**arrive, **stand, **trailing}, 2: again}), 1, range(101, 116))
    assert link_results(plain, W, H, LinkingConfig(carried_off_lengths=None, held_departures=False)).links == 0


def test_a_car_that_set_off_while_held_departs_from_its_last_measured_box_though_the_matches_hardly_moved():
    # it stands at x=500 (measured) until frame 100 and sets off; the standing hold's matches creep 3 px (under
    # carried_off_lengths) and stall (frames 101-115, unmeasured); its next track starts 3.5 m beyond where it stood
    # at frame 116, driving 3 m/s. From the held end 0.1 s before no car gets there; a departure from standstill
    # begun when it was last measured, 1.6 s before, does (the roundabout render's cars at the yield line)
    m = CAR / 4.5
    arrive = {f: (100 + 8 * f, 300.0) for f in range(0, 50)}
    stand = {f: (500.0, 300.0) for f in range(50, 101)}
    creep = {f: (500.0 + min(1.0 * (f - 100), 3.0), 300.0) for f in range(101, 116)}
    again = {f: (500.0 + 3.5 * m + 3 * m / FPS * (f - 116), 300.0) for f in range(116, 160)}

    def run(cfg: LinkingConfig) -> int:
        results = _with_unmeasured(_results(160, {1: {**arrive, **stand, **creep}, 2: again}), 1, range(101, 116))
        return link_results(results, W, H, cfg).links

    assert run(LinkingConfig()) == 1
    assert run(LinkingConfig(held_departures=False)) == 0
    # measured to the end (no hold), it stood there until 0.1 s before: not that car
    results = _results(160, {1: {**arrive, **stand, **creep}, 2: again})
    assert link_results(results, W, H).links == 0


def test_a_car_that_waited_at_the_frame_edge_is_linked_to_the_track_driving_away_from_there():
    # half out of the bottom edge it stands 17 s, where neither the detector nor the standing hold follows it (the
    # nadir intersection render's car 56); then a track drives away up the view along a way through where it stood
    stood = {f: (300.0, 590.0) for f in range(0, 60)}  # its box touches the bottom edge
    away = {f: (314.0 + 3.6 * (f - 230), 570.0 - 4.8 * (f - 230)) for f in range(230, 290)}
    results = _results(290, {1: stood, 2: away})
    assert link_results(results, W, H).links == 1
    assert link_results(_results(290, {1: stood, 2: away}), W, H, LinkingConfig(edge_waits=False)).links == 0
    # a track driving up another lane, 6.75 m across from where it stood, is another vehicle
    other_lane = {f: (360.0, 570.0 - 6.0 * (f - 230)) for f in range(230, 290)}
    assert link_results(_results(290, {1: stood, 2: other_lane}), W, H).links == 0


def _coloured(results: list[FrameResult], colours: dict[int, tuple[int, int, int]]) -> list[FrameResult]:
    """Each track's colour samples (tracking/appearance.py) once a second, as a recorded run carries them."""
    from tracking.appearance import box_histogram

    looks = {}
    for tid, bgr in colours.items():
        looks[tid] = box_histogram(np.full((20, 40, 3), bgr, np.uint8), np.array([0, 0, 40, 20], np.float32))
    for r in results:
        if r.frame.index % int(FPS) == 0:
            r.appearance = {tr.track_id: looks[tr.track_id] for tr in r.tracks if tr.track_id in colours}
    return results


def test_a_car_found_where_one_of_another_colour_waited_is_another_car():
    """Car 1 waits at x=500 and is lost; 22 s later a standing car is found there. By place and time it is car 1
    (a red light's wait), and so it is joined when it has car 1's colour, or no colours were sampled; a blue car
    found where a red one waited is another car (``linking.appearance``)."""
    wait = {f: (500.0, 300.0) for f in range(50, 80)}
    later = {f: (500.0, 300.5) for f in range(300, 330)}
    red, red_again, blue = (30, 30, 200), (30, 35, 185), (200, 60, 30)  # red_again: a little darker
    for colours, cfg, joined in (
        ({}, LinkingConfig(), True),
        ({1: red, 2: red_again}, LinkingConfig(), True),
        ({1: red, 2: blue}, LinkingConfig(), False),
        ({1: red, 2: blue}, LinkingConfig(appearance=False), True),
    ):
        results = _coloured(_results(330, {1: wait, 2: later}), colours)
        assert link_results(results, W, H, cfg).links == int(joined), (colours, cfg.appearance)
        assert _ids_by_frame(results)[310] == ({1} if joined else {2})


def test_of_two_cars_that_could_each_be_the_one_found_again_the_one_that_looks_like_it_is():
    """Two cars stand side by side at a stop line (lanes 30 px = 3.4 m apart) and both are lost; 20 s later one
    car is found standing between the two places, a little nearer the blue one's: it is red, so it is the red car."""
    red, blue = (30, 30, 200), (200, 60, 30)
    red_wait = {f: (500.0, 300.0) for f in range(50, 80)}
    blue_wait = {f: (500.0, 330.0) for f in range(50, 80)}
    found = {f: (500.0, 316.5) for f in range(280, 310)}
    results = _coloured(_results(310, {1: red_wait, 2: blue_wait, 3: found}), {1: red, 2: blue, 3: red})
    link_results(results, W, H)
    assert _ids_by_frame(results)[300] == {1}
    plain = _results(310, {1: red_wait, 2: blue_wait, 3: found})
    link_results(plain, W, H, LinkingConfig(appearance=False))
    assert _ids_by_frame(plain)[300] == {2}  # by place alone: the blue car


def test_a_car_found_standing_that_then_drives_back_the_way_the_lost_one_came_is_another_car():
    """Car 1 drives east and is lost; 9 s later car 2 is found standing 12 m on, in the lane beside, and drives off
    west: car 1 would have stopped and turned back where it was lost (``linking.turned_back_deg``; on the rendered
    oblique intersection such a link made a U-turn of a car that drove through). Driving off east, it is car 1."""
    lost = _drive(range(0, 50), 100, 300, 8.0)  # 9 m/s, lost at x=492
    for way, joined in ((-8.0, False), (8.0, True)):
        found = {f: (600.0, 315.0) for f in range(140, 170)} | _drive(range(170, 220), 600, 315, way)
        results = _results(220, {1: lost, 2: found})
        assert link_results(results, W, H).links == int(joined), way
        unchecked = _results(220, {1: lost, 2: found})
        assert link_results(unchecked, W, H, LinkingConfig(turned_back_deg=180)).links == 1, way


def test_a_car_lost_for_its_whole_wait_and_found_driving_off_is_one_track_unless_another_drove_through_its_place():
    """Car 1 stops at a stop line (x=500) and is lost 3 s later; 30 s on, a car is found driving off, straight on
    or turned left. Only a departure after a wait explains it (longer than ``max_moving_gap_s``), and with
    ``linking.waited_departures`` it is car 1. Not where car 2, tracked all along, drove through car 1's place
    before the found car could have set off from there: two vehicles are never in one place at once."""
    arrive = {f: (100 + 8 * f, 300.0) for f in range(0, 50)} | {f: (500.0, 300.0) for f in range(50, 80)}
    straight = _drive(range(380, 420), 580, 300, 8.0)
    left = {f: (580.0, 230.0 - 8.0 * (f - 380)) for f in range(380, 420)}
    for found in (straight, left):
        for cfg, links in ((LinkingConfig(waited_departures=False), 0), (LinkingConfig(), 1)):
            results = _results(420, {1: arrive, 2: found})
            assert link_results(results, W, H, cfg).links == links, (cfg.waited_departures, found[380])
        joined = _results(420, {1: arrive, 2: found})
        link_results(joined, W, H)
        assert _ids_by_frame(joined)[400] == {1}
    # car 2 waited behind car 1 and drove through its place at f=290-300, 8 s before the found car could have left
    behind = {f: (440.0, 300.0) for f in range(60, 280)} | _drive(range(280, 330), 440, 300, 8.0)
    results = _results(420, {1: arrive, 3: behind, 2: straight})
    assert link_results(results, W, H).links == 0


def test_two_cars_lost_in_one_queue_through_a_red_light_drive_off_in_their_order():
    """Cars 1 and 2 wait nose to tail (x=500 and 440) and both are lost; after the red light a car is found driving
    at x=620, and 3 s later another at x=600. Each could be either car (the two pairings' displacements add up to
    the same), but car 1 cannot be the one found later and further back: it was ahead of car 2 all along."""
    ahead = {f: (100 + 8 * f, 300.0) for f in range(0, 50)} | {f: (500.0, 300.0) for f in range(50, 80)}
    behind = {f: (40 + 8 * f, 300.0) for f in range(0, 50)} | {f: (440.0, 300.0) for f in range(50, 80)}
    first, second = _drive(range(400, 440), 620, 300, 8.0), _drive(range(430, 470), 600, 300, 8.0)
    results = _results(470, {1: ahead, 2: behind, 3: first, 4: second})
    assert link_results(results, W, H).links == 2
    ids = _ids_by_frame(results)
    assert ids[420] == {1} and ids[460] == {2}
