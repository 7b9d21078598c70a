"""Shared forward passes for threads that step different streams at the same time.

Each stream's pipeline steps in its own thread (ego-motion, tracking, speeds and sinks are per-stream CPU work that
OpenCV, NumPy and torch run with the GIL released). When a thread reaches a model - the detector or the road U-Net -
it does not run it: it hands its images to a ``SharedPasses`` object and waits. Once every thread that is stepping
is waiting (or ``window_s`` has passed since the first one started waiting) one of them runs every waiting image
through the model in one forward pass per (model, settings, input size) group, and each thread gets its own answers
back. The answers are exactly what the thread would have computed alone on the same model: native-resolution passes,
tiles, probes and U-Net runs are gathered when they happen, nothing is guessed in advance.

On CUDA a group is one batched call (FP16: the detector's ``half`` setting, the U-Net under autocast); on the CPU
each image still runs on its own (a batch is no faster there, and results stay bit-identical to stepping alone).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

MAX_MODEL_BATCH = 32  # images per forward pass; bounds GPU memory whatever the number of streams

# A runner computes the answers of one group: same model, same settings, inputs of the same shape.
Runner = Callable[[list[Any]], list[Any]]


@dataclass
class _Request:
    items: list[tuple[Hashable, Runner, Any]]  # (group key, runner, input)
    since: float = field(default_factory=time.monotonic)
    results: list[Any] | None = None
    error: BaseException | None = None


class SharedPasses:
    """The meeting point of the stepping threads. ``enter()``/``leave()`` bracket one thread's step; ``run(items)``
    inside it returns the answers for ``items`` computed in a shared pass.

    ``window_s=None``: wait until every entered thread is waiting or has left (``step_streams``: all streams step
    together). A number: run what has gathered after that long at the latest (the service: streams arrive at their
    own pace, and one slow stream must not hold the others' latency hostage).
    """

    def __init__(self, window_s: float | None = None, max_batch: int = MAX_MODEL_BATCH):
        self.window_s = window_s
        self.max_batch = max_batch
        self._cond = threading.Condition()
        self._active = 0  # threads inside a step
        self._blocked = 0  # of them, waiting for answers (pending, or in the pass being run)
        self._pending: list[_Request] = []
        self._running = False
        self.passes = 0  # forward passes run (for tests and benchmarks)
        self.images = 0

    # -- a thread's step --------------------------------------------------------------------------------------
    def enter(self, n: int = 1) -> None:
        with self._cond:
            self._active += n

    def leave(self) -> None:
        with self._cond:
            self._active -= 1
        self._flush_while_ready()

    def run(self, items: list[tuple[Hashable, Runner, Any]]) -> list[Any]:
        if not items:
            return []
        req = _Request(items)
        with self._cond:
            self._pending.append(req)
            self._blocked += 1
        while True:
            self._flush_while_ready()
            with self._cond:
                if req.results is not None or req.error is not None:
                    break
                timeout = None
                if self.window_s is not None and self._pending and not self._running:
                    timeout = max(0.0, self._pending[0].since + self.window_s - time.monotonic()) + 1e-4
                self._cond.wait(timeout if timeout is not None else 0.05)
                if req.results is not None or req.error is not None:
                    break
        if req.error is not None:
            raise req.error
        assert req.results is not None  # the loop above ends only with results or an error
        return req.results

    # -- the shared pass ----------------------------------------------------------------------------------------
    def _ready(self) -> bool:
        if self._running or not self._pending:
            return False
        if self._blocked >= self._active:
            return True
        return self.window_s is not None and time.monotonic() - self._pending[0].since >= self.window_s

    def _flush_while_ready(self) -> None:
        while True:
            with self._cond:
                if not self._ready():
                    return
                batch, self._pending = self._pending, []
                self._running = True
            try:
                self._compute(batch)
            finally:
                with self._cond:
                    self._running = False
                    self._blocked -= len(batch)
                    self._cond.notify_all()

    def _compute(self, batch: list[_Request]) -> None:
        groups: dict[Hashable, list[tuple[_Request, int]]] = defaultdict(list)
        runners: dict[Hashable, Runner] = {}
        results = {id(req): [None] * len(req.items) for req in batch}
        for req in batch:
            for i, (key, runner, _) in enumerate(req.items):
                groups[key].append((req, i))
                runners.setdefault(key, runner)  # any member's model: same weights and settings give the same answer
        failed: dict[int, BaseException] = {}
        for key, members in groups.items():
            for start in range(0, len(members), self.max_batch):
                chunk = members[start : start + self.max_batch]
                try:
                    answers = runners[key]([req.items[i][2] for req, i in chunk])
                except BaseException as exc:  # every thread of the group gets the error, raised in its own step
                    for req, _ in chunk:
                        failed[id(req)] = exc
                    continue
                self.passes += 1
                self.images += len(chunk)
                for (req, i), answer in zip(chunk, answers):
                    results[id(req)][i] = answer
        for req in batch:  # only now: a waiting thread takes its answers as soon as they are set
            if id(req) in failed:
                req.error = failed[id(req)]
            else:
                req.results = results[id(req)]
