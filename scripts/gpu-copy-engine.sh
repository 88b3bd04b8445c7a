#!/usr/bin/env bash
# #35's copy-engine path on GPUs: its correctness (one rank per GPU and
# ranks sharing GPUs), then bench_overlap (a compute kernel's slowdown
# beside a 64 MiB all-gather or all-to-all: SM kernel, copy engines, NCCL)
# and bench_collectives --paths (the copy engines' bandwidth beside the
# SM paths and NCCL). Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-libs.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/symm-ce}
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
FINAL_LIMIT=${FINAL_LIMIT:-200} OUT=$OUT scripts/gpu-final.sh \
  "collectives:2,4,8:150:copies_on_the_copy_engines back_to_back mismatches_of_agreed collective_kernels_sample" \
  "functional:2,4:60:calibrated_crossovers copy_engines_where"
# Beside a bf16 GEMM of 8192^3 at three sizes, then beside multiply-adds
# in 64 waves of short blocks at 64 MiB.
for spec in "16777216 gemm" "67108864 gemm" "268435456 gemm" "67108864 fma"; do
  read -r b kind <<< "$spec"
  timeout 120 .gpu-bin/examples/bench_overlap --bytes $b --compute $kind >> "$OUT/overlap.md" 2>> "$OUT/overlap.err"
  echo "bench_overlap $b $kind rc $?" >> "$OUT/overlap.md"
done
[ "${COLL:-1}" = 1 ] || exit 0
timeout 150 .gpu-bin/examples/bench_collectives --worlds 2 --collectives all_gather,all_to_all --paths \
  --sizes 1048576,16777216,67108864,268435456 --csv "$OUT/coll.csv" > "$OUT/coll.md" 2> "$OUT/coll.err"
echo "bench_collectives rc $?" >> "$OUT/coll.md"
