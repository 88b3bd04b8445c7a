#!/usr/bin/env bash
# The GPU checks of #31 (trust) in one call, each step under its own limit:
#   scripts/gpu-trust.sh validate   # the suites #31 touched (VALIDATE_SUITES), worlds SYMM_GPU_WORLDS
#   scripts/gpu-trust.sh ab         # per-call cost: .gpu-old/bench_all_reduce against the new build
#   scripts/gpu-trust.sh validate@400 ab@150
# Binaries: scripts/build-gpu-bin.sh (.gpu-bin) and, for `ab`, the old
# build's bench_all_reduce in .gpu-old. Logs go under $OUT/<step>.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
export SYMM_CACHE_DIR=${SYMM_CACHE_DIR:-/tmp/symm-jit-cache}
OUT=${OUT:-/tmp/symm-trust}
mkdir -p "$OUT"
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
rc=0
for spec in "$@"; do
  name=${spec%@*}
  limit=590
  [ "$name" != "$spec" ] && limit=${spec##*@}
  mkdir -p "$OUT/$name"
  echo "=== step $name (limit ${limit}s, $GPUS GPUs)"
  start=$(date +%s)
  case "$name" in
    validate)
      suites=${VALIDATE_SUITES:-"gpu_dsl kernels:fail_fast kernels:emulator_kernels kernels:all_reduce kernels:graph_safe difftest"}
      # shellcheck disable=SC2086
      OUT="$OUT/validate" STEP_TIMEOUT=${STEP_TIMEOUT:-150} timeout "$limit" scripts/gpu-validate.sh $suites > "$OUT/validate/stdout.txt" 2>&1
      r=$?
      tail -40 "$OUT/validate/summary.md" 2>/dev/null || tail -20 "$OUT/validate/stdout.txt" ;;
    ab)
      OUT="$OUT/ab" timeout "$limit" scripts/bench-ab.sh .gpu-old/bench_all_reduce .gpu-bin/examples/bench_all_reduce "${AB_RUNS:-2}" \
        --worlds "${AB_WORLDS:-2}" --max-bytes 65536 > "$OUT/ab/stdout.txt" 2>&1
      r=$?
      tail -30 "$OUT/ab/stdout.txt" ;;
    *) echo "unknown step $name (validate, ab)"; r=2 ;;
  esac
  echo "=== step $name exited $r after $(( $(date +%s) - start ))s"
  [ "$r" = 0 ] || rc=$r
done
exit $rc
