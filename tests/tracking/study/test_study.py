import csv
import json

import numpy as np
import pytest

from tests.tracking.study.conftest import drive, template
from tracking.study import (
    Approach,
    StudyConfig,
    StudyInputError,
    Trajectory,
    compute_study,
    find_approaches,
    write_study,
)


def test_approaches_found_where_tracks_enter_and_leave(junction):
    trajs, _ = junction
    found = find_approaches(trajs, StudyConfig())
    assert sorted(a.name for a in found) == ["E", "N", "S", "W"]
    for a in found:
        # the inbound heading of each arm points at the junction centre
        to_centre = np.degrees(np.arctan2(-a.x, -a.y)) % 360
        assert abs((a.heading_deg - to_centre + 180) % 360 - 180) < 15


def test_pieces_found_again_on_an_arms_way_out_are_not_an_approach(junction):
    """Vehicles the tracker lost in the junction and found again on the west arm's way out, heading out: their
    pieces start near the edge of the view with one heading, like an arm's entries, but "into the junction" points
    away from it - fragments, not a fifth arm."""
    trajs, _ = junction
    out_lane = np.array([[-50.0, 1.75], [-60.0, 1.75]])
    fragments = [Trajectory(100 + k, "car", *drive(out_lane, 10.0, 20.0 + 15.0 * k)) for k in range(4)]
    found = find_approaches(trajs + fragments, StudyConfig())
    assert sorted(a.name for a in found) == ["E", "N", "S", "W"]


def test_an_arm_whose_tracks_begin_at_two_places_along_it_is_one_approach():
    """A straight road seen end to end: half the eastbound tracks begin at the view's edge, half 30 m further on (a
    far side where the detector finds vehicles late). Same heading, one line: one approach, not two."""
    east = np.array([[-60.0, -1.75], [60.0, -1.75]])
    west = np.array([[60.0, 1.75], [-60.0, 1.75]])
    trajs = []
    for k in range(8):
        t, xy = drive(east, 12.0, 10.0 * k)
        if k % 2:
            t, xy = t[xy[:, 0] >= -30.0], xy[xy[:, 0] >= -30.0]
        trajs.append(Trajectory(k, "car", t, xy))
        trajs.append(Trajectory(100 + k, "car", *drive(west, 12.0, 10.0 * k + 5.0)))
    found = find_approaches(trajs, StudyConfig())
    assert len(found) == 2
    assert sorted(round(a.heading_deg) % 360 for a in found) == [90, 270]


def test_a_motorway_whose_tracks_begin_late_and_end_early_has_two_approaches():
    """A dual carriageway of three lanes each way seen end to end at motorway speed (the 4K ramp render): westbound
    vehicles are found only 40 m into the view (an entries-only cluster 40 m from the eastbound exits beside it), and
    a few westbound tracks are lost 35 m before the far edge (a small exits-only cluster within the west arm's spread
    of lanes). Two arms: two approaches, not four."""
    trajs = []
    for k in range(12):
        lane = 2.0 + 3.5 * (k % 3)
        east = np.array([[-70.0, -lane], [70.0, -lane]])
        trajs.append(Trajectory(k, "car", *drive(east, 30.0, 2.0 * k)))
        end = -35.0 if k % 4 == 0 else -70.0
        west = np.array([[30.0, lane], [end, lane]])
        trajs.append(Trajectory(100 + k, "car", *drive(west, 30.0, 2.0 * k + 1.0)))
    found = find_approaches(trajs, StudyConfig())
    assert len(found) == 2, [(a.name, round(a.x), round(a.y), round(a.heading_deg)) for a in found]
    assert sorted(round(a.heading_deg) % 360 for a in found) == [90, 270]


