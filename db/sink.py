"""``DatabaseSink``: pipeline results into the database (a ``tracking.types.Sink``).

Life of a run row: ``open`` inserts it as ``running``; ``write`` buffers per-frame track rows and every
``batch_rows`` rows writes them in one transaction (new tracks first, then their speed rows) and updates progress
and ``heartbeat_at``; ``close`` writes the rest, the per-track aggregates, the speed violations and then marks the
run ``complete`` - all in one last transaction, so a run is complete only if everything is there. A run whose input
was damaged (the summary's ``losses``) is also ``completeness = 'incomplete'`` with the losses in ``losses_json``. ``abort`` marks
it ``failed``. A process killed midway leaves it ``running`` with a stale heartbeat: never complete;
:func:`fail_stale_runs` turns those into ``failed``.

A database that goes away mid-run (MariaDB restarted, network cut) is waited for: every transaction is retried
for up to ``retry_s`` seconds (``db.retry``, one log line per retry). Nothing of the sink's own state changes until
a transaction has committed, so a retry writes exactly what the failed attempt would have; and since a commit can
succeed with its answer lost, a retried batch first checks the run's ``frames_done`` (written in the batch's own
transaction) and a retried close the run's status: what is already there is not written twice.

Re-running a video: history is kept, but only one run per (video, mode) is ``complete``. When a new run completes,
earlier complete runs of the same video and mode become ``superseded`` and their tracks, speeds and violations are
deleted in that same transaction, so the dashboard never sees two result sets - nor none while the re-run is going.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from db.engine import begin_write, session_factory
from db.models import (
    Flight,
    ProcessingRun,
    Task,
    TaskRound,
    TrackRow,
    TrackSpeed,
    Video,
    Violation,
    grid_cell,
    utcnow,
)
from db.retry import DEFAULT_RETRY_S, retry_db
from tracking.types import FrameResult, RunInfo, lower_bound_kmh, trusted_speed, violation_rule
from vision.types import VEHICLE_CLASSES

PATH_SPACING_S = 0.5  # GeoJSON path: one point every half second is plenty for a map


@dataclass
class _Track:
    first_frame: int
    first_t: float
    last_frame: int = 0
    last_t: float = 0.0
    classes: Counter = field(default_factory=Counter)
    moving_frames: int = 0
    frames: int = 0
    # kmh, t, lat, lon, sigma, scale source
    speeds: list[tuple[float, float, float | None, float | None, float | None, str | None]] = field(
        default_factory=list
    )
    path: list[list[float]] = field(default_factory=list)
    path_t: float = -1e9
    db_id: int | None = None


def _finite(x) -> float | None:
    """NaN/inf mean 'unknown' here; both back ends store that as NULL."""
    return float(x) if x is not None and math.isfinite(x) else None


class DatabaseSink:
    def __init__(
        self,
        url: str | None = None,
        *,
        video_id: int | None = None,
        flight_id: int | None = None,
        task_round_id: int | None = None,
        speed_limit_kmh: float | None = None,
        time_offset_s: float | None = None,
        batch_rows: int = 5000,
        min_over_limit_s: float = 1.0,
        session_maker: sessionmaker | None = None,
        retry_s: float = DEFAULT_RETRY_S,
        fence: Callable[[Session, int], None] | None = None,
    ):
        self._sessions = session_maker or session_factory(url)
        # Called in every transaction that writes results, with the run's id (in ``open``: the new run's, so the
        # caller can record it in the same transaction); raises to refuse the write. The service's batch jobs check
        # (and renew) their lease with it and record the attempt's run on the job: a worker that lost its job
        # commits nothing more, and whoever takes the job over knows which run's rows to remove.
        self._fence = fence
        self.video_id, self.flight_id, self.task_round_id = video_id, flight_id, task_round_id
        self.speed_limit_kmh, self.time_offset_s = speed_limit_kmh, time_offset_s
        self.batch_rows, self.min_over_limit_s, self.retry_s = batch_rows, min_over_limit_s, retry_s
        self.run_id: int | None = None
        self._tracks: dict[int, _Track] = {}
        self._rows: list[dict] = []
        self._frames = 0
        self._last_frame: int | None = None  # index of the last frame written (a live stream's do not start at 0)
        self._frame_count: int | None = None
        self._fps = 25.0
        self._unconfirmed: tuple[int, int] | None = None  # (frames, rows) of a batch whose commit got no answer
        self._scale_sources: Counter = Counter()  # frames per scale source

    # -- Sink protocol ---------------------------------------------------------------------------------------
    def open(self, info: RunInfo) -> None:
        self._frame_count, self._fps = info.frame_count, info.fps or 25.0

        def attempt() -> tuple[int, int]:
            with self._sessions() as s, s.begin():
                begin_write(s)
                video_id = self.video_id if self.video_id is not None else self._video_for(s, info).id
                run = ProcessingRun(
                    video_id=video_id,
                    flight_id=self.flight_id,
                    task_round_id=self.task_round_id,
                    status="running",
                    baseline=info.mode == "baseline",
                    source=info.source[:1024],
                    config_json=info.config,
                    weights=(info.weights or "")[:1024] or None,
                    device=(info.device or "")[:64] or None,
                    frame_count=info.frame_count,
                    started_at=utcnow(),
                    heartbeat_at=utcnow(),
                )
                s.add(run)
                s.flush()
                if self._fence is not None:
                    self._fence(s, run.id)
                return video_id, run.id

        self.video_id, self.run_id = retry_db(attempt, "starting a run", self.retry_s)

    def write(self, result: FrameResult) -> None:
        f = result.frame
        for tr in result.tracks:
            t = self._tracks.get(tr.track_id)
            if t is None:
                t = self._tracks[tr.track_id] = _Track(first_frame=f.index, first_t=f.t)
            t.last_frame, t.last_t = f.index, f.t
            t.classes[int(tr.class_id)] += 1
            t.frames += 1
            t.moving_frames += bool(tr.moving)
            speed, lat, lon = _finite(tr.speed_kmh), _finite(tr.lat), _finite(tr.lon)
            if speed is not None and trusted_speed(tr.speed_flag, _finite(tr.speed_sigma_kmh)):
                t.speeds.append((speed, f.t, lat, lon, _finite(tr.speed_sigma_kmh), result.scale_source))
            if lat is not None and lon is not None and f.t - t.path_t >= PATH_SPACING_S:
                t.path.append([round(lon, 7), round(lat, 7)])
                t.path_t = f.t
            self._rows.append(
                {
                    "track_no": tr.track_id,
                    "frame": f.index,
                    "t_s": f.t,
                    "speed_kmh": speed,
                    "sigma_kmh": _finite(tr.speed_sigma_kmh),
                    "lat": lat,
                    "lon": lon,
                    "flag": tr.speed_flag[:32] if tr.speed_flag else None,
                }
            )
        self._frames += 1
        self._last_frame = f.index
        if result.scale_source:
            self._scale_sources[result.scale_source] += 1
        if len(self._rows) >= self.batch_rows:
            self.write_batch(self.retry_s)

    def write_batch(self, retry_s: float) -> None:
        """The rows buffered so far, in one transaction (retried for ``retry_s`` while the database is away).

        Raises ``db.retry.DatabaseUnavailable`` after ``retry_s``; the rows then stay buffered for the next call."""

        def attempt() -> tuple[dict[int, int], int]:
            with self._sessions() as s, s.begin():
                begin_write(s)
                if self._fence is not None:
                    self._fence(s, self._run_id())
                self._confirm_unknown_commit(s)
                n = len(self._rows)
                self._unconfirmed = (self._frames, n)  # until the commit's answer arrives
                ids = self._flush(s)
            return ids, n

        self._flushed(*retry_db(attempt, f"writing results of run {self.run_id}", retry_s))

    def close(self, summary: dict[str, Any]) -> None:
        def attempt() -> tuple[dict[int, int], int]:
            with self._sessions() as s, s.begin():
                begin_write(s)
                if self._fence is not None:
                    self._fence(s, self._run_id())
                self._confirm_unknown_commit(s)
                run = s.get(ProcessingRun, self.run_id)
                assert run is not None  # created by open(); a run is not deleted while its sink writes
                if run.status == "complete":  # an earlier attempt committed; only its answer was lost
                    return self._ids_of_written_tracks(s), len(self._rows)
                n = len(self._rows)
                ids = self._flush(s)
                self._complete(s, run, summary, ids)
            return ids, n

        self._flushed(*retry_db(attempt, f"completing run {self.run_id}", self.retry_s))

    def _complete(self, s: Session, run: ProcessingRun, summary: dict[str, Any], ids: dict[int, int]) -> None:
        self._finish_tracks(s, ids)
        n_violations = self._violations(s, ids)
        self._supersede(s, run)
        run.status, run.finished_at, run.progress = "complete", utcnow(), 1.0
        run.frames_done, run.last_frame = self._frames, self._last_frame
        run.summary_json = json.loads(json.dumps(summary, default=str))  # plain JSON types only
        run.timings_json = run.summary_json.get("timings")
        run.summary_json["violations"] = n_violations
        run.summary_json["violation_rule"] = violation_rule(self.min_over_limit_s)
        scale = run.summary_json.get("scale")
        source = scale.get("source") if isinstance(scale, dict) else None
        if not source and self._scale_sources:
            source = self._scale_sources.most_common(1)[0][0]
        run.scale_source = str(source)[:16] if source else None
        losses = run.summary_json.get("losses") or []
        run.completeness, run.losses_json = ("incomplete", losses) if losses else ("complete", None)

    def abort(self, error: BaseException | None) -> None:
        if self.run_id is None:
            return
        self._rows.clear()

        def attempt():
            with self._sessions() as s, s.begin():
                begin_write(s)
                s.execute(
                    update(ProcessingRun)
                    .where(ProcessingRun.id == self.run_id)
                    .values(
                        status="failed",
                        finished_at=utcnow(),
                        frames_done=self._frames,
                        last_frame=self._last_frame,
                        error=(f"{type(error).__name__}: {error}" if error is not None else "aborted")[:10000],
                    )
                )

        retry_db(attempt, f"marking run {self.run_id} failed", self.retry_s)

    # -- internals -------------------------------------------------------------------------------------------
    def _run_id(self) -> int:
        assert self.run_id is not None  # set by open(), before any batch is written
        return self.run_id

    def _video_for(self, s: Session, info: RunInfo) -> Video:
        path = str(Path(info.source).resolve()) if Path(info.source).exists() else info.source
        video = s.scalar(select(Video).where(Video.file_path == path[:1024]).order_by(Video.id.desc()))
        if video is None:
            video = Video(file_path=path[:1024], flight_id=self.flight_id)
            s.add(video)
        video.width, video.height, video.fps, video.frame_count = info.width, info.height, info.fps, info.frame_count
        if info.frame_count and info.fps:
            video.duration_s = info.frame_count / info.fps
        if self.time_offset_s is not None:
            video.time_offset_s = self.time_offset_s
        s.flush()
        return video

    def _flush(self, s: Session) -> dict[int, int]:
        """Write the buffered rows in ``s``'s transaction; returns the database ids of the tracks it created.

        Changes nothing of the sink's state (the transaction may still fail): :meth:`_flushed` does, after the
        commit."""
        new = [(no, t) for no, t in self._tracks.items() if t.db_id is None]
        ids: dict[int, int] = {}
        if new:
            rows = [
                TrackRow(
                    run_id=self.run_id,
                    track_no=no,
                    class_name=self._class_name(t),
                    first_t=t.first_t,
                    last_t=t.last_t,
                    first_frame=t.first_frame,
                    last_frame=t.last_frame,
                )
                for no, t in new
            ]
            s.add_all(rows)
            s.flush()
            ids = {no: row.id for (no, _), row in zip(new, rows)}
        if self._rows:
            speed_rows = [{k: v for k, v in r.items() if k != "track_no"} for r in self._rows]
            for r, src in zip(speed_rows, self._rows):
                r["track_id"] = self._tracks[src["track_no"]].db_id or ids[src["track_no"]]
            _insert_speed_rows(s, speed_rows)
        progress = min(1.0, self._frames / self._frame_count) if self._frame_count else 0.0
        s.execute(
            update(ProcessingRun)
            .where(ProcessingRun.id == self.run_id)
            .values(frames_done=self._frames, last_frame=self._last_frame, progress=progress, heartbeat_at=utcnow())
        )
        return ids

    def _ids_of_written_tracks(self, s: Session) -> dict[int, int]:
        return dict(s.execute(select(TrackRow.track_no, TrackRow.id).where(TrackRow.run_id == self.run_id)).all())

    def _flushed(self, ids: dict[int, int], n_rows: int) -> None:
        """A batch is committed: the new tracks have their ids, its ``n_rows`` buffered rows are gone."""
        for no, db_id in ids.items():
            if no in self._tracks and self._tracks[no].db_id is None:
                self._tracks[no].db_id = db_id
        del self._rows[:n_rows]
        self._unconfirmed = None

    def _confirm_unknown_commit(self, s: Session) -> None:
        """Did the last batch whose commit got no answer (connection lost at COMMIT) go through after all?

        Its transaction set ``frames_done`` to the frame count it was written at; rows are only added with new
        frames, so no other batch leaves that value with rows in it."""
        if self._unconfirmed is None:
            return
        frames, n_rows = self._unconfirmed
        if s.scalar(select(ProcessingRun.frames_done).where(ProcessingRun.id == self.run_id)) == frames:
            self._flushed(self._ids_of_written_tracks(s), n_rows)
        self._unconfirmed = None

    @staticmethod
    def _class_name(t: _Track) -> str:
        cid = t.classes.most_common(1)[0][0] if t.classes else -1
        return VEHICLE_CLASSES[cid] if 0 <= cid < len(VEHICLE_CLASSES) else f"class_{cid}"[:16]

    def _finish_tracks(self, s: Session, ids: dict[int, int]) -> None:
        rows = []
        for no, t in self._tracks.items():
            speeds = [v[0] for v in t.speeds]
            sigmas = [v[4] for v in t.speeds if v[4] is not None]
            sources = Counter(v[5] for v in t.speeds if v[5])
            path = None
            if len(t.path) >= 2:
                path = json.dumps({"type": "LineString", "coordinates": t.path})
            elif t.path:
                path = json.dumps({"type": "Point", "coordinates": t.path[0]})
            rows.append(
                {
                    "id": t.db_id or ids[no],
                    "last_t": t.last_t,
                    "last_frame": t.last_frame,
                    "class_name": self._class_name(t),
                    "moving": t.moving_frames * 2 >= t.frames,
                    "median_speed_kmh": statistics.median(speeds) if speeds else None,
                    "max_speed_kmh": max(speeds) if speeds else None,
                    "path_geojson": path,
                    "median_sigma_kmh": statistics.median(sigmas) if sigmas else None,
                    "scale_source": sources.most_common(1)[0][0][:16] if sources else None,
                }
            )
        if rows:
            s.execute(update(TrackRow), rows)  # ORM bulk UPDATE by primary key

    def _limit_and_task(self, s: Session) -> tuple[float | None, int | None]:
        if self.task_round_id is None:
            return self.speed_limit_kmh, None
        task = s.scalar(select(Task).join(TaskRound).where(TaskRound.id == self.task_round_id))
        if task is None:
            return self.speed_limit_kmh, None
        return self.speed_limit_kmh or task.speed_limit_kmh, task.id

    def _event_clock(self, s: Session, run: ProcessingRun):
        """(time of video t=0, is it an estimate): the flight's clock when known (an estimate unless UTC), else None."""
        flight = s.get(Flight, self.flight_id) if self.flight_id else None
        video = s.get(Video, self.video_id) if self.video_id is not None else None
        offset = (video.time_offset_s or 0.0) if video is not None else 0.0
        if flight is not None and flight.start_time is not None:
            return flight.start_time + timedelta(seconds=offset), flight.clock != "utc"
        # no flight log, no wall clock: the time is the video time t_s alone (never the processing time, which
        # would be false evidence of when the vehicle drove by)
        return None, True

    def _violations(self, s: Session, ids: dict[int, int]) -> int:
        limit, task_id = self._limit_and_task(s)
        if not limit:
            return 0
        run = s.get(ProcessingRun, self.run_id)
        assert run is not None  # created by open(); a run is not deleted while its sink writes
        t0, estimate = self._event_clock(s, run)
        frame_s = 1.0 / self._fps
        rule = violation_rule(self.min_over_limit_s)
        rows = []
        for no, t in self._tracks.items():
            # over the limit even at the low end of its uncertainty; the record is the frame where that low end is
            # highest, and its sigma is the track_speeds row of the same track and time
            over = [v for v in t.speeds if lower_bound_kmh(v[0], v[4]) > limit]
            if len(over) * frame_s < self.min_over_limit_s:
                continue
            speed, when, lat, lon, sigma, source = max(over, key=lambda v: lower_bound_kmh(v[0], v[4]))
            rows.append(
                {
                    "run_id": self.run_id,
                    "track_id": t.db_id or ids[no],
                    "task_id": task_id,
                    "speed_kmh": speed,
                    "limit_kmh": limit,
                    "sigma_kmh": sigma,
                    "lower_bound_kmh": lower_bound_kmh(speed, sigma),
                    "over_limit_s": round(len(over) * frame_s, 3),
                    "rule": rule,
                    "scale_source": source[:16] if source else None,
                    "t_s": when,
                    "lat": lat,
                    "lon": lon,
                    "time_is_estimate": estimate,
                    "cell": grid_cell(lat, lon),
                    "occurred_at": t0 + timedelta(seconds=when) if t0 else None,
                }
            )
        if rows:
            s.execute(insert(Violation), rows)
        return len(rows)

    def _supersede(self, s: Session, run: ProcessingRun) -> None:
        old = list(
            s.scalars(
                select(ProcessingRun.id).where(
                    ProcessingRun.video_id == run.video_id,
                    ProcessingRun.baseline == run.baseline,
                    ProcessingRun.status == "complete",
                    ProcessingRun.id != run.id,
                )
            )
        )
        if not old or run.video_id is None:
            return
        delete_run_rows(s, old)
        s.execute(update(ProcessingRun).where(ProcessingRun.id.in_(old)).values(status="superseded"))


