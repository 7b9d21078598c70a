"""The Python steps of ``bench/gpu_device_run.sh`` (one prepared GPU call): frames, plain Ultralytics, profile, record.

    python3 bench/gpu_device_steps.py frames CLIP.mp4 FOLDER       # decode with OpenCV into FOLDER/img + seqinfo.ini
    python3 bench/gpu_device_steps.py plain FOLDER --label L --device cuda --frames 300 --results R.jsonl
    python3 bench/gpu_device_steps.py record LABEL RUN_DIR/summary.json --results R.jsonl
    python3 bench/gpu_device_steps.py profile FOLDER --device cuda --frames 40 --out profile.txt

``frames`` exists because the GPU machine has no PyAV (its wheel alone is 34 MiB, more than the call can carry
beside the clips): the clips travel as H.264 files, OpenCV (whose wheel bundles FFmpeg) decodes them there into
JPEG folders, and every contender reads the same folder through ``vision.source.open_source``.
``plain`` is what a user of Ultralytics runs: ``YOLO(weights).track(frame, tracker="bytetrack.yaml", persist=True,
conf=0.1, imgsz=640, quantize=16)`` (``half=True`` before Ultralytics 8.4) frame by frame, decode included, with the same weights as ``airpatrol process``.
``profile`` steps the default dual-layer pipeline over preloaded frames: stage timers, then ``cProfile`` (Python
functions by own time), then ``torch.profiler`` on a few frames (top ops by device and host time, host<->device
copies); the report is rewritten after each part.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

T_START = time.perf_counter()  # this process's start: what a user waits from, imports and model loading included
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("YOLO_OFFLINE", "1")


def phases(stamps: list[float], head: int, skip: int) -> dict:
    """Start-up and steady state from the time each frame's result was ready: seconds from the process start to the
    first result (imports, model loading, warm-up, first frame); fps over the first ``head`` results counted from the
    process start (what a clip of that length gets end to end); fps of the results after the first ``skip`` (the warm
    loop, steady state); the slowest result interval before and after ``skip``."""
    t = np.asarray(stamps, np.float64)
    n = len(t)
    if n == 0:
        return {"frames": 0}
    head, skip = min(head, n), min(skip, n - 2) if n > 2 else 0
    gaps = np.diff(t)
    return {
        "frames": n,
        "first_result_s": round(float(t[0] - T_START), 2),
        "head_frames": head,
        "head_fps_from_start": round(head / float(t[head - 1] - T_START), 2),
        "head_fps_from_first_result": round((head - 1) / float(t[head - 1] - t[0]), 2) if head > 1 else None,
        "steady_after": skip,
        "steady_fps": round((n - 1 - skip) / float(t[-1] - t[skip]), 2) if n - 1 > skip else None,
        "slowest_ms_before_steady": round(1000 * float(gaps[:skip].max()), 1) if skip > 0 else None,
        "slowest_ms_steady": round(1000 * float(gaps[skip:].max()), 1) if n - 1 > skip else None,
        "fps_whole_from_start": round(n / float(t[-1] - T_START), 2),
    }


def append(results: Path | None, row: dict) -> None:
    print(json.dumps(row), flush=True)
    if results is not None:
        with results.open("a") as fh:
            fh.write(json.dumps(row) + "\n")


def cmd_frames(a) -> int:
    import cv2

    cap = cv2.VideoCapture(str(a.clip))
    if not cap.isOpened():
        print(f"{a.clip}: OpenCV cannot open it", file=sys.stderr)
        return 2
    fps = cap.get(cv2.CAP_PROP_FPS) or 25.0
    img = a.folder / "img"
    img.mkdir(parents=True, exist_ok=True)
    n, w, h = 0, 0, 0
    while a.max_frames is None or n < a.max_frames:
        ok, frame = cap.read()
        if not ok:
            break
        n += 1
        h, w = frame.shape[:2]
        cv2.imwrite(str(img / f"img{n:06d}.jpg"), frame, [cv2.IMWRITE_JPEG_QUALITY, a.quality])
    cap.release()
    if n == 0:
        print(f"{a.clip}: no frame decoded", file=sys.stderr)
        return 2
    (a.folder / "seqinfo.ini").write_text(
        f"[Sequence]\nname={a.folder.name}\nimDir=img\nframeRate={fps:g}\nseqLength={n}\nimWidth={w}\nimHeight={h}\n"
        "imExt=.jpg\n"
    )
    print(f"{a.clip} -> {a.folder}: {n} frames {w}x{h} at {fps:g} fps (JPEG q{a.quality})")
    return 0


def cmd_loop(a) -> int:
    """A long frame folder from a short one: its frames forward, backward, forward ... (symbolic links), so the
    footage stays continuous (no cut for the ego-motion to fail on) however long the run."""
    files = sorted(p for p in (a.folder / "img").iterdir() if p.suffix.lower() == ".jpg")
    if len(files) < 2:
        print(f"{a.folder}: fewer than 2 frames", file=sys.stderr)
        return 2
    cycle = files + files[-2:0:-1]
    img = a.out / "img"
    img.mkdir(parents=True, exist_ok=True)
    for i in range(a.frames):
        link = img / f"img{i + 1:06d}.jpg"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(cycle[i % len(cycle)].resolve())
    ini = (a.folder / "seqinfo.ini").read_text().splitlines()
    ini = [f"seqLength={a.frames}" if line.startswith("seqLength=") else line for line in ini]
    ini = [f"name={a.out.name}" if line.startswith("name=") else line for line in ini]
    (a.out / "seqinfo.ini").write_text("\n".join(ini) + "\n")
    print(f"{a.folder} ({len(files)} frames) -> {a.out}: {a.frames} frames, forward and back")
    return 0


class _Stamps:
    """A sink of the run that notes when each frame's result was ready."""

    def __init__(self) -> None:
        self.t: list[float] = []

    def open(self, info) -> None:
        pass

    def write(self, result) -> None:
        self.t.append(time.perf_counter())

    def close(self, summary) -> None:
        pass

    def abort(self, error) -> None:
        pass


