#!/usr/bin/env bash
# Issue 26: the one prepared GPU call. Run from the repository root on the GPU machine:
#
#   PYTHONUNBUFFERED=1 GPU_RUN_BUDGET_S=300 timeout -k 10 320 bash bench/gpu_device_run.sh [--quick]
#
# Needs (ignored, carried with the call): .whl/ (cp312 wheels of what the GPU image lacks: ultralytics, kornia, lap,
# pydantic, ..., and for `serve` fastapi, starlette, uvicorn, websockets, alembic, mako, argon2-cffi(+bindings, cffi,
# pycparser), python-multipart, itsdangerous, xstatic-leaflet, opentelemetry-api, anyio; PyAV as a stripped tarball
# .whl/av-*-stripped.tar.xz, ~19 MB against the wheel's 34 MiB, so everything fits one call's 64 MiB) and
# .gpuclips/ (nadir_1080p.mp4: the 1080p nadir interchange; uavdt_M1303_300.mp4: 300 frames of UAVDT M1303,
# 1024x540). OpenCV decodes the clips into JPEG folders first and every contender reads those; a longer folder plays
# each clip forward and back (symbolic links) for the steady state. Steps, in order of value, each under `timeout`
# and inside one overall budget (GPU_RUN_BUDGET_S, default 300 s; what it does not reach is skipped), failing soft:
#   a) airpatrol process --device cuda (edge.runner.process_video, each result timed: start-up, the clip's first
#      frames end to end, steady state after 30 frames) and plain Ultralytics track (same weights, ByteTrack, 640,
#      FP16, timed the same way) on the 1080p nadir clip looped to LONG_NADIR_N frames and on UAVDT 1024x540
#   s) airpatrol serve with 1 4 8 live 1080p streams (bench/gpu_streams.py --modes serve): PyAV sends MPEG-TS over
#      TCP where PyAV is installed (--live pyav; the service pulls and decodes it), else JPEG over the push WebSocket
#   c) bench/gpu_streams.py --modes step, 1 4 8 streams (full: 1 2 4 8 16), ego_motion.backend auto (= OpenCV)
#   r) the UAVDT clip through the CPU path, CUDA tracks scored against it (CLEAR-MOT)
#   p) stage timers, cProfile, then torch.profiler on 3 frames, of the pipeline on the 1080p clip
#   t) tests/vision/gpu -k cuda;  b) bench.ego_motion_backends --device cuda (8 streams batched)
#   o) the widest stream count with the torch ego-motion (against c's OpenCV: the 'auto' rule, docs/gpu.md)
#   e) process --batch-size 8 (full mode only)
# GPU utilisation/memory/power/SM clock sampled by nvidia-smi every 200 ms during each step.
# Out ($OUT, default ./gpu_out): log.txt, results.jsonl, gpu_util.csv, gpu_streams*.json, profile.txt.
# On this machine (no GPU, no wheels), small: GPU_RUN_LOCAL=1 GPU_RUN_DEVICE=cpu GPU_RUN_FRAMES=4 GPU_RUN_STREAMS="1 2"
#   GPU_RUN_LONG=12 OUT=/tmp/x bash bench/gpu_device_run.sh --quick
# PyAV tarball (here, once): pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
#   --platform manylinux_2_28_x86_64 -d /tmp/av av==18.1.0; unzip it into /tmp/av/x; strip --strip-unneeded every
#   *.so* there (its Cython modules carry debug info: 31 -> 5.5 MB); tar -C /tmp/av/x -cf - . | xz -9 >
#   .whl/av-18.1.0-stripped.tar.xz
# GPU_RUN_PARTS: which steps, by letter (default all: "a v s c r p t b o e"); two calls on one warm machine split the
# 2-minute flight (a) from the rest, so a failure in one costs only its own call.
set -u
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
DEVICE=${GPU_RUN_DEVICE:-cuda}
BUDGET=${GPU_RUN_BUDGET_S:-300}
WORK=${GPU_RUN_WORK:-/tmp/airpatrol-gpu}
LOG=$OUT/log.txt RES=$OUT/results.jsonl SMI=$OUT/gpu_util.csv
START=$(date +%s)
mkdir -p "$WORK"
exec > >(tee -a "$LOG") 2>&1

export YOLO_OFFLINE=1 YOLO_CONFIG_DIR=$WORK/yolo MPLCONFIGDIR=$WORK/mpl PYTHONUNBUFFERED=1
if [ -z "${GPU_RUN_LOCAL:-}" ] && [ -f "$WORK/site/.installed" ]; then
  echo "== wheels: installed by an earlier call on this machine"
  export PYTHONPATH=$ROOT:$WORK/site
