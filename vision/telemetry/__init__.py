"""Flight-log parsing: DJI SRT/CSV, PX4 ULog, MAVLink tlog, ArduPilot DataFlash and GPX into one sample stream."""

from vision.telemetry.loader import detect_format, load_flight_log
from vision.telemetry.poses import PoseTrack, TelemetryCoverageError, find_sidecar_srt
from vision.telemetry.types import FlightLog, FlightLogError, TelemetrySample, to_pose

__all__ = [
    "FlightLog",
    "FlightLogError",
    "PoseTrack",
    "TelemetryCoverageError",
    "TelemetrySample",
    "detect_format",
    "find_sidecar_srt",
    "load_flight_log",
    "to_pose",
]
