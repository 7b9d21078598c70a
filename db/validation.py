"""Pydantic models that guard every write into the database (CLI, importer, sink, dashboard forms).

Anything from outside (a flight log, a form, a device) is checked here for types, sizes and ranges before it can
reach SQL, so the two back ends never see values one would truncate and the other accept.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError, field_validator

from db.models import DEVICE_KINDS, ROLES


class DbValidationError(ValueError):
    """Input rejected before it reached the database; the message names what and why."""


Serial = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:\-]*$"),
]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Lat = Annotated[float, Field(ge=-90, le=90)]
Lon = Annotated[float, Field(ge=-180, le=180)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class SampleIn(_Strict):
    t_s: float = Field(ge=-86400, le=7 * 86400)
    time_utc: datetime | None = None
    lat: Lat | None = None
    lon: Lon | None = None
    rel_alt_m: float | None = Field(None, ge=-2000, le=20000)
    abs_alt_m: float | None = Field(None, ge=-1000, le=20000)
    heading_deg: float | None = Field(None, ge=-360, le=360)
    gimbal_pitch_deg: float | None = Field(None, ge=-360, le=360)
    gimbal_yaw_deg: float | None = Field(None, ge=-360, le=360)
    gimbal_roll_deg: float | None = Field(None, ge=-360, le=360)
    ground_speed_ms: float | None = Field(None, ge=0, le=300)
    vertical_speed_ms: float | None = Field(None, ge=-300, le=300)
    battery_pct: float | None = Field(None, ge=0, le=100)
    focal_len_mm: float | None = Field(None, gt=0, le=5000)
    frame_cnt: int | None = Field(None, ge=0, le=2**31 - 1)


_SAMPLES = TypeAdapter(list[SampleIn])


class FlightMetaIn(_Strict):
    source_file: str = Field(max_length=1024)
    source_format: str = Field(max_length=32)
    checksum: str = Field(pattern=r"^[0-9a-f]{64}$")
    status: str = Field(max_length=255)
    home_lat: Lat | None = None
    home_lon: Lon | None = None
    home_alt_m: float | None = Field(None, ge=-1000, le=20000)
    start_time: datetime | None = None
    end_time: datetime | None = None


class DeviceIn(_Strict):
    serial: Serial
    kind: Literal[DEVICE_KINDS] = "drone"  # type: ignore[valid-type]
    model: Annotated[str, StringConstraints(strip_whitespace=True, max_length=128)] | None = None
    name: Annotated[str, StringConstraints(strip_whitespace=True, max_length=128)] | None = None
    camera_preset: Annotated[str, StringConstraints(strip_whitespace=True, max_length=64)] | None = None


class UserIn(_Strict):
    username: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=2, max_length=64, pattern=r"^[\w.@-]+$")
    ]
    password: Annotated[str, StringConstraints(min_length=8, max_length=1024)]
    role: Literal[ROLES] = "viewer"  # type: ignore[valid-type]
    display_name: Annotated[str, StringConstraints(strip_whitespace=True, max_length=128)] | None = None
    email: (
        Annotated[str, StringConstraints(strip_whitespace=True, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")] | None
    ) = None


class TaskIn(_Strict):
    name: Name
    description: Annotated[str, StringConstraints(max_length=10000)] | None = None
    area: list[tuple[Lon, Lat]] | None = Field(None, description="polygon ring as [lon, lat] pairs")
    road_name: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] | None = None
    road: list[tuple[Lon, Lat]] | None = Field(None, description="road centre line as [lon, lat] pairs")
    speed_limit_kmh: float | None = Field(None, gt=0, le=300)

    @field_validator("area")
    @classmethod
    def _polygon(cls, ring):
        if ring is not None and len(ring) < 3:
            raise ValueError("a polygon needs at least 3 points")
        return ring


_M = TypeVar("_M", bound=BaseModel)


def validate(model: type[_M], data: dict, what: str) -> _M:
    """``model(**data)`` or a one-line :class:`DbValidationError` naming ``what`` and the first problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "value"
        raise DbValidationError(f"{what}: {field}: {err['msg']} (got {_short(err.get('input'))})") from None


def validate_samples(rows: list[dict], what: str) -> None:
    """Check telemetry rows in one pass (fast path of pydantic-core); raise on the first bad one."""
    try:
        _SAMPLES.validate_python(rows)
    except ValidationError as exc:
        err = exc.errors()[0]
        index, field = err["loc"][0], ".".join(str(p) for p in err["loc"][1:])
        t = rows[index].get("t_s") if isinstance(index, int) else None
        t_text = f", t={t:.2f} s" if isinstance(t, float) and math.isfinite(t) else ""
        raise DbValidationError(
            f"{what}: sample {index}{t_text}: {field}: {err['msg']} (got {_short(err.get('input'))})"
        ) from None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
