#!/usr/bin/env bash
# One command for the benchmarks, each symm and NCCL (Rust, one process),
# then torch (torchrun), then one table per case with ratios. Needs GPUs;
# NVLink multicast stays off.
#   all_reduce:  examples/bench_all_reduce.rs, bench/torch_all_reduce.py,
#                bench/report.py -> $OUT/bench_table.md
#   collectives: examples/bench_collectives.rs, bench/torch_collectives.py
#                (and its NVSHMEM ops, in a run of their own),
#                bench/report_collectives.py -> $OUT/collectives_table.md
#
#   scripts/bench.sh                  # both, on this machine's GPUs
#   WHAT=collectives scripts/bench.sh # or WHAT=all_reduce
#   WORLDS=2 scripts/bench.sh         # world sizes (default: all_reduce 2,4
#                                     # and collectives 1,2,4,8, those that fit)
#   COLLECTIVES=all_gather,all_to_all scripts/bench.sh  # some collectives
#   MAX_BYTES=1048576 scripts/bench.sh                  # collectives' largest size
#   LEAD_IN=8 scripts/bench.sh        # 8 untimed calls in each graph first (see
#                                     # --lead-in in examples/bench_all_reduce.rs)
#   TORCH_NVSHMEM=0 scripts/bench.sh  # skip torch's NVSHMEM ops
# Binaries: .gpu-bin/examples/ when staged there (scripts/build-gpu-bin.sh),
# else cargo builds them; BENCH_BIN and BENCH_COLL_BIN name them outright.
# BENCH_ARGS go to bench_all_reduce, COLL_ARGS to bench_collectives.
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
WHAT=${WHAT:-all_reduce,collectives}
OUT=${OUT:-bench/out}
LEAD_IN=${LEAD_IN:-0}
mkdir -p "$OUT"

for w in ${WHAT//,/ }; do
  case "$w" in all_reduce|collectives) ;; *) echo "WHAT: unknown '$w' (all_reduce, collectives)" >&2; exit 2 ;; esac
done
wants() { [[ ",$WHAT," == *",$1,"* ]]; }

# The world sizes of a list that this machine's GPUs fit.
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fitting() {
  local out=() w
  for w in ${1//,/ }; do [ "$w" -le "${GPUS:-0}" ] && out+=("$w"); done
  (IFS=,; echo "${out[*]:-}")
}
if [ -z "${WORLDS:-}" ] && [ "${GPUS:-0}" -eq 0 ]; then
  echo "no GPU found (nvidia-smi -L); set WORLDS to run anyway" >&2
  exit 2
fi

# A benchmark binary: staged, or built here.
binary() {
  if [ -x ".gpu-bin/examples/$1" ]; then echo ".gpu-bin/examples/$1"
  else cargo build --release --example "$1" >&2; echo "${CARGO_TARGET_DIR:-target}/release/examples/$1"; fi
}

if wants all_reduce; then
  BIN=${BENCH_BIN:-$(binary bench_all_reduce)}
  AR_WORLDS=${WORLDS:-$(fitting 2,4)}
  AR_WORLDS=${AR_WORLDS:-1}
fi
if wants collectives; then
  COLL_BIN=${BENCH_COLL_BIN:-$(binary bench_collectives)}
  C_WORLDS=${WORLDS:-$(fitting 1,2,4,8)}
fi

# NVRTC and NCCL on the library path.
source scripts/gpu-libs.sh

if wants all_reduce; then
  "$BIN" --worlds "$AR_WORLDS" --lead-in "$LEAD_IN" --csv "$OUT/bench_symm.csv" ${BENCH_ARGS:-}
  rm -f "$OUT"/bench_torch_*.csv
  for w in ${AR_WORLDS//,/ }; do
    torchrun --nproc-per-node "$w" bench/torch_all_reduce.py "$OUT/bench_torch_$w.csv" "$LEAD_IN"
  done
  python3 bench/report.py --lead-in "$LEAD_IN" "$OUT/bench_symm.csv" "$OUT"/bench_torch_*.csv | tee "$OUT/bench_table.md"
fi

if wants collectives; then
  # Earlier runs' CSVs (other worlds) would join the tables.
  rm -f "$OUT"/collectives_*.csv
  PICK=()
  [ -n "${COLLECTIVES:-}" ] && PICK+=(--collectives "$COLLECTIVES")
  [ -n "${MAX_BYTES:-}" ] && PICK+=(--max-bytes "$MAX_BYTES")
  # A world that fails ends with status 1 after the others ran: its rows so
  # far are in the CSV, so torch and the report still run.
  "$COLL_BIN" --worlds "$C_WORLDS" --lead-in "$LEAD_IN" --csv "$OUT/collectives_symm.csv" ${PICK[@]+"${PICK[@]}"} ${COLL_ARGS:-} \
    | tee "$OUT/collectives_symm.md" \
    || echo "bench_collectives failed (see above); the tables hold what it timed"
  for w in ${C_WORLDS//,/ }; do
    torchrun --nproc-per-node "$w" bench/torch_collectives.py "$OUT/collectives_torch_$w.csv" \
      --lead-in "$LEAD_IN" ${PICK[@]+"${PICK[@]}"}
    # NVSHMEM's ops in a process of their own; their failure (no NVSHMEM in
    # this torch, an op that cannot be captured) costs only their columns.
    if [ "${TORCH_NVSHMEM:-1}" != 0 ]; then
      timeout "${NVSHMEM_TIMEOUT:-900}" torchrun --nproc-per-node "$w" bench/torch_collectives.py \
        "$OUT/collectives_nvshmem_$w.csv" --nvshmem --lead-in "$LEAD_IN" ${PICK[@]+"${PICK[@]}"} \
        || echo "torch's NVSHMEM ops at world $w failed (see above); their columns stay empty"
    fi
  done
  python3 bench/report_collectives.py --lead-in "$LEAD_IN" "$OUT"/collectives_*.csv | tee "$OUT/collectives_table.md"
fi
