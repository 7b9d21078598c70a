"""Frame sources: decode a video file (anything FFmpeg reads) or an image-sequence folder, one frame at a time.

Never holds more than the current frame: memory stays flat however long the video.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from vision.types import Frame

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")


class SourceError(ValueError):
    """A video or image folder that cannot be read; the message names the file and the problem."""


@dataclass(frozen=True)
class SourceInfo:
    path: str
    width: int
    height: int
    fps: float
    frame_count: int | None  # None when the container does not say
    duration_s: float | None
    codec: str


@dataclass(frozen=True)
class DecodeLoss:
    """A stretch of the video that could not be decoded: the run completed without it.

    ``first_frame``/``last_frame`` are 1-based frame numbers in the video's own timeline (time x fps), inclusive;
    ``start_s``/``end_s`` the same stretch in seconds from the first frame.
    """

    reason: str
    first_frame: int
    last_frame: int
    start_s: float
    end_s: float

    @property
    def frames(self) -> int:
        return self.last_frame - self.first_frame + 1


class FrameSource:
    """Iterate ``Frame`` objects (index from 0, time in seconds from the first frame).

    ``losses`` lists what could not be decoded (filled while iterating; empty for an intact source): a damaged
    file yields every frame it can and reports the rest here instead of failing or ending silently.
    """

    info: SourceInfo
    losses: list[DecodeLoss]

    def __iter__(self) -> Iterator[Frame]:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "FrameSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


GAP_FRAMES = 2.5  # a jump of more than this many frame intervals between decoded frames means frames were lost
MAX_LEADING_ERRORS = 50  # undecodable packets before the first frame after which the file is called unreadable
END_TOLERANCE_FRAMES = 2  # containers round their declared length; fewer missing frames at the end are not a loss


class VideoFileSource(FrameSource):
    """Decode with PyAV (FFmpeg): exact presentation timestamps and clear errors for broken files.

    A file damaged after its first frame is decoded as far as possible: frames missing in the middle (a timestamp
    jump), a decoder error, or an end before the declared length become :class:`DecodeLoss` entries in ``losses``.
    """

    def __init__(self, path: str | os.PathLike, max_frames: int | None = None):
        import av  # local import: only file decoding needs it

        self.path = Path(path)
        self.max_frames = max_frames
        self.losses = []
        if not self.path.exists():
            raise SourceError(f"{self.path}: no such file")
        if self.path.is_file() and self.path.stat().st_size == 0:
            raise SourceError(f"{self.path}: file is empty")
        try:
            self._container = av.open(str(self.path), mode="r")
        except (av.error.FFmpegError, OSError, UnicodeDecodeError) as exc:
            raise SourceError(f"{self.path}: not a readable video ({_short(exc)})") from None
        streams = self._container.streams.video
        if not streams:
            self._container.close()
            raise SourceError(f"{self.path}: contains no video stream")
        stream = streams[0]
        if stream.codec_context is None or stream.codec_context.width == 0:
            self._container.close()
            raise SourceError(f"{self.path}: unsupported or unknown video codec")
        stream.thread_type = "AUTO"
        self._stream = stream
        fps = float(stream.average_rate or stream.guessed_rate or 0) or 25.0
        duration = None
        if stream.duration and stream.time_base:
            duration = float(stream.duration * stream.time_base)
        elif self._container.duration:
            duration = self._container.duration / 1e6
        count = stream.frames or (int(round(duration * fps)) if duration else None)
        self.info = SourceInfo(
            str(self.path),
            stream.codec_context.width,
            stream.codec_context.height,
            fps,
            count,
            duration,
            stream.codec_context.name,
        )

    def use_hardware_decoder(self, device_type: str = "cuda") -> str | None:
        """Decode on ``device_type`` (FFmpeg hwaccel: 'cuda' is NVDEC) from now on; call before iterating.

        Returns None when the hardware decoder opened and decoded the first frame, else why not (the software
        decoder stays in place)."""
        import av
        from av.codec.hwaccel import HWAccel

        try:
            container = av.open(str(self.path), mode="r", hwaccel=HWAccel(device_type, allow_software_fallback=False))
            next(container.decode(video=0))  # the probe: opening alone succeeds even without a usable device
            container.close()
            container = av.open(str(self.path), mode="r", hwaccel=HWAccel(device_type, allow_software_fallback=False))
        except (av.error.FFmpegError, OSError, StopIteration, ValueError) as exc:
            return _short(exc)
        self._container.close()
        self._container, self._stream = container, container.streams.video[0]
        return None

    def __iter__(self) -> Iterator[Frame]:
        import av

        self.losses = []
        fps = self.info.fps
        t0 = prev = None
        index = errors = 0
        stopped: str | None = None
        packets = self._container.demux(self._stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                break
            except av.error.FFmpegError as exc:  # the container itself is unreadable from here on
                stopped = f"decoding stopped: {_short(exc)}"
                break
            try:
                decoded = self._stream.decode(packet)
            except av.error.FFmpegError as exc:  # one damaged packet: skip it, the timestamps show what was lost
                errors += 1
                if index == 0 and errors >= MAX_LEADING_ERRORS:
                    raise SourceError(
                        f"{self.path}: video is damaged or truncated at frame 0 ({_short(exc)})"
                    ) from None
                continue
            for vf in decoded:
                t = float(vf.time) if vf.time is not None else index / fps
                if t0 is None:
                    t0 = t
                if prev is not None and t - prev > GAP_FRAMES / fps:
                    self._lost("frames missing or undecodable (damaged data)", prev - t0 + 1 / fps, t - t0 - 1 / fps)
                prev = t
                yield Frame(index=index, t=t - t0, image=vf.to_ndarray(format="bgr24"))
                index += 1
                if self.max_frames is not None and index >= self.max_frames:
                    return
        if index > 0:
            assert prev is not None and t0 is not None  # set with the first frame
            declared = self.info.frame_count
            covered = int(round((prev - t0) * fps)) + 1
            if stopped:
                self._lost(stopped, prev - t0 + 1 / fps, self._declared_end_s(prev - t0))
            elif declared and declared - covered >= END_TOLERANCE_FRAMES:
                self._lost(
                    f"decoding ended early: {index} of {declared} declared frames decoded (file truncated or damaged)",
                    prev - t0 + 1 / fps,
                    self._declared_end_s(prev - t0),
                )
        if index == 0:
            raise SourceError(f"{self.path}: no frame could be decoded (unsupported codec or truncated file)")

    def _declared_end_s(self, last_t: float) -> float:
        """Time of the last frame the container declares (at least ``last_t``)."""
        fps, count = self.info.fps, self.info.frame_count
        return max(last_t, (count - 1) / fps) if count else last_t

    def _lost(self, reason: str, start_s: float, end_s: float) -> None:
        fps = self.info.fps
        first, last = int(round(start_s * fps)) + 1, int(round(end_s * fps)) + 1
        if last >= first:
            self.losses.append(DecodeLoss(reason, first, last, round(start_s, 3), round(max(end_s, start_s), 3)))

    def close(self) -> None:
        self._container.close()


class ImageFolderSource(FrameSource):
    """A folder of images in name order (MOTChallenge ``seq/img1``, UAVDT ``seq/img``, or a flat folder).

    Frame rate from ``seqinfo.ini`` when present, else ``fps``.
    """

    def __init__(self, path: str | os.PathLike, fps: float | None = None, max_frames: int | None = None):
        root = Path(path)
        if not root.is_dir():
            raise SourceError(f"{root}: not a folder")
        folder = root
        for sub in ("img1", "img"):
            if (root / sub).is_dir():
                folder = root / sub
        self.files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
        if max_frames is not None:
            self.files = self.files[:max_frames]
        if not self.files:
            raise SourceError(f"{root}: no images ({', '.join(IMAGE_EXTENSIONS)}) found")
        ini_fps = _seqinfo_fps(root / "seqinfo.ini")
        first = cv2.imread(str(self.files[0]), cv2.IMREAD_COLOR)
        if first is None:
            raise SourceError(f"{self.files[0]}: not a readable image")
        h, w = first.shape[:2]
        rate = fps or ini_fps or 30.0
        self.path = root
        self.losses = []
        self.info = SourceInfo(str(root), w, h, rate, len(self.files), len(self.files) / rate, "images")

    def __iter__(self) -> Iterator[Frame]:
        for i, f in enumerate(self.files):
            img = cv2.imread(str(f), cv2.IMREAD_COLOR)
            if img is None:
                raise SourceError(f"{f}: not a readable image")
            if img.shape[1] != self.info.width or img.shape[0] != self.info.height:
                raise SourceError(f"{f}: size {img.shape[1]}x{img.shape[0]} differs from the sequence's")
            yield Frame(index=i, t=i / self.info.fps, image=img)


def _seqinfo_fps(ini: Path) -> float | None:
    if not ini.is_file():
        return None
    cp = configparser.ConfigParser()
    try:
        cp.read(ini)
        return float(cp["Sequence"]["frameRate"])
    except (KeyError, ValueError, configparser.Error):
        return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]


def open_source(path: str | os.PathLike, fps: float | None = None, max_frames: int | None = None) -> FrameSource:
    """Open a video file or an image-sequence folder."""
    p = Path(path)
    if p.is_dir():
        return ImageFolderSource(p, fps=fps, max_frames=max_frames)
    return VideoFileSource(p, max_frames=max_frames)


def read_frame_at(path: str | os.PathLike, index: int) -> np.ndarray:
    """Convenience for tools and tests: the image of one frame."""
    with open_source(path, max_frames=index + 1) as src:
        for frame in src:
            if frame.index == index:
                return frame.image
    raise SourceError(f"{path}: has no frame {index}")