def cmd_steady(a) -> int:
    """``airpatrol process``'s own code (``edge.runner.process_video``: decode thread, file sinks, no video) over a
    frame folder, the end of each frame's pipeline step noted: start-up and steady state apart (``phases``). The
    step, not the result: a recorded run holds its results back (the motion layer's look-back, then the linking of
    each vehicle's pieces over the whole flight, ``linking``), so results come in a burst at the end; the seconds
    from the last step to the end of the run (linking, the files) are reported apart. Stopped by ``timeout`` (TERM),
    the row of what was measured so far is still written."""
    import signal

    from edge.config import load_settings
    from edge.runner import process_video
    from tracking.linked_run import HeldResults

    cfg = load_settings(a.config, {}).pipeline.model_copy(update={"device": a.device})
    steps: list[float] = []  # each frame's result taken in by the run (held for the linking)
    add = HeldResults.add

    def timed_add(self, result):
        add(self, result)
        steps.append(time.perf_counter())

    HeldResults.add = timed_add  # type: ignore[method-assign]
    stamps = _Stamps()

    def row(**extra) -> dict:
        return {"step": a.label, **phases(steps, a.head, a.skip), **extra}

    def cut(*_) -> None:
        append(a.results, row(cut="stopped at the step's limit", results=len(stamps.t)))
        raise SystemExit(124)

    signal.signal(signal.SIGTERM, cut)
    outcome = process_video(
        a.folder, a.out, cfg, extra_sinks=[stamps], write_video=False, progress=False, max_frames=a.frames
    )
    end = time.perf_counter()
    if not steps:  # not linked: the results come as they are made
        steps = stamps.t
    s = outcome.summary
    t = s.get("timings", {})
    append(
        a.results,
        row(
            after_last_step_s=round(end - steps[-1], 2) if steps else None,
            warm_up_s=t.get("warm_up_s"),
            run_fps=t.get("fps"),
            run_wall_s=t.get("wall_s"),
            ms_per_frame_by_stage=t.get("ms_per_frame_by_stage"),
            device=s.get("device"),
            tracks=s.get("counts", {}).get("tracks"),
            links=(s.get("linking") or {}).get("links"),
            detector_scales=len(s.get("detector_scales") or []),
            ego_motion_failures=s.get("ego_motion_failures"),
        ),
    )
    return 0


