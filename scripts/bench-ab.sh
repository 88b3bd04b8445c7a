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
# NVRTC and NCCL from the CUDA toolkit or torch's wheels, as scripts/bench.sh finds them.
LIBS=$(python3 -c 'import glob, os, site
print(":".join(sorted({os.path.dirname(f) for b in site.getsitepackages() + ["/usr/local/cuda/lib64"]
    for p in ("nvidia/*/lib/libnccl.so*", "nvidia/*/lib/libnvrtc.so*", "libnvrtc.so*")
    for f in glob.glob(os.path.join(b, p))})))')
mkdir -p /tmp/symm-nccl
for d in ${LIBS//:/ }; do
  [ -e "$d/libnccl.so.2" ] && ln -sf "$d/libnccl.so.2" /tmp/symm-nccl/libnccl.so
done
export LD_LIBRARY_PATH="/tmp/symm-nccl:$LIBS:${LD_LIBRARY_PATH:-}"
for i in $(seq "$RUNS"); do
  for side in old new; do
    bin=$OLD; [ "$side" = new ] && bin=$NEW
    "$bin" "$@" --csv "$OUT/${side}_$i.csv" > "$OUT/${side}_$i.log" 2>&1 \
      || { echo "$side run $i failed:"; tail -5 "$OUT/${side}_$i.log"; exit 1; }
  done
done
python3 bench/compare.py "$OUT" | tee "$OUT/compare.md"
