"""What the service benchmarks share: a free local port, ``airpatrol serve`` as a process of its own (as deployed)
until it is ready, a login and a device token over its API, and FFmpeg as a live encoder sending a clip at its real
rate. Used by bench/stream_bench.py, publish_bench.py, gpu_streams.py, load_test.py and live_pacing.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(
    folder: Path,
    config: dict,
    pythonpath: list[Path],
    env: dict[str, str] | None = None,
    log: Path | None = None,
    ready_s: float = 180.0,
) -> tuple[subprocess.Popen, int]:
    """``airpatrol serve --config FOLDER/serve.yaml`` (``config`` written there) on a free port, run in ``folder``
    with its log in ``log`` (default FOLDER/serve.log), the code from ``pythonpath`` (in that order, before an
    inherited PYTHONPATH); returns once ``/readyz`` answers. A server that exits or is not ready within ``ready_s``
    ends the benchmark with the end of its log."""
    import httpx
    import yaml

    (folder / "serve.yaml").write_text(yaml.safe_dump(config))
    path = [str(p) for p in pythonpath] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    port = free_port()
    log = log or folder / "serve.log"
    with open(log, "wb") as out:  # a file, not a pipe nobody reads (a full pipe would stall the server)
        proc = subprocess.Popen(
            [sys.executable, "-m", "edge.cli", "serve", "--config", str(folder / "serve.yaml")]
            + ["--port", str(port), "--log-level", "warning"],
            env={**os.environ, "YOLO_OFFLINE": "1", **(env or {}), "PYTHONPATH": os.pathsep.join(path)},
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + ready_s
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"airpatrol serve exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return proc, port
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            stop(proc, 0)
            raise SystemExit(f"airpatrol serve did not become ready in {ready_s:.0f} s")
        time.sleep(0.3)


def stop(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """SIGTERM (a graceful stop: the service completes its runs), then SIGKILL after ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def login(base: str, username: str, password: str) -> dict[str, str]:
    """The Authorization header of a user's session (``base``: http://host:port)."""
    import httpx

    r = httpx.post(f"{base}/api/auth/login", json={"username": username, "password": password})
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


def device_token(base: str, admin: dict[str, str], serial: str, kind: str) -> str:
    """An API token of a device registered by the admin (``admin``: the admin's Authorization header)."""
    import httpx

    httpx.post(f"{base}/api/devices", headers=admin, json={"serial": serial, "kind": kind}).raise_for_status()
    r = httpx.post(f"{base}/api/devices/{serial}/tokens", headers=admin)
    r.raise_for_status()
    return r.json()["token"]


def ffmpeg_live(clip: Path, url: str, loop: bool = True, quiet: bool = True) -> subprocess.Popen:
    """ffmpeg sending the clip at its real rate (looped unless ``loop`` is false) without re-encoding, as a drone or
    encoder does: FLV to rtmp://, MPEG-TS otherwise (srt://, udp://, tcp://...?listen=1 for the service to pull);
    ``quiet=False`` lets its errors through."""
    fmt = "flv" if url.startswith("rtmp://") else "mpegts"
    out = subprocess.DEVNULL if quiet else None
    return subprocess.Popen(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-re", *(["-stream_loop", "-1"] if loop else [])]
        + ["-i", str(clip), "-c", "copy", "-f", fmt, url],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
    )