def cmd_plain(a) -> int:
    import torch
    from ultralytics import YOLO

    from vision.detection import DEFAULT_DETECTOR_WEIGHTS, fp16_predict_args
    from vision.source import open_source

    device = 0 if a.device == "cuda" else "cpu"
    half = a.device == "cuda"
    model = YOLO(str(DEFAULT_DETECTOR_WEIGHTS), task="detect")
    kw = dict(imgsz=a.imgsz, conf=a.conf, device=device, verbose=False)
    if half:  # FP16: 'quantize' replaced 'half' in Ultralytics 8.4 (which warns on every call given 'half')
        kw.update(fp16_predict_args())
    t_loaded = time.perf_counter()
    with open_source(a.folder, max_frames=2) as src:
        for f in src:  # warm-up: CUDA context, cuDNN autotuning (not counted)
            model.predict(f.image, **kw)
    if a.device == "cuda":
        torch.cuda.synchronize()
    t_warm = time.perf_counter()
    speed: dict[str, float] = {}
    n = 0
    stamps: list[float] = []
    w0, c0 = time.perf_counter(), time.process_time()
    with open_source(a.folder, max_frames=a.frames) as src:
        for frame in src:
            r = list(model.track(frame.image, tracker="bytetrack.yaml", persist=True, **kw))[0]
            for k, v in (r.speed or {}).items():
                speed[k] = speed.get(k, 0.0) + float(v or 0.0)
            n += 1
            stamps.append(time.perf_counter())
    if a.device == "cuda":
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    append(
        a.results,
        {
            "step": f"plain_{a.label}",
            "frames": n,
            "fps": round(n / wall, 2),
            "ms_per_frame": round(1000 * wall / n, 2),
            "cpu_ms_per_frame": round(1000 * cpu / n, 2),
            "ultralytics_ms_per_frame": {k: round(v / n, 2) for k, v in speed.items()},
            "imgsz": a.imgsz,
            "half": half,
            "device": a.device,
            "load_s": round(t_loaded - T_START, 2),
            "warm_up_s": round(t_warm - t_loaded, 2),
            **{k: v for k, v in phases(stamps, a.head or n, a.skip).items() if k != "frames"},
        },
    )
    return 0


def cmd_record(a) -> int:
    s = json.loads(a.summary.read_text())
    t = s.get("timings", {})
    append(
        a.results,
        {
            "step": a.label,
            "frames": s.get("counts", {}).get("frames"),
            "fps": t.get("fps"),
            "ms_per_frame": t.get("ms_per_frame"),
            "run_wall_s": t.get("wall_s"),
            "processing_s": t.get("processing_s"),
            "ms_per_frame_by_stage": t.get("ms_per_frame_by_stage"),
            "device": s.get("device"),
            "mode": s.get("mode"),
            "detector_tiles": s.get("detector_tiles"),
            "ego_motion_failures": s.get("ego_motion_failures"),
            "tracks": s.get("counts", {}).get("tracks"),
            "versions": s.get("versions"),
        },
    )
    return 0


def _table(prof, sort: str, n: int) -> str:
    try:
        return prof.key_averages().table(sort_by=sort, row_limit=n, max_name_column_width=60)
    except (AttributeError, KeyError, ValueError) as exc:  # a sort key this torch version does not know
        return f"(no table sorted by {sort}: {exc})"


