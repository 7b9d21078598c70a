"""Stand-in tasks for the scheduler tests (imported by spawned worker processes, so they live in a module)."""

from __future__ import annotations

import os
from pathlib import Path

from edge.batch.plan import ItemResult


def crash_first_attempt(item, job, attempt: int) -> ItemResult:
    """Kills its worker process on the first attempt of every file (like an out-of-memory kill), then succeeds."""
    if attempt == 1 and "crash" in item.video.name:
        os._exit(3)
    return ItemResult(str(item.video), "done", attempt, note=f"pid {os.getpid()}")


def flaky(item, job, attempt: int) -> ItemResult:
    """Fails retryably until a marker file beside the video says it has failed twice."""
    marker = Path(job.out_root) / f"{item.video.name}.fails"
    n = int(marker.read_text()) if marker.exists() else 0
    if n < 2:
        marker.write_text(str(n + 1))
        return ItemResult(str(item.video), "failed", attempt, error="transient", retryable=True)
    return ItemResult(str(item.video), "done", attempt)