def test_a_motorway_half_with_a_few_tracks_lost_among_it_is_still_one_half():
    """The motorway above, and two eastbound vehicles the tracker loses where the westbound ones are first found (the
    4K ramp minute: 2 exits among 20 entries in that cluster): the westbound entries are still an entries half and
    join the eastbound exits into one arm. Two approaches, and every westbound vehicle gets that arm as its origin."""
    trajs = []
    for k in range(12):
        lane = 2.0 + 3.5 * (k % 3)
        trajs.append(Trajectory(k, "car", *drive(np.array([[-70.0, -lane], [70.0, -lane]]), 30.0, 2.0 * k)))
        trajs.append(Trajectory(100 + k, "car", *drive(np.array([[30.0, lane], [-70.0, lane]]), 30.0, 2.0 * k + 1.0)))
    for k in range(2):  # lost 40 m before the east edge, beside where the westbound tracks begin
        trajs.append(Trajectory(200 + k, "car", *drive(np.array([[-70.0, -2.0], [30.0, -2.0]]), 30.0, 30.0 + 3.0 * k)))
    study = compute_study(trajs, None, StudyConfig())
    assert len(study.approaches) == 2, [(a.name, round(a.x), round(a.y)) for a in study.approaches]
    west = [v for v in study.vehicles if 100 <= v.track_id < 200]
    assert all(v.origin is not None and v.destination is not None for v in west)


def test_every_vehicle_gets_its_origin_destination_movement_and_lane(junction):
    trajs, truth = junction
    study = compute_study(trajs, None, StudyConfig())
    names = {a.id: a.name for a in study.approaches}
    assert len(study.vehicles) == len(trajs)
    for v in study.vehicles:
        origin, dest, movement, lane = truth[v.track_id]
        assert (names.get(v.origin), names.get(v.destination), v.movement, v.lane) == (origin, dest, movement, lane)
    assert study.conflicts == []


def test_turning_movement_table_counts_every_vehicle_once_per_bin(junction):
    trajs, _ = junction
    study = compute_study(trajs, None, StudyConfig())
    # a ~3-minute flight is shorter than one 15-minute bin: shorter bins and a note
    assert study.bin_s == 120.0
    assert any("shorter than one 900 s bin" in w for w in study.warnings)
    rows = study.tables["turning_movements"]
    assert sum(r["count"] for r in rows) == len(trajs)
    n_bins = int(np.ceil((study.t1 - study.t0) / 120.0))
    assert {r["bin_start_s"] for r in rows} == {round(study.t0 + 120.0 * k, 2) for k in range(n_bins)}
    od = {
        (r["origin_name"], r["destination_name"]): r["count"]
        for r in study.tables["od_matrix"]
        if r["vehicle_class"] == "all"
    }
    assert od[("S", "N")] == 4 and od[("S", "E")] == 2 and od[("S", "W")] == 2
    flows = [r for r in study.tables["lane_flows"] if r["vehicles"]]
    assert flows and all(abs(r["time_mean_speed_kmh"] - 36.0) < 2.0 for r in flows)


def test_vehicles_entering_or_leaving_mid_view_are_counted_as_such(junction):
    trajs, _ = junction
    t = np.arange(0, 6, 0.1)
    from_middle = Trajectory(900, "car", 200 + t, np.column_stack([np.full_like(t, 1.75), 10.0 * t]))  # to N
    parked = Trajectory(901, "car", 200 + t, np.tile([[30.0, 30.0]], (len(t), 1)))
    study = compute_study([*trajs, from_middle, parked], None, StudyConfig())
    by_id = {v.track_id: v for v in study.vehicles}
    assert by_id[900].movement == "entered_mid_view" and by_id[900].origin is None
    assert {a.id: a.name for a in study.approaches}[by_id[900].destination] == "N"
    assert by_id[901].movement == "stationary"
    counted = {r["movement"] for r in study.tables["turning_movements"] if r["count"]}
    assert {"entered_mid_view", "stationary"} <= counted