def cmd_profile(a) -> int:
    """Where the time goes, cheapest first, the report rewritten after each part (a part cut off by the step's limit
    leaves the earlier ones): the stage timers unprofiled, cProfile (Python time in the loop), then torch.profiler on
    a few frames only (its trace of a frame's thousands of kernels takes long to collect: the first device run spent
    its 90 s there)."""
    import cProfile
    import io
    import pstats

    import torch

    from edge.config import load_settings
    from tracking.pipeline import Pipeline
    from vision.source import open_source

    cuda = a.device == "cuda"
    with open_source(a.folder, max_frames=a.warmup + 2 * a.frames + a.torch_frames) as src:
        frames = list(src)
        info = src.info
    cfg = load_settings(a.config, {}).pipeline.model_copy(update={"device": a.device})
    pipe = Pipeline(cfg)
    pipe.reset(info.width, info.height, info.fps)
    for f in frames[: a.warmup]:
        pipe.step(f)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    sync()
    part1 = frames[a.warmup : a.warmup + a.frames]
    part2 = frames[a.warmup + a.frames : a.warmup + 2 * a.frames] or part1
    part3 = frames[a.warmup + 2 * a.frames :][: a.torch_frames] or part1[: a.torch_frames]
    out: list[str] = [
        f"profile: {a.folder}, {info.width}x{info.height}, device {a.device}, torch {torch.__version__}, "
        f"ego-motion {type(pipe.ego).__module__}"
    ]

    def flush() -> None:
        a.out.write_text("\n".join(out) + "\n")

    before = dict(pipe.timings)
    t0 = time.perf_counter()
    for f in part1:
        pipe.step(f)
    sync()
    plain_ms = 1000 * (time.perf_counter() - t0) / max(len(part1), 1)
    stages = {k: round((v - before.get(k, 0.0)) / max(len(part1), 1), 2) for k, v in pipe.timings.items()}
    out.append(f"unprofiled: {len(part1)} frames, {plain_ms:.1f} ms/frame; pipeline stage timers (ms/frame): {stages}")
    print(out[0], out[-1], sep="\n", flush=True)
    flush()
    row: dict = {
        "step": f"profile_{a.label}",
        "frames": len(part1),
        "ms_per_frame": round(plain_ms, 2),
        "fps": round(1000 / plain_ms, 2),
        "ms_per_frame_by_stage": stages,
    }
    append(a.results, row)

    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    for f in part2:
        pipe.step(f)
    sync()
    pr.disable()
    cprof_ms = 1000 * (time.perf_counter() - t0) / max(len(part2), 1)
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(a.rows)
    out.append(f"\n== cProfile, {len(part2)} further frames ({cprof_ms:.1f} ms/frame under cProfile), by own time ==")
    out.append(buf.getvalue())
    flush()
    print(f"cProfile: {len(part2)} frames, {cprof_ms:.1f} ms/frame under it", flush=True)
    if not cuda or a.torch_frames <= 0:
        return 0

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=False) as prof:
        t0 = time.perf_counter()
        for f in part3:
            pipe.step(f)
        sync()
        prof_ms = 1000 * (time.perf_counter() - t0) / max(len(part3), 1)
    events = prof.key_averages()

    def dev_us(e) -> float:
        return float(getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0)) or 0.0)

    n = max(len(part3), 1)
    kernel_ms = sum(dev_us(e) for e in events) / 1000 / n
    copies = [e for e in events if any(k in e.key.lower() for k in ("memcpy", "memset", "synchronize"))]
    out.append(f"\n== torch.profiler, {len(part3)} further frames ({prof_ms:.1f} ms/frame under it) ==")
    out.append(
        f"device time (sum of self device time of all ops): {kernel_ms:.2f} ms/frame "
        f"= {100 * kernel_ms / max(prof_ms, 1e-9):.1f} % of the frame's wall time"
    )
    out.append("host<->device copies, memsets and synchronisations (count, self device ms total, per frame):")
    for e in sorted(copies, key=dev_us, reverse=True):
        out.append(f"  {e.key[:70]:70s} n={e.count:6d}  {dev_us(e) / 1000:8.2f} ms  {e.count / n:6.1f}/frame")
    flush()
    print("\n".join(out[-2 - len(copies) :]), flush=True)
    append(
        a.results,
        {
            "step": f"profile_{a.label}_torch",
            "frames": len(part3),
            "profiled_ms_per_frame": round(prof_ms, 2),
            "device_busy_pct": round(100 * kernel_ms / max(prof_ms, 1e-9), 1),
            "copies_per_frame": round(sum(e.count for e in copies) / n, 1),
        },
    )
    for name, sort in (("device", "self_device_time_total"), ("host", "self_cpu_time_total")):
        out.append(f"\n== top ops by {name} time ({sort}) ==")
        t = _table(prof, sort, a.rows)
        if t.startswith("(no table") and name == "device":  # torch before 2.4 named it after CUDA
            t = _table(prof, "self_cuda_time_total", a.rows)
        out.append(t)
        flush()
    return 0


