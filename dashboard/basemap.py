"""An operator-supplied offline base map: raster tiles from a PMTiles or MBTiles file, served by the app itself.

The edge server is usually offline, so an online tile URL shows nothing there. An operator exports the region once
(e.g. ``pmtiles extract`` of a raster archive, or any MBTiles raster export) and points ``basemap_file`` at it; the
dashboard serves its tiles at ``/dashboard/basemap/{z}/{x}/{y}`` (read with the maintained ``pmtiles`` package, or
SQLite for MBTiles). Raster tiles only (PNG, JPEG, WebP): vector tiles would need a vector renderer in the browser.
"""

from __future__ import annotations

import gzip
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MEDIA_TYPES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp"}


class BasemapError(ValueError):
    pass


@dataclass
class Basemap:
    path: Path
    media_type: str
    min_zoom: int
    max_zoom: int
    bounds: list[list[float]] | None  # [[south, west], [north, east]]
    attribution: str
    _get: Callable[[int, int, int], bytes | None] = field(repr=False)

    def tile(self, z: int, x: int, y: int) -> bytes | None:
        if not (self.min_zoom <= z <= self.max_zoom) or not (0 <= x < 2**z and 0 <= y < 2**z):
            return None
        return self._get(z, x, y)

    def config(self, url: str) -> dict:
        return {
            "url": url,
            "min_zoom": self.min_zoom,
            "max_zoom": self.max_zoom,
            "bounds": self.bounds,
            "attribution": self.attribution,
        }


def _open_pmtiles(path: Path) -> Basemap:
    import mmap

    from pmtiles.reader import Reader
    from pmtiles.tile import Compression, TileType

    fh = open(path, "rb")
    try:
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        reader = Reader(lambda offset, length: data[offset : offset + length])
        header = reader.header()
    except Exception as exc:  # the pmtiles reader raises several kinds on a file that is not PMTiles
        fh.close()
        raise BasemapError(f"{path}: not a PMTiles archive ({type(exc).__name__}: {exc})") from None
    kind = header["tile_type"]
    types = {TileType.PNG: "png", TileType.JPEG: "jpg", TileType.WEBP: "webp"}
    if kind not in types:
        raise BasemapError(f"{path}: {kind.name} tiles; the dashboard serves raster tiles (PNG, JPEG, WebP) only")
    gz = header["tile_compression"] == Compression.GZIP
    meta: dict = {}
    try:
        meta = reader.metadata() or {}
    except Exception:  # metadata is optional
        pass
    lock = threading.Lock()  # the reader is a plain function over one mmap: cheap, but keep it to one thread

    def get(z, x, y):
        with lock:
            tile = reader.get(z, x, y)
        return gzip.decompress(tile) if tile and gz else tile

    e7 = 1e7
    bounds = [
        [header["min_lat_e7"] / e7, header["min_lon_e7"] / e7],
        [header["max_lat_e7"] / e7, header["max_lon_e7"] / e7],
    ]
    return Basemap(
        path,
        MEDIA_TYPES[types[kind]],
        header["min_zoom"],
        header["max_zoom"],
        bounds,
        str(meta.get("attribution") or ""),
        get,
    )


def _open_mbtiles(path: Path) -> Basemap:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        meta = dict(con.execute("SELECT name, value FROM metadata").fetchall())
        zooms = con.execute("SELECT MIN(zoom_level), MAX(zoom_level) FROM tiles").fetchone()
    except sqlite3.Error as exc:
        raise BasemapError(f"{path}: not an MBTiles file ({exc})") from None
    fmt = str(meta.get("format", "png")).lower()
    if fmt not in MEDIA_TYPES:
        raise BasemapError(f"{path}: {fmt} tiles; the dashboard serves raster tiles (PNG, JPEG, WebP) only")
    if zooms[0] is None:
        raise BasemapError(f"{path}: holds no tiles")
    bounds = None
    if meta.get("bounds"):
        try:
            w, s, e, n = (float(v) for v in str(meta["bounds"]).split(","))
            bounds = [[s, w], [n, e]]
        except ValueError:
            bounds = None
    lock = threading.Lock()

    def get(z, x, y):
        with lock:  # MBTiles rows count from the south (TMS)
            row = con.execute(
                "SELECT tile_data FROM tiles WHERE zoom_level=? AND tile_column=? AND tile_row=?", (z, x, 2**z - 1 - y)
            ).fetchone()
        return bytes(row[0]) if row else None

    return Basemap(
        path, MEDIA_TYPES[fmt], int(zooms[0]), int(zooms[1]), bounds, str(meta.get("attribution") or ""), get
    )


def open_basemap(path: str | Path) -> Basemap:
    path = Path(path)
    if not path.is_file():
        raise BasemapError(f"{path}: no such file")
    with open(path, "rb") as fh:
        magic = fh.read(16)
    if magic.startswith(b"PMTiles"):
        return _open_pmtiles(path)
    if magic.startswith(b"SQLite format 3"):
        return _open_mbtiles(path)
    raise BasemapError(f"{path}: neither PMTiles nor MBTiles")