def test_rear_end_and_crossing_conflicts():
    t = np.arange(0, 8, 0.1)
    standing = Trajectory(1, "car", t, np.tile([[1.75, 0.0]], (len(t), 1)))
    closing = Trajectory(2, "car", t, np.column_stack([np.full_like(t, 1.75), -60.0 + 12.0 * t]))
    # crossing paths at (0, 40): a northbound car there at t=3.0 s, an eastbound one at 3.6 s
    north = Trajectory(3, "car", t, np.column_stack([np.zeros_like(t), 40.0 + 10.0 * (t - 3.0)]))
    east = Trajectory(4, "car", t, np.column_stack([10.0 * (t - 3.6), np.full_like(t, 40.0)]))
    late = Trajectory(5, "car", t, np.column_stack([-40.0 + 10.0 * (t - 7.0), np.full_like(t, 40.0)]))
    study = compute_study([standing, closing, north, east, late], None, StudyConfig(ttc_s=1.5, pet_s=1.0))
    ttc = [c for c in study.conflicts if c.kind == "ttc"]
    pet = [c for c in study.conflicts if c.kind == "pet"]
    # the crossing pair is on a collision course too; the late car (5) conflicts with nobody
    assert {(c.track_a, c.track_b) for c in ttc} == {(1, 2), (3, 4)}
    rear_end = next(c for c in ttc if (c.track_a, c.track_b) == (1, 2))
    assert rear_end.value_s <= 1.5 and abs(rear_end.y) < 10
    assert [(c.track_a, c.track_b) for c in pet] == [(3, 4)]
    # centres 0.6 s apart, less half a car length each way at 10 m/s
    assert pet[0].value_s == pytest.approx(0.6 - 0.45, abs=0.1)


def test_parked_cars_whose_positions_jitter_have_no_conflict_with_each_other_but_with_a_car_driving_at_them():
    """Two cars parked side by side, 0.6 m apart, whose tracked positions drift to and fro at up to 2.3 km/h (box
    jitter; seed 2's oblique intersection had such a row of parked tracks): neither ever moved faster than 5.4 km/h,
    so no TTC between them, though extrapolated they meet within a second (five conflicts before). A car driving at
    one of them is one (a creeping queue, which has a heading, keeps its TTCs: the truth-trajectory ramp's)."""
    t = np.arange(0, 20, 0.1)
    parked = Trajectory(1, "car", t, np.tile([[0.0, 0.0]], (len(t), 1)))
    beside = Trajectory(2, "car", t, np.column_stack([2.4 + 0.4 * np.sin(2 * np.pi * t / 4), np.zeros_like(t)]))
    study = compute_study([parked, beside], None, StudyConfig(ttc_s=1.5, pet_s=1.0))
    assert {v.movement for v in study.vehicles} == {"stationary"}
    assert [c for c in study.conflicts if c.kind == "ttc"] == []
    at = Trajectory(3, "car", t, np.column_stack([np.zeros_like(t), -150.0 + 10.0 * t]))
    study = compute_study([parked, beside, at], None, StudyConfig(ttc_s=1.5, pet_s=1.0))
    pairs = {(c.track_a, c.track_b) for c in study.conflicts if c.kind == "ttc"}
    assert (1, 3) in pairs and (1, 2) not in pairs


def test_approaches_outside_the_view_are_refused(junction):
    trajs, _ = junction
    far = [Approach("A", "nowhere", 900.0, 900.0, 180.0, 10.0)]
    with pytest.raises(StudyInputError, match="outside the area the flight observed"):
        compute_study(trajs, far, StudyConfig())


def test_write_study_tables_and_geojson(junction, tmp_path):
    trajs, _ = junction
    study = compute_study(trajs, None, StudyConfig(bin_s=60))
    paths = write_study(study, tmp_path)
    names = {p.name for p in paths}
    assert {"turning_movements.csv", "od_matrix.csv", "vehicles.csv", "conflicts.csv", "study.geojson"} <= names
    with open(tmp_path / "turning_movements.csv") as fh:
        header = next(csv.reader(fh))
    assert header[:2] == ["bin_start_s", "bin_end_s"] and "movement" in header and "vehicle_class" in header
    gj = json.loads((tmp_path / "study.geojson").read_text())
    kinds = [f["properties"]["kind"] for f in gj["features"]]
    assert kinds.count("approach") == 4 and kinds.count("lane") == 8
    with open(tmp_path / "conflicts.csv") as fh:  # empty, but with its header
        assert next(csv.reader(fh))[0] == "kind"


