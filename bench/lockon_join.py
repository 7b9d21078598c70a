"""Joining a long-GOP live stream mid-GOP (the issue's case): ffmpeg sends a clip as UDP MPEG-TS without re-encoding
(the nadir clip: one keyframe every 7.08 s); the service's pull reader joins DELAY seconds later and reads for 15 s.
Prints when the first frame came, how many frames arrived and the reader's events (a reconnect is 'dropped').

    python bench/lockon_join.py --delay 1 4
Run it with PYTHONPATH pointing at another checkout to measure that code (e.g. main) the same way.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from publish_bench import publisher  # noqa: E402
from stream_bench import DEFAULT_CLIP, free_port  # noqa: E402


def join(clip: Path, delay: float, seconds: float = 15.0) -> str:
    from edge.service.ingest import PullReader, check_source

    port = free_port()
    ff = publisher(clip, f"udp://127.0.0.1:{port}?pkt_size=1316", quiet=False)
    try:
        time.sleep(delay)
        n, events = [0], []
        first: list[float | None] = [None]
        t0 = time.monotonic()

        def on_frame(_):
            n[0] += 1
            if first[0] is None:
                first[0] = time.monotonic() - t0

        reader = PullReader(
            check_source(f"udp://127.0.0.1:{port}", None),
            on_frame,
            lambda e, d: events.append(e),
            open_timeout_s=10,
            read_timeout_s=5,
            backoff_initial_s=0.5,
            backoff_max_s=30,
            name="bench",
        )
        reader.start()
        time.sleep(seconds)
        reader.stop()
        got = f"first frame after {first[0]:.1f} s" if first[0] is not None else "no frame"
        return (
            f"joined {delay:g} s after the source started: {got}, {n[0]} frames in {seconds:g} s, "
            f"{events.count('dropped')} reconnects, events {events}"
        )
    finally:
        ff.kill()
        ff.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clip", type=Path, default=DEFAULT_CLIP)
    ap.add_argument("--delay", type=float, nargs="+", default=[1.0, 4.0])
    args = ap.parse_args()
    if not args.clip.is_file():
        raise SystemExit(f"{args.clip}: clip not found (set AIRPATROL_SHARED or --clip)")
    for d in args.delay:
        print(join(args.clip, d))


if __name__ == "__main__":
    main()
