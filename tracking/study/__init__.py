"""Traffic studies from a flight's trajectories: approaches, turning movements, origin-destination, lanes, flows,
speeds, headways, densities and conflicts (docs/study.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tracking.study.model import (
    MOVEMENTS,
    PARTIAL_MOVEMENTS,
    Approach,
    Conflict,
    CountingLine,
    Lane,
    SmoothedTrack,
    Study,
    StudyConfig,
    StudyInputError,
    Trajectory,
    VehicleMovement,
)

if TYPE_CHECKING:
    from tracking.study.approaches import find_approaches
    from tracking.study.compute import compute_study
    from tracking.study.io import (
        load_approaches,
        load_counting_lines,
        load_run_trajectories,
        trajectories_from_rows,
        write_study,
    )

# The computations pull in scipy (clustering, kd-trees, kernel densities): loaded on first use, so that the
# `airpatrol` command line, which registers `study`, starts without them.
_LAZY = {
    "find_approaches": "tracking.study.approaches",
    "compute_study": "tracking.study.compute",
    "load_approaches": "tracking.study.io",
    "load_counting_lines": "tracking.study.io",
    "load_run_trajectories": "tracking.study.io",
    "trajectories_from_rows": "tracking.study.io",
    "write_study": "tracking.study.io",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tracking.study' has no attribute {name!r}")


__all__ = [
    "MOVEMENTS",
    "PARTIAL_MOVEMENTS",
    "Approach",
    "Conflict",
    "CountingLine",
    "Lane",
    "SmoothedTrack",
    "Study",
    "StudyConfig",
    "StudyInputError",
    "Trajectory",
    "VehicleMovement",
    "compute_study",
    "find_approaches",
    "load_approaches",
    "load_counting_lines",
    "load_run_trajectories",
    "trajectories_from_rows",
    "write_study",
]
