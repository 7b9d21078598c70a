"""Study input and output: trajectories from rows or a run folder's ``tracks.csv``, approaches and counting lines
from GeoJSON/JSON files, and the study written as CSV tables plus GeoJSON (docs/study.md)."""

from __future__ import annotations

import csv
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tracking.study.model import Approach, CountingLine, Study, StudyInputError, Trajectory
from tracking.study.picture import write_study_picture

REQUIRED_COLUMNS = ("t", "track_id", "class", "ground_x_m", "ground_y_m")


def _num(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def trajectories_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Trajectory]:
    """Trajectories from rows with ``track_id, vehicle_class, t_s, x_m, y_m, lon, lat`` (lon/lat may be None).
    Rows without ground coordinates are skipped; tracks keep their most frequent class."""
    pts: dict[int, list[tuple[float, float, float, float | None, float | None]]] = defaultdict(list)
    classes: dict[int, Counter] = defaultdict(Counter)
    for row in rows:
        t, x, y = _num(row.get("t_s")), _num(row.get("x_m")), _num(row.get("y_m"))
        if t is None or x is None or y is None:
            continue
        tid = int(row["track_id"])
        pts[tid].append((t, x, y, _num(row.get("lon")), _num(row.get("lat"))))
        classes[tid][str(row.get("vehicle_class") or "car")] += 1
    out = []
    for tid in sorted(pts):
        arr = sorted(pts[tid], key=lambda p: p[0])
        times = np.array([p[0] for p in arr])
        xy = np.array([[p[1], p[2]] for p in arr])
        lonlat = None
        if all(p[3] is not None and p[4] is not None for p in arr):
            lonlat = np.array([[p[3], p[4]] for p in arr], np.float64)
        out.append(Trajectory(tid, classes[tid].most_common(1)[0][0], times, xy, lonlat))
    return out


