"""The pipeline's CPU stages per frame, without the detector's own time: what a GPU leaves the host to do.

    python -m bench.cpu_stages [--video CLIP_OR_FOLDER] [--frames 177] [--variants default overlap_stages=false]
                               [--repeats 3] [--cache FILE] [--live]

The detector runs once, on the CPU, and its outputs are recorded in call order (``--cache``, reused when it exists
for the same clip and frame count); every timed run replays them, so what is timed is the rest of the pipeline
(ego-motion, road layer, motion layer, tracking, speeds and sizes) as on a GPU machine whose detector call is a few
milliseconds, with no ONNX threads competing for this machine's cores. The pipeline is deterministic, so a replay
gives the recorded run's tracks. Variants (``key=value,...`` of the pipeline config, or ``default``) run
interleaved, ``--repeats`` times each; printed per run: ms per frame over the whole step loop and the stage timers.

Another commit's code, with a recording of its own (two commits may decide differently somewhere, e.g. where a
rewritten sum differs in its last bit, and then call the detector on other frames; a replay that diverges from its
recording stops and says so):

    git worktree add /tmp/old COMMIT
    PYTHONPATH=/tmp/old python3 bench/cpu_stages.py --cache /tmp/old.pkl --variants default
    python3 bench/cpu_stages.py --cache /tmp/new.pkl

Default clip: ../shared/data/real_video/nadir_interchange/drone.mp4 (1080p nadir, 177 frames).
"""

from __future__ import annotations

import argparse
import copy
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tracking.config import PipelineConfig
from tracking.pipeline import Pipeline
from vision.source import open_source

DEFAULT_VIDEO = Path(__file__).resolve().parents[1] / ".." / "shared" / "data/real_video/nadir_interchange/drone.mp4"


_MISSING = "<no such attribute>"


class DetectorTape:
    """Stands in for the pipeline's detector: records each method call's result and each attribute the pipeline
    reads (its scale plan's state), in order (``calls`` empty), or replays them (the pipeline makes the same calls
    and reads in the same order when fed the same values). Attributes the pipeline sets go to the real detector."""

    def __init__(self, real: Any, calls: list | None = None):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_replay", calls is not None)
        object.__setattr__(self, "calls", [] if calls is None else calls)
        object.__setattr__(self, "_pos", 0)

    def _next(self, name: str) -> Any:
        if self._pos >= len(self.calls) or self.calls[self._pos][0] != name:
            raise SystemExit(f"the replay diverged at step {self._pos} ({name}): record the clip again")
        out = self.calls[self._pos][1]
        object.__setattr__(self, "_pos", self._pos + 1)
        return copy.deepcopy(out)  # the pipeline changes detections in place (scores, moving flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._replay:
            value = self._next(name)
            if value == _MISSING:
                raise AttributeError(name)
            if not (isinstance(value, tuple) and value[:1] == ("<method>",)):
                return value
            return lambda *args, **kwargs: self._next(name + "()")
        try:
            attr = getattr(self._real, name)
        except AttributeError:
            self.calls.append((name, _MISSING))
            raise
        if not callable(attr):
            self.calls.append((name, copy.deepcopy(attr)))
            return attr
        self.calls.append((name, ("<method>",)))

        def call(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            self.calls.append((name + "()", copy.deepcopy(out)))
            return out

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)


def config_for(variant: str) -> PipelineConfig:
    update: dict[str, Any] = {}
    for item in [] if variant == "default" else variant.split(","):
        key, value = item.split("=", 1)
        update[key] = {"true": True, "false": False}.get(value.lower(), value)
    return PipelineConfig(device="cpu").model_copy(update=update)


def run(frames: list, info: Any, cfg: PipelineConfig, detector: Any, live: bool) -> tuple[float, dict[str, float]]:
    pipe = Pipeline(cfg, detector=detector)
    pipe.reset(info.width, info.height, info.fps, recorded=not live)
    t0 = time.perf_counter()
    for frame in frames:
        pipe.step(frame)
    _ = pipe.scale  # the last frame's size measurements, if the helper thread still runs them
    ms = 1000 * (time.perf_counter() - t0) / len(frames)
    return ms, {k: round(v / len(frames), 1) for k, v in pipe.timings.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--video", type=Path, default=DEFAULT_VIDEO)
    ap.add_argument("--frames", type=int, default=177)
    ap.add_argument("--variants", nargs="+", default=["default", "overlap_stages=false"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache", type=Path, help="the detector's recorded outputs (made when missing)")
    ap.add_argument("--live", action="store_true", help="a live stream's pipeline (recorded=False)")
    a = ap.parse_args(argv)
    if not a.video.exists():
        print(f"{a.video}: no such clip (--video)", file=sys.stderr)
        return 2
    with open_source(a.video, max_frames=a.frames) as src:
        frames, info = list(src), src.info
    real = Pipeline(PipelineConfig(device="cpu")).detector
    key = (str(a.video.resolve()), len(frames), a.live)
    calls = None
    if a.cache and a.cache.exists():
        try:
            stored = pickle.loads(a.cache.read_bytes())
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            print(f"{a.cache}: not a recording of this bench ({type(exc).__name__}); delete it", file=sys.stderr)
            return 2
        calls = stored["calls"] if isinstance(stored, dict) and stored.get("key") == key else None
    if calls is None:
        tape = DetectorTape(real)
        run(frames, info, PipelineConfig(device="cpu"), tape, a.live)
        calls = tape.calls
        if a.cache:
            a.cache.write_bytes(pickle.dumps({"key": key, "calls": calls}))
        print(f"recorded {len(calls)} detector calls on {len(frames)} frames", flush=True)
    print(f"{a.video.name}: {len(frames)} frames {info.width}x{info.height}, {'live' if a.live else 'recorded'}")
    results: dict[str, list[float]] = {v: [] for v in a.variants}
    for _ in range(a.repeats):
        for variant in a.variants:  # interleaved: a loaded machine slows every variant alike
            ms, stages = run(frames, info, config_for(variant), DetectorTape(real, calls), a.live)
            results[variant].append(ms)
            print(f"{variant:28s} {ms:6.1f} ms/frame  {stages}", flush=True)
    for variant, values in results.items():
        print(f"{variant:28s} median {statistics.median(values):6.1f} ms/frame over {len(values)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
