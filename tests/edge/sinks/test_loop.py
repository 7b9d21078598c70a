"""The one sink loop (edge.sinks.loop): the order sinks are opened, fed, closed and aborted in, for every kind of run."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest

from edge.rundir import OutputWriteError, RunDirectory
from edge.sinks.loop import RunSinks
from tracking.types import FrameResult, RunInfo
from vision.types import Frame

RUN = RunInfo("clip.mp4", 64, 48, 25.0, 3, {}, "weights.pt", "dual_layer", "cpu")


class Recording:
    """A sink that notes every call in a shared journal (and fails where told)."""

    def __init__(self, name: str, journal: list, fail_on: str | None = None, error: BaseException | None = None):
        self.name, self.journal, self.fail_on = name, journal, fail_on
        self.error = error or RuntimeError(f"{name} broke")

    def _note(self, call: str, arg=None) -> None:
        self.journal.append((self.name, call, arg))
        if call == self.fail_on:
            raise self.error

    def open(self, run):
        self._note("open", run.source)

    def write(self, result):
        self._note("write", result.frame.index)

    def close(self, summary):
        self._note("close", summary.get("frames", summary.get("mode")))

    def abort(self, exc):
        self._note("abort", str(exc))


def results(n: int = 3):
    return [FrameResult(Frame(i, i / 25, np.zeros((0, 0, 3), np.uint8)), []) for i in range(n)]


def test_sinks_open_in_order_get_every_frame_and_files_close_before_the_summary(tmp_path):
    journal: list = []
    files, extra = [Recording("csv", journal), Recording("mot", journal)], [Recording("db", journal)]

    def summarize():
        journal.append(("summary", "made", None))
        return {"frames": 3}

    class Bar:
        n, closed = 0, False

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    bar = Bar()
    with RunSinks(RUN, files, extra) as sinks:
        sinks.feed(results(), bar)
        summary = sinks.finish(summarize, tmp_path / "summary.json")
    assert (bar.n, bar.closed) == (3, True)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary == {"frames": 3}
    assert journal == [
        ("csv", "open", "clip.mp4"),
        ("mot", "open", "clip.mp4"),
        ("db", "open", "clip.mp4"),
        *[(s, "write", i) for i in range(3) for s in ("csv", "mot", "db")],
        ("csv", "close", "dual_layer"),
        ("mot", "close", "dual_layer"),  # files first ...
        ("summary", "made", None),
        ("db", "close", 3),
    ]  # ... then the others with the summary
    assert sinks.opened == []


def test_a_failing_write_aborts_every_open_sink_and_the_error_goes_on():
    journal: list = []
    sinks = [Recording("csv", journal), Recording("db", journal, fail_on="write")]
    with pytest.raises(RuntimeError, match="db broke"):
        with RunSinks(RUN, sinks[:1], sinks[1:]) as run_sinks:
            run_sinks.feed(results())
    assert [j for j in journal if j[1] == "abort"] == [("csv", "abort", "db broke"), ("db", "abort", "db broke")]
    assert [j for j in journal if j[1] == "write"] == [("csv", "write", 0), ("db", "write", 0)]


def test_an_interruption_aborts_the_sinks_too():
    journal: list = []

    def interrupted():
        yield results(1)[0]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with RunSinks(RUN, [Recording("csv", journal)]) as sinks:
            sinks.feed(interrupted())
    assert journal[-1] == ("csv", "abort", "")


def test_a_sink_that_cannot_open_aborts_only_those_already_open():
    journal: list = []
    with pytest.raises(RuntimeError, match="mot broke"):
        with RunSinks(
            RUN, [Recording("csv", journal), Recording("mot", journal, fail_on="open"), Recording("db", journal)]
        ):
            pass
    assert journal == [("csv", "open", "clip.mp4"), ("mot", "open", "clip.mp4"), ("csv", "abort", "mot broke")]


def test_a_full_disk_becomes_one_clear_line_for_every_sink(tmp_path):
    journal: list = []
    rundir = RunDirectory(tmp_path / "run")
    full = OSError(errno.ENOSPC, "No space left on device")
    with rundir:
        with pytest.raises(OutputWriteError, match="no space left on device") as caught:
            with RunSinks(
                RUN, [Recording("csv", journal, fail_on="write", error=full)], [Recording("db", journal)], rundir
            ) as sinks:
                sinks.feed(results())
    assert caught.value.__cause__ is full
    aborts = [j for j in journal if j[1] == "abort"]
    assert [a[0] for a in aborts] == ["csv", "db"] and all(a[2] == str(caught.value) for a in aborts)


def test_a_live_run_feeds_frame_by_frame_and_can_hear_that_an_abort_failed():
    journal: list = []
    db = Recording("db", journal, fail_on="abort")
    sinks = RunSinks(RUN, [], [db]).open()
    for r in results(2):
        sinks.write(r)
    with pytest.raises(RuntimeError, match="db broke"):
        sinks.abort(ValueError("stream lost"), quiet=False)
    assert journal == [
        ("db", "open", "clip.mp4"),
        ("db", "write", 0),
        ("db", "write", 1),
        ("db", "abort", "stream lost"),
    ]
    assert sinks.opened == []


def test_a_run_that_holds_its_results_shows_each_frame_to_the_watchers_as_it_is_processed():
    """Whole-flight linking holds the results until the end: a sink that follows the processing (a job's lease and
    progress) sees each frame while it is processed, and only once; the other sinks get the results afterwards."""
    journal: list = []

    class Watching(Recording):
        follows_processing = True

    files, db, watcher = Recording("files", journal), Recording("db", journal), Watching("job", journal)
    with RunSinks(RUN, [files], [db, watcher]) as sinks:
        held = []
        for r in sinks.watched(results(3)):
            journal.append(("pipeline", "held", r.frame.index))
            held.append(r)
        sinks.feed(held, watchers=False)
        sinks.finish(lambda: {"frames": 3})
    writes = [(name, arg) for name, call, arg in journal if call in ("write", "held")]
    assert writes[:6] == [("job", 0), ("pipeline", 0), ("job", 1), ("pipeline", 1), ("job", 2), ("pipeline", 2)]
    assert writes[6:] == [("files", 0), ("db", 0), ("files", 1), ("db", 1), ("files", 2), ("db", 2)]
