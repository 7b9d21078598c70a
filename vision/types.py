"""Typed values that flow between the perception stages.

Everything here is a plain dataclass so a stage can be tested alone with hand-made inputs.
Arrays are NumPy; boxes are pixel ``xyxy`` in the frame they came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class CameraModel:
    """Pinhole camera: sensor size and focal length (physical), enough to get intrinsics at any resolution."""

    name: str
    sensor_width_mm: float
    sensor_height_mm: float
    focal_length_mm: float

    def intrinsics(self, width: int, height: int) -> np.ndarray:
        """3x3 K for an image of ``width`` x ``height`` pixels (square pixels, centred principal point).

        The video may be a crop of the sensor (16:9 from a 4:3 sensor): the horizontal field of view is kept,
        which is how DJI cameras record video.
        """
        fx = self.focal_length_mm / self.sensor_width_mm * width
        return np.array([[fx, 0.0, width / 2.0], [0.0, fx, height / 2.0], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class CameraPose:
    """Where the camera was and where it looked at one instant (one telemetry sample).

    ``altitude_m`` is height above the ground the vehicles drive on (DJI ``rel_alt``/``H``; take-off height).
    ``gimbal_pitch_deg`` is -90 when looking straight down, 0 at the horizon.
    ``heading_deg`` is the camera's yaw from true north, clockwise.
    """

    t: float
    altitude_m: float | None = None
    lat: float | None = None
    lon: float | None = None
    abs_altitude_m: float | None = None
    heading_deg: float | None = None
    gimbal_pitch_deg: float | None = None
    gimbal_roll_deg: float | None = None
    focal_length_mm: float | None = None  # focal length reported per frame (zoom cameras)
    camera: CameraModel | None = None


@dataclass
class Frame:
    """One decoded video frame (BGR, uint8) with its presentation time and, when known, the camera pose."""

    index: int
    t: float
    image: np.ndarray
    pose: CameraPose | None = None

    @property
    def size(self) -> tuple[int, int]:
        h, w = self.image.shape[:2]
        return w, h


class DetectionSource:
    """Where a detection came from (ints so they pack into an array)."""

    DETECTOR = 0
    MOTION = 1
    PREDICTED = 2  # a track's own predicted box, carrying it through a frame the detector skipped
    ANY_HEADING = 3  # the any-heading detector's box where the shipped one has none (recorded runs, extends tracks)


@dataclass
class Detections:
    """N boxes of one frame, column-aligned arrays."""

    xyxy: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    score: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.float32))
    class_id: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int32))
    source: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int8))
    moving: np.ndarray = field(default_factory=lambda: np.zeros((0,), bool))

    def __post_init__(self) -> None:
        self.xyxy = np.asarray(self.xyxy, np.float32).reshape(-1, 4)
        n = len(self.xyxy)
        self.score = np.asarray(self.score, np.float32).reshape(n)
        self.class_id = np.asarray(self.class_id, np.int32).reshape(n)
        self.source = (np.asarray(self.source, np.int8) if len(self.source) else np.zeros(n, np.int8)).reshape(n)
        self.moving = (np.asarray(self.moving, bool) if len(self.moving) else np.zeros(n, bool)).reshape(n)

    def __len__(self) -> int:
        return len(self.xyxy)

    def __getitem__(self, idx) -> "Detections":
        return Detections(self.xyxy[idx], self.score[idx], self.class_id[idx], self.source[idx], self.moving[idx])

    @staticmethod
    def concat(parts: list["Detections"]) -> "Detections":
        parts = [p for p in parts if len(p)]
        if not parts:
            return Detections()
        return Detections(
            np.concatenate([p.xyxy for p in parts]),
            np.concatenate([p.score for p in parts]),
            np.concatenate([p.class_id for p in parts]),
            np.concatenate([p.source for p in parts]),
            np.concatenate([p.moving for p in parts]),
        )

    @property
    def centers(self) -> np.ndarray:
        return np.stack([(self.xyxy[:, 0] + self.xyxy[:, 2]) / 2, (self.xyxy[:, 1] + self.xyxy[:, 3]) / 2], axis=1)

    @property
    def wh(self) -> np.ndarray:
        return np.stack([self.xyxy[:, 2] - self.xyxy[:, 0], self.xyxy[:, 3] - self.xyxy[:, 1]], axis=1)


# Class names used across the project. The shipped detector is trained on these; COCO models are mapped onto them.
VEHICLE_CLASSES: tuple[str, ...] = ("car", "truck", "bus", "van")
