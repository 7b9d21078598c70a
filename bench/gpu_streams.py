"""Many live 1080p streams on one machine: throughput, latency, GPU use.

For each N in ``--streams`` (default 1 2 4 8 16) N copies of ``--video`` (default the 1080p nadir clip of the shared
data) are processed with the default dual-layer pipeline (road U-Net on), two ways:

* ``step``: in this process through ``edge.batch.batched.step_streams`` - every stream steps in its own thread, the
  detector and U-Net calls of all streams in shared forward passes. ``--frames`` frames per stream, decoded
  beforehand (decoding is not what this mode measures). Latency = the time from handing a frame in to its result.
* ``serve``: a real ``airpatrol serve`` subprocess with N live streams: N FFmpeg processes each send the clip looped
  at its real rate (MPEG-TS over TCP, as a ground station or encoder would), the service pulls, decodes, processes
  and publishes; results are read from each stream's live feed (``/api/streams/{id}/feed``) for ``--frames`` frames'
  worth of time (at the clip's rate) after a warm-up. Latency = the service's own measure in every result message
  (frame arrival to result published), so decode and queueing are included; frames the service dropped because it
  fell behind count against its fps, not its latency.

Printed per N and mode: frames per second per stream and in total, p95 latency, mean GPU utilisation and peak GPU
memory while it ran (NVML via ``pynvml``/``nvidia-ml-py`` or ``nvidia-smi``; "n/a" where neither sees a GPU).

    python3 bench/gpu_streams.py --device cuda                      # the full table (H100: see docs/deployment.md)
    python3 bench/gpu_streams.py --device cpu --streams 1 2 --frames 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("YOLO_OFFLINE", "1")

from bench.serving import ffmpeg_live, free_port, login, start_serve, stop  # noqa: E402

SHARED = Path(os.environ.get("AIRPATROL_SHARED", ROOT.parent / "shared"))
DEFAULT_VIDEO = SHARED / "data" / "real_video" / "nadir_interchange" / "drone.mp4"


# -- GPU utilisation and memory ----------------------------------------------------------------------------------


class GpuSampler:
    """Samples utilisation (%) and memory used (MiB) of GPU 0 every ``every`` s while running; None without a GPU."""

    def __init__(self, every: float = 0.2):
        self.every = every
        self.util: list[float] = []
        self.mem: list[float] = []
        self._stop = threading.Event()
        self._read = self._nvml() or self._smi()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _nvml():
        try:
            import pynvml

            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # not installed, no driver, no GPU
            return None

        def read():
            return float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu), pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20

        return read

    @staticmethod
    def _smi():
        if shutil.which("nvidia-smi") is None:
            return None

        def read():
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout
            util, mem = out.strip().split(",")[:2]
            return float(util), float(mem)

        try:
            read()
        except Exception:
            return None
        return read

    def _loop(self):
        while not self._stop.wait(self.every):
            try:
                u, m = self._read()
            except Exception:
                continue
            self.util.append(u)
            self.mem.append(m)

    def __enter__(self):
        if self._read is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)

    def summary(self) -> tuple[str, str]:
        if self._read is None or not self.util:
            return "n/a", "n/a"
        return f"{np.mean(self.util):.0f} %", f"{max(self.mem) / 1024:.1f} GiB"


# -- mode step: step_streams in this process ---------------------------------------------------------------------


def load_frames(video: Path, n: int) -> list:
    from vision.source import open_source

    with open_source(video, max_frames=n) as src:
        frames = list(src)
    if not frames:
        raise SystemExit(f"{video}: no frames decoded")
    return frames


def pipeline_config(device: str, config: Path | None, ego_backend: str | None = None):
    from edge.config import load_settings

    pipeline = load_settings(config, {}).pipeline.model_copy(update={"device": device})
    if ego_backend:
        pipeline.ego_motion = pipeline.ego_motion.model_copy(update={"backend": ego_backend})
    return pipeline


def run_step(n: int, frames: list, cfg, warmup: int, serial: bool = False) -> dict:
    from edge.batch.batched import step_streams
    from tracking.pipeline import Pipeline
    from vision.types import Frame

    pipes = [Pipeline(cfg, streams=n) for _ in range(n)]  # 'streams': what the 'auto' backend weighs
    h, w = frames[0].image.shape[:2]
    for p in pipes:
        p.reset(w, h, 25.0)

    def feed(f):
        return [Frame(f.index, f.t, f.image) for _ in range(n)]  # the same pixels for every stream: read-only

    for f in frames[:warmup]:  # model warm-up (cuDNN autotuning, first allocations): not counted
        step_streams(pipes, feed(f), parallel=not serial)
    latencies = []
    with GpuSampler() as gpu:
        t0 = time.perf_counter()
        for f in frames[warmup:]:
            t = time.perf_counter()
            step_streams(pipes, feed(f), parallel=not serial)
            latencies.append(time.perf_counter() - t)
        wall = time.perf_counter() - t0
    counted = len(frames) - warmup
    util, mem = gpu.summary()
    return {
        "mode": "serial" if serial else "step",
        "streams": n,
        "ego_backend": "torch" if type(pipes[0].ego).__module__.startswith("vision.gpu") else "opencv",
        "frames": counted,
        "fps_stream": counted / wall,
        "fps_total": n * counted / wall,
        "p95_ms": 1000 * float(np.percentile(latencies, 95)),
        "gpu_util": util,
        "gpu_mem": mem,
    }


# -- mode processes: one process per stream, each with its own models (no shared passes) -----------------------------


def _stream_process(video: str, n_frames: int, warmup: int, cfg_json: str, out) -> None:
    from tracking.config import PipelineConfig
    from tracking.pipeline import Pipeline

    frames = load_frames(Path(video), n_frames)
    pipe = Pipeline(PipelineConfig.model_validate_json(cfg_json))
    for f in frames[:warmup]:
        pipe.step(f)
    lat, start = [], time.time()
    for f in frames[warmup:]:
        t = time.perf_counter()
        pipe.step(f)
        lat.append(time.perf_counter() - t)
    out.put((start, time.time(), lat))


def run_processes(n: int, video: Path, n_frames: int, cfg, warmup: int) -> dict:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_stream_process, args=(str(video), n_frames, warmup, cfg.model_dump_json(), out))
        for _ in range(n)
    ]
    with GpuSampler() as gpu:
        for p in procs:
            p.start()
        got = [out.get() for _ in procs]
        for p in procs:
            p.join()
    wall = max(e for _, e, _ in got) - min(s for s, _, _ in got)  # from the first stream's start to the last's end
    counted = n_frames - warmup
    util, mem = gpu.summary()
    return {
        "mode": "procs",
        "streams": n,
        "frames": counted,
        "fps_stream": counted / wall,
        "fps_total": n * counted / wall,
        "p95_ms": 1000 * float(np.percentile([x for *_, lat in got for x in lat], 95)),
        "gpu_util": util,
        "gpu_mem": mem,
    }


# -- mode serve: airpatrol serve with N live streams ---------------------------------------------------------------


def _has_pyav() -> bool:
    import importlib.util

    return importlib.util.find_spec("av") is not None


@contextmanager
def serve(folder: Path, device: str, config: Path | None):
    import yaml

    db = f"sqlite:///{folder / 'bench.db'}"
    base_cfg = yaml.safe_load(config.read_text()) if config else {}
    cfg = {
        **base_cfg,
        "database_url": db,
        "data_dir": str(folder / "data"),
        "pipeline": {**base_cfg.get("pipeline", {}), "device": device},
    }
    env = {"AIRPATROL_USER_PASSWORD": "bench-password"}
    proc, port = start_serve(folder, cfg, [ROOT], env)
    try:
        subprocess.run(
            [sys.executable, "-m", "edge.cli", "user", "add", "bench", "--role", "operator", "--database-url", db],
            env={**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
            check=True,
            capture_output=True,
        )
        base = f"http://127.0.0.1:{port}"
        yield base, login(base, "bench", "bench-password")
    finally:
        stop(proc)


def live_source(video: Path, port: int) -> subprocess.Popen:
    """FFmpeg as a live encoder: the clip looped at its real rate, MPEG-TS over TCP, waiting for the service."""
    return ffmpeg_live(video, f"tcp://127.0.0.1:{port}?listen=1")


def pyav_send(video: Path, port: int) -> None:
    """An encoder without an ffmpeg program: PyAV remuxes the clip (no re-encoding), looped at its real rate, as
    MPEG-TS to a TCP listener the service's pull reader connects to (what ``live_source`` does with ffmpeg). Runs in a
    process of its own (``pyav_source``): PyAV's listening socket holds the GIL while it waits for the service."""
    import av

    url = f"tcp://127.0.0.1:{port}?listen=1&listen_timeout=120000"
    with av.open(url, "w", format="mpegts") as out:
        ost, offset, t0 = None, 0.0, time.monotonic()
        while True:
            with av.open(str(video)) as inp:
                ist = inp.streams.video[0]
                if ost is None:
                    ost = out.add_stream_from_template(ist)
                step = 1.0 / float(ist.average_rate or 25)
                tb = float(ist.time_base or 1 / 90000)
                shift, end = round(offset / tb), offset
                for pkt in inp.demux(ist):
                    if pkt.dts is None:  # the demuxer's flush packet
                        continue
                    t = offset + (pkt.pts if pkt.pts is not None else pkt.dts) * tb
                    lag = t - (time.monotonic() - t0)
                    if lag > 0:
                        time.sleep(lag)
                    if pkt.pts is not None:
                        pkt.pts += shift
                    pkt.dts += shift
                    pkt.stream = ost
                    out.mux(pkt)
                    end = max(end, t + step)
            offset = end


