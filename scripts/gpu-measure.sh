#!/usr/bin/env bash
# The multi-GPU measurement (#21) in steps that each fit one device call
# (600 s): run on a machine of 2 or 4 GPUs with the binaries of
# scripts/build-gpu-bin.sh staged in .gpu-bin, one step per call, logs and
# tables under $OUT/<step>.
#
#   scripts/gpu-measure.sh validate      # every GPU suite at every world that fits
#   scripts/gpu-measure.sh multiprocess  # one process per GPU (symm-run, torchrun)
#   scripts/gpu-measure.sh all_reduce    # scripts/bench.sh, default method
#   scripts/gpu-measure.sh lead_in       # scripts/bench.sh with LEAD_IN=8
#   scripts/gpu-measure.sh collectives   # the collective-set benchmark
#   scripts/gpu-measure.sh functional    # the functional layer's rows
#   scripts/gpu-measure.sh decode 8b     # tp_decode: TP 2 and 4, batch 1 and 8 (8b or 70b)
#
# NVLink multicast stays off in every step (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
export SYMM_CACHE_DIR=${SYMM_CACHE_DIR:-/tmp/symm-jit-cache}
OUT=${OUT:-/tmp/symm-measure}
step=${1:?"a step: validate, multiprocess, all_reduce, lead_in, collectives, functional or decode"}
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${GPUS:-0}" -lt 2 ]; then
  echo "SKIPPED: $step needs 2 or more GPUs; this machine has ${GPUS:-0}" >&2
  exit 2
fi
# World sizes up to the GPU count: one rank per GPU, never shared.
worlds=$(seq -s, 1 "$GPUS")
mkdir -p "$OUT/$step"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/$step/gpus.csv" 2>&1
nvidia-smi topo -m > "$OUT/$step/topo.txt" 2>&1
# shellcheck source=scripts/gpu-libs.sh
source scripts/gpu-libs.sh
case "$step" in
  validate)
    STEP_TIMEOUT=${STEP_TIMEOUT:-200} SYMM_CHECK_ALL=1 SYMM_GPU_WORLDS=$worlds OUT=$OUT/$step \
      scripts/gpu-validate.sh gpu gpu_dsl examples/all_reduce kernels:all_reduce \
      kernels:collectives kernels:foundation kernels:emulator_kernels kernels:graph_safe \
      kernels:pool kernels:functional kernels:subgroups kernels:fused
    ;;
  multiprocess)
    SYMM_GPU_WORLDS=$worlds OUT=$OUT/$step scripts/gpu-validate.sh multiprocess
    ;;
  all_reduce)
    WHAT=all_reduce WORLDS=$worlds OUT=$OUT/$step scripts/bench.sh > "$OUT/$step/log.txt" 2>&1
    ;;
  lead_in)
    LEAD_IN=8 WHAT=all_reduce WORLDS=$worlds OUT=$OUT/$step scripts/bench.sh > "$OUT/$step/log.txt" 2>&1
    ;;
  collectives)
    WHAT=collectives WORLDS=$worlds OUT=$OUT/$step scripts/bench.sh > "$OUT/$step/log.txt" 2>&1
    ;;
  functional)
    .gpu-bin/examples/bench_functional --worlds "$worlds" --sizes 1024,16384,65536,1048576 \
      > "$OUT/$step/table.md" 2> "$OUT/$step/log.txt"
    ;;
  decode)
    # The TP sizes the heads divide: 2, and 4 where it fits.
    tp=2
    [ "$GPUS" -ge 4 ] && tp=2,4
    shape=${2:-8b}
    for batch in 1 8; do
      .gpu-bin/examples/tp_decode --shape "$shape" --layers 4 --batch "$batch" --ctx 2048 \
        --worlds "$tp" > "$OUT/$step/${shape}_b$batch.md" 2>> "$OUT/$step/log.txt"
    done
    ;;
  *)
    echo "unknown step '$step'" >&2
    exit 2
    ;;
esac