def test_section_speed_between_two_counting_lines_and_density(junction):
    from tracking.study import CountingLine

    trajs, truth = junction
    lines = [CountingLine("s50", (0.0, -50.0), (8.0, -50.0)), CountingLine("s20", (0.0, -20.0), (8.0, -20.0))]
    study = compute_study(trajs, None, StudyConfig(counting_lines=lines))
    rows = study.tables["section_speeds"]
    from_south = {tid for tid, (origin, *_rest) in truth.items() if origin == "S"}
    assert {r["track_id"] for r in rows} == from_south
    assert all(abs(r["speed_kmh"] - 36.0) < 1.5 and abs(r["distance_m"] - 30.0) < 1.5 for r in rows)
    summary = [r for r in study.tables["section_speed_summary"] if r["vehicles"]]
    assert sum(r["vehicles"] for r in summary) == len(from_south)
    # one car at a time on 50 m of a two-lane approach: a low density, level of service A
    dens = study.tables["density"]
    assert dens and all(r["lanes"] == 2 and r["los"] == "A" and r["density_veh_km_lane"] < 7 for r in dens)
    hw = [r for r in study.tables["headway_stats"] if r["measure"] == "headway" and r["n"]]
    assert hw and all(r["median_s"] >= 7.5 for r in hw)  # vehicles enter 8 s apart, an arm's lane sees one in 32 s


def test_rows_with_lon_lat_give_georeferenced_approaches(junction):
    from tracking.study import trajectories_from_rows

    trajs, _ = junction
    # a local east/north tangent plane around 49.97 N, 36.30 E
    lon0, lat0, m_per_deg_lat = 36.30, 49.97, 111_132.0
    m_per_deg_lon = m_per_deg_lat * np.cos(np.radians(lat0))
    rows = [
        {
            "track_id": tr.track_id,
            "vehicle_class": tr.vehicle_class,
            "t_s": t,
            "x_m": x,
            "y_m": y,
            "lon": lon0 + x / m_per_deg_lon,
            "lat": lat0 + y / m_per_deg_lat,
        }
        for tr in trajs
        for t, (x, y) in zip(tr.t, tr.xy)
    ]
    rows.append(
        {"track_id": 999, "vehicle_class": "car", "t_s": 1.0, "x_m": None, "y_m": None, "lon": None, "lat": None}
    )
    again = trajectories_from_rows(rows)
    assert len(again) == len(trajs) and all(tr.lonlat is not None for tr in again)
    study = compute_study(again, None, StudyConfig())
    for a in study.approaches:
        assert a.lon == pytest.approx(lon0 + a.x / m_per_deg_lon, abs=1e-7)
        assert a.lat == pytest.approx(lat0 + a.y / m_per_deg_lat, abs=1e-7)


def _cut_by_the_flight(trajs: list[Trajectory], start_offset_s: float, end_offset_s: float) -> list[Trajectory]:
    """Two through vehicles cut by the flight: 901 northbound (the south arm, lane 1) from the flight's start, first
    seen ``start_offset_s`` x 10 m - 90 m past the junction's centre; 902 eastbound (the west arm) to its end, last
    seen ``end_offset_s`` x 10 m - 90 m past it (negative: before it)."""
    from tests.tracking.study.conftest import drive, rotate, template

    t_first = min(float(tr.t[0]) for tr in trajs)
    t_last = max(float(tr.t[-1]) for tr in trajs)
    t, xy = drive(template("through", 1), 10.0, t_first - start_offset_s)
    keep = t >= t_first
    started = Trajectory(901, "car", t[keep], xy[keep])
    t, xy = drive(rotate(template("through", 1), ARMS_W), 10.0, t_last - end_offset_s)
    keep = t <= t_last
    ended = Trajectory(902, "car", t[keep], xy[keep])
    return [*trajs, started, ended]


def test_vehicles_cut_by_the_flight_past_their_turn_get_no_guessed_arm_where_the_traffic_turns_several_ways(junction):
    """A vehicle first seen past the junction's centre when the flight began may have come from any arm; one last
    seen before the centre when it ended (a queue at a red light) has not made its turn yet. Where the flight's
    vehicles reach (leave) that arm from (for) several arms, as at this junction, neither gets an inferred arm."""
    trajs, _ = junction
    study = compute_study(_cut_by_the_flight(trajs, 9.5, 8.5), None, StudyConfig())
    names = {a.id: a.name for a in study.approaches}
    v = {v.track_id: v for v in study.vehicles}
    assert v[901].present_at_start and v[902].present_at_end
    assert v[901].origin is None and names[v[901].destination] == "N" and v[901].movement == "entered_mid_view"
    assert names[v[902].origin] == "W" and v[902].destination is None and v[902].movement == "left_mid_view"
    assert all(not (x.origin_inferred or x.destination_inferred) for x in study.vehicles)
    assert all(r["inferred"] == 0 for r in study.tables["od_matrix"])


