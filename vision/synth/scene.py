"""What a synthetic scene is: the pydantic config (user input) and the result summary.

Everything random in a scene is drawn from ``seed`` through named sub-streams (see :func:`rng_for`), so the same
config gives the same ground truth byte for byte, and changing one part (e.g. the ground texture) does not reshuffle
the traffic.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

SCENE_TYPES = ("highway", "rural", "intersection", "roundabout", "ramp")
SceneType = Literal["highway", "rural", "intersection", "roundabout", "ramp"]


class SynthConfigError(ValueError):
    """A scene config that cannot be used (bad value, unreadable file)."""


class SynthCameraConfig(BaseModel):
    """Physical camera. Default: DJI Mavic 3 (Hasselblad L2D-20c, 4/3" sensor, 24 mm equivalent)."""

    name: str = "dji_mavic3"
    sensor_width_mm: float = Field(17.3, gt=0)
    sensor_height_mm: float = Field(13.0, gt=0)
    focal_length_mm: float = Field(12.29, gt=0)


class SceneConfig(BaseModel):
    """One synthetic drone clip. Units: metres, seconds, degrees, km/h."""

    scene: SceneType = "highway"
    seed: int = 0
    duration_s: float = Field(10.0, gt=0, le=600)
    fps: float = Field(30.0, ge=1, le=120)
    width: int = Field(1280, ge=64, le=7680)
    height: int = Field(720, ge=64, le=4320)
    altitude_m: float = Field(80.0, ge=10, le=500, description="height above the road (DJI rel_alt)")
    gimbal_pitch_deg: float = Field(-90.0, ge=-90, le=-40, description="-90 = nadir, -45 = oblique")
    heading_deg: float | None = Field(None, description="camera yaw from north, clockwise; None = random")
    camera: SynthCameraConfig = SynthCameraConfig()

    drift_mps: float = Field(0.4, ge=0, le=10, description="slow horizontal drift of the drone")
    jitter_deg: float = Field(0.04, ge=0, le=2, description="gimbal jitter amplitude (fast, small)")
    yaw_rate_dps: float = Field(0.3, ge=0, le=20, description="slow yaw rotation, sign random")
    altitude_wobble_m: float = Field(0.2, ge=0, le=5)

    traffic_density: float = Field(1.0, ge=0, le=4, description="multiplier on vehicle arrival rates")
    lanes_per_direction: int | None = Field(None, ge=1, le=5, description="None = scene default / random")
    speed_limit_kmh: float | None = Field(None, gt=0, le=200, description="None = scene default")
    lane_changes: bool = True
    near_misses: int = Field(
        0, ge=0, le=100, description="scripted rear-end near-misses, spread over the clip (see docs/synth.md)"
    )
    near_miss_ttc_s: float = Field(0.8, gt=0, le=3, description="a scripted near-miss ends at this time to collision")
    parked_vehicles: int = Field(6, ge=0, le=200)
    clutter_objects: int = Field(
        6, ge=0, le=200, description="vehicle-like distractors off the road (containers, boxes)"
    )

    motion_blur: bool = True
    exposure_s: float | None = Field(None, gt=0, lt=1, description="None = half the frame interval (180 deg shutter)")
    noise_sigma: float = Field(2.0, ge=0, le=30, description="Gaussian sensor noise, grey levels")
    jpeg_quality: int | None = Field(80, ge=5, le=100, description="JPEG round trip per frame; None = off")
    shadows: bool = True
    lighting_changes: bool = True

    use_shared_data: Literal["auto", "on", "off"] = Field(
        "auto", description="real ground texture / car crops from ../shared; 'off' = procedural only"
    )
    shared_dir: str | None = Field(None, description="default: $AIRPATROL_SHARED or <repo>/../shared")

    write_video: bool = True
    road_mask_every: int = Field(1, ge=0, description="write road_mask/NNNNNN.png every N frames; 0 = never")
    yolo_every: int = Field(0, ge=0, description="write a YOLO image+label every N frames; 0 = never")
    yolo_min_visibility: float = Field(0.5, ge=0, le=1)

    origin_lat: float = Field(49.96718, ge=-89, le=89)
    origin_lon: float = Field(36.30347, ge=-180, le=180)
    ground_elevation_m: float = Field(150.0, description="abs_alt = rel_alt + this")
    start_time: str = Field("2026-11-21 12:27:52.373", description="wall-clock of frame 1, as DJI writes it")

    @field_validator("width", "height")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError("must be even (H.264 4:2:0 video)")
        return v

    @model_validator(mode="after")
    def _frames(self) -> "SceneConfig":
        if self.frame_count < 1:
            raise ValueError("duration_s * fps gives no frame")
        return self

    @property
    def frame_count(self) -> int:
        return int(round(self.duration_s * self.fps))

    @property
    def exposure(self) -> float:
        return self.exposure_s if self.exposure_s is not None else 0.5 / self.fps


def rng_for(seed: int, stream: str) -> np.random.Generator:
    """An independent generator per named part of the scene (traffic, camera, texture, ...)."""
    digest = hashlib.sha256(f"{seed}:{stream}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def load_config(path: str | Path | None = None, **overrides) -> SceneConfig:
    """Config from a JSON/YAML file (optional) with keyword overrides; one-line error on bad input."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise SynthConfigError(f"{p}: cannot read scene config ({exc.strerror})") from None
        try:
            if p.suffix.lower() in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text) or {}
            else:
                data = json.loads(text)
        except Exception as exc:  # noqa: BLE001 - any parse error is a bad file
            raise SynthConfigError(f"{p}: not valid {p.suffix.lstrip('.') or 'JSON'}: {exc}") from None
        if not isinstance(data, dict):
            raise SynthConfigError(f"{p}: scene config must be a mapping")
        data = data.get("config", data)  # accept a scene.json written by the generator
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return SceneConfig(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "config"
        src = f"{path}: " if path is not None else ""
        raise SynthConfigError(f"{src}scene config field {where!r}: {err['msg']}") from None


def sample_config(seed: int, scene: str | None = None, **overrides) -> SceneConfig:
    """A random but plausible config (for building varied training/evaluation sets)."""
    rng = rng_for(seed, "sample_config")
    resolutions = [(1280, 720), (1920, 1080), (2688, 1512), (3840, 2160)]
    w, h = resolutions[int(rng.integers(len(resolutions)))]
    pitch = -90.0 if rng.random() < 0.5 else float(rng.uniform(-90, -45))
    cfg = dict(
        scene=scene or SCENE_TYPES[int(rng.integers(len(SCENE_TYPES)))],
        seed=seed,
        width=w,
        height=h,
        altitude_m=float(rng.uniform(30, 150)),
        gimbal_pitch_deg=round(pitch, 1),
        drift_mps=float(rng.uniform(0, 1.0)),
        jitter_deg=float(rng.uniform(0.0, 0.1)),
        yaw_rate_dps=float(rng.uniform(0, 1.0)),
        traffic_density=float(rng.uniform(0.6, 1.6)),
        parked_vehicles=int(rng.integers(0, 15)),
        clutter_objects=int(rng.integers(0, 12)),
        noise_sigma=float(rng.uniform(0.5, 4)),
        jpeg_quality=int(rng.integers(55, 95)),
    )
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    return load_config(None, **cfg)


@dataclass
class SceneResult:
    """What :func:`generate_scene` wrote, with the key facts of the clip."""

    out_dir: Path
    config: SceneConfig
    frame_count: int
    fps: float
    width: int
    height: int
    metres_per_pixel: float  # true scale at the image centre, frame 1
    vehicle_ids: int  # distinct vehicles in gt.txt
    gt_rows: int
    seconds: float  # wall time of the generation
    files: dict[str, Path] = field(default_factory=dict)
