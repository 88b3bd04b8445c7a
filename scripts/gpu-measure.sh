#!/usr/bin/env bash
# The multi-GPU measurement (#21) in steps: run on a machine of 2 or 4 GPUs
# with the binaries of scripts/build-gpu-bin.sh staged in .gpu-bin. One call
# may take several steps, each stopped after its limit (STEP@SECONDS, else
# STEP_LIMIT, default 590), so that a slow step costs only its own rows; logs
# and tables go under $OUT/<step>.
#
#   scripts/gpu-measure.sh validate      # every GPU suite at every world that fits
#   scripts/gpu-measure.sh multiprocess  # one process per GPU (symm-run, torchrun)
#   scripts/gpu-measure.sh all_reduce    # scripts/bench.sh, default method
#   scripts/gpu-measure.sh lead_in       # scripts/bench.sh with LEAD_IN=8
#   scripts/gpu-measure.sh collectives   # the collective-set benchmark
#   scripts/gpu-measure.sh functional    # the functional layer's rows
#   scripts/gpu-measure.sh decode:8b     # tp_decode: TP 2 and 4, batch 1 and 8 (8b or 70b)
#   scripts/gpu-measure.sh moe           # bench_moe (and --stages), torch's all_to_all_vdev_2d, moe_layer, bench_overlap --moe-tokens
#   scripts/gpu-measure.sh all_reduce@200 lead_in@150 decode:8b@100
#
# Correctness runs every world up to the GPU count (one rank per GPU, never
# shared; VALIDATE_WORLDS, VALIDATE_SUITES narrow it); the benchmarks run
# worlds 2 and 4 where they fit (BENCH_WORLDS).
# NVLink multicast stays off in every step (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
export SYMM_CACHE_DIR=${SYMM_CACHE_DIR:-/tmp/symm-jit-cache}
OUT=${OUT:-/tmp/symm-measure}
usage="steps (each NAME or NAME@SECONDS): validate, multiprocess, all_reduce, lead_in, collectives, functional, decode:8b, decode:70b, moe"
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
# Every step checked before the first one runs.
for spec in "$@"; do
  name=${spec%@*}
  case "$name" in
    validate|multiprocess|all_reduce|lead_in|collectives|functional|decode:8b|decode:70b|moe) ;;
    *) echo "unknown step '$name'; $usage" >&2; exit 2 ;;
  esac
  if [ "$name" != "$spec" ] && ! [[ ${spec##*@} =~ ^[0-9]+$ ]]; then
    echo "step '$spec': the limit after @ must be whole seconds" >&2
    exit 2
  fi
done
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${GPUS:-0}" -lt 2 ]; then
  echo "SKIPPED: $* needs 2 or more GPUs; this machine has ${GPUS:-0}" >&2
  exit 2
fi
# World sizes up to the GPU count: one rank per GPU, never shared.
worlds=$(seq -s, 1 "$GPUS")
bench_worlds=${BENCH_WORLDS:-2}
[ "$GPUS" -ge 4 ] && bench_worlds=${BENCH_WORLDS:-2,4}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
# shellcheck source=scripts/gpu-libs.sh
source scripts/gpu-libs.sh
{ readlink -f /tmp/symm-nccl/libnccl.so; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' 2>&1; } > "$OUT/versions.txt"

# One step (NAME or NAME:ARG), run under its own time limit.
run_step() {
  local step=${1%%:*} arg=${1#*:}
  [ "$arg" = "$1" ] && arg=
  local dir="$OUT/${1//:/_}"
  mkdir -p "$dir"
  case "$step" in
    validate)
      # Every suite but multiprocess (a step of its own), unless narrowed.
      # shellcheck disable=SC2086
      STEP_TIMEOUT=${STEP_TIMEOUT:-200} SYMM_CHECK_ALL=1 SYMM_GPU_WORLDS=${VALIDATE_WORLDS:-$worlds} \
        SKIP_SUITES=multiprocess OUT=$dir scripts/gpu-validate.sh ${VALIDATE_SUITES:-}
      ;;
    multiprocess)
      SYMM_GPU_WORLDS=${VALIDATE_WORLDS:-$worlds} OUT=$dir scripts/gpu-validate.sh multiprocess
      ;;
    all_reduce)
      WHAT=all_reduce WORLDS=$bench_worlds OUT=$dir scripts/bench.sh > "$dir/log.txt" 2>&1
      ;;
    lead_in)
      LEAD_IN=8 WHAT=all_reduce WORLDS=$bench_worlds OUT=$dir scripts/bench.sh > "$dir/log.txt" 2>&1
      ;;
    collectives)
      WHAT=collectives WORLDS=$bench_worlds OUT=$dir scripts/bench.sh > "$dir/log.txt" 2>&1
      ;;
    functional)
      .gpu-bin/examples/bench_functional --worlds "$bench_worlds" --sizes 1024,16384,65536,1048576 \
        > "$dir/table.md" 2> "$dir/log.txt"
      ;;
    moe)
      local rc=0
      for w in ${bench_worlds//,/ }; do
        .gpu-bin/examples/bench_moe --world "$w" > "$dir/world$w.md" 2>> "$dir/log.txt" || rc=$?
        .gpu-bin/examples/bench_moe --world "$w" --stages > "$dir/stages$w.md" 2>> "$dir/log.txt" || rc=$?
        # torch's all_to_all_vdev_2d takes fewer than 16 experts a rank.
        python3 bench/torch_moe.py --world "$w" --experts 16 > "$dir/torch$w.md" 2>> "$dir/log.txt" || rc=$?
        .gpu-bin/examples/bench_moe --world "$w" --experts 16 > "$dir/world${w}_16.md" 2>> "$dir/log.txt" || rc=$?
        .gpu-bin/examples/moe_layer --world "$w" --experts 128 > "$dir/layer$w.md" 2>> "$dir/log.txt" || rc=$?
        # The pull and copy-engine forms beside a GEMM (#36: where the copy
        # engines win).
        .gpu-bin/examples/bench_overlap --world "$w" --moe-tokens 4096 --compute gemm \
          > "$dir/overlap$w.md" 2>> "$dir/log.txt" || rc=$?
      done
      return $rc
      ;;
    decode)
      # TP sizes: the benchmark worlds (the heads divide 2 and 4).
      local shape=${arg:-8b} rc=0
      for batch in 1 8; do
        .gpu-bin/examples/tp_decode --shape "$shape" --layers 4 --batch "$batch" --ctx 2048 \
          --worlds "$bench_worlds" > "$dir/${shape}_b$batch.md" 2>> "$dir/log.txt" || rc=$?
      done
      return $rc
      ;;
  esac
}

rc=0
export -f run_step
for spec in "$@"; do
  s=${spec%@*} limit=${STEP_LIMIT:-590}
  [ "$s" = "$spec" ] || limit=${spec##*@}
  echo "=== $s (limit $limit s) $(date -u +%T)" | tee -a "$OUT/steps.txt"
  start=$SECONDS
  OUT=$OUT GPUS=$GPUS worlds=$worlds bench_worlds=$bench_worlds \
    timeout -k 10 "$limit" bash -uo pipefail -c 'run_step "$1"' _ "$s"
  r=$?
  echo "=== $s exited $r after $((SECONDS - start)) s" | tee -a "$OUT/steps.txt"
  [ $r = 0 ] || rc=$r
done
exit $rc