def test_vehicles_cut_by_the_flight_get_the_arm_every_other_vehicle_took_flagged_as_inferred(junction):
    """Where every vehicle the flight saw reach the north arm came from the south, and every one from the west went
    on east, a vehicle first seen past the centre heading north gets the south arm as its origin, and one last seen
    before the centre heading east the east arm as its destination, flagged as inferred."""
    trajs, truth = junction
    keep = [tr for tr in trajs if truth[tr.track_id][1] != "N" or truth[tr.track_id][0] == "S"]
    keep = [tr for tr in keep if truth[tr.track_id][0] != "W" or truth[tr.track_id][1] == "E"]
    study = compute_study(_cut_by_the_flight(keep, 9.5, 8.5), None, StudyConfig())
    names = {a.id: a.name for a in study.approaches}
    v = {v.track_id: v for v in study.vehicles}
    assert (names[v[901].origin], names[v[901].destination], v[901].movement) == ("S", "N", "through")
    assert v[901].origin_inferred and not v[901].destination_inferred
    assert (names[v[902].origin], names[v[902].destination], v[902].movement) == ("W", "E", "through")
    assert v[902].destination_inferred and not v[902].origin_inferred
    assert all(not (x.origin_inferred or x.destination_inferred) for x in study.vehicles if x.track_id < 900)
    od = {
        (r["origin_name"], r["destination_name"]): r for r in study.tables["od_matrix"] if r["vehicle_class"] == "all"
    }
    assert od[("S", "N")]["inferred"] == 1 and od[("W", "E")]["inferred"] == 1 and od[("E", "W")]["inferred"] == 0


def test_vehicles_cut_by_the_flight_before_their_turn_keep_the_arm_their_corridor_gives(junction):
    """First seen before the centre (last seen past it): the vehicle is in its origin's (destination's) corridor,
    which names the arm outright, with or without the other vehicles' movements."""
    trajs, _ = junction
    study = compute_study(_cut_by_the_flight(trajs, 8.5, 9.5), None, StudyConfig())
    names = {a.id: a.name for a in study.approaches}
    v = {v.track_id: v for v in study.vehicles}
    assert (names[v[901].origin], names[v[901].destination]) == ("S", "N")
    assert (names[v[902].origin], names[v[902].destination]) == ("W", "E")
    assert not (v[901].origin_inferred or v[902].destination_inferred)


ARMS_W = 270.0


def test_a_car_waiting_when_the_flight_began_is_present_at_its_start_though_its_track_starts_later(junction):
    """The tracker confirms a car waiting at a stop line seconds into the flight (the detector boxes a queue's cars
    now and then): its track starts 2 s in, 20 m inside the view, standing - it cannot have driven in and stopped
    there in 2 s, so it was there when the flight began, and is left out of the counts of vehicles that crossed
    (``present_at_start``) like one seen from the first frame. A car first seen as late at the view's edge, driving
    in, entered; and one first seen 40 m in after 15 s may have entered unseen (it is counted)."""
    trajs, _ = junction
    t_first = min(float(tr.t[0]) for tr in trajs)
    rng = np.random.default_rng(3)
    # south arm, lane 1: standing 20 m before the centre from t_first + 2 s for 10 s, then through at 10 m/s
    t_wait = t_first + 2.0 + np.arange(0.0, 10.0, 0.1)
    xy_wait = np.tile([1.75, -20.0], (len(t_wait), 1))
    t_go, xy_go = drive(np.array([[1.75, -20.0], [1.75, 90.0]]), 10.0, float(t_wait[-1]) + 0.1)
    waiting = Trajectory(
        901,
        "car",
        np.concatenate([t_wait, t_go]),
        np.vstack([xy_wait, xy_go]) + rng.normal(0, 0.1, (len(t_wait) + len(t_go), 2)),
    )
    # south arm, lane 2: driving in from the view's edge, first seen 2 s into the flight
    t, xy = drive(template("through", 2), 10.0, t_first + 2.0 - 3.0)
    keep = t >= t_first + 2.0
    entering = Trajectory(902, "car", t[keep], xy[keep])
    # south arm, lane 1: first seen 20 m before the centre 15 s in, driving: it may have come in unseen
    t, xy = drive(np.array([[1.75, -20.0], [1.75, 90.0]]), 10.0, t_first + 15.0)
    late = Trajectory(903, "car", t, xy)
    study = compute_study([*trajs, waiting, entering, late], None, StudyConfig())
    v = {v.track_id: v for v in study.vehicles}
    names = {a.id: a.name for a in study.approaches}
    assert sorted(names.values()) == ["E", "N", "S", "W"]
    assert v[901].present_at_start and names[v[901].origin] == "S"
    assert not v[902].present_at_start and names[v[902].origin] == "S"
    assert not v[903].present_at_start
    # the junction's vehicles all drive in at the view's edge: only the one there from the first frame was there
    assert [x.track_id for x in study.vehicles if x.track_id < 900 and x.present_at_start] == [1]


