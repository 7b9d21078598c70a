"""The push protocol: a device sends JPEG frames and per-frame telemetry over one WebSocket.

Messages from the device, in order:

* optional text ``{"type": "hello", "fps": 25}``
* per frame: text ``{"type": "frame", "t": 12.04, "telemetry": {...}}`` then one binary message, the JPEG
  (``t`` seconds, increasing; omitted: the arrival time is used; ``telemetry`` fields as in a flight log sample:
  lat, lon, rel_alt_m, heading_deg, gimbal_pitch_deg, focal_len_mm, ...)
* text ``{"type": "end"}``: the flight is over, the run is completed.

Anything else closes the connection with a reason: 1003 (unsupported data: bad JSON, unknown type, a binary message
without header, not a JPEG, decreasing time), 1009 (too big), 1008 (policy: not allowed). The JPEG's header is
checked on arrival; its pixels are decoded only if the frame is not dropped, so a JPEG whose header is fine but whose
data is corrupt counts as a frame error of the stream (status ``errors``) instead of closing the connection.
"""

from __future__ import annotations

import io
import json
from typing import Literal

import cv2
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from db.validation import SampleIn
from vision.telemetry.types import TelemetrySample, to_pose
from vision.types import CameraPose

CLOSE_UNSUPPORTED = 1003
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009


class ProtocolError(ValueError):
    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code, self.reason = code, reason[:120]  # a close reason must fit in 123 bytes


class PushTelemetry(SampleIn):
    """A flight-log sample without its own time (the frame's ``t`` is its time)."""

    t_s: float | None = None  # type: ignore[assignment]  # optional here on purpose: the frame's t stands in


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class HelloMsg(_Msg):
    type: Literal["hello"]
    fps: float = Field(25.0, gt=0, le=240)


class FrameMsg(_Msg):
    type: Literal["frame"]
    t: float | None = Field(None, ge=0, le=7 * 86400)
    telemetry: PushTelemetry | None = None

    def pose(self, t: float) -> CameraPose | None:
        if self.telemetry is None:
            return None
        fields = self.telemetry.model_dump(exclude={"t_s"})
        return to_pose(TelemetrySample(t_s=t, **fields))


class EndMsg(_Msg):
    type: Literal["end"]


_TYPES: dict[str, type[HelloMsg] | type[FrameMsg] | type[EndMsg]] = {
    "hello": HelloMsg,
    "frame": FrameMsg,
    "end": EndMsg,
}


def parse_text(text: str) -> HelloMsg | FrameMsg | EndMsg:
    if len(text) > 64 * 1024:
        raise ProtocolError(CLOSE_TOO_BIG, "text message larger than 64 KiB")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(CLOSE_UNSUPPORTED, f"malformed JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, dict) or data.get("type") not in _TYPES:
        kind = data.get("type") if isinstance(data, dict) else type(data).__name__
        raise ProtocolError(CLOSE_UNSUPPORTED, f"unknown message type {str(kind)[:30]!r} (expected hello, frame, end)")
    try:
        return _TYPES[data["type"]].model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "message"
        raise ProtocolError(CLOSE_UNSUPPORTED, f"invalid {data['type']} message: {where}: {err['msg']}") from None


def check_jpeg(data: bytes, max_bytes: int, max_pixels: int) -> tuple[int, int]:
    """(width, height) of a pushed JPEG from its header (Pillow's JPEG parser; no pixel is decoded), or
    ProtocolError: not a JPEG, or too big (a decompression bomb is refused before it is decoded)."""
    from PIL.JpegImagePlugin import JpegImageFile  # not Image.open: Ultralytics patches that to try extra plugins

    if len(data) > max_bytes:
        raise ProtocolError(CLOSE_TOO_BIG, f"frame of {len(data)} bytes exceeds {max_bytes}")
    try:
        with JpegImageFile(io.BytesIO(data)) as im:
            w, h = im.size
    except (SyntaxError, OSError, ValueError, EOFError):
        raise ProtocolError(CLOSE_UNSUPPORTED, "binary message is not a JPEG image") from None
    if w * h > max_pixels:
        raise ProtocolError(CLOSE_TOO_BIG, f"frame {w}x{h} exceeds {max_pixels} pixels")
    return w, h


def decode_jpeg(data: bytes) -> np.ndarray:
    """BGR pixels of a JPEG that passed :func:`check_jpeg` (done by the stream worker, only for frames it processes)."""
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("JPEG data is corrupt or truncated")
    return image
