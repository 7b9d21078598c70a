"""The study page of a run (TestClient on SQLite): movements and O-D matrix against the junction's scripted routes,
every table exportable as CSV, approaches kept per site and edited (move, rename, merge) with CSRF and the operator
role, conflict clips cut from the run's video, the printable report, and bad inputs answered on the page."""

from __future__ import annotations

import csv
import io
import math
import re
from collections import Counter

import pytest
from sqlalchemy import select

from tests.dashboard.dash_helpers import ORIGIN, _metres_to_latlon, csrf_of
from tests.dashboard.study_helpers import LEG_M, LEGS, ROUTES, make_junction_run_dir

pytest.importorskip("tracking.study", reason="the traffic study (tracking.study, issue 24) is not in this tree")


def _import(tmp_path, db_url, name="junction", task_round_id=None, **kw):
    from db.run_import import import_run_dir

    video = kw.pop("video", False)
    return import_run_dir(
        make_junction_run_dir(tmp_path / name, video=video, **kw),
        db_url,
        orthophoto=video,
        task_round_id=task_round_id,
    )


def _leg_of(lon: float, lat: float) -> str:
    """The junction leg whose far end is nearest to a lon/lat (the truth the approaches are checked against)."""
    ends = {leg: _metres_to_latlon(u[0] * LEG_M, u[1] * LEG_M, ORIGIN) for leg, u in LEGS.items()}
    return min(ends, key=lambda leg: math.hypot(ends[leg][0] - lat, (ends[leg][1] - lon) * math.cos(math.radians(lat))))


def _page_od(html: str) -> Counter:
    cells = re.findall(r'data-origin="([^"]+)" data-destination="([^"]+)">(\d*)<', html)
    return Counter({(o, d): int(n) for o, d, n in cells if n})


def _approaches(client, run_id) -> list[dict]:
    return client.get(f"/dashboard/api/runs/{run_id}/study").json()["approaches"]


def test_movements_and_od_matrix_match_the_scripted_routes(tmp_path, db_url, client_for):
    imported = _import(tmp_path, db_url)
    viewer = client_for("viewer")
    page = viewer.get(f"/dashboard/runs/{imported.run_id}/study")
    assert page.status_code == 200, page.text
    legs = {a["key"]: _leg_of(a["lon"], a["lat"]) for a in _approaches(viewer, imported.run_id)}
    assert sorted(legs.values()) == sorted(LEGS), legs  # one approach per leg of the junction
    got = Counter({(legs[o], legs[d]): n for (o, d), n in _page_od(page.text).items()})
    assert got == Counter((o, d) for o, d, _t in ROUTES)
    data = viewer.get(f"/dashboard/api/runs/{imported.run_id}/study").json()
    assert data["can_edit"] is False and data["saved"] is False and data["site"] == f"run:{imported.run_id}"
    arrows = {(legs[m["origin"]], legs[m["destination"]]): m for m in data["movements"]}
    assert {k: m["vehicles"] for k, m in arrows.items()} == dict(Counter((o, d) for o, d, _t in ROUTES))
    busiest = max(arrows.values(), key=lambda m: m["vehicles"])
    assert busiest["width"] == 1.0 and all(0 < m["width"] <= 1 for m in arrows.values())
    # one lane per approach (every route drives 2 m right of the centre line), with the vehicles that entered there
    lanes = re.findall(r"<td>([A-Z]) <span[^>]*>[^<]*</span></td><td class=\"num\">(\d+)</td>", page.text)
    assert sorted(k for k, _lane in lanes) == sorted(legs) and {lane for _k, lane in lanes} == {"1"}
    # the scripted near miss: W->E and S->N pass (2 m, -2 m) 0.5 s apart
    scripted = {1, 2}
    assert any({c["track_a"], c["track_b"]} == scripted for c in data["conflicts"]), data["conflicts"]


def test_every_table_is_exportable_as_csv(tmp_path, db_url, client_for):
    imported = _import(tmp_path, db_url)
    viewer = client_for("viewer")
    page = viewer.get(f"/dashboard/runs/{imported.run_id}/study").text
    links = sorted(set(re.findall(rf"/dashboard/runs/{imported.run_id}/study/(\w+)\.csv", page)))
    assert {"od_matrix_grid", "conflicts", "turning_movements", "vehicles"} <= set(links)
    for name in links:
        r = viewer.get(f"/dashboard/runs/{imported.run_id}/study/{name}.csv")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv"), (name, r.text[:200])
        rows = list(csv.DictReader(io.StringIO(r.text)))
        shown = re.search(rf'id="study-table-{name}" data-rows="(\d+)"', page)
        if shown:  # the page's table and its CSV hold the same rows
            assert len(rows) == int(shown.group(1)), name
    vehicles = list(
        csv.DictReader(io.StringIO(viewer.get(f"/dashboard/runs/{imported.run_id}/study/vehicles.csv").text))
    )
    assert Counter(v["movement"] for v in vehicles)["stationary"] == 6  # the parked cars: counted as such
    assert viewer.get(f"/dashboard/runs/{imported.run_id}/study/nonsense.csv").status_code == 404


