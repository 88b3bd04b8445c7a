#!/usr/bin/env bash
# Runs the prebuilt GPU binaries in .gpu-bin on a lent GPU machine and writes
# logs to $OUT. Build them first with scripts/build-gpu-bin.sh.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/symm-out}
mkdir -p "$OUT"
# NVRTC (and NCCL) on the library path.
source "$(dirname "$0")/gpu-libs.sh"
export SYMM_REQUIRE_GPU=1 SYMM_CACHE_DIR=/tmp/symm-jit-cache
# One test at a time: collectives of different tests on the same GPUs would
# compete for SMs with spin-waiting kernels and could starve each other
# (NCCL has the same rule for concurrent communicators).
export RUST_TEST_THREADS=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
rc=0
for bin in "$@"; do
  echo "=== $bin" | tee -a "$OUT/log.txt"
  # --nocapture: a libtest binary would otherwise hide its tests' SKIPPED
  # lines (a world size above the GPU count); the other binaries ignore it.
  timeout 500 ".gpu-bin/$bin" --nocapture 2>&1 | tee -a "$OUT/log.txt"
  r=${PIPESTATUS[0]}; [ "$r" != 0 ] && rc=$r && echo "=== $bin exited $r" | tee -a "$OUT/log.txt"
done
exit $rc