def load_run_trajectories(run_dir: Path) -> list[Trajectory]:
    """Trajectories of a processed run folder (``tracks.csv`` of ``airpatrol process``), in ground metres."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise StudyInputError(f"{run_dir}: not a folder (expected the output folder of `airpatrol process`)")
    path = run_dir / "tracks.csv"
    if not path.is_file():
        raise StudyInputError(f"{path}: missing; {run_dir} is not a processed run")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise StudyInputError(f"{path}: not a tracks.csv (missing columns {', '.join(missing)})")
            rows = [
                {
                    "track_id": r["track_id"],
                    "vehicle_class": r["class"],
                    "t_s": r["t"],
                    "x_m": r["ground_x_m"],
                    "y_m": r["ground_y_m"],
                    "lon": r.get("lon"),
                    "lat": r.get("lat"),
                }
                for r in reader
            ]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise StudyInputError(f"{path}: cannot read ({str(exc).splitlines()[0]})") from None
    try:
        trajs = trajectories_from_rows(rows)
    except (TypeError, ValueError) as exc:
        raise StudyInputError(f"{path}: bad value ({exc})") from None
    if not rows:
        raise StudyInputError(f"{path}: no tracked vehicles")
    if not trajs:
        raise StudyInputError(
            f"{path}: no ground coordinates (the run has no georeference or scale); "
            "process it with telemetry or --calibration"
        )
    return trajs


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyInputError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StudyInputError(f"{path}: cannot parse ({str(exc).splitlines()[0]})") from None


def _features(data: Any, path: Path) -> list[dict]:
    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        return [f for f in data.get("features", []) if isinstance(f, dict)]
    if isinstance(data, list):
        return [{"type": "Feature", "properties": d, "geometry": None} for d in data if isinstance(d, dict)]
    raise StudyInputError(f"{path}: expected a GeoJSON FeatureCollection or a JSON list")


def load_approaches(path: Path) -> list[Approach]:
    """Approaches from GeoJSON (Point features as :func:`write_study` writes them: properties ``id``, ``name``,
    ``heading_deg``, ``radius_m``, and ``x_m``/``y_m`` or lon/lat coordinates) or a JSON list of such objects.
    Lon/lat-only approaches get x/y = NaN until :func:`tracking.study.compute.compute_study` places them."""
    path = Path(path)
    out = []
    for n, f in enumerate(_features(_read_json(path), path)):
        props = f.get("properties") or {}
        if props.get("kind", "approach") != "approach":
            continue
        geom = f.get("geometry") or {}
        lon = lat = None
        if geom.get("type") == "Point" and len(geom.get("coordinates") or []) >= 2:
            lon, lat = (float(v) for v in geom["coordinates"][:2])
        x, y = _num(props.get("x_m", props.get("x"))), _num(props.get("y_m", props.get("y")))
        if (x is None or y is None) and props.get("coordinates") == "ground_m" and lon is not None:
            x, y, lon, lat = lon, lat, None, None
        heading = _num(props.get("heading_deg"))
        if heading is None or ((x is None or y is None) and lon is None):
            raise StudyInputError(f"{path}: approach {n + 1} needs a position and heading_deg")
        out.append(
            Approach(
                str(props.get("id") or chr(ord("A") + n)),
                str(props.get("name") or props.get("id") or f"approach {n + 1}"),
                math.nan if x is None else x,
                math.nan if y is None else y,
                heading % 360.0,
                _num(props.get("radius_m")) or 15.0,
                lon,
                lat,
            )
        )
    if not out:
        raise StudyInputError(f"{path}: no approaches in it")
    return out


def load_counting_lines(path: Path) -> list[CountingLine]:
    """Counting lines (consecutive pairs give section speeds) from GeoJSON LineStrings with ground coordinates
    (property ``coordinates: ground_m``) or a JSON list of ``{"name", "a": [x, y], "b": [x, y]}``."""
    path = Path(path)
    out = []
    for n, f in enumerate(_features(_read_json(path), path)):
        props = f.get("properties") or {}
        geom = f.get("geometry") or {}
        try:
            if geom.get("type") == "LineString":
                a, b = geom["coordinates"][0], geom["coordinates"][-1]
            else:
                a, b = props["a"], props["b"]
            out.append(
                CountingLine(
                    str(props.get("name") or f"line {n + 1}"), (float(a[0]), float(a[1])), (float(b[0]), float(b[1]))
                )
            )
        except (KeyError, IndexError, TypeError, ValueError):
            raise StudyInputError(f"{path}: counting line {n + 1} needs two points") from None
    if len(out) < 2:
        raise StudyInputError(f"{path}: section speeds need two counting lines, found {len(out)}")
    return out


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> Path:
    cols = columns or (list(rows[0]) if rows else [])
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return path


def _coords(study: Study, pts: np.ndarray) -> list[list[float]]:
    ll = study.to_lonlat(pts)
    if ll is None:
        return [[round(float(x), 2), round(float(y), 2)] for x, y in pts]
    return [[round(float(lon), 7), round(float(lat), 7)] for lon, lat in ll]


def study_geojson(study: Study) -> dict[str, Any]:
    """Approaches (Points, with an arrow line of their inbound direction) and lanes (LineStrings); lon/lat where
    the run is georeferenced, else ground metres (``coordinates: ground_m`` in every feature's properties)."""
    system = "wgs84" if study.georef is not None else "ground_m"
    feats = []
    for a in study.approaches:
        p = np.array([[a.x, a.y]])
        feats.append(
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": _coords(study, p)[0]},
                "properties": {
                    "kind": "approach",
                    "id": a.id,
                    "name": a.name,
                    "heading_deg": round(a.heading_deg, 1),
                    "radius_m": round(a.radius_m, 1),
                    "x_m": round(a.x, 2),
                    "y_m": round(a.y, 2),
                    "coordinates": system,
                },
            }
        )
    for ln in study.lanes:
        feats.append(
            {
                "type": "Feature",
                "geometry": {"type": "LineString", "coordinates": _coords(study, ln.line)},
                "properties": {
                    "kind": "lane",
                    "approach": ln.approach,
                    "lane": ln.lane,
                    "offset_m": round(ln.offset_m, 2),
                    "vehicles": ln.vehicles,
                    "coordinates": system,
                },
            }
        )
    for c in study.conflicts:
        feats.append(
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": _coords(study, np.array([[c.x, c.y]]))[0]},
                "properties": {"kind": "conflict", **c.as_row(), "coordinates": system},
            }
        )
    return {"type": "FeatureCollection", "features": feats}


