#!/usr/bin/env bash
# Times two builds of the benchmark alternately (old, new, old, new, ...),
# so that drift in the machine hits both, and prints the change per row.
#   scripts/bench-ab.sh OLD_BIN NEW_BIN [RUNS] [bench arguments...]
#   scripts/bench-ab.sh old/bench_all_reduce .gpu-bin/examples/bench_all_reduce 3 --worlds 2,4 --max-bytes 65536
# Logs and CSVs go to $OUT (default bench/out/ab). NVLink multicast stays off.
set -euo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OLD=$1 NEW=$2
shift 2
RUNS=3
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then RUNS=$1; shift; fi
OUT=${OUT:-bench/out/ab}
mkdir -p "$OUT"
# NVRTC and NCCL on the library path.
source scripts/gpu-libs.sh
# CSVs of an earlier comparison would be counted as runs of this one.
rm -f "$OUT"/old_*.csv "$OUT"/new_*.csv "$OUT"/old_*.log "$OUT"/new_*.log
for i in $(seq "$RUNS"); do
  for side in old new; do
    bin=$OLD; [ "$side" = new ] && bin=$NEW
    "$bin" "$@" --csv "$OUT/${side}_$i.csv" > "$OUT/${side}_$i.log" 2>&1 \
      || { echo "$side run $i failed:"; tail -5 "$OUT/${side}_$i.log"; exit 1; }
  done
done
# Both builds must have timed the same way: a build older than `--lead-in`
# ignores flags it does not know, and prints no method line.
old_method=$(grep -h '^method:' "$OUT/old_1.log" || echo "old: no method line")
new_method=$(grep -h '^method:' "$OUT/new_1.log" || echo "new: no method line")
if [ "$old_method" != "$new_method" ]; then
  echo "WARNING: the two builds timed differently:"
  echo "  old: $old_method"
  echo "  new: $new_method"
fi
python3 bench/compare.py "$OUT" | tee "$OUT/compare.md"
