"""Live sources for the ingest tests: the test clip as a long-GOP live encoder (FFmpeg, H.264/H.265, a keyframe
every GOP_S seconds, sent at its real rate as MPEG-TS), and a live RTSP camera serving it (GStreamer's RTSP server)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from service_helpers import free_port

GOP_S = 3
ENCODERS = {
    "h264": ["-c:v", "libx264", "-x264-params", f"keyint={25 * GOP_S}:min-keyint={25 * GOP_S}:scenecut=0"],
    "hevc": [
        "-c:v",
        "libx265",
        "-x265-params",
        f"keyint={25 * GOP_S}:min-keyint={25 * GOP_S}:scenecut=0:log-level=error",
    ],
}


def long_gop_files(clip, folder, loops: int = 14, codecs: tuple[str, ...] = tuple(ENCODERS)) -> dict:
    """The clip looped (to 60 s) and encoded with a keyframe every GOP_S seconds: MPEG-TS files per codec."""
    out = {}
    for codec in codecs:
        out[codec] = folder / f"long_{codec}.ts"
        subprocess.run(
            [
                "ffmpeg",
                "-hide_banner",
                "-loglevel",
                "error",
                "-stream_loop",
                str(loops),
                "-i",
                str(clip),
                *ENCODERS[codec],
                "-preset",
                "ultrafast",
                "-f",
                "mpegts",
                str(out[codec]),
            ],
            check=True,
            stdin=subprocess.DEVNULL,
        )
    return out


def live_encoder(long_gop: dict, codec: str, url: str) -> subprocess.Popen:
    """A long-GOP live source: the encoded stream sent at its real rate (``-re``) as MPEG-TS to ``url``."""
    return subprocess.Popen(
        [
            "ffmpeg",
            "-hide_banner",
            "-loglevel",
            "error",
            "-re",
            "-i",
            str(long_gop[codec]),
            "-c",
            "copy",
            "-f",
            "mpegts",
            url,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def ffmpeg_has_srt() -> bool:
    if shutil.which("ffmpeg") is None:
        return False
    out = subprocess.run(["ffmpeg", "-hide_banner", "-protocols"], capture_output=True, text=True).stdout
    return any(line.strip() == "srt" for line in out.splitlines())


RTSP_CAMERA = Path(__file__).with_name("rtsp_camera.py")
GST_PYTHON = os.environ.get("AIRPATROL_TEST_GST_PYTHON", "/usr/bin/python3")  # a Python with PyGObject (python3-gi)


@functools.cache
def rtsp_camera_missing() -> str | None:
    """Why the GStreamer RTSP camera cannot run here (None: it can)."""
    if not Path(GST_PYTHON).is_file():
        return f"{GST_PYTHON} not found"
    probe = (
        "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
        "from gi.repository import Gst; Gst.init(None); "
        "missing = [e for e in ('udpsrc', 'tsdemux', 'h264parse', 'rtph264pay', 'h265parse', 'rtph265pay') "
        "if Gst.ElementFactory.find(e) is None]; print(' '.join(missing))"
    )
    r = subprocess.run([GST_PYTHON, "-c", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return "PyGObject or the GStreamer RTSP server missing"
    return f"GStreamer elements missing: {r.stdout.strip()}" if r.stdout.strip() else None


class RtspCamera:
    """A live RTSP camera: gst-rtsp-server re-serving the long-GOP encoder's MPEG-TS (sent to it over UDP) as RTP;
    ``watcher`` another client already watching it, so the stream is running when the reader joins (mid-GOP)."""

    def __init__(self, long_gop: dict, codec: str):
        self.long_gop, self.codec = long_gop, codec
        self.port, self.udp_port = free_port(), free_port()
        self.url = f"rtsp://127.0.0.1:{self.port}/cam"
        self.procs: list[subprocess.Popen] = []
        self.server: subprocess.Popen | None = None

    def start(self) -> "RtspCamera":
        self.server = server = subprocess.Popen(
            [
                GST_PYTHON,
                str(RTSP_CAMERA),
                "--port",
                str(self.port),
                "--udp-port",
                str(self.udp_port),
                "--codec",
                self.codec,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert server.stdout.readline().strip() == "ready", server.stderr.read()
        self.procs = [server, live_encoder(self.long_gop, self.codec, f"udp://127.0.0.1:{self.udp_port}?pkt_size=1316")]
        return self

    def watcher(self) -> None:
        self.procs.append(
            subprocess.Popen(
                [
                    "ffmpeg",
                    "-hide_banner",
                    "-loglevel",
                    "error",
                    "-rtsp_transport",
                    "tcp",
                    "-i",
                    self.url,
                    "-f",
                    "null",
                    "-",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []
