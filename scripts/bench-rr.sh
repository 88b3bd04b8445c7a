#!/usr/bin/env bash
# Times several builds of one benchmark round-robin for a fixed time, and
# compares each against a base: for kernel variants whose differences are
# a few hundredths of a µs, which needs tens of rounds (bench/NOTES.md v32).
#   scripts/bench-rr.sh DIR SECONDS BASE "V1 V2 ..." [bench arguments...]
#   scripts/bench-rr.sh .gpu-v-ab 240 N "N F X" --worlds 2 --max-bytes 65536 --paths pull,two_shot
# Runs DIR/<V>/$BIN (default bench_all_reduce) once per variant per round,
# rotating which goes first, until SECONDS have passed; then writes
# $OUT/BASE-vs-V.md (bench/compare.py) for every other variant. Logs and
# CSVs go to $OUT/raw (default bench/out/rr). NVLink multicast stays off.
set -uo pipefail
if [ $# -lt 4 ]; then
  echo "usage: $0 DIR SECONDS BASE \"V1 V2 ...\" [bench arguments...]" >&2
  exit 2
fi
# DIR and OUT as the caller named them, before the cd to the repository.
DIR=$(realpath "$1")
OUT=$(realpath -m "${OUT:-bench/out/rr}")
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# One JIT cache for every round: only the first run of a variant compiles.
export SYMM_CACHE_DIR=${SYMM_CACHE_DIR:-/tmp/symm-rr-cache}
BIN=${BIN:-bench_all_reduce}
SECONDS_=$2 BASE=$3
read -r -a VS <<< "$4"
shift 4
case " ${VS[*]} " in
  *" $BASE "*) ;;
  *) echo "the base $BASE is not among the variants (${VS[*]})" >&2; exit 2 ;;
esac
source scripts/gpu-libs.sh || exit 1
rm -rf "$OUT/raw" "$OUT/cmp"
mkdir -p "$OUT/raw"
start=$(date +%s)
i=0
while [ $(($(date +%s) - start)) -lt "$SECONDS_" ]; do
  i=$((i + 1))
  n=${#VS[@]}
  for k in $(seq 0 $((n - 1))); do
    v=${VS[$(((k + i) % n))]}
    "$DIR/$v/$BIN" "$@" --csv "$OUT/raw/${v}_$i.csv" > "$OUT/raw/${v}_$i.log" 2>&1 || {
      echo "$v run $i failed:"
      tail -5 "$OUT/raw/${v}_$i.log"
      rm -f "$OUT/raw/${v}_$i.csv"
    }
  done
done
echo "$i rounds in $(($(date +%s) - start)) s"
for v in "${VS[@]}"; do
  [ "$v" = "$BASE" ] && continue
  d="$OUT/cmp/$BASE-vs-$v"
  mkdir -p "$d"
  # Only rounds that both finished, so that both sides saw the same drift
  # (compare.py pools each side's runs).
  for f in "$OUT/raw/${BASE}"_*.csv; do
    j=${f##*_}
    j=${j%.csv}
    if [ -f "$OUT/raw/${v}_$j.csv" ]; then
      cp "$f" "$d/old_$j.csv"
      cp "$OUT/raw/${v}_$j.csv" "$d/new_$j.csv"
    fi
  done
  # Both builds must have timed the same way (as bench-ab.sh checks): a
  # build older than a timing flag ignores it and prints no method line.
  base_method=$(grep -h -m1 '^method:' "$OUT/raw/${BASE}"_1.log 2>/dev/null || echo "no method line")
  v_method=$(grep -h -m1 '^method:' "$OUT/raw/${v}"_1.log 2>/dev/null || echo "no method line")
  if [ "$base_method" != "$v_method" ]; then
    echo "WARNING: $BASE and $v timed differently: $base_method / $v_method"
  fi
  python3 bench/compare.py "$d" > "$OUT/$BASE-vs-$v.md"
  echo "== $BASE against $v"
  sed -n '/^| impl | GPUs | change of median/,$p' "$OUT/$BASE-vs-$v.md"
done
