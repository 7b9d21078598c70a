"""`import-log`: flights + samples in one transaction, idempotent by checksum, devices, partial logs, validation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from db.crud import create_device
from db.engine import session_scope
from db.importer import LogImportError, import_flight_log, import_flight_log_file
from db.models import Device, Flight, TelemetrySampleRow
from db.validation import DbValidationError

SHARED = Path(os.environ.get("AIRPATROL_SHARED", Path(__file__).resolve().parents[2] / ".." / "shared"))
TELEMETRY = SHARED / "data" / "telemetry"

SRT = """1
00:00:00,000 --> 00:00:00,033
<font size="28">SrtCnt : 1, DiffTime : 33ms
2024-01-18 10:23:26.397
[iso : 150] [focal_len : 240] [latitude: -22.724555] [longitude: -47.602414] [rel_alt: 52.300 abs_alt: 601.679] </font>

2
00:00:00,033 --> 00:00:00,066
<font size="28">SrtCnt : 2, DiffTime : 33ms
2024-01-18 10:23:26.430
[iso : 150] [focal_len : 240] [latitude: -22.724560] [longitude: -47.602420] [rel_alt: 52.400 abs_alt: 601.779] </font>

3
00:00:00,066 --> 00:00:00,100
<font size="28">SrtCnt : 3, DiffTime : 33ms
2024-01-18 10:23:26.463
[iso : 150] [focal_len : 240] [latitude: -22.724565] [longitude: -47.602426] [rel_alt: 52.500 abs_alt: 601.879] </font>
"""


def counts(url):
    with session_scope(url) as s:
        return s.scalar(select(func.count(Flight.id))), s.scalar(select(func.count(TelemetrySampleRow.id)))


def test_import_twice_adds_nothing(db_url, tmp_path):
    p = tmp_path / "DJI_0001.SRT"
    p.write_text(SRT)
    with session_scope(db_url) as s:
        r = import_flight_log(s, p, device_serial="MAVIC-1", create_device=True, progress=False)
    assert r.created and r.samples == 3 and r.status == "complete"
    with session_scope(db_url) as s:
        again = import_flight_log(s, p, device_serial="MAVIC-1", progress=False)
    assert not again.created and again.flight_id == r.flight_id
    assert counts(db_url) == (1, 3)
    with session_scope(db_url) as s:
        f = s.get(Flight, r.flight_id)
        assert f.status == "complete" and f.sample_count == 3 and f.clock == "local" and len(f.checksum) == 64
        assert f.start_time.isoformat() == "2024-01-18T10:23:26.397000"
        first = s.scalar(select(TelemetrySampleRow).order_by(TelemetrySampleRow.t_s))
        assert (first.lat, first.lon, first.rel_alt_m, first.focal_len_mm) == (-22.724555, -47.602414, 52.3, 24.0)


def test_unknown_device_is_an_error_unless_created(db_url, tmp_path):
    p = tmp_path / "a.SRT"
    p.write_text(SRT)
    with pytest.raises(LogImportError, match="unknown device 'X-9'.*--create-device"):
        with session_scope(db_url) as s:
            import_flight_log(s, p, device_serial="X-9", progress=False)
    with pytest.raises(LogImportError, match="does not name its aircraft"):
        with session_scope(db_url) as s:
            import_flight_log(s, p, progress=False)
    assert counts(db_url) == (0, 0)
    with session_scope(db_url) as s:
        create_device(s, "X-9", model="Mini 3")
    with session_scope(db_url) as s:
        assert import_flight_log(s, p, device_serial="X-9", progress=False).created


def test_partial_log_status_and_attach_to_existing_flight(db_url, tmp_path):
    cut = tmp_path / "cut.SRT"
    cut.write_text(SRT.rstrip("\n")[:-70])  # third entry loses its end
    with session_scope(db_url) as s:
        d = create_device(s, "P4-1")
        planned = Flight(device_id=d.id, status="planned")
        s.add(planned)
        s.flush()
        fid = planned.id
    with session_scope(db_url) as s:
        r = import_flight_log(s, cut, flight_id=fid, progress=False)
    assert r.flight_id == fid and r.samples == 2
    assert r.status == "partial: line 13: truncated entry (unterminated <font> tag)"
    with session_scope(db_url) as s:
        assert s.get(Flight, fid).status == r.status
    with pytest.raises(LogImportError, match="already has a log"):
        other = tmp_path / "other.SRT"
        other.write_text(SRT.replace("52.300", "53.300"))
        with session_scope(db_url) as s:
            import_flight_log(s, other, flight_id=fid, progress=False)


def test_boundary_validation_rejects_bad_values(db_url, tmp_path):
    bad = tmp_path / "bad.SRT"
    bad.write_text(SRT.replace("[latitude: -22.724560]", "[latitude: 95.5]"))
    with pytest.raises(
        DbValidationError, match=r"bad.SRT: sample 1, t=0.03 s: lat: Input should be less than or equal to 90"
    ):
        with session_scope(db_url) as s:
            import_flight_log(s, bad, device_serial="D1", create_device=True, progress=False)
    p = tmp_path / "ok.SRT"
    p.write_text(SRT)
    with pytest.raises(DbValidationError, match="device serial"):
        with session_scope(db_url) as s:
            import_flight_log(s, p, device_serial="x" * 65, create_device=True, progress=False)
    with pytest.raises(DbValidationError, match="device serial"):
        with session_scope(db_url) as s:
            import_flight_log(s, p, device_serial="drop table; --", create_device=True, progress=False)
    assert counts(db_url) == (0, 0)
    with session_scope(db_url) as s:
        assert s.scalar(select(func.count(Device.id))) == 0


def test_failure_inside_the_transaction_leaves_nothing(db_url, tmp_path):
    p = tmp_path / "a.SRT"
    p.write_text(SRT)
    with pytest.raises(RuntimeError):
        with session_scope(db_url) as s:
            import_flight_log(s, p, device_serial="D1", create_device=True, progress=False)
            raise RuntimeError("power cut")
    assert counts(db_url) == (0, 0)


@pytest.mark.shared
def test_real_logs(db_url):
    if not TELEMETRY.is_dir():
        pytest.skip(f"shared telemetry not found at {TELEMETRY}")
    with session_scope(db_url) as s:
        ulog = import_flight_log(s, TELEMETRY / "px4_ulog" / "sample_log_small.ulg", create_device=True, progress=False)
        broken = import_flight_log(
            s,
            TELEMETRY / "dji_srt" / "broken_incomplete.SRT",
            device_serial="MAVIC-PRO-1",
            create_device=True,
            progress=False,
        )
    assert ulog.created and ulog.samples == 636
    assert broken.status == "partial: line 115: truncated entry (no position)" and broken.samples == 19
    with session_scope(db_url) as s:
        f = s.get(Flight, ulog.flight_id)
        assert f.device.serial == "000600000000383638393239510d0035002d" and f.device.model == "CUBEPILOT_CUBEORANGE"
        assert f.clock == "utc" and f.start_time.year == 2021 and f.source_format == "px4_ulog"
        assert abs(f.home_lat - 63.417) < 0.01


def test_cli_import_and_upgrade(db_url, tmp_path, monkeypatch):
    import typer

    from db import cli as db_cli

    # the same registration as edge/cli.py (importing that pulls in the whole pipeline: seconds of torch import)
    app = typer.Typer()
    app.command("import-log")(db_cli.cli_import_log)
    db_app = typer.Typer()
    db_app.command("upgrade")(db_cli.cli_db_upgrade)
    app.add_typer(db_app, name="db")
    monkeypatch.setenv("AIRPATROL_DATABASE_URL", db_url)
    runner = CliRunner()
    up = runner.invoke(app, ["db", "upgrade"])
    from db.migrate import head_revision

    assert up.exit_code == 0 and f"revision {head_revision()}" in up.output
    p = tmp_path / "DJI_0007.SRT"
    p.write_text(SRT)
    res = runner.invoke(app, ["import-log", str(p), "--device", "CLI-1", "--create-device", "-q"])
    assert res.exit_code == 0, res.output
    assert "flight" in res.output and "3 samples, complete" in res.output
    res = runner.invoke(app, ["import-log", str(p), "-q"])
    assert res.exit_code == 0 and "already imported" in res.output
    junk = tmp_path / "junk.srt"
    junk.write_text("not a log")
    res = runner.invoke(app, ["import-log", str(junk), "-q"])
    assert res.exit_code == 2 and "junk.srt: not a recognised flight log" in res.output
    assert counts(db_url) == (1, 3)
    cut = tmp_path / "DJI_0008.SRT"
    cut.write_text(SRT.replace("52.300", "53.300").rstrip("\n")[:-70])  # the third entry loses its end
    res = runner.invoke(app, ["import-log", str(cut), "--device", "CLI-1", "-q"])
    assert res.exit_code == 3, res.output  # EXIT_INCOMPLETE: imported what was readable, said what was not
    assert "2 samples, partial: line 13" in res.output
    assert "warning" in res.output and "INCOMPLETE" in res.output and "DJI_0008.SRT" in res.output
    assert counts(db_url) == (2, 5)


def test_concurrent_imports(db_url, tmp_path):
    """Eight threads importing four files at once, each file twice, unknown device created on the fly: every call
    succeeds, each file is stored exactly once, one device."""
    from concurrent.futures import ThreadPoolExecutor

    paths = []
    for i in range(4):
        p = tmp_path / f"c{i}.SRT"
        p.write_text(SRT.replace("52.300", f"{60 + i}.000"))
        paths.append(p)

    def work(p):
        return import_flight_log_file(db_url, p, device_serial="CONC-1", create_device=True, progress=False).created

    with ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(work, paths + paths)) == [False] * 4 + [True] * 4
    assert counts(db_url) == (4, 12)
    with session_scope(db_url) as s:
        assert s.scalar(select(func.count(Device.id))) == 1