def delete_run_rows(s: Session, run_ids: list[int]) -> None:
    """The result rows of these runs (per-frame speeds, violations, tracks); the runs' own rows stay."""
    tracks = select(TrackRow.id).where(TrackRow.run_id.in_(run_ids))
    s.execute(delete(TrackSpeed).where(TrackSpeed.track_id.in_(tracks)))
    s.execute(delete(Violation).where(Violation.run_id.in_(run_ids)))
    s.execute(delete(TrackRow).where(TrackRow.run_id.in_(run_ids)))


_ROWS_PER_STATEMENT = 5000
_SPEED_COLUMNS = ("track_id", "frame", "t_s", "speed_kmh", "sigma_kmh", "lat", "lon", "flag")


def _insert_speed_rows(s: Session, rows: list[dict]) -> None:
    """Bulk insert of per-frame rows.

    On MariaDB/MySQL through PyMySQL the rows are rendered into one multi-row INSERT with the driver's own
    escape functions called directly: PyMySQL's generic executemany spends most of its time dispatching the
    escaping of ~8 values per row in Python (measured: about half the insert time of 1 M rows). Every value is
    an int, a finite float or NULL, plus the short ``flag`` string (escaped). Other drivers use executemany.
    """
    bind = s.get_bind()
    if bind.dialect.name not in ("mysql", "mariadb") or bind.dialect.driver != "pymysql":
        s.execute(insert(TrackSpeed), rows)
        return
    from pymysql.converters import escape_float, escape_string

    def num(x) -> str:
        return "NULL" if x is None or not math.isfinite(x) else escape_float(float(x))

    def text(x) -> str:
        return "NULL" if x is None else "'" + escape_string(x) + "'"

    # The DB-API cursor of the session's connection (same transaction); called without parameters PyMySQL does no
    # %-formatting of the statement, so '%' in a flag stays as it is.
    cursor = s.connection().connection.cursor()
    for i in range(0, len(rows), _ROWS_PER_STATEMENT):  # ~0.5 MB statements, far below max_allowed_packet
        values = ",".join(
            f"({int(r['track_id'])},{int(r['frame'])},{num(r['t_s'])},{num(r['speed_kmh'])},{num(r['sigma_kmh'])},"
            f"{num(r['lat'])},{num(r['lon'])},{text(r['flag'])})"
            for r in rows[i : i + _ROWS_PER_STATEMENT]
        )
        cursor.execute(f"INSERT INTO track_speeds ({', '.join(_SPEED_COLUMNS)}) VALUES {values}")
    cursor.close()


def fail_stale_runs(session: Session, max_silence_s: float = 900.0) -> int:
    """Mark 'running' runs whose last batch is older than ``max_silence_s`` as failed (their process died)."""
    cutoff = utcnow() - timedelta(seconds=max_silence_s)
    result = session.execute(
        update(ProcessingRun)
        .where(
            ProcessingRun.status == "running",
            ProcessingRun.heartbeat_at < cutoff,
        )
        .values(
            status="failed",
            finished_at=utcnow(),
            error=f"no progress for more than {max_silence_s:.0f} s (process died?)",
        )
    )
    return result.rowcount or 0  # type: ignore[attr-defined]  # an UPDATE's result is a CursorResult, which has it