def test_right_turners_the_frame_cuts_short_beside_an_arm_are_no_arm_of_their_own():
    """A nadir view whose bottom edge lies 20 m south of the junction's centre (seed 2's nadir intersection): the
    right turners from the west leave through it 35 degrees into their turn, a cluster of exits with its own heading
    inside the south arm's. One stretch of the view's edge is one arm: four approaches, not five, and the turners get
    the south arm as their destination."""

    def cut(t, xy):
        keep = xy[:, 1] >= -20.0
        return t[keep], xy[keep]

    routes = {
        "N -> S": np.array([[-1.75, 60.0], [-1.75, -60.0]]),
        "S -> N": np.array([[1.75, -60.0], [1.75, 60.0]]),
        "W -> E": np.array([[-60.0, -1.75], [60.0, -1.75]]),
        "E -> W": np.array([[60.0, 1.75], [-60.0, 1.75]]),
        # turning from 28 m before the centre, cut at y = -20 m heading 125 degrees: 2 m west of the south arm's middle
        "W -> S": np.array([[-60.0, -1.75], [-28.0, -1.75], [4.76, -24.71]]),
    }
    trajs = []
    for r, way in enumerate(routes.values()):
        for k in range(6):
            t, xy = cut(*drive(way, 10.0, 20.0 * k + 3.0 * r))
            trajs.append(Trajectory(100 * r + k, "car", t, xy))
    study = compute_study(trajs, None, StudyConfig())
    names = {a.id: a.name for a in study.approaches}
    assert sorted(names.values()) == ["E", "N", "S", "W"], [(a.name, round(a.x), round(a.y)) for a in study.approaches]
    turners = [v for v in study.vehicles if v.track_id >= 400]
    assert [(names.get(v.origin), names.get(v.destination)) for v in turners] == [("W", "S")] * 6


def test_parked_cars_whose_positions_drift_make_no_approach(junction):
    """Parked cars far from the camera drift by metres over a flight (seed 2's oblique intersection, the detector at
    native scale: five parked tracks 5-7 m from start to end over minutes, at the view's edge), enough for an entry
    and an exit 6 m of travel apart: they made a fifth approach for four arms. A track that never moves as a vehicle
    does (``stationary_speed_kmh``) gives no approach its ends, and stays stationary."""
    trajs, _ = junction
    t0 = min(float(tr.t[0]) for tr in trajs)
    t1 = max(float(tr.t[-1]) for tr in trajs)
    rng = np.random.default_rng(5)
    parked = []
    for k in range(5):  # in the corner between the north and east arms, at the view's edge, 7 m of drift each
        t = np.arange(t0 + 5.0 + 3.0 * k, t1 - 5.0 - 3.0 * k, 0.1)
        drift = np.linspace(0.0, 1.0, len(t))[:, None] * np.array([-5.0, -5.0])
        xy = np.array([42.0 + 1.5 * k, 42.0 - 1.5 * k]) + drift + rng.normal(0, 0.05, (len(t), 2))
        parked.append(Trajectory(950 + k, "car", t, xy))
    study = compute_study([*trajs, *parked], None, StudyConfig())
    assert sorted(a.name for a in study.approaches) == ["E", "N", "S", "W"]
    v = {v.track_id: v for v in study.vehicles}
    assert all(v[950 + k].movement == "stationary" for k in range(5))
