"""A violation's evidence on the run page and in its export: speed ± sigma, speed - 2 sigma, time over the limit,
the rule and the scale source, all from the violation's own record; each vehicle's median speed ± sigma and scale."""

from __future__ import annotations

import csv
import io
import re
import zipfile

from tests.dashboard.dash_helpers import make_run_dir


def _cells(row_html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row_html, re.S)]


def test_run_page_and_export_show_each_violations_evidence(tmp_path, db_url, client_for):
    from sqlalchemy import select

    from db.engine import session_scope
    from db.models import ProcessingRun, TrackRow, Violation
    from db.run_import import import_run_dir

    # vehicles at 30 ... 120 km/h, sigma 1.5, speeds from frame 3 of 60 at 10 fps: 5.7 s with a speed
    run_dir = make_run_dir(tmp_path / "run", scale_source="size_prior")
    header = (run_dir / "tracks.csv").read_text().splitlines()[0].split(",")
    assert "speed_sigma_kmh" in header and "scale_source" in header
    imported = import_run_dir(run_dir, db_url, speed_limit_kmh=80.0)
    assert imported.violations == 2
    with session_scope(db_url) as s:
        assert s.get(ProcessingRun, imported.run_id).scale_source == "size_prior"
        stored = {
            no: (v.sigma_kmh, v.lower_bound_kmh, v.over_limit_s, v.scale_source)
            for v, no in s.execute(
                select(Violation, TrackRow.track_no).join(TrackRow, TrackRow.id == Violation.track_id)
            )
        }
        assert stored == {4: (1.5, 92.0, 5.7, "size_prior"), 5: (1.5, 117.0, 5.7, "size_prior")}
        track5 = s.scalar(select(TrackRow.id).where(TrackRow.run_id == imported.run_id, TrackRow.track_no == 5))

    profile = client_for("viewer").get(f"/dashboard/api/tracks/{track5}/profile").json()
    assert profile["scale_source"] == "size_prior" and profile["median_sigma_kmh"] == 1.5

    page = client_for("viewer").get(f"/dashboard/runs/{imported.run_id}").text
    table = page[page.index('id="violations-table"') :]
    table = table[: table.index("</table>")]
    assert "Over limit" in table and "Scale" in table
    rows = {
        cells[1]: cells for cells in (_cells(r) for r in re.findall(r"<tr class=\"clickable\".*?</tr>", table, re.S))
    }
    assert set(rows) == {"truck #4", "car #5"}
    assert rows["car #5"][2:7] == ["120.0 ± 1.5 km/h", "117.0 km/h", "80 km/h", "5.7 s", "size_prior"]
    assert "speed - 2 sigma &gt; limit for at least 1 s" in page or "speed - 2 sigma > limit for at least 1 s" in page
    vehicles = page[page.index('id="vehicle-table"') :]
    row = next(r for r in re.findall(r"<tr class=\"clickable\".*?</tr>", vehicles, re.S) if ">#5" in r)
    assert "120.0" in _cells(row)[3] and "± 1.5" in _cells(row)[3] and _cells(row)[-1] == "size_prior"

    z = zipfile.ZipFile(io.BytesIO(client_for("viewer").get(f"/dashboard/runs/{imported.run_id}/export.zip").content))
    exported = {r["track_no"]: r for r in csv.DictReader(io.StringIO(z.read("violations.csv").decode()))}
    assert exported["5"]["sigma_kmh"] == "1.5" and exported["5"]["lower_bound_kmh"] == "117.0"
    assert exported["5"]["rule"] == "speed - 2 sigma > limit for at least 1 s"
    assert exported["5"]["scale_source"] == "size_prior" and exported["5"]["over_limit_s"] == "5.7"

    c = client_for("viewer")
    csv_rows = list(csv.DictReader(io.StringIO(c.get(f"/dashboard/runs/{imported.run_id}/export.csv").text)))
    assert (
        csv_rows
        and {r["scale_source"] for r in csv_rows} == {"size_prior"}
        and {r["sigma_kmh"] for r in csv_rows if r["speed_kmh"]} == {"1.5"}
    )
    geo = c.get(f"/dashboard/runs/{imported.run_id}/export.geojson").json()
    assert geo["properties"]["scale_source"] == "size_prior"
    assert {f["properties"]["scale_source"] for f in geo["features"] if f["properties"]["median_speed_kmh"]} == {
        "size_prior"
    }
