"""RTMP publishers (DJI/Autel controllers, OBS, ffmpeg) straight into the service, through a supervised nginx.

nginx with its RTMP module (Debian: ``libnginx-mod-rtmp``) takes every publisher on one port. Its ``on_publish``
hook asks the service (``POST /api/publish/rtmp`` on 127.0.0.1 with a per-process secret) whether the stream key is
valid: the key is a device API token (``apt_...``, issued by an admin per device, revocable), so each device
publishes with its own key and an unknown key is refused before a byte of video is relayed. The service then reads
the published stream back from nginx on 127.0.0.1 with the ordinary pull reader (keyframe lock-on, reconnect), so a
publisher that drops and publishes again continues the same run.

Why nginx and not FFmpeg's own RTMP listener (``av.open('rtmp://0.0.0.0:P/live/KEY', options={'listen': '1'})``):
FFmpeg's listener takes one connection per port and accepts any stream key (it only logs "Unexpected stream"), so
it can neither serve many devices on one port nor authenticate them. Measured in docs/service.md.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import subprocess
import threading
import time
from pathlib import Path

log = logging.getLogger("airpatrol.service.rtmp")

CONF = """\
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
load_module {module};
events {{ worker_connections 512; }}
rtmp {{
    server {{
        listen {host}:{port};
        chunk_size 4096;
        application live {{
            live on;
            record off;
            # A publisher must be authorised by the service; only the service (on this machine) may play. on_play
            # tells the service its reader is subscribed, so the publisher is let in only then: its first keyframe
            # (the only one for seconds with a long-GOP encoder) reaches the reader.
            on_publish {callback};
            on_play {callback};
            notify_method post;
            allow play 127.0.0.1;
            deny play all;
            drop_idle_publisher 10s;
        }}
    }}
}}
"""


class RtmpSetupError(ValueError):
    pass


class RtmpRelay:
    """Writes the nginx config, starts nginx and restarts it (with back-off) if it dies, until ``stop``."""

    def __init__(self, folder: Path, host: str, port: int, callback_base: str, nginx: str, module: str):
        self.folder, self.host, self.port = folder, host, port
        self.secret = secrets.token_urlsafe(24)  # the callback proves it comes from our nginx
        self.callback = f"{callback_base}/api/publish/rtmp?secret={self.secret}"
        self.nginx = shutil.which(nginx) or nginx
        self.module = module
        self._proc: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._players: dict[str, threading.Event] = {}  # stream key -> set when the service's reader plays it
        self._players_lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="rtmp-relay", daemon=True)
        self.restarts = 0

    def check(self) -> None:
        if not Path(self.nginx).is_file():
            raise RtmpSetupError(
                f"service.rtmp_port is set but nginx was not found ({self.nginx}); Debian: "
                f"apt-get install nginx-light libnginx-mod-rtmp"
            )
        if not Path(self.module).is_file():
            raise RtmpSetupError(
                f"nginx RTMP module {self.module} not found; Debian: apt-get install libnginx-mod-rtmp"
            )

    def play_url(self, key: str) -> str:
        return f"rtmp://127.0.0.1:{self.port}/live/{key}"

    def start(self) -> None:
        self.check()
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "nginx.conf").write_text(
            CONF.format(dir=self.folder, module=self.module, host=self.host, port=self.port, callback=self.callback)
        )
        test = subprocess.run(
            [self.nginx, "-t", "-p", str(self.folder), "-c", str(self.folder / "nginx.conf")],
            capture_output=True,
            text=True,
        )
        if test.returncode != 0:
            raise RtmpSetupError(f"nginx RTMP relay config refused: {test.stderr.strip().splitlines()[-1]}")
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        self._proc = subprocess.Popen(
            [self.nginx, "-p", str(self.folder), "-c", str(self.folder / "nginx.conf")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        log.info("RTMP relay (nginx pid %s) listening on %s:%s", self._proc.pid, self.host, self.port)

    def _supervise(self) -> None:
        backoff = 0.5
        while not self._stop.wait(1.0):
            if self._proc is not None and self._proc.poll() is not None:
                log.error(
                    "RTMP relay exited with %s; restarting in %.1f s (see %s/error.log)",
                    self._proc.returncode,
                    backoff,
                    self.folder,
                )
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, 30.0)
                self.restarts += 1
                self._spawn()
            else:
                backoff = 0.5

    def expect_player(self, key: str) -> threading.Event:
        """An event set when the service's reader starts playing ``key`` (nginx's on_play)."""
        with self._players_lock:
            ev = self._players[key] = threading.Event()
            return ev

    def player_started(self, key: str) -> None:
        with self._players_lock:
            ev = self._players.pop(key, None)
        if ev is not None:
            ev.set()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._thread.is_alive():
            self._thread.join(5)


def wait_listening(port: int, timeout: float = 5.0) -> bool:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False
