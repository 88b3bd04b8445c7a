#!/usr/bin/env bash
# #34 on a machine of 2 or more GPUs, binaries of scripts/build-gpu-bin.sh in
# .gpu-bin: groups across simulated nodes (NVLink domains of consecutive
# ranks). Logs and tables go to $OUT.
#   1. NCCL's own log of its transport between the simulated nodes;
#   2. bench_across: symm's hierarchical collectives against flat NCCL,
#      1 KiB-256 MiB, one rank per GPU, every GPU, 2 nodes (ACROSS_CALLS
#      picks the calls), and the deterministic mode's exact reductions;
#   3. the mesh example, one rank per GPU, 256 MiB of gradients;
#   4. the mesh example and the hierarchical tests with 2 ranks per GPU
#      (a domain per GPU, each rail across GPUs): correctness only.
# NCCL's P2P and SHM transports are off (NCCL_P2P_DISABLE=1,
# NCCL_SHM_DISABLE=1) so that it crosses the simulated nodes by its
# network transport, as between real ones; with one rank per GPU and a
# GPU per node it uses nothing else anyway.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-libs.sh
source scripts/gpu-libs.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=32 SYMM_CACHE_DIR=/tmp/jc
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
OUT=${OUT:-/tmp/symm-across}
mkdir -p "$OUT"
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
status=0
step() { # name limit command...
  local name=$1 limit=$2; shift 2
  echo "=== $name (limit ${limit}s): $*" | tee -a "$OUT/steps.log"
  timeout "$limit" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local rc=$?
  echo "=== $name exited $rc" | tee -a "$OUT/steps.log"
  [ "$rc" = 0 ] || status=1
}
step nccl_log 120 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET .gpu-bin/examples/bench_across \
  --nodes 2 --max-bytes 1024 --calls all_reduce
# (NCCL logs to stdout.)
sed 's/^[^ ]* //' "$OUT/nccl_log.out" | grep -E "via NET|via P2P|via SHM|Using network|nNodes" \
  | sort | uniq -c | head -20 > "$OUT/nccl_transport.txt"
rm -f "$OUT/nccl_log.out" "$OUT/nccl_log.err"
[ -z "${SKIP_BENCH:-}" ] && step bench_across "${ACROSS_BENCH_LIMIT:-300}" .gpu-bin/examples/bench_across \
  --nodes 2 --calls "${ACROSS_CALLS:-all_reduce,all_gather,reduce_scatter,broadcast,all_to_all}"
# The deterministic mode's exact reductions against flat NCCL.
[ -z "${SKIP_BENCH:-}" ] && step bench_det "${ACROSS_BENCH_LIMIT:-300}" .gpu-bin/examples/bench_across \
  --nodes 2 --deterministic --calls all_reduce,reduce_scatter
step mesh "${ACROSS_MESH_LIMIT:-120}" .gpu-bin/examples/mesh --nodes 2 --grad-mib 256
step mesh_shared 120 .gpu-bin/examples/mesh --world $((2 * GPUS)) \
  --nodes "$GPUS" --grad-mib 16
step tests_shared 240 env SYMM_GPU_WORLDS=1,2,4,16 SYMM_KERNEL_TESTS_ON=gpu \
  SYMM_TESTS=full .gpu-bin/functional --include-ignored across hierarchical larger --test-threads 1
# One file back per kind: the runner returns a few files only.
for f in "$OUT"/*.out "$OUT"/*.err "$OUT/nccl_transport.txt"; do
  [ -s "$f" ] && { echo "##### $(basename "$f")"; tail -n 200 "$f"; }
done > "$OUT/summary.txt"
cat "$OUT/steps.log"
exit $status
