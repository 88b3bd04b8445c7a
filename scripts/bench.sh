#!/usr/bin/env bash
# One command for the all-reduce benchmark: symm and NCCL (Rust, one
# process), then torch symm_mem and dist.all_reduce (torchrun), then one
# table with ratios. Needs GPUs; NVLink multicast stays off.
#   scripts/bench.sh            # worlds 2 and 4
#   WORLDS=2 scripts/bench.sh
#   LEAD_IN=8 scripts/bench.sh  # 8 untimed calls in each graph first (see
#                               # --lead-in in examples/bench_all_reduce.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
WORLDS=${WORLDS:-2,4}
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
BIN=${BENCH_BIN:-}
if [ -z "$BIN" ]; then
  if [ -x .gpu-bin/examples/bench_all_reduce ]; then BIN=.gpu-bin/examples/bench_all_reduce
  else cargo build --release --example bench_all_reduce; BIN=target/release/examples/bench_all_reduce; fi
fi
# NVRTC and NCCL on the library path.
source scripts/gpu-libs.sh
LEAD_IN=${LEAD_IN:-0}
"$BIN" --worlds "$WORLDS" --lead-in "$LEAD_IN" --csv "$OUT/bench_symm.csv" ${BENCH_ARGS:-}
for w in ${WORLDS//,/ }; do
  torchrun --nproc-per-node "$w" bench/torch_all_reduce.py "$OUT/bench_torch_$w.csv" "$LEAD_IN"
done
python3 bench/report.py --lead-in "$LEAD_IN" "$OUT/bench_symm.csv" "$OUT"/bench_torch_*.csv | tee "$OUT/bench_table.md"
