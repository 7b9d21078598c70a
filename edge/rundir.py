"""An output folder that appears only when complete: written under a hidden temporary name, renamed at the end."""
from __future__ import annotations

import os
import shutil
from pathlib import Path


class RunDirectory:
    def __init__(self, final: str | os.PathLike):
        self.final = Path(final).resolve()
        self.tmp = self.final.parent / f".{self.final.name}.partial-{os.getpid()}"

    def __enter__(self) -> Path:
        if self.final.exists() and not self.final.is_dir():
            raise ValueError(f"{self.final}: output path exists and is not a folder")
        self.final.parent.mkdir(parents=True, exist_ok=True)
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir()
        return self.tmp

    def commit(self) -> Path:
        """Replace any earlier result with the complete one (the old one is removed only after the new is in place)."""
        old = None
        if self.final.exists():
            old = self.final.parent / f".{self.final.name}.old-{os.getpid()}"
            os.replace(self.final, old)
        os.replace(self.tmp, self.final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.final

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.tmp.exists():  # not committed: discard, nothing half-written stays behind
            shutil.rmtree(self.tmp, ignore_errors=True)
