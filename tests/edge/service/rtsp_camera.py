"""A live RTSP camera for the tests: GStreamer's RTSP server (gst-rtsp-server) re-serving an MPEG-TS stream that
arrives on a UDP port, the way an IP camera or a drone's video link serves its encoder's output.

Run as its own process with a Python that has PyGObject (Debian: python3-gi gir1.2-gst-rtsp-server-1.0
gstreamer1.0-plugins-good gstreamer1.0-plugins-bad; the system /usr/bin/python3):

    python3 rtsp_camera.py --port 8554 --udp-port 5000 --codec h264     # rtsp://127.0.0.1:8554/cam

The encoder (ffmpeg -re ... -f mpegts udp://127.0.0.1:5000) runs on its own; an RTSP client joins whatever point of
the stream is being sent (mid-GOP, as with a real camera). The media is shared: every client sees the same live
stream. Prints "ready" when it listens. Stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

PAYLOADERS = {"h264": "h264parse config-interval=-1 ! rtph264pay", "hevc": "h265parse config-interval=-1 ! rtph265pay"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--udp-port", type=int, help="live MPEG-TS arriving here")
    src.add_argument("--file", help="an MPEG-TS file played at its rate")
    ap.add_argument("--codec", choices=sorted(PAYLOADERS), default="h264")
    ap.add_argument("--path", default="/cam")
    args = ap.parse_args()
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    factory = GstRtspServer.RTSPMediaFactory()
    source = (
        f"udpsrc address=127.0.0.1 port={args.udp_port} buffer-size=4194304 do-timestamp=true "
        f'caps="video/mpegts,systemstream=(boolean)true"'
        if args.udp_port
        else f"filesrc location={args.file}"
    )
    factory.set_launch(
        f"( {source} ! tsdemux ignore-pcr=true ! {PAYLOADERS[args.codec]} name=pay0 pt=96 config-interval=-1 )"
    )
    factory.set_shared(True)  # one live stream for every client
    server.get_mount_points().add_factory(args.path, factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
        return 1
    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, lambda: loop.quit() or False)  # in the main loop
    print("ready", flush=True)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
