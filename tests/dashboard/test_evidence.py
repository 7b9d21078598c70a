"""A snapshot per violation, cut from the run's video around the vehicle, kept with the run and exported with it."""

from __future__ import annotations

import csv
import io
import zipfile

import cv2
import numpy as np

from tests.dashboard.dash_helpers import VEHICLE_BGR, make_run_dir


def test_violations_get_snapshots_of_their_vehicle(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    run_dir = make_run_dir(tmp_path / "run", video=True)  # the source video draws each vehicle as a white box
    imported = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0)
    assert imported.violations == 2 and imported.snapshots == 2
    for track_no in (4, 5):  # the 95 and 120 km/h cars
        img = cv2.imread(str(run_dir / "evidence" / f"violation_{track_no}.jpg"))
        assert img is not None and img.shape[0] >= 200
        h, w = img.shape[:2]
        centre = img[h // 2 - 2 : h // 2 + 3, w // 2 - 4 : w // 2 + 5].reshape(-1, 3).astype(int)
        assert np.abs(centre - VEHICLE_BGR).max() < 60, f"vehicle #{track_no} is not in the middle of its snapshot"

    c = client_for("viewer")
    page = c.get(f"/dashboard/runs/{imported.run_id}").text
    assert page.count('class="snapshot"') == 2
    r = c.get(f"/dashboard/runs/{imported.run_id}/evidence/5.jpg")
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert c.get(f"/dashboard/runs/{imported.run_id}/evidence/1.jpg").status_code == 404  # no violation
    props = [
        f["properties"] for f in c.get(f"/dashboard/api/map?run_id={imported.run_id}").json()["violations"]["features"]
    ]
    assert sorted(p["snapshot"] for p in props) == [True, True]

    z = zipfile.ZipFile(io.BytesIO(c.get(f"/dashboard/runs/{imported.run_id}/export.zip").content))
    rows = list(csv.DictReader(io.StringIO(z.read("violations.csv").decode())))
    assert sorted(int(r["track_no"]) for r in rows) == [4, 5]
    assert all(r["when"].endswith("(wall-clock unknown)") and r["snapshot"] in z.namelist() for r in rows)


def test_without_a_video_the_violations_have_no_snapshot(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    imported = import_run_dir(make_run_dir(tmp_path / "run"), db_url, speed_limit_kmh=80.0)
    assert imported.violations == 2 and imported.snapshots == 0
    c = client_for("viewer")
    z = zipfile.ZipFile(io.BytesIO(c.get(f"/dashboard/runs/{imported.run_id}/export.zip").content))
    assert z.namelist() == ["violations.csv"]


def test_violations_get_a_short_clip_kept_linked_and_exported(tmp_path, db_url, client_for):
    import av
    from sqlalchemy import select

    from db.engine import session_scope
    from db.models import TrackRow, Violation
    from db.run_import import import_run_dir
    from vision.evidence import CLIP_AFTER_S, CLIP_BEFORE_S

    fps, frames = 10.0, 60
    run_dir = make_run_dir(tmp_path / "run", video=True, fps=fps, frames=frames)
    imported = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0, orthophoto=False)
    assert imported.violations == 2 and imported.clips == 2
    with session_scope(db_url) as s:
        times = dict(
            s.execute(
                select(TrackRow.track_no, Violation.t_s)
                .join(TrackRow, TrackRow.id == Violation.track_id)
                .where(Violation.run_id == imported.run_id)
            ).all()
        )
    boxes = {
        (int(r["track_id"]), int(r["frame"]) - 1): [float(r[k]) for k in ("x1", "y1", "x2", "y2")]
        for r in csv.DictReader(open(run_dir / "tracks.csv", newline=""))
    }
    for track_no, t in times.items():
        with av.open(str(run_dir / "evidence" / f"violation_{track_no}.mp4")) as c:
            imgs = [f.to_ndarray(format="bgr24") for f in c.decode(video=0)]
        first = max(0, round((t - CLIP_BEFORE_S) * fps))
        want = [i for i in range(frames) if t - CLIP_BEFORE_S - 1e-6 <= i / fps <= t + CLIP_AFTER_S + 1e-6]
        assert abs(len(imgs) - len(want)) <= 1, (track_no, len(imgs), len(want))
        # the frame of the violation shows the vehicle where the tracker had it: the clip is cut at the right time
        k = round(t * fps)
        x1, y1, x2, y2 = boxes[(track_no, k)]
        img = imgs[k - first]
        centre = img[int((y1 + y2) / 2) - 2 : int((y1 + y2) / 2) + 3, int((x1 + x2) / 2) - 3 : int((x1 + x2) / 2) + 4]
        assert np.abs(centre.reshape(-1, 3).astype(int) - VEHICLE_BGR).max() < 60

    c = client_for("viewer")
    page = c.get(f"/dashboard/runs/{imported.run_id}").text
    assert page.count('class="small clip-link"') == 2
    r = c.get(f"/dashboard/runs/{imported.run_id}/evidence/5.mp4")
    assert r.status_code == 200 and r.headers["content-type"] == "video/mp4" and len(r.content) > 1000
    assert c.get(f"/dashboard/runs/{imported.run_id}/evidence/1.mp4").status_code == 404
    z = zipfile.ZipFile(io.BytesIO(c.get(f"/dashboard/runs/{imported.run_id}/export.zip").content))
    rows = list(csv.DictReader(io.StringIO(z.read("violations.csv").decode())))
    assert all(r["clip"] in z.namelist() for r in rows) and len(rows) == 2
