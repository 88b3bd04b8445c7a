#!/usr/bin/env bash
# #34's calibration on GPUs: the functional tests of the measured
# crossovers and of both hierarchical forms, the differential tester's
# GPU half, the functional suite, and bench_across --calibrate on
# simulated nodes (NCCL's network transport between them). Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-libs.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/symm-calibrate}
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
FINAL_LIMIT=${FINAL_LIMIT:-420} OUT=$OUT scripts/gpu-final.sh \
  "functional:2,4:120:calibrated_crossovers hierarchical_collectives_in_both_forms hierarchical_thresholds --nocapture" \
  "difftest:1:120:--ignored gpu_matches_the_emulator" \
  "functional:2,4:240"
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
  timeout 120 .gpu-bin/examples/bench_across --nodes 2 --calibrate --max-bytes 4194304 \
  > "$OUT/across.md" 2> "$OUT/across.err"
echo "bench_across rc $?" >> "$OUT/across.md"
grep -E "via NET|nNodes|Using network" "$OUT/across.err" | sort | uniq -c | head -8 >> "$OUT/across.md"
