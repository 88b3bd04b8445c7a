#!/usr/bin/env bash
# The GPU checks of #31 (trust) in one call, each step under its own limit:
#   scripts/gpu-trust.sh validate   # the suites #31 touched (VALIDATE_SUITES), worlds SYMM_GPU_WORLDS
#   scripts/gpu-trust.sh ab         # per-call cost: .gpu-old/bench_all_reduce against the new build
#   scripts/gpu-trust.sh failfast   # fail-fast times (FAILFAST lines), worlds FAILFAST_WORLDS
#   scripts/gpu-trust.sh validate@400 ab@150
# Binaries: scripts/build-gpu-bin.sh (.gpu-bin) and, for `ab`, the old
# build's bench_all_reduce in .gpu-old. Each step's log and summary come
# back as $OUT/<step>.*; the rest stays under /tmp/symm-trust (the device
# tool returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
export SYMM_CACHE_DIR=${SYMM_CACHE_DIR:-/tmp/symm-jit-cache}
OUT=${OUT:-/tmp/symm-trust}
WORK=/tmp/symm-trust
mkdir -p "$OUT" "$WORK"
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
rc=0
for spec in "$@"; do
  name=${spec%@*}
  limit=590
  [ "$name" != "$spec" ] && limit=${spec##*@}
  mkdir -p "$WORK/$name"
  echo "=== step $name (limit ${limit}s, $GPUS GPUs)"
  start=$(date +%s)
  case "$name" in
    validate)
      suites=${VALIDATE_SUITES:-"gpu_dsl kernels:fail_fast kernels:emulator_kernels kernels:all_reduce kernels:graph_safe difftest"}
      # shellcheck disable=SC2086
      OUT="$WORK/validate" STEP_TIMEOUT=${STEP_TIMEOUT:-150} timeout "$limit" scripts/gpu-validate.sh $suites > "$WORK/validate/stdout.txt" 2>&1
      r=$?
      cp "$WORK/validate/log.txt" "$OUT/validate.log" 2>/dev/null
      cp "$WORK/validate/summary.md" "$OUT/validate.md" 2>/dev/null
      tail -40 "$OUT/validate.md" 2>/dev/null || tail -20 "$WORK/validate/stdout.txt" ;;
    ab)
      # shellcheck disable=SC2086
      OUT="$WORK/ab" timeout "$limit" scripts/bench-ab.sh .gpu-old/bench_all_reduce .gpu-bin/examples/bench_all_reduce "${AB_RUNS:-2}" \
        --worlds "${AB_WORLDS:-2}" --max-bytes 65536 ${AB_ARGS:-} > "$OUT/ab.txt" 2>&1
      r=$?
      tail -30 "$OUT/ab.txt" ;;
    failfast)
      # The fail-fast tests print their times (FAILFAST lines) to stderr,
      # which libtest shows only with --nocapture.
      (source scripts/gpu-libs.sh
       # The full tier: every world size and case the tests have.
       export SYMM_TESTS=full SYMM_KERNEL_TESTS_ON=gpu SYMM_GPU_WORLDS=${FAILFAST_WORLDS:-2,4,8} RUST_TEST_THREADS=1
       e=0
       timeout "$limit" .gpu-bin/fail_fast --test-threads=1 --nocapture || e=$?
       # The NCCL route's abort (NCCL refuses ranks that share a GPU, so
       # only the worlds this machine has GPUs for run).
       timeout "$limit" .gpu-bin/functional a_failed_rank_aborts_its_peers_nccl_calls --test-threads=1 --nocapture || e=$?
       exit $e) > "$OUT/failfast.txt" 2>&1
      r=$?
      grep -E '^(FAILFAST|SKIPPED|test result)|FAILED|panicked' "$OUT/failfast.txt" | tail -60 ;;
    *) echo "unknown step $name (validate, ab, failfast)"; r=2 ;;
  esac
  echo "=== step $name exited $r after $(( $(date +%s) - start ))s"
  [ "$r" = 0 ] || rc=$r
done
exit $rc
