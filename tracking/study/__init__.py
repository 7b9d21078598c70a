"""Traffic studies from a flight's trajectories: approaches, turning movements, origin-destination, lanes, flows,
speeds, headways, densities and conflicts (docs/study.md)."""

from tracking.study.approaches import find_approaches
from tracking.study.compute import compute_study
from tracking.study.io import (
    load_approaches,
    load_counting_lines,
    load_run_trajectories,
    trajectories_from_rows,
    write_study,
)
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