def cmd_compare(a) -> int:
    """CUDA tracks scored against the CPU path's tracks of the same frames (CLEAR-MOT, as the accuracy benches)."""
    import numpy as np

    from tracking.evaluation.io import read_mot
    from tracking.evaluation.mot import mot_metrics

    ref, _ = read_mot(a.reference)
    got, _ = read_mot(a.candidate)
    last = min(int(ref.frame.max(initial=0)), int(got.frame.max(initial=0)))
    ref, got = ref.subset(ref.frame <= last), got.subset(got.frame <= last)
    m, _ = mot_metrics(ref, got)
    keys = ("mota", "idf1", "num_switches", "num_false_positives", "num_misses", "motp_iou")
    append(
        a.results,
        {
            "step": a.label,
            "frames": last,
            "reference": str(a.reference),
            "boxes_reference": len(ref),
            "boxes_candidate": len(got),
            "tracks_reference": len(np.unique(ref.ids)),
            "tracks_candidate": len(np.unique(got.ids)),
            **{k: m.get(k) for k in keys},
        },
    )
    return 0


def cmd_summary(a) -> int:
    """The short table at the end of the log: one line per step, then dual / plain fps per clip."""
    rows = (
        [json.loads(line) for line in a.results.read_text().splitlines() if line.strip()] if a.results.exists() else []
    )
    by: dict[str, dict] = {}
    for r in rows:  # a step's shell row (rc, wall, GPU) and its detail row (fps, stages) merge under one name
        by.setdefault(r["step"], {}).update(r)
    print(f"{'step':24s} {'rc':>4s} {'wall s':>7s} {'frames':>6s} {'fps':>8s} {'GPU mean/max %':>15s} {'GPU MiB':>8s}")
    for name, r in by.items():
        gpu = r.get("gpu") or {}
        print(
            f"{name:24s} {str(r.get('rc', '')):>4s} {r.get('wall_s', ''):>7} {str(r.get('frames', '')):>6s} "
            f"{str(r.get('fps', '')):>8s} {str(gpu.get('util_mean', '')) + '/' + str(gpu.get('util_max', '')):>15s} "
            f"{str(gpu.get('mem_max_mib', '')):>8s}"
            + (f"  skipped: {r['skipped']}" if r.get("skipped") else "")
            + (
                f"  MOTA {r['mota']:.3f} IDF1 {r['idf1']:.3f} switches {r['num_switches']} vs the CPU path"
                if r.get("mota") is not None
                else ""
            )
        )
    for path in sorted(a.results.parent.glob("gpu_streams*.json")):  # bench/gpu_streams.py --json, beside the results
        for r in json.loads(path.read_text()).get("rows", []):
            print(
                f"{path.stem}: {r['mode']} {r.get('live') or r.get('ego_backend', '?')} N={r['streams']}: {r['fps_stream']:.2f} fps per "
                f"stream, {r['fps_total']:.2f} total, p95 {r['p95_ms']:.0f} ms, GPU {r['gpu_util']}, {r['gpu_mem']}"
            )
    for name, r in by.items():  # start-up and steady state apart (steady, plain)
        if r.get("steady_fps") is not None:
            print(
                f"{name}: first result {r.get('first_result_s')} s after the process start"
                + (f" (warm-up {r['warm_up_s']} s)" if r.get("warm_up_s") is not None else "")
                + f"; first {r.get('head_frames')} frames {r.get('head_fps_from_start')} fps from the start, "
                f"{r.get('head_fps_from_first_result')} from the first result; steady {r['steady_fps']} fps after "
                f"{r.get('steady_after')} frames (slowest frame {r.get('slowest_ms_steady')} ms; before: "
                f"{r.get('slowest_ms_before_steady')} ms)"
            )
    for clip in ("nadir", "uavdt"):
        dual, plain = by.get(f"process_{clip}", {}), by.get(f"plain_{clip.split('_')[0]}", {})
        for key in ("fps", "run_fps", "head_fps_from_first_result", "steady_fps"):
            if dual.get(key) and plain.get(key if key != "run_fps" else "fps"):
                d, p = dual[key], plain[key if key != "run_fps" else "fps"]
                print(
                    f"{clip} ({key}): airpatrol process {d} fps, plain Ultralytics {p} fps: dual = {100 * d / p:.0f} %"
                )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("frames")
    p.add_argument("clip", type=Path)
    p.add_argument("folder", type=Path)
    p.add_argument("--max-frames", type=int)
    p.add_argument("--quality", type=int, default=95)
    p = sub.add_parser("plain")
    p.add_argument("folder", type=Path)
    p.add_argument("--label", required=True)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--conf", type=float, default=0.1)
    p.add_argument("--head", type=int, help="phases: the first HEAD frames end to end (default: all)")
    p.add_argument("--skip", type=int, default=30, help="phases: steady state after this many frames")
    p.add_argument("--results", type=Path)
    p = sub.add_parser("loop")
    p.add_argument("folder", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--frames", type=int, required=True)
    p = sub.add_parser("steady")
    p.add_argument("folder", type=Path)
    p.add_argument("--label", required=True)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--frames", type=int)
    p.add_argument("--head", type=int, default=177, help="the first HEAD frames end to end (the clip's length)")
    p.add_argument("--skip", type=int, default=30, help="steady state after this many frames")
    p.add_argument("--config", type=Path, help="AirPatrol YAML/JSON config (its pipeline section is used)")
    p.add_argument("--out", type=Path, required=True, help="the run folder")
    p.add_argument("--results", type=Path)
    p = sub.add_parser("record")
    p.add_argument("label")
    p.add_argument("summary", type=Path)
    p.add_argument("--results", type=Path)
    p = sub.add_parser("profile")
    p.add_argument("folder", type=Path)
    p.add_argument("--label", default="nadir")
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--frames", type=int, default=30, help="frames per pass (stage timers, cProfile)")
    p.add_argument("--torch-frames", type=int, default=4, help="frames under torch.profiler (CUDA only; 0: none)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rows", type=int, default=30)
    p.add_argument("--config", type=Path, help="AirPatrol YAML/JSON config (its pipeline section is used)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--results", type=Path)
    p = sub.add_parser("compare")
    p.add_argument("label")
    p.add_argument("reference", type=Path, help="tracks_mot.txt of the CPU run")
    p.add_argument("candidate", type=Path, help="tracks_mot.txt of the CUDA run")
    p.add_argument("--results", type=Path)
    p = sub.add_parser("summary")
    p.add_argument("results", type=Path)
    a = ap.parse_args(argv)
    commands = {"frames": cmd_frames, "plain": cmd_plain, "record": cmd_record, "profile": cmd_profile}
    commands.update(loop=cmd_loop, steady=cmd_steady)
    return {**commands, "compare": cmd_compare, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    raise SystemExit(main())
