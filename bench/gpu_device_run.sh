#!/usr/bin/env bash
# Issue 26: the one prepared GPU call. Run from the repository root on the GPU machine:
#
#   PYTHONUNBUFFERED=1 bash bench/gpu_device_run.sh [--quick]
#
# Needs (ignored, carried with the call): .whl/ (cp312 wheels of what the GPU image lacks: ultralytics, kornia, lap,
# pydantic, ...) and .gpuclips/ (nadir_1080p.mp4: the 1080p nadir interchange; uavdt_M1303_300.mp4: 300 frames of
# UAVDT M1303, 1024x540). There is no PyAV on that machine (its wheel is 34 MiB): OpenCV decodes the clips into JPEG
# folders first and every contender reads those. Steps, in order of value, each under `timeout` and inside one
# overall budget (GPU_RUN_BUDGET_S, default 420 s), each failing soft:
#   a) airpatrol process --device cuda and plain Ultralytics track (same weights, ByteTrack, imgsz 640, FP16) on both
#   b) bench.ego_motion_backends --device cuda (8 streams batched)
#   c) bench/gpu_streams.py --modes step, 1 2 4 8 16 streams (quick: 1 4 8), ego_motion.backend auto
#   p) stage timers, cProfile, then torch.profiler on 3 frames, of the pipeline on the 1080p clip
#   t) tests/vision/gpu -k cuda;  r) the UAVDT clip through the CPU path, CUDA tracks scored against it
#   o) 8 streams with the OpenCV ego-motion (against c's torch at 8; 'auto' takes torch from 8 on CUDA)
#   e) process --batch-size 8 (full mode only)
# GPU utilisation/memory/power/SM clock sampled by nvidia-smi every 200 ms during each step.
# Out ($OUT, default ./gpu_out): log.txt, results.jsonl, gpu_util.csv, gpu_streams.json, profile.txt.
# Quick mode, ~200 s in all (wheel install included; what the budget does not reach is skipped, last steps first):
#   PYTHONUNBUFFERED=1 GPU_RUN_BUDGET_S=200 timeout -k 10 215 bash bench/gpu_device_run.sh --quick
# On this machine (no GPU, no wheels), small: GPU_RUN_LOCAL=1 GPU_RUN_DEVICE=cpu GPU_RUN_FRAMES=4 GPU_RUN_STREAMS="1 2"
#   OUT=/tmp/x bash bench/gpu_device_run.sh --quick
set -u
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/gpu_out}
mkdir -p "$OUT"
DEVICE=${GPU_RUN_DEVICE:-cuda}
BUDGET=${GPU_RUN_BUDGET_S:-420}
WORK=${GPU_RUN_WORK:-/tmp/airpatrol-gpu}
LOG=$OUT/log.txt RES=$OUT/results.jsonl SMI=$OUT/gpu_util.csv
START=$(date +%s)
mkdir -p "$WORK"
exec > >(tee -a "$LOG") 2>&1

export YOLO_OFFLINE=1 YOLO_CONFIG_DIR=$WORK/yolo MPLCONFIGDIR=$WORK/mpl PYTHONUNBUFFERED=1
if [ -z "${GPU_RUN_LOCAL:-}" ]; then
  echo "== install wheels: $(ls .whl/*.whl 2>/dev/null | wc -l) files"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" .whl/*.whl \
    || echo "!! wheel install failed (steps that need a missing package will fail)"
  export PYTHONPATH=$ROOT:$WORK/site
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
PY=python3
STEPS="$PY bench/gpu_device_steps.py"
# GPU_RUN_CONFIG: an AirPatrol config for process, profile and gpu_streams (the CPU check forces the torch paths)
CFG=()
[ -n "${GPU_RUN_CONFIG:-}" ] && CFG=(--config "$GPU_RUN_CONFIG")

# caps (s) per step: process, plain, ego, streams, profile, streams with OpenCV, CPU reference
if [ $QUICK = 1 ]; then
  NADIR_N=60 UAVDT_N=90 EGO_N=20 EGO_STREAMS=8 PROF_N=8 PROF_TORCH_N=3 STREAM_N=10 STREAMS="1 4 8" CPU_N=20 MODE=quick
  CAP_PROC=50 CAP_PLAIN=35 CAP_EGO=40 CAP_STREAMS=70 CAP_PROF=45 CAP_OCV=40 CAP_CPU=35
else
  NADIR_N=177 UAVDT_N=300 EGO_N=60 EGO_STREAMS=8 PROF_N=30 PROF_TORCH_N=3 STREAM_N=30 STREAMS="1 2 4 8 16" CPU_N=60
  MODE=full CAP_PROC=90 CAP_PLAIN=60 CAP_EGO=75 CAP_STREAMS=180 CAP_PROF=60 CAP_OCV=60 CAP_CPU=60
fi
# smaller still where asked (the CPU check): GPU_RUN_FRAMES caps every frame count
if [ -n "${GPU_RUN_FRAMES:-}" ]; then
  for v in NADIR_N UAVDT_N EGO_N PROF_N STREAM_N CPU_N; do
    [ "${!v}" -gt "$GPU_RUN_FRAMES" ] && printf -v "$v" %s "$GPU_RUN_FRAMES"
  done
