"""The one sink loop: a run's per-frame results fanned out to its sinks, in the order every run needs.

``airpatrol process`` (``edge.runner.process_video``), a Ray run stitched from segments
(``edge.batch.segments.write_run``) and a live stream (``edge.service.workers``) all feed their sinks through
:class:`RunSinks`, so they open, write, finish and fail the same way:

1. every sink is opened with the run's :class:`~tracking.types.RunInfo`, in order;
2. each frame's result goes to every sink, in order (:meth:`RunSinks.write`, or :meth:`RunSinks.feed` for a whole
   iterable, with an optional progress bar);
3. :meth:`RunSinks.finish`: the file sinks close first, because the run summary counts what they wrote; the summary is
   then made (by the caller, who knows what its run adds: completeness, segments ...), written as ``summary.json``
   when a folder is given, and the other sinks (database, live feed) close with it;
4. on any error or interruption (Ctrl-C included) every sink still open is aborted with it - a full disk as one
   clear :class:`~edge.rundir.OutputWriteError` line when the run writes a folder - and the error goes on up.

A recorded run uses it as a context manager around the loop; a live stream, whose frames arrive one at a time and
whose run ends when the stream does, calls :meth:`RunSinks.open`, :meth:`RunSinks.write`, :meth:`RunSinks.finish`
and :meth:`RunSinks.abort` itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from edge.rundir import RunDirectory, output_write_error
from tracking.types import FrameResult, RunInfo, Sink


class RunSinks:
    """``with RunSinks(run, file_sinks, extra_sinks, rundir) as sinks: sinks.feed(results); sinks.finish(...)``."""

    def __init__(
        self,
        run: RunInfo,
        file_sinks: Sequence[Sink],
        extra_sinks: Sequence[Sink] | None = None,
        rundir: RunDirectory | None = None,
    ):
        self.run = run
        self.file_sinks, self.extra_sinks = list(file_sinks), list(extra_sinks or [])
        self.sinks = self.file_sinks + self.extra_sinks
        # sinks that follow the processing as it happens (a job's lease, progress and cancel: ``follows_processing``)
        # rather than store its results: a run that holds its results back (whole-flight linking) feeds them each
        # frame as it is processed (``watched``) and not again with the results (``feed(..., watchers=False)``)
        self.watchers = [s for s in self.extra_sinks if getattr(s, "follows_processing", False)]
        self.rundir = rundir
        self.opened: list[Sink] = []
        self.loop_s = 0.0  # time spent in feed(): decoding + pipeline + sinks, the run's processing time

    def open(self) -> RunSinks:
        try:
            for s in self.sinks:
                s.open(self.run)
                self.opened.append(s)
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)  # a full disk is reported the same way here
            raise
        return self

    __enter__ = open

    def write(self, result: FrameResult, watchers: bool = True) -> None:
        for s in self.sinks:
            if watchers or s not in self.watchers:
                s.write(result)

    def watched(self, results: Iterable[FrameResult]) -> Iterator[FrameResult]:
        """``results`` passed on, each shown to the watchers first (as it is processed)."""
        for result in results:
            for s in self.watchers:
                s.write(result)
            yield result

    def feed(self, results: Iterable[FrameResult], progress=None, watchers: bool = True) -> None:
        """Every result to every sink (``watchers=False``: but the watchers, who saw them being processed);
        ``progress`` (a tqdm bar) advances per frame and is closed at the end."""
        t0 = time.perf_counter()
        for result in results:
            self.write(result, watchers)
            if progress is not None:
                progress.update(1)
        if progress is not None:
            progress.close()
        self.loop_s += time.perf_counter() - t0

    def finish(self, summarize: Callable[[], dict[str, Any]], summary_json: Path | None = None) -> dict[str, Any]:
        """Close the file sinks, make the summary, write it to ``summary_json``, close the others with it."""
        for s in self.file_sinks:  # file sinks finish first: the summary counts what they wrote
            s.close({"source": self.run.source, "mode": self.run.mode})
            self.opened.remove(s)
        summary = summarize()
        if summary_json is not None:
            summary_json.write_text(json.dumps(summary, indent=2))
        for s in self.extra_sinks:  # database, live feed: they get the complete summary
            s.close(summary)
            self.opened.remove(s)
        return summary

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            return
        disk_full = output_write_error(exc, self.rundir) if self.rundir is not None else None
        self.abort(disk_full or exc)
        if disk_full is not None:  # a full disk: one clear line, also in the database
            raise disk_full from exc

    def abort(self, exc: BaseException, *, quiet: bool = True) -> None:
        """Abort every sink still open with ``exc``. Their own errors are dropped (``exc`` is what happened), or,
        with ``quiet=False``, the first is raised once all are aborted (a live stream reports it in its status)."""
        failed: Exception | None = None
        for s in self.opened:
            try:
                s.abort(exc)
            except Exception as err:  # keep the original error
                failed = failed or err
        self.opened.clear()
        if failed is not None and not quiet:
            raise failed