def test_operators_move_rename_and_merge_approaches(tmp_path, db_url, client_for):
    from db.engine import session_scope
    from db.models import StudyApproach

    imported = _import(tmp_path, db_url)
    op, viewer = client_for("operator"), client_for("viewer")
    url = f"/dashboard/api/runs/{imported.run_id}/approaches"
    found = _approaches(op, imported.run_id)
    renamed = [{**a, "name": f"{_leg_of(a['lon'], a['lat'])} arm"} for a in found]
    body = {"approaches": renamed}
    assert viewer.post(url, json=body, headers={"X-CSRF-Token": csrf_of(viewer)}).status_code == 403
    assert op.post(url, json=body).status_code == 403  # no CSRF token
    r = op.post(url, json=body, headers={"X-CSRF-Token": csrf_of(op)})
    assert r.status_code == 200, r.text
    with session_scope(db_url) as s:
        rows = list(s.scalars(select(StudyApproach)))
        assert {(x.run_id, x.task_id) for x in rows} == {(imported.run_id, None)}
        assert sorted(x.name for x in rows) == ["E arm", "N arm", "S arm", "W arm"]
    page = viewer.get(f"/dashboard/runs/{imported.run_id}/study").text
    assert "N arm" in page and "kept for this run" in page
    # dragged 1 km away: refused with the reason, nothing changed
    far = [dict(a) for a in renamed]
    far[0]["lat"] += 0.01
    r = op.post(url, json={"approaches": far}, headers={"X-CSRF-Token": csrf_of(op)})
    assert r.status_code == 422 and "outside its view" in r.json()["detail"]
    assert sorted(a["name"] for a in _approaches(op, imported.run_id)) == ["E arm", "N arm", "S arm", "W arm"]
    # opposite legs are not one approach: refused with the reason
    keys = {_leg_of(a["lon"], a["lat"]): a["key"] for a in renamed}
    r = op.post(f"{url}/merge", json={"keep": keys["E"], "merge": keys["W"]}, headers={"X-CSRF-Token": csrf_of(op)})
    assert r.status_code == 422 and "different directions" in r.json()["detail"]
    # the west leg split in two approaches side by side (as a finder may split a wide road): merged back into one
    west = next(a for a in renamed if a["key"] == keys["W"])
    split = renamed + [{**west, "key": "W2", "name": "west, north half", "lat": west["lat"] + 2.5 / 111_320}]
    r = op.post(url, json={"approaches": split}, headers={"X-CSRF-Token": csrf_of(op)})
    assert r.status_code == 200, r.text
    before = _page_od(viewer.get(f"/dashboard/runs/{imported.run_id}/study").text)
    from_west = sum(n for (o, _d), n in before.items() if o in (keys["W"], "W2"))
    assert from_west == sum(1 for o, _d, _t in ROUTES if o == "W")
    r = op.post(f"{url}/merge", json={"keep": keys["W"], "merge": "W2"}, headers={"X-CSRF-Token": csrf_of(op)})
    assert r.status_code == 200, r.text
    assert sorted(a["key"] for a in _approaches(op, imported.run_id)) == sorted(keys.values())
    after = _page_od(viewer.get(f"/dashboard/runs/{imported.run_id}/study").text)
    assert sum(n for (o, _d), n in after.items() if o == keys["W"]) == from_west
    # and back to the approaches found from the trajectories
    r = op.post(f"{url}/reset", headers={"X-CSRF-Token": csrf_of(op)})
    assert r.status_code == 200 and r.json()["deleted"] == 4
    assert len(_approaches(op, imported.run_id)) == 4


def test_approaches_are_kept_for_the_task_and_used_by_its_other_runs(tmp_path, db_url, client_for):
    from db.engine import session_scope
    from db.models import Task, TaskRound

    with session_scope(db_url) as s:
        task = Task(name="crossroads survey")
        s.add(task)
        s.flush()
        rnd = TaskRound(task_id=task.id, round_no=1)
        s.add(rnd)
        s.flush()
        task_id, round_id = task.id, rnd.id
    first = _import(tmp_path, db_url, "first", task_round_id=round_id)
    second = _import(tmp_path, db_url, "second", task_round_id=round_id, seconds=30.0)
    op = client_for("operator")
    found = _approaches(op, first.run_id)
    named = [{**a, "name": f"{_leg_of(a['lon'], a['lat'])} road"} for a in found]
    r = op.post(
        f"/dashboard/api/runs/{first.run_id}/approaches",
        json={"approaches": named},
        headers={"X-CSRF-Token": csrf_of(op)},
    )
    assert r.status_code == 200 and r.json()["site"] == f"task:{task_id}"
    other = op.get(f"/dashboard/api/runs/{second.run_id}/study").json()
    assert other["saved"] is True and sorted(a["name"] for a in other["approaches"]) == sorted(a["name"] for a in named)
    # a flight of the task over another place: the site's approaches are outside its view, and the page says so
    elsewhere = _import(tmp_path, db_url, "elsewhere", task_round_id=round_id, origin=(52.52, 13.40))
    r = op.get(f"/dashboard/runs/{elsewhere.run_id}/study")
    assert r.status_code == 200 and 'id="study-message"' in r.text and "outside the view" in r.text
    site = op.get(f"/dashboard/tasks/{task_id}/study")
    assert site.status_code == 200 and "W road" in site.text
    assert site.text.count(f"/dashboard/runs/{first.run_id}/study") == 1
    assert "every approach of this site lies outside the view" in site.text  # the far run, listed with why


