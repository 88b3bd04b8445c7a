#!/usr/bin/env bash
# Runs the prebuilt GPU binaries in .gpu-bin (scripts/build-gpu-bin.sh) on a
# lent GPU machine, writes logs to $OUT, and ends with a table of passed,
# failed and skipped tests per suite and world size ($OUT/summary.md).
#
#   scripts/gpu-validate.sh                 # the whole suite
#   scripts/gpu-validate.sh gpu gpu_dsl     # some binaries
#   SKIP_SUITES="multiprocess" scripts/gpu-validate.sh   # all but some
#
# Each binary (per world size) is stopped after STEP_TIMEOUT seconds (500).
# SYMM_CHECK_ALL=1 bounds-checks the built-in kernels' launches too (their
# launch_unchecked), which proves their indexing in bounds on the GPU.
# World sizes: SYMM_GPU_WORLDS (default 1,2,3,4,8). Where the machine has
# fewer GPUs than ranks, ranks share GPUs (symm::Ranks::gpus), so a one-GPU
# machine runs every world size; SYMM_RANKS_PER_GPU=k forces k per GPU.
# Every test binary runs its full tier (SYMM_TESTS=full), one test at a
# time, once per world; of the tests generated per world size (NAME::world_W),
# only those of that world. Suite names:
#   gpu, gpu_dsl, multiprocess   the GPU tier's binaries (their tests are
#                                #[ignore]d in a plain cargo test: run with --ignored)
#   kernels:NAME                 a kernels test binary (all_reduce, collectives, foundation, graph_safe,
#                                pool, emulator_kernels, functional, subgroups, fused, p2p) on GPU ranks
#                                (SYMM_KERNEL_TESTS_ON=gpu)
#   examples/NAME                an example, once per world (--ranks W)
#   difftest                     the differential tester's corpus, on GPU rank 0 too
#                                (run after the others when no suite is named)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/symm-out}
mkdir -p "$OUT"
# NVRTC (and NCCL) on the library path.
source "$(dirname "$0")/gpu-libs.sh"
export SYMM_CACHE_DIR=/tmp/symm-jit-cache
# The full tier: every case of every test, not the quick tier's sample.
export SYMM_TESTS=full
export SYMM_GPU_WORLDS=${SYMM_GPU_WORLDS:-1,2,3,4,8}
# Ranks that share a GPU need a hardware work queue each (the binaries ask
# for this themselves; set here too, for any binary that starts CUDA early).
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
# One test at a time: collectives of different tests on the same GPUs would
# compete for SMs with spin-waiting kernels and could starve each other
# (NCCL has the same rule for concurrent communicators).
export RUST_TEST_THREADS=1
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  for s in gpu gpu_dsl multiprocess examples/all_reduce kernels:all_reduce kernels:collectives kernels:foundation kernels:emulator_kernels kernels:graph_safe kernels:pool kernels:functional kernels:subgroups kernels:fused kernels:p2p; do
    [[ " ${SKIP_SUITES:-} " == *" $s "* ]] || suites+=("$s")
  done
fi
LOG="$OUT/log.txt"
rc=0
step() { # header, command...
  local header=$1; shift
  echo "=== $header" | tee -a "$LOG"
  timeout "${STEP_TIMEOUT:-500}" "$@" 2>&1 | tee -a "$LOG"
  local r=${PIPESTATUS[0]}
  if [ "$r" != 0 ]; then
    rc=$r
    echo "=== ${header%% *} exited $r" | tee -a "$LOG"
  elif [[ $header == examples/* ]]; then
    echo "=== ok" | tee -a "$LOG"
  fi
}
# Runs a libtest binary once per world size: per_world SUITE BINARY ARGS...
per_world() {
  local suite=$1 bin=$2; shift 2
  # Without --nocapture, so libtest's result lines stay whole; the tests
  # write which world sizes they ran (and the GPU tier what it measured) to
  # SYMM_CASE_LOG instead.
  for w in ${SYMM_GPU_WORLDS//,/ }; do
    # The per-world tests of other world sizes would only pass empty
    # (and count as skipped): leave them out.
    others=()
    for o in 1 2 3 4 5 6 7 8; do
      [ "$o" = "$w" ] || others+=(--skip "::world_$o")
    done
    rm -f "$OUT/cases.txt"
    SYMM_CASE_LOG="$OUT/cases.txt" SYMM_KERNEL_TESTS_ON=gpu SYMM_GPU_WORLDS=$w \
      step "$suite world=$w" "$bin" --test-threads=1 "$@" "${others[@]}"
    [ -f "$OUT/cases.txt" ] && tee -a "$LOG" < "$OUT/cases.txt" && rm -f "$OUT/cases.txt"
  done
}
for s in "${suites[@]}"; do
  case "$s" in
    kernels:*)
      per_world "${s#kernels:}" ".gpu-bin/${s#kernels:}" ;;
    gpu|gpu_dsl|multiprocess)
      # The GPU tier alone: the binary's other tests (compiling its kernels
      # with NVRTC) ran in CI.
      per_world "$s" ".gpu-bin/$s" --ignored ;;
    difftest) ;; # below, after the others
    examples/*)
      for w in ${SYMM_GPU_WORLDS//,/ }; do
        step "$s world=$w" ".gpu-bin/$s" --ranks "$w"
      done ;;
    *)
      echo "unknown suite $s" | tee -a "$LOG"
      rc=2 ;;
  esac
done
# The differential tester's corpus (difftest/): the same random kernels the
# CI checks against their host-compiled CUDA C run here through the CUDA
# backend too (its GPU tier, --include-ignored), and must equal the emulator
# bit for bit. Run by default (name it, `scripts/gpu-validate.sh difftest`,
# to run it alone; SKIP_SUITES=difftest to leave it out). Its binary:
# `cargo test --release --no-run -p symm-difftest`, the `difftest-*`
# executable copied to .gpu-bin/difftest.
if { [ $# -eq 0 ] && [[ " ${SKIP_SUITES:-} " != *" difftest "* ]]; } || [[ " $* " == *" difftest "* ]]; then
  if [ -x .gpu-bin/difftest ]; then
    rm -f "$OUT/cases.txt"
    SYMM_CASE_LOG="$OUT/cases.txt" step "difftest world=1" .gpu-bin/difftest --include-ignored --test-threads=1
    [ -f "$OUT/cases.txt" ] && tee -a "$LOG" < "$OUT/cases.txt" && rm -f "$OUT/cases.txt"
  else
    echo "=== difftest world=1" | tee -a "$LOG"
    echo "SKIPPED (1): .gpu-bin/difftest is missing (cargo test --release --no-run -p symm-difftest)" | tee -a "$LOG"
  fi
fi
python3 "$(dirname "$0")/gpu-summary.py" "$LOG" | tee "$OUT/summary.md"
exit $rc
