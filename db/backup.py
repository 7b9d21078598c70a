"""``airpatrol db backup`` / ``restore``: a consistent copy of the whole database, while the service runs.

- SQLite: SQLite's online backup API (a page-by-page snapshot that writers do not corrupt); the backup is itself a
  SQLite file. Restore copies it back the same way.
- MariaDB: ``mariadb-dump --single-transaction`` (a consistent InnoDB snapshot without locking the tables), as
  SQL text, gzip-compressed when the file name ends in ``.gz``. Restore drops the target's tables and feeds the
  dump to the ``mariadb`` client. The password goes to the tools in a private options file, never on the command
  line (where ``ps`` would show it).

A backup holds the Alembic revision table too: after a restore, ``airpatrol db upgrade`` brings an older backup to
the current schema. Backups are not portable between the two back ends.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from db.engine import database_url

SQLITE_MAGIC = b"SQLite format 3\x00"


class BackupError(ValueError):
    """A backup or restore that cannot be done; the message says why (one line)."""


def _backend(url: URL) -> str:
    name = url.get_backend_name()
    if name == "sqlite":
        return "sqlite"
    if name in ("mysql", "mariadb"):
        return "mariadb"
    raise BackupError(f"database {url.render_as_string(hide_password=True)}: backups support SQLite and MariaDB only")


def _sqlite_path(url: URL) -> Path:
    if not url.database or url.database == ":memory:":
        raise BackupError("an in-memory SQLite database cannot be backed up")
    return Path(url.database)


def backup(url: str | None, target: str | Path) -> Path:
    """Write a backup of the database at ``url`` to ``target`` (refuses to overwrite); returns the path."""
    parsed = make_url(database_url(url))
    target = Path(target)
    if target.exists():
        raise BackupError(f"{target}: already exists; choose a new file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")  # a failed backup never looks like a finished one
    try:
        if _backend(parsed) == "sqlite":
            _sqlite_copy(_sqlite_path(parsed), partial, must_exist=True)
        else:
            _mariadb_dump(parsed, partial, compress=target.suffix == ".gz")
        partial.rename(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def restore(url: str | None, source: str | Path) -> None:
    """Replace the whole content of the database at ``url`` by the backup ``source``."""
    parsed = make_url(database_url(url))
    source = Path(source)
    if not source.is_file():
        raise BackupError(f"{source}: no such backup file")
    head = _head(source)
    if _backend(parsed) == "sqlite":
        if not head.startswith(SQLITE_MAGIC):
            raise BackupError(f"{source}: not a SQLite backup (a MariaDB dump cannot be restored into SQLite)")
        _check_sqlite_backup(source)
        from db.engine import dispose_engines

        dispose_engines()  # no pooled connection of ours keeps the old file open
        target = _sqlite_path(parsed)
        target.parent.mkdir(parents=True, exist_ok=True)
        _sqlite_copy(source, target, must_exist=False)
    else:
        if head.startswith(SQLITE_MAGIC) or b"-- MariaDB dump" not in head and b"-- MySQL dump" not in head:
            raise BackupError(f"{source}: not a MariaDB dump made by `airpatrol db backup`")
        _mariadb_restore(parsed, source)


def _head(path: Path) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            return f.read(4096)
    except (OSError, EOFError) as exc:
        raise BackupError(f"{path}: unreadable ({exc})") from None


# -- SQLite -----------------------------------------------------------------------------------------------------
def _sqlite_copy(src: Path, dst: Path, must_exist: bool) -> None:
    if must_exist and not src.is_file():
        raise BackupError(f"{src}: no such SQLite database")
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        dest = sqlite3.connect(dst)
        try:
            source.backup(dest)  # consistent snapshot even while other connections write
        finally:
            dest.close()
    except sqlite3.Error as exc:
        raise BackupError(f"{src} -> {dst}: {exc}") from None
    finally:
        source.close()


def _check_sqlite_backup(path: Path) -> None:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            raise BackupError(f"{path}: the backup file is damaged (SQLite integrity check failed)")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path}: not a readable SQLite backup ({exc})") from None
    finally:
        conn.close()
    if "alembic_version" not in tables:
        raise BackupError(f"{path}: not an AirPatrol database backup (no schema revision table)")


# -- MariaDB ----------------------------------------------------------------------------------------------------
def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise BackupError(f"{names[0]} not found (Debian: apt-get install mariadb-client)")


@contextmanager
def _options_file(url: URL):
    """A private [client] options file with the credentials (never on the command line)."""
    fd, name = tempfile.mkstemp(prefix="airpatrol-db-", suffix=".cnf")
    try:
        lines = ["[client]", f"user={url.username or ''}", f"password={url.password or ''}"]
        socket = url.query.get("unix_socket")
        if socket:
            lines.append(f"socket={socket}")
        else:
            lines += [f"host={url.host or '127.0.0.1'}", f"port={url.port or 3306}", "protocol=TCP"]
        lines.append("default-character-set=utf8mb4")
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        yield name
    finally:
        os.unlink(name)


def _run(args: list[str], what: str, **kwargs) -> None:
    try:
        proc = subprocess.run(args, stderr=subprocess.PIPE, **kwargs)
    except OSError as exc:
        raise BackupError(f"{what}: {exc}") from None
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip().splitlines()
        raise BackupError(f"{what} failed: {reason[-1] if reason else f'exit code {proc.returncode}'}")


def _mariadb_dump(url: URL, target: Path, compress: bool) -> None:
    dump = _tool("mariadb-dump", "mysqldump")
    with _options_file(url) as opts:
        args = [
            dump,
            f"--defaults-extra-file={opts}",
            "--single-transaction",
            "--quick",
            "--routines",
            "--triggers",
            "--hex-blob",
            "--no-tablespaces",
            "--skip-lock-tables",
            url.database or "",
        ]
        if compress:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert proc.stdout is not None and proc.stderr is not None  # both are PIPEs
            with gzip.open(target, "wb") as out:
                shutil.copyfileobj(proc.stdout, out, 1 << 20)
            err = proc.stderr.read().decode(errors="replace").strip().splitlines()
            if proc.wait() != 0:
                raise BackupError(f"mariadb-dump failed: {err[-1] if err else proc.returncode}")
        else:
            with open(target, "wb") as out:
                _run(args, "mariadb-dump", stdout=out)


def _mariadb_restore(url: URL, source: Path) -> None:
    from sqlalchemy import inspect, text

    from db.engine import dispose_engines, make_db_engine

    engine = make_db_engine(str(url.render_as_string(hide_password=False)))
    try:
        with engine.begin() as conn:  # tables of a newer schema than the backup's would otherwise linger
            conn.execute(text("SET FOREIGN_KEY_CHECKS=0"))
            for name in inspect(conn).get_table_names():
                conn.execute(text(f"DROP TABLE `{name}`"))
            conn.execute(text("SET FOREIGN_KEY_CHECKS=1"))
    finally:
        engine.dispose()
    dispose_engines()
    client = _tool("mariadb", "mysql")
    with _options_file(url) as opts:
        opener = gzip.open if source.suffix == ".gz" else open
        with opener(source, "rb") as dump:
            proc = subprocess.Popen(
                [client, f"--defaults-extra-file={opts}", url.database or ""],
                stdin=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert proc.stdin is not None and proc.stderr is not None  # both are PIPEs
            try:
                shutil.copyfileobj(dump, proc.stdin, 1 << 20)
                proc.stdin.close()
            except BrokenPipeError:
                pass
            err = proc.stderr.read().decode(errors="replace").strip().splitlines()
            if proc.wait() != 0:
                raise BackupError(f"restore with the mariadb client failed: {err[-1] if err else proc.returncode}")
