"""Speed classes and their colours: one palette for the map legend, the dashboard charts and the annotated video.

Blue (slow) to dark red (fast), in km/h; grey while a vehicle's speed is not known (yet). The dashboard hands these
to its JavaScript (``dashboard/templates/base.html``), the video annotator (``edge/sinks/annotate.py``) draws with them.
"""

from __future__ import annotations

import bisect
import math

SPEED_EDGES_KMH = (20, 40, 60, 80, 100, 120)
SPEED_COLOURS = ("#3b4cc0", "#2c9fd1", "#1fb58f", "#a5c31b", "#f2a31b", "#e5521b", "#b40426")
UNKNOWN_COLOUR = "#8a8f98"
VIOLATION_COLOUR = "#d63031"  # the map's violation markers


def speed_class(speed_kmh: float | None) -> int:
    """Index into SPEED_COLOURS, or -1 when the speed is unknown."""
    if speed_kmh is None or not math.isfinite(speed_kmh):
        return -1
    return bisect.bisect_right(SPEED_EDGES_KMH, speed_kmh)


def speed_colour(speed_kmh: float | None) -> str:
    c = speed_class(speed_kmh)
    return UNKNOWN_COLOUR if c < 0 else SPEED_COLOURS[c]


def legend_labels() -> list[str]:
    e = SPEED_EDGES_KMH
    return [f"< {e[0]}"] + [f"{a}–{b}" for a, b in zip(e, e[1:])] + [f"≥ {e[-1]}"]
