"""An output folder that appears only when complete: written under a hidden temporary name, renamed at the end.

A full disk (or quota, or file size limit) while writing is :class:`OutputWriteError`: one line naming the folder
(and the file, when the system said which); the temporary folder is removed, any earlier result stays as it was.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

# Defined beside the commands' error handling (db/cli_errors.py), which turns it into exit code 4.
from db.cli_errors import OutputWriteError

DISK_FULL = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for the file system or the process's file size limit",
}


def output_write_error(exc: BaseException, rundir: "RunDirectory") -> OutputWriteError | None:
    """``exc`` as an :class:`OutputWriteError` when it is a full disk, else None."""
    if not isinstance(exc, OSError) or exc.errno not in DISK_FULL:
        return None
    where = str(exc.filename).replace(str(rundir.tmp), str(rundir.final)) if exc.filename else str(rundir.final)
    kept = "the previous results there are untouched" if rundir.final.exists() else "nothing was written"
    return OutputWriteError(f"{where}: {DISK_FULL[exc.errno]} while writing the results; the run failed and {kept}")


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