fi
# GPU_RUN_STREAMS (the CPU check): other stream counts; the widest also runs with OpenCV and batches the ego bench
if [ -n "${GPU_RUN_STREAMS:-}" ]; then
  STREAMS=$GPU_RUN_STREAMS
  EGO_STREAMS=${STREAMS##* }
fi
WIDE=${STREAMS##* }
# the 1080p folder also feeds the profile (warm-up 5 + 2 passes + torch.profiler's) and the streams (warm-up 3)
NADIR_FOLDER_N=$(printf '%s\n' "$NADIR_N" $((5 + 2 * PROF_N + PROF_TORCH_N)) $((3 + STREAM_N)) | sort -n | tail -1)

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

FR=$WORK/frames
RUNS=$WORK/runs
rm -rf "$RUNS"
step frames_nadir 60 $STEPS frames .gpuclips/nadir_1080p.mp4 "$FR/nadir" --max-frames "$NADIR_FOLDER_N"
step frames_uavdt 60 $STEPS frames .gpuclips/uavdt_M1303_300.mp4 "$FR/uavdt" --max-frames "$UAVDT_N"

# a) end to end: airpatrol process (the CLI's code path: python3 -m edge.cli = the airpatrol command) and plain
#    Ultralytics on the same frames, each in its own process (model load and CUDA start-up not in the fps)
for clip in nadir uavdt; do
  n=$NADIR_N
  [ $clip = uavdt ] && n=$UAVDT_N
  if step "process_$clip" $CAP_PROC $PY -m edge.cli process "$FR/$clip" --device "$DEVICE" --out "$RUNS/$clip" --no-video -q \
    --max-frames "$n" "${CFG[@]}"; then
    $STEPS record "process_$clip" "$RUNS/$clip/summary.json" --results "$RES"
  fi
  step "plain_$clip" $CAP_PLAIN $STEPS plain "$FR/$clip" --label "$clip" --device "$DEVICE" --frames "$n" --results "$RES"
done

# b) ego-motion and motion layer, OpenCV vs torch, on the 1080p clip (reads the MP4 with OpenCV)
step ego_motion $CAP_EGO $PY -m bench.ego_motion_backends --video .gpuclips/nadir_1080p.mp4 --device "$DEVICE" \
  --frames "$EGO_N" --batch 8 --streams "$EGO_STREAMS"

# c) many streams in one process, shared detector / U-Net passes (step_streams); the frames are preloaded
# shellcheck disable=SC2086
step gpu_streams $CAP_STREAMS $PY bench/gpu_streams.py --video "$FR/nadir" --device "$DEVICE" --streams $STREAMS \
  --modes step --frames "$STREAM_N" --warmup 3 --json "$OUT/gpu_streams.json" "${CFG[@]}"

# p) where the time goes in the pipeline's step loop: stage timers, cProfile, torch.profiler (device/host ops, copies)
step profile_nadir $CAP_PROF $STEPS profile "$FR/nadir" --label nadir --device "$DEVICE" --frames "$PROF_N" \
  --torch-frames "$PROF_TORCH_N" --out "$OUT/profile.txt" --results "$RES" "${CFG[@]}"

# t) the torch backend's CUDA tests (the rest of tests/ runs in CI, without a GPU)
step cuda_tests 30 env PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $PY -m pytest -q -p no:cacheprovider tests/vision/gpu -k cuda

# r) the same UAVDT frames through the CPU path (OpenCV ego-motion; the torch detector, so no ONNX export is needed
#    offline): the CUDA run's tracks scored against these (CLEAR-MOT over the first CPU_N frames)
if step cpu_reference_uavdt $CAP_CPU $PY -m edge.cli process "$FR/uavdt" --device cpu --detector-runtime torch \
  --out "$RUNS/uavdt_cpu" --no-video -q --max-frames "$CPU_N" && [ -f "$RUNS/uavdt/tracks_mot.txt" ]; then
  $STEPS record cpu_reference_uavdt "$RUNS/uavdt_cpu/summary.json" --results "$RES"
  $STEPS compare cuda_vs_cpu_uavdt "$RUNS/uavdt_cpu/tracks_mot.txt" "$RUNS/uavdt/tracks_mot.txt" --results "$RES" || true
fi

# o) the widest stream count (8) with the OpenCV ego-motion in the streams' own threads, against c's batched torch
#    there (the 'auto' rule's open question, docs/gpu.md)
step gpu_streams_opencv $CAP_OCV $PY bench/gpu_streams.py --video "$FR/nadir" --device "$DEVICE" --streams "$WIDE" \
  --modes step --frames "$STREAM_N" --warmup 3 --ego-backend opencv --json "$OUT/gpu_streams_opencv.json" "${CFG[@]}"

# e) the shipped GPU knob: frames per detector call
if [ $QUICK = 0 ] && step process_nadir_b8 60 $PY -m edge.cli process "$FR/nadir" --device "$DEVICE" --out "$RUNS/nadir_b8" --no-video -q \
  --max-frames "$NADIR_N" --batch-size 8 "${CFG[@]}"; then
  $STEPS record process_nadir_b8 "$RUNS/nadir_b8/summary.json" --results "$RES"
fi

echo
echo "== summary ($(($(date +%s) - START))s in all; serve mode not run: it needs PyAV and an ffmpeg binary there)"
$STEPS summary "$RES" || true
exit 0
