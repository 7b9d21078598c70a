"""Run a batch on this machine: a pool of spawned worker processes, each loading the pipeline once.

At most ``workers`` files are in flight, so a file's attempt is charged only while it really runs. A failure the
worker reports as retryable (anything but bad input) is tried again, up to ``retries`` more times. A worker process
that dies (out of memory, a crash in native code) breaks a ``ProcessPoolExecutor`` for every file in flight: those
files are charged one attempt each and the pool is rebuilt.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from tqdm import tqdm

from edge.batch.plan import BatchItem, ItemResult
from edge.batch.worker import BatchJob, init_worker, process_item

Task = Callable[[BatchItem, BatchJob, int], ItemResult]


class ProgressBar:
    """A tqdm bar over all files with the running done/skipped/failed counts."""

    def __init__(self, total: int, desc: str, enabled: bool):
        self.bar = tqdm(total=total, desc=desc, unit="file", disable=not enabled, dynamic_ncols=True)
        self.counts = {"done": 0, "skipped": 0, "failed": 0}

    def update(self, result: ItemResult) -> None:
        self.counts[result.status] += 1
        self.bar.set_postfix(self.counts, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def should_retry(result: ItemResult, retries: int) -> bool:
    return result.status == "failed" and result.retryable and result.attempts <= retries


def run_local(
    items: list[BatchItem],
    job: BatchJob,
    workers: int = 1,
    retries: int = 2,
    progress: bool = True,
    task: Task = process_item,
) -> list[ItemResult]:
    """Results in the order of ``items``."""
    workers = max(1, min(workers, len(items) or 1))
    ctx = multiprocessing.get_context("spawn")  # no fork: torch/OpenMP state and CUDA do not survive it
    pending: deque[tuple[int, int]] = deque((i, 1) for i in range(len(items)))  # (index, attempt)
    results: dict[int, ItemResult] = {}
    bar = ProgressBar(len(items), "batch", progress)
    pool: ProcessPoolExecutor | None = None
    in_flight: dict[Future, tuple[int, int]] = {}
    try:
        while pending or in_flight:
            if pool is None:
                pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=init_worker, initargs=(job.threads,))
            while pending and len(in_flight) < workers:
                i, attempt = pending.popleft()
                in_flight[pool.submit(task, items[i], job, attempt)] = (i, attempt)
            finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            broken = False
            for fut in finished:
                broken |= _settle(fut, in_flight, items, retries, pending, results, bar)
            if broken:  # every file still in flight dies with the pool: settle them all, then start a new pool
                pool.shutdown(wait=True, cancel_futures=True)
                pool = None
                for fut in list(in_flight):
                    _settle(fut, in_flight, items, retries, pending, results, bar)
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return [results[i] for i in range(len(items))]


def _settle(
    fut: Future,
    in_flight: dict,
    items: list[BatchItem],
    retries: int,
    pending: deque,
    results: dict[int, ItemResult],
    bar: ProgressBar,
) -> bool:
    """Take a finished future's result, or queue the file again; True when the pool broke."""
    i, attempt = in_flight.pop(fut)
    broken = False
    try:
        result = fut.result()
    except BrokenProcessPool:
        broken = True
        result = ItemResult(
            str(items[i].video),
            "failed",
            attempt,
            retryable=True,
            error="a worker process died (out of memory or a native crash)",
        )
    except Exception as exc:  # e.g. a result that could not be sent back
        result = ItemResult(
            str(items[i].video), "failed", attempt, retryable=True, error=f"{type(exc).__name__}: {exc}"[:500]
        )
    if should_retry(result, retries):
        pending.appendleft((i, attempt + 1))
    else:
        results[i] = result
        bar.update(result)
    return broken