elif [ -z "${GPU_RUN_LOCAL:-}" ]; then
  echo "== install wheels: $(ls .whl/*.whl 2>/dev/null | wc -l) files, $(ls .whl/*.tar.xz 2>/dev/null | wc -l) tarballs"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" .whl/*.whl \
    || echo "!! wheel install failed (steps that need a missing package will fail)"
  for t in .whl/*.tar.xz; do
    [ -e "$t" ] && { tar -xJf "$t" -C "$WORK/site" || echo "!! $t: not unpacked"; }
  done
  touch "$WORK/site/.installed"
  export PYTHONPATH=$ROOT:$WORK/site
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
PY=python3
STEPS="$PY bench/gpu_device_steps.py"
# GPU_RUN_CONFIG: an AirPatrol config for process, profile and gpu_streams (the CPU check forces the torch paths)
CFG=()
[ -n "${GPU_RUN_CONFIG:-}" ] && CFG=(--config "$GPU_RUN_CONFIG")

# frame counts and caps (s) per step
NADIR_CLIP=177 UAVDT_CLIP=300
if [ $QUICK = 1 ]; then
  LONG_NADIR_N=360 LONG_UAVDT_N=300 EGO_N=20 EGO_STREAMS=8 PROF_N=8 PROF_TORCH_N=3 STREAM_N=10 STREAMS="1 4 8"
  SERVE_STREAMS="1 4 8" SERVE_N=100 CPU_N=20 MODE=quick
  CAP_PROC=60 CAP_PLAIN=35 CAP_EGO=40 CAP_STREAMS=60 CAP_SERVE=100 CAP_PROF=45 CAP_OCV=45 CAP_CPU=35
else
  # the 1080p flight: 3000 frames = 2 minutes at the clip's 25 fps (the 177-frame clip played forward and back)
  LONG_NADIR_N=3000 LONG_UAVDT_N=600 EGO_N=60 EGO_STREAMS=8 PROF_N=30 PROF_TORCH_N=3 STREAM_N=30 STREAMS="1 4 8 16"
  SERVE_STREAMS="1 4 8 16" SERVE_N=150 CPU_N=60 MODE=full
  CAP_PROC=360 CAP_PLAIN=120 CAP_EGO=75 CAP_STREAMS=150 CAP_SERVE=240 CAP_PROF=60 CAP_OCV=60 CAP_CPU=60
fi
# smaller still where asked (the CPU check): GPU_RUN_FRAMES caps the short counts, GPU_RUN_LONG the looped runs
if [ -n "${GPU_RUN_FRAMES:-}" ]; then
  for v in NADIR_CLIP UAVDT_CLIP EGO_N PROF_N STREAM_N CPU_N SERVE_N; do
    [ "${!v}" -gt "$GPU_RUN_FRAMES" ] && printf -v "$v" %s "$GPU_RUN_FRAMES"
  done
fi
if [ -n "${GPU_RUN_LONG:-}" ]; then LONG_NADIR_N=$GPU_RUN_LONG LONG_UAVDT_N=$GPU_RUN_LONG; fi
# GPU_RUN_STREAMS (the CPU check): other stream counts for step and serve; the widest also runs with torch
if [ -n "${GPU_RUN_STREAMS:-}" ]; then
  STREAMS=$GPU_RUN_STREAMS SERVE_STREAMS=$GPU_RUN_STREAMS
  EGO_STREAMS=${STREAMS##* }
fi
WIDE=${STREAMS##* }
SKIP=30
[ "$NADIR_CLIP" -le $SKIP ] && SKIP=$((NADIR_CLIP / 2))

echo "== airpatrol GPU run ($MODE), $(date -u +%FT%TZ), device $DEVICE, budget ${BUDGET}s, $(nproc) CPU cores"
git log -1 --oneline 2>/dev/null || true
if command -v nvidia-smi >/dev/null; then nvidia-smi; HAVE_SMI=1; else echo "no nvidia-smi"; HAVE_SMI=0; fi
$PY - <<'EOF' || true
import importlib, sys
print("python", sys.version.split()[0])
for m in ("torch", "torchvision", "ultralytics", "kornia", "cv2", "numpy", "onnxruntime", "pydantic", "lap", "av"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m} {getattr(mod, '__version__', '?')} ({mod.__file__})")
    except Exception as exc:
        print(f"  {m}: not importable ({type(exc).__name__}: {exc})")
import torch
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"  cuda {torch.version.cuda}, cudnn {torch.backends.cudnn.version()}, {p.name}, {p.multi_processor_count} SMs")
EOF

SMI_PID=""
smi_start() {
  [ $HAVE_SMI = 1 ] || return 0
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw,clocks.sm \
    --format=csv,noheader,nounits -lms 200 >"$WORK/smi_$1.csv" 2>/dev/null &
  SMI_PID=$!
}
# prints the step's GPU summary as JSON ("null" without nvidia-smi) and appends its samples to gpu_util.csv
smi_stop() {
  if [ $HAVE_SMI = 0 ] || [ -z "$SMI_PID" ]; then echo null; return 0; fi
  kill "$SMI_PID" 2>/dev/null
  wait "$SMI_PID" 2>/dev/null
  SMI_PID=""
  [ -s "$SMI" ] || echo "step,timestamp,util_pct,mem_mib,power_w,sm_mhz" >"$SMI"
  awk -v s="$1" -F', *' 'NF>=5 {print s","$1","$2","$3","$4","$5}' "$WORK/smi_$1.csv" >>"$SMI"
  # busy mean: from the first sample the GPU was busy on (model loading and imports before it are not the loop)
  awk -F', *' 'NF>=5 && $2 ~ /^[0-9]/ {n++; u+=$2; if ($2>mu) mu=$2; if ($3>mm) mm=$3; if ($2>0) b=1; if (b) {bn++; bu+=$2}}
    END {if (n) printf "{\"samples\":%d,\"util_mean\":%.1f,\"util_busy_mean\":%.1f,\"util_max\":%d,\"mem_max_mib\":%d}",
         n, u/n, (bn ? bu/bn : 0), mu, mm; else printf "null"}' "$WORK/smi_$1.csv"
}

# step NAME CAP_S COMMAND...: run under timeout (the cap or what is left of the budget), fail soft, log a JSON row
step() {
  local name=$1 cap=$2
  shift 2
  local left=$((BUDGET - ($(date +%s) - START)))
  if [ "$left" -lt 20 ]; then
    echo "== $name: skipped, ${left}s of the budget left"
    echo "{\"step\":\"$name\",\"skipped\":\"budget\"}" >>"$RES"
    return 1
  fi
  local limit=$((cap < left - 10 ? cap : left - 10))
  echo
  echo "== $name (limit ${limit}s, $(($(date +%s) - START))s elapsed): $*"
  smi_start "$name"
  local t0 t1 rc gpu
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@"
  rc=$?
  t1=$(date +%s.%N)
  gpu=$(smi_stop "$name")
  [ $rc = 124 ] && echo "!! $name: stopped at its limit (${limit}s)"
  [ $rc != 0 ] && [ $rc != 124 ] && echo "!! $name: exit status $rc"
  local wall
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b-a}')
  echo "{\"step\":\"$name\",\"rc\":$rc,\"wall_s\":$wall,\"limit_s\":$limit,\"gpu\":$gpu}" | tee -a "$RES"
  return $rc
}

PARTS=" ${GPU_RUN_PARTS:-a v s c r p t b o e} "
want() { [[ $PARTS == *" $1 "* ]]; }
echo "== parts:$PARTS"
FR=$WORK/frames
RUNS=$WORK/runs
mkdir -p "$RUNS"
# the frame folders, once per machine (a second call on the same warm machine reuses them)
if [ ! -f "$FR/nadir/seqinfo.ini" ] || [ ! -f "$FR/uavdt/seqinfo.ini" ]; then
  rm -rf "$FR"
  step frames_nadir 60 $STEPS frames .gpuclips/nadir_1080p.mp4 "$FR/nadir" --max-frames "$NADIR_CLIP"
  step frames_uavdt 60 $STEPS frames .gpuclips/uavdt_M1303_300.mp4 "$FR/uavdt" --max-frames "$UAVDT_CLIP"
fi
rm -rf "$FR/nadir_long" "$FR/uavdt_long"
$STEPS loop "$FR/nadir" "$FR/nadir_long" --frames "$LONG_NADIR_N" || true
$STEPS loop "$FR/uavdt" "$FR/uavdt_long" --frames "$LONG_UAVDT_N" || true

# a) end to end and steady state: airpatrol process (its own code path, edge.runner.process_video, = the airpatrol
#    command) and plain Ultralytics, each in its own process, on the same looped frames; the first NADIR_CLIP /
#    UAVDT_CLIP frames are the clip itself (its end-to-end figure), the rest the steady state
want a && for clip in nadir uavdt; do
  head=$NADIR_CLIP
  [ $clip = uavdt ] && head=$UAVDT_CLIP
  step "process_$clip" $CAP_PROC $STEPS steady "$FR/${clip}_long" --label "process_$clip" --device "$DEVICE" \
    --head "$head" --skip $SKIP --out "$RUNS/$clip" --results "$RES" "${CFG[@]}"
  step "plain_$clip" $CAP_PLAIN $STEPS plain "$FR/${clip}_long" --label "$clip" --device "$DEVICE" --frames 100000 \
    --head "$head" --skip $SKIP --results "$RES"
done

# v) the CPU stages in turn against overlapped (pipeline.overlap_stages), interleaved, on the first 400 frames of the
#    1080p flight: the same code, so the difference is the overlap alone
if want v; then
  printf 'pipeline:\n  overlap_stages: false\n' >"$WORK/in_turn.yaml"
  for variant in ${GPU_RUN_VARIANTS:-in_turn overlapped in_turn overlapped}; do
    vcfg=()
    [ $variant = in_turn ] && vcfg=(--config "$WORK/in_turn.yaml")
    step "process_nadir_400_$variant" 60 $STEPS steady "$FR/nadir_long" --label "process_nadir_400_$variant" \
      --device "$DEVICE" --frames 400 --head "$NADIR_CLIP" --skip $SKIP --out "$RUNS/nadir_$variant" --results "$RES" \
      "${vcfg[@]}"
  done
fi

# s) airpatrol serve with live 1080p streams: PyAV (no ffmpeg program there) sends the clip as MPEG-TS over TCP and
#    the service pulls it; without PyAV the clip's JPEG frames go over the push WebSocket
if $PY -c "import av" 2>/dev/null; then LIVE=pyav LIVE_SRC=.gpuclips/nadir_1080p.mp4; else LIVE=push LIVE_SRC=$FR/nadir; fi
# shellcheck disable=SC2086
want s && step gpu_streams_serve $CAP_SERVE $PY bench/gpu_streams.py --video "$LIVE_SRC" --device "$DEVICE" --streams $SERVE_STREAMS \
  --modes serve --live $LIVE --frames "$SERVE_N" --serve-warmup 3 --json "$OUT/gpu_streams_serve.json" "${CFG[@]}"

# c) many streams in one process, shared detector / U-Net passes (step_streams); the frames are preloaded
# shellcheck disable=SC2086
want c && step gpu_streams $CAP_STREAMS $PY bench/gpu_streams.py --video "$FR/nadir_long" --device "$DEVICE" --streams $STREAMS \
  --modes step --frames "$STREAM_N" --warmup 3 --json "$OUT/gpu_streams.json" "${CFG[@]}"

# r) the same UAVDT frames through the CPU path (OpenCV ego-motion; the torch detector, so no ONNX export is needed
#    offline): the CUDA run's tracks scored against these (CLEAR-MOT over the first CPU_N frames)
if want r && [ -f "$RUNS/uavdt/tracks_mot.txt" ] && step cpu_reference_uavdt $CAP_CPU $PY -m edge.cli process "$FR/uavdt" --device cpu --detector-runtime torch \
  --out "$RUNS/uavdt_cpu" --no-video -q --max-frames "$CPU_N"; then
  $STEPS record cpu_reference_uavdt "$RUNS/uavdt_cpu/summary.json" --results "$RES"
  $STEPS compare cuda_vs_cpu_uavdt "$RUNS/uavdt_cpu/tracks_mot.txt" "$RUNS/uavdt/tracks_mot.txt" --results "$RES" || true
fi

# p) where the time goes in the pipeline's step loop: stage timers, cProfile, torch.profiler (device/host ops, copies)
want p && step profile_nadir $CAP_PROF $STEPS profile "$FR/nadir_long" --label nadir --device "$DEVICE" --frames "$PROF_N" \
  --torch-frames "$PROF_TORCH_N" --out "$OUT/profile.txt" --results "$RES" "${CFG[@]}"

# t) the torch backend's CUDA tests (the rest of tests/ runs in CI, without a GPU)
want t && step cuda_tests 30 env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $PY -m pytest -q -p no:cacheprovider tests/vision/gpu -k cuda

# b) ego-motion and motion layer, OpenCV vs torch, on the 1080p clip (reads the MP4 with OpenCV)
want b && step ego_motion $CAP_EGO $PY -m bench.ego_motion_backends --video .gpuclips/nadir_1080p.mp4 --device "$DEVICE" \
  --frames "$EGO_N" --batch 8 --streams "$EGO_STREAMS"

# o) the widest stream count with the torch ego-motion batched over the streams, against c's OpenCV ('auto')
want o && step gpu_streams_torch $CAP_OCV $PY bench/gpu_streams.py --video "$FR/nadir_long" --device "$DEVICE" --streams "$WIDE" \
  --modes step --frames "$STREAM_N" --warmup 3 --ego-backend torch --json "$OUT/gpu_streams_torch.json" "${CFG[@]}"

# e) the shipped GPU knob: frames per detector call
if [ $QUICK = 0 ] && want e && step process_nadir_b8 60 $PY -m edge.cli process "$FR/nadir" --device "$DEVICE" --out "$RUNS/nadir_b8" --no-video -q \
  --max-frames "$NADIR_CLIP" --batch-size 8 "${CFG[@]}"; then
  $STEPS record process_nadir_b8 "$RUNS/nadir_b8/summary.json" --results "$RES"
fi

echo
echo "== summary ($(($(date +%s) - START))s in all)"
$STEPS summary "$RES" || true
exit 0
