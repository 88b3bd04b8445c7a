#!/usr/bin/env bash
# One short GPU pass over what a change touched, each binary under its own
# limit, the whole under FINAL_LIMIT seconds; the log goes to $OUT/final.log.
#   scripts/gpu-final.sh "functional:1,2:60:root_calls point_to_point_from" "subgroups:4:50" ...
# Each argument is binary:worlds:limit[:filters].
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-libs.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=32 SYMM_CACHE_DIR=/tmp/jc SYMM_KERNEL_TESTS_ON=gpu SYMM_TESTS=full
OUT=${OUT:-/tmp/symm-final}
mkdir -p "$OUT"
log="$OUT/final.log"
end=$(( $(date +%s) + ${FINAL_LIMIT:-300} ))
status=0
for spec in "$@"; do
  IFS=: read -r bin worlds limit filters <<< "$spec"
  left=$(( end - $(date +%s) ))
  [ "$left" -le 5 ] && { echo "=== $bin: NOT RUN (time)" | tee -a "$log"; status=1; continue; }
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $bin worlds $worlds limit ${limit}s ${filters:-}" >> "$log"
  # This binary's own section of the log, for its summary line (one cut
  # off by its limit has no result line of its own).
  from=$(( $(wc -l < "$log") + 1 ))
  # shellcheck disable=SC2086
  SYMM_GPU_WORLDS=$worlds timeout "$limit" ".gpu-bin/$bin" ${filters:-} --test-threads 1 >> "$log" 2>&1
  rc=$?
  echo "=== $bin exited $rc" >> "$log"
  [ "$rc" = 0 ] || status=1
  result=$(tail -n +"$from" "$log" | grep -E '^test result' | tail -1)
  printf '%-14s worlds %-5s rc %3s  %s\n' "$bin" "$worlds" "$rc" "${result:-no result (cut off?)}"
done
grep -E 'panicked|FAILED|SKIPPED' "$log" | grep -v "^test .* ok$" | cut -c1-300 | sort | uniq -c | sort -rn | head -30 || true
# Non-zero when a binary failed or was cut off (not when nothing was listed).
exit $status