def _write_smoothed(path: Path, study: Study) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(TABLE_COLUMNS["trajectories"])
        for tid in sorted(study.smoothed):
            s = study.smoothed[tid]
            sp, acc, hd = s.speed * 3.6, s.longitudinal_accel, s.heading_deg
            for k in range(len(s.t)):
                w.writerow(
                    [
                        tid,
                        f"{s.t[k]:.3f}",
                        f"{s.xy[k, 0]:.2f}",
                        f"{s.xy[k, 1]:.2f}",
                        f"{sp[k]:.1f}",
                        f"{acc[k]:.2f}",
                        f"{hd[k]:.1f}",
                    ]
                )
    return path


def write_study(study: Study, out_dir: Path) -> list[Path]:
    """Every table as ``<name>.csv``, ``vehicles.csv``, ``conflicts.csv``, ``study.geojson``, ``study.json``
    (settings, bin length, warnings) and ``study.png`` (the picture) into ``out_dir`` (created)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in study.tables.items():
        paths.append(_write_csv(out / f"{name}.csv", rows, TABLE_COLUMNS.get(name)))
    paths.append(_write_smoothed(out / "trajectories.csv", study))
    (out / "study.geojson").write_text(json.dumps(study_geojson(study)), encoding="utf-8")
    paths.append(out / "study.geojson")
    meta = {
        "t0": study.t0,
        "t1": study.t1,
        "bin_s": study.bin_s,
        "approaches": len(study.approaches),
        "vehicles": len(study.vehicles),
        "conflicts": len(study.conflicts),
        "warnings": study.warnings,
        "config": {k: v for k, v in vars(study.config).items() if k != "counting_lines"},
        "tables": sorted(study.tables),
    }
    (out / "study.json").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    paths.append(out / "study.json")
    paths.append(write_study_picture(study, out / "study.png"))
    return paths


# Column order of each table when it has no rows (an empty CSV still says what it would hold).
TABLE_COLUMNS: dict[str, list[str]] = {
    "turning_movements": [
        "bin_start_s",
        "bin_end_s",
        "origin",
        "origin_name",
        "destination",
        "destination_name",
        "movement",
        "vehicle_class",
        "count",
        "inferred",
    ],
    "od_matrix": ["origin", "origin_name", "destination", "destination_name", "vehicle_class", "count", "inferred"],
    "peak_hour": [
        "origin",
        "destination",
        "movement",
        "peak_hour_start_s",
        "peak_hour_volume",
        "peak_bin_volume",
        "peak_hour_factor",
    ],
    "lane_flows": [
        "bin_start_s",
        "bin_end_s",
        "approach",
        "lane",
        "vehicles",
        "flow_veh_h",
        "time_mean_speed_kmh",
        "space_mean_speed_kmh",
    ],
    "headways": ["approach", "lane", "from_s", "to_s", "headways", "gaps"],
    "headway_stats": ["approach", "lane", "measure", "n", "mean_s", "p15_s", "median_s", "p85_s"],
    "section_speeds": [
        "section",
        "track_id",
        "vehicle_class",
        "t_enter",
        "t_exit",
        "travel_time_s",
        "distance_m",
        "speed_kmh",
    ],
    "section_speed_summary": [
        "section",
        "bin_start_s",
        "bin_end_s",
        "vehicles",
        "time_mean_speed_kmh",
        "space_mean_speed_kmh",
    ],
    "density": [
        "bin_start_s",
        "bin_end_s",
        "approach",
        "segment_m",
        "lanes",
        "mean_vehicles",
        "density_veh_km_lane",
        "los",
    ],
    "vehicles": [
        "track_id",
        "vehicle_class",
        "origin",
        "destination",
        "movement",
        "lane",
        "entry_t",
        "exit_t",
        "heading_change_deg",
        "mean_speed_kmh",
        "present_at_start",
        "present_at_end",
        "origin_inferred",
        "destination_inferred",
        "entry_x_m",
        "entry_y_m",
        "exit_x_m",
        "exit_y_m",
    ],
    "conflicts": [
        "kind",
        "value_s",
        "t",
        "x_m",
        "y_m",
        "lon",
        "lat",
        "track_a",
        "track_b",
        "class_a",
        "class_b",
        "speed_a_kmh",
        "speed_b_kmh",
    ],
    "trajectories": ["track_id", "t", "x_m", "y_m", "speed_kmh", "accel_ms2", "heading_deg"],
}