def pyav_source(video: Path, port: int) -> subprocess.Popen:
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import gpu_streams as g; g.pyav_send(g.Path(sys.argv[1]), {port})"
    return subprocess.Popen(
        [sys.executable, "-c", code, str(video)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def jpeg_frames(video: Path) -> tuple[list[bytes], float]:
    """The clip's frames as JPEG files' bytes, and its rate: a folder's JPEG files as they are (the GPU call's frame
    folders), or a video file's frames decoded and encoded once by OpenCV (no PyAV, no ffmpeg program needed)."""
    import configparser

    import cv2

    if video.is_dir():
        info = configparser.ConfigParser()
        info.read(video / "seqinfo.ini")
        fps = float(info.get("Sequence", "frameRate", fallback="25"))
        files = sorted((video / info.get("Sequence", "imDir", fallback="img")).glob("*.jpg"))
        return [f.read_bytes() for f in files], fps
    cap = cv2.VideoCapture(str(video))
    fps = cap.get(cv2.CAP_PROP_FPS) or 25.0
    out = []
    while True:
        ok, img = cap.read()
        if not ok:
            break
        out.append(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
    cap.release()
    return out, fps


class PushSource(threading.Thread):
    """A device pushing the clip, looped at its real rate, to a push stream of the service (edge.client.publish's
    protocol: a JSON header, then the JPEG, over one WebSocket). The JPEG bytes are sent as they are: the bench
    process encodes nothing, so it takes no CPU from the service."""

    def __init__(self, base: str, auth: dict, jpegs: list[bytes], fps: float, name: str):
        from edge.client.api import Endpoint
        from edge.client.publish import Publisher, PublishOptions

        class JpegPublisher(Publisher):
            def _send(self, ws, t: float, image, telemetry) -> None:  # image: the JPEG's bytes
                ws.send(json.dumps({"type": "frame", "t": round(t, 4)}))
                ws.send(image)
                self.sent += 1

        super().__init__(daemon=True)
        token = auth["Authorization"].split(" ", 1)[1]
        self.publisher = JpegPublisher(
            Endpoint(base, token), PublishOptions(name=name, max_retries=2, retry_max_s=1.0), say=lambda _: None
        )
        self.stream = self.publisher.register()
        self.jpegs, self.fps = jpegs, fps
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def frames(self):
        t0, i = time.monotonic(), 0
        while not self.stop.is_set():
            t = i / self.fps
            lag = t - (time.monotonic() - t0)
            if lag > 0:
                time.sleep(lag)
            elif lag < -0.2:  # behind: skip, stay live (as the publish client does with a recording)
                i += 1
                continue
            yield t, self.jpegs[i % len(self.jpegs)]
            i += 1

    def run(self) -> None:
        try:
            self.publisher.run(self.frames(), self.fps, None)
        except BaseException as exc:  # reported by run_serve
            self.error = exc


def run_serve(
    n: int, video: Path, base: str, auth: dict, seconds: float, warmup_s: float, live: str = "ffmpeg", jpegs=None
) -> dict:
    """``live``: 'ffmpeg' (an ffmpeg program per stream sends MPEG-TS over TCP, the service pulls and decodes it with
    PyAV), 'pyav' (the same, sent by PyAV in this process: no ffmpeg program), 'push' (JPEG over the push WebSocket,
    ``jpegs`` = (frames, fps): neither PyAV nor ffmpeg needed anywhere)."""
    import httpx
    from websockets.sync.client import connect

    sources: list = []
    ids = []
    results: list[list[float]] = [[] for _ in range(n)]
    counting = threading.Event()
    done = threading.Event()
    t_begin, t_ready, t_end = time.perf_counter(), None, None  # the row's phases: how long each stream count costs
    try:
        for i in range(n):
            if live == "push":
                src = PushSource(base, auth, jpegs[0], jpegs[1], f"bench-push-{i}")
                sources.append(src)
                ids.append(src.stream)
                src.start()
                continue
            port = free_port()
            sources.append(live_source(video, port) if live == "ffmpeg" else pyav_source(video, port))
            r = httpx.post(
                f"{base}/api/streams",
                headers=auth,
                timeout=60,
                json={"kind": "pull", "url": f"tcp://127.0.0.1:{port}", "name": f"bench-{port}"},
            )
            r.raise_for_status()
            ids.append(r.json())

        def listen(i: int, feed: str):
            with connect(feed, additional_headers=auth) as ws:
                while not done.is_set():
                    try:
                        msg = json.loads(ws.recv(timeout=1.0))
                    except TimeoutError:
                        continue
                    if msg.get("type") == "result" and counting.is_set():
                        results[i].append(float(msg["latency_ms"]))

        ws_base = base.replace("http://", "ws://")
        threads = [
            threading.Thread(target=listen, args=(i, ws_base + s["feed_url"]), daemon=True) for i, s in enumerate(ids)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120  # every stream connected and processing
        while time.monotonic() < deadline:
            states = [httpx.get(f"{base}/api/streams/{s['id']}", headers=auth).json() for s in ids]
            if all(st.get("processed", 0) > 0 for st in states):
                break
            time.sleep(0.5)
        t_ready = time.perf_counter()
        time.sleep(warmup_s)
        with GpuSampler() as gpu:
            counting.set()
            t0 = time.perf_counter()
            time.sleep(seconds)
            counting.clear()
            wall = time.perf_counter() - t0
        done.set()
        for t in threads:
            t.join(5)
        util, mem = gpu.summary()
        t_end = time.perf_counter()
    finally:
        done.set()
        for p in sources:  # push: the device says the flight is over, the service completes the run
            if isinstance(p, PushSource):
                p.stop.set()
        for p in sources:
            if isinstance(p, PushSource):
                p.join(30)
        for s in ids:
            try:
                httpx.delete(f"{base}/api/streams/{s['id']}", headers=auth, timeout=60)
            except httpx.HTTPError:
                pass
        for p in sources:
            if not isinstance(p, PushSource):
                p.kill()
                p.wait()
    errors = [f"{type(p.error).__name__}: {p.error}" for p in sources if getattr(p, "error", None)]
    per = [len(r) / wall for r in results]
    lat = [x for r in results for x in r]
    return {
        "mode": "serve",
        "live": live,
        **({"source_errors": errors} if errors else {}),
        "streams": n,
        "frames": sum(len(r) for r in results),
        "fps_stream": float(np.mean(per)),
        "fps_total": float(np.sum(per)),
        "p95_ms": float(np.percentile(lat, 95)) if lat else float("nan"),
        "gpu_util": util,
        "gpu_mem": mem,
        "until_all_processing_s": round(t_ready - t_begin, 1) if t_ready else None,
        "teardown_s": round(time.perf_counter() - t_end, 1) if t_end else None,
    }


# -- the table ------------------------------------------------------------------------------------------------------


def print_row(r: dict) -> None:
    print(
        f"| {r['mode']:6} | {r.get('ego_backend', '-'):6} | {r['streams']:3d} | {r['frames']:6d} | {r['fps_stream']:8.2f} | {r['fps_total']:8.2f} | "
        f"{r['p95_ms']:8.0f} | {r['gpu_util']:>8} | {r['gpu_mem']:>8} |",
        flush=True,
    )


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--video", type=Path, default=DEFAULT_VIDEO, help="the stream's clip (default: 1080p nadir clip)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--frames", type=int, default=150, help="frames per stream (serve: that many frames' time)")
    ap.add_argument("--warmup", type=int, default=2, help="step: frames per stream run before timing")
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["step", "serve"],
        choices=["step", "serial", "procs", "serve"],
        help="step: step_streams (threads, shared passes); serial: step_streams one stream after another; "
        "procs: one process per stream, own models; serve: airpatrol serve with live streams",
    )
    ap.add_argument("--config", type=Path, help="AirPatrol YAML/JSON config (its pipeline section is used)")
    ap.add_argument(
        "--ego-backend",
        choices=["auto", "opencv", "torch"],
        help="ego_motion.backend for every stream (default: the config's; 'auto' is OpenCV everywhere)",
    )
    ap.add_argument(
        "--live",
        choices=["ffmpeg", "pyav", "push"],
        help="serve: how the live sources send the clip - 'ffmpeg': an ffmpeg program per stream, MPEG-TS over TCP, "
        "pulled and decoded by the service's PyAV; 'pyav': the same sent by PyAV in this process (no ffmpeg program); "
        "'push': JPEG frames over the push WebSocket (edge.client.publish's protocol; neither PyAV nor ffmpeg "
        "needed, --video may be a frame folder). Default: ffmpeg if found, else pyav if importable, else push",
    )
    ap.add_argument("--serve-warmup", type=float, default=2.0, help="serve: seconds processed before counting")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    if not args.video.exists():
        raise SystemExit(f"{args.video}: no such video (set --video, or AIRPATROL_SHARED to the shared data)")
    from vision.detection import resolve_device

    device = resolve_device(args.device)
    import torch

    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else "none (CPU)"
    print(f"video {args.video.name}, device {device}, GPU {gpu}, {os.cpu_count()} CPU cores, torch {torch.__version__}")
    print("| mode   | ego    |   N | frames | fps/strm | fps tot. | p95 ms   | GPU util | GPU mem  |")
    print("|--------|--------|----:|-------:|---------:|---------:|---------:|---------:|---------:|")
    rows: list[dict] = []

    def emit(row: dict) -> None:  # the JSON is rewritten after every row: a run cut short keeps what it measured
        rows.append(row)
        print_row(row)
        if args.json:
            args.json.write_text(
                json.dumps({"video": str(args.video), "device": device, "gpu": gpu, "rows": rows}, indent=2)
            )

    cfg = pipeline_config(device, args.config, args.ego_backend)
    if {"step", "serial"} & set(args.modes):
        frames = load_frames(args.video, args.frames + args.warmup)
        warmup = min(args.warmup, len(frames) - 1)
        for n in args.streams:
            for mode in [m for m in ("step", "serial") if m in args.modes]:  # alternately: a loaded machine drifts
                emit(run_step(n, frames, cfg, warmup, serial=mode == "serial"))
        del frames
    if "procs" in args.modes:
        for n in args.streams:
            emit(run_processes(n, args.video, args.frames + args.warmup, cfg, args.warmup))
    if "serve" in args.modes:
        live = args.live or ("ffmpeg" if shutil.which("ffmpeg") else "pyav" if _has_pyav() else "push")
        if live in ("ffmpeg", "pyav") and not args.video.is_file():
            raise SystemExit(f"{args.video}: --live {live} needs a video file (push also takes a frame folder)")
        if live == "ffmpeg" and shutil.which("ffmpeg") is None:
            raise SystemExit("--live ffmpeg needs the ffmpeg program (--live pyav or push do without)")
        jpegs = jpeg_frames(args.video) if live == "push" else None
        if jpegs is not None:
            fps = jpegs[1]
        else:
            from vision.source import open_source

            with open_source(args.video) as src:
                fps = src.info.fps
        seconds = args.frames / fps
        print(f"serve: live sources by {live}, {seconds:.1f} s counted per stream count after {args.serve_warmup} s")
        with (
            tempfile.TemporaryDirectory(prefix="airpatrol-gpu-streams-") as tmp,
            serve(Path(tmp), device, args.config) as (base, auth),
        ):
            for n in args.streams:
                emit(run_serve(n, args.video, base, auth, seconds, args.serve_warmup, live, jpegs))
    return rows


if __name__ == "__main__":
    main()
