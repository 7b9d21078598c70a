"""Content checksums of files: a batch re-run skips a video whatever its name or folder, an ONNX export is cached
per weights file."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path, chunk: int = 4 << 20) -> str:
    """Hex sha256 of the file's content, read in ``chunk``-byte blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