def test_bad_inputs_are_explained_on_the_page(tmp_path, db_url, client_for):
    no_georef = _import(tmp_path, db_url, "nogeo", georeferenced=False)
    short = _import(tmp_path, db_url, "short", seconds=4.0)
    viewer = client_for("viewer")
    for path in ("study", "study/report"):
        r = viewer.get(f"/dashboard/runs/{no_georef.run_id}/{path}")
        assert r.status_code == 200 and "no map positions" in r.text and 'id="study-message"' in r.text
    assert "no map positions" in viewer.get(f"/dashboard/api/runs/{no_georef.run_id}/study").json()["message"]
    assert viewer.get(f"/dashboard/runs/{no_georef.run_id}/study/vehicles.csv").status_code == 409
    r = viewer.get(f"/dashboard/runs/{short.run_id}/study")
    assert r.status_code == 200
    assert 'id="study-warnings"' in r.text and "shorter than one" in r.text  # a 4 s flight: shorter bins, said
    # its vehicles mostly entered or left mid-view: all of them in the O-D matrix, none dropped
    vehicles = list(csv.DictReader(io.StringIO(viewer.get(f"/dashboard/runs/{short.run_id}/study/vehicles.csv").text)))
    moving = [v for v in vehicles if v["movement"] != "stationary"]
    assert any(not v["origin"] or not v["destination"] for v in moving)
    assert sum(_page_od(r.text).values()) == len(moving)
    r = viewer.get(f"/dashboard/runs/{short.run_id}/study?bin=fortnight")
    assert r.status_code == 200 and "bin &#39;fortnight&#39;" in r.text
    assert viewer.get("/dashboard/runs/999999/study").status_code == 404


def test_report_draws_an_arrow_per_movement_as_wide_as_its_volume(tmp_path, db_url, client_for):
    imported = _import(tmp_path, db_url, video=True)
    viewer = client_for("viewer")
    html = viewer.get(f"/dashboard/runs/{imported.run_id}/study/report").text
    assert f"/dashboard/runs/{imported.run_id}/ortho.png" in html  # the diagram lies on the run's imagery
    arrows = re.findall(r'class="movement-arrow" data-vehicles="(\d+)">.*?stroke-width="([\d.]+)"', html, re.S)
    assert len(arrows) == len(Counter((o, d) for o, d, _t in ROUTES))
    by_volume = sorted((int(n), float(w)) for n, w in arrows)
    assert all(w1 <= w2 for (_n1, w1), (_n2, w2) in zip(by_volume, by_volume[1:]))
    assert by_volume[0][1] < by_volume[-1][1]
    assert 'id="od-table"' in html and 'id="conflict-table"' in html and "series-figure" in html


def test_conflict_clips_are_cut_from_the_run_video(tmp_path, db_url, client_for):
    imported = _import(tmp_path, db_url, video=True)
    op = client_for("operator")
    r = op.post(
        f"/dashboard/runs/{imported.run_id}/study/clips", data={"csrf_token": csrf_of(op)}, follow_redirects=True
    )
    assert r.status_code == 200
    clips = sorted(set(re.findall(rf"/dashboard/runs/{imported.run_id}/study/clips/(conflict_[\w]+\.mp4)", r.text)))
    n_conflicts = len(op.get(f"/dashboard/api/runs/{imported.run_id}/study").json()["conflicts"])
    assert n_conflicts and len(clips) == n_conflicts
    clip = op.get(f"/dashboard/runs/{imported.run_id}/study/clips/{clips[0]}")
    assert clip.status_code == 200 and clip.headers["content-type"] == "video/mp4"
    import av

    with av.open(io.BytesIO(clip.content), "r") as c:
        assert len(list(c.decode(video=0))) >= 20  # about 4 s at 10 fps
    assert (tmp_path / "junction" / "evidence").exists() is False or not list(
        (tmp_path / "junction" / "evidence").glob("*.mp4")
    )
    assert op.get(f"/dashboard/runs/{imported.run_id}/study/clips/..%2Fsummary.json").status_code == 404
