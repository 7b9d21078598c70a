"""A throw-away MariaDB server in a temporary folder, for tests and benchmarks (never for production data).

``mariadb-install-db`` initialises a data directory, ``mariadbd`` serves it on 127.0.0.1:<free port> and a unix
socket; an ``airpatrol`` user with a random password gets one database per ``create_database()`` call.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"])


class MariaDBUnavailable(RuntimeError):
    pass


def find_server_binaries() -> tuple[str, str] | None:
    """(mariadbd, mariadb-install-db) if installed (Debian puts mariadbd in /usr/sbin)."""
    server = shutil.which("mariadbd", path=_SEARCH_PATH) or shutil.which("mysqld", path=_SEARCH_PATH)
    install = shutil.which("mariadb-install-db", path=_SEARCH_PATH) or shutil.which(
        "mysql_install_db", path=_SEARCH_PATH
    )
    return (server, install) if server and install else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MariaDBServer:
    def __init__(self, buffer_pool: str = "256M", durable: bool = True):
        found = find_server_binaries()
        if not found:
            raise MariaDBUnavailable("mariadbd / mariadb-install-db not found (Debian: apt-get install mariadb-server)")
        self.server_bin, self.install_bin = found
        # Short path: unix socket paths are limited to ~107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="apmdb-"))
        self.datadir, self.sock = self.root / "data", self.root / "sock"
        self.port = _free_port()
        self.password = secrets.token_urlsafe(16)
        self.buffer_pool, self.durable = buffer_pool, durable
        self.proc: subprocess.Popen | None = None

    def _user_args(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses to run as root without it

    def start(self, timeout_s: float = 60.0) -> "MariaDBServer":
        """Start the server; again after :meth:`shutdown`, on the same data, port and socket (a restart)."""
        first = not self.datadir.exists()
        if first:
            with (self.root / "install.log").open("w") as log:
                subprocess.run(
                    [
                        self.install_bin,
                        "--no-defaults",
                        f"--datadir={self.datadir}",
                        "--auth-root-authentication-method=normal",
                        "--skip-test-db",
                        *self._user_args(),
                    ],
                    check=True,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                )
        args = [
            self.server_bin,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--socket={self.sock}",
            f"--port={self.port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={self.root / 'mariadbd.pid'}",
            f"--log-error={self.root / 'error.log'}",
            f"--tmpdir={self.root}",
            "--skip-log-bin",
            f"--innodb-buffer-pool-size={self.buffer_pool}",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            *self._user_args(),
        ]
        if not self.durable:
            args.append("--innodb-flush-log-at-trx-commit=2")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise MariaDBUnavailable(f"mariadbd exited with {self.proc.returncode}: {self.error_log_tail()}")
            try:
                self._root_sql("SELECT 1")
                break
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise MariaDBUnavailable(
                        f"mariadbd did not accept connections in {timeout_s:.0f} s: {self.error_log_tail()}"
                    ) from None
                time.sleep(0.2)
        if first:
            self._root_sql(f"CREATE USER 'airpatrol'@'127.0.0.1' IDENTIFIED BY '{self.password}'")
        return self

    def shutdown(self, kill: bool = False) -> None:
        """Stop the server but keep its data (``start()`` brings it back): SIGTERM, a clean shutdown, or SIGKILL,
        a crash (InnoDB recovers at the next start)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def error_log_tail(self) -> str:
        p = self.root / "error.log"
        return " | ".join(p.read_text(errors="replace").strip().splitlines()[-3:]) if p.exists() else "(no log)"

    def _root_sql(self, *statements: str) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.sock), user="root", password="", connect_timeout=2)
        try:
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
            conn.commit()
        finally:
            conn.close()

    def create_database(self, name: str | None = None) -> str:
        """A new empty utf8mb4 database the ``airpatrol`` user owns; returns its SQLAlchemy URL (TCP, password)."""
        name = name or f"t_{secrets.token_hex(4)}"
        self._root_sql(
            f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
            f"GRANT ALL PRIVILEGES ON `{name}`.* TO 'airpatrol'@'127.0.0.1'",
        )
        return f"mysql+pymysql://airpatrol:{self.password}@127.0.0.1:{self.port}/{name}?charset=utf8mb4"

    def drop_database(self, name: str) -> None:
        self._root_sql(f"DROP DATABASE IF EXISTS `{name}`")

    def stop(self) -> None:
        """Stop the server and delete its data."""
        self.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "MariaDBServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
