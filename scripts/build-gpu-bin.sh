#!/usr/bin/env bash
# Builds release test and example binaries and copies them, stripped, into
# .gpu-bin (git-ignored) for the GPU machine, which has no Rust toolchain.
# Every test binary is a libtest one: scripts/gpu-validate.sh runs each at
# its full tier (SYMM_TESTS=full), and the GPU tier's tests with --ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu-bin && mkdir -p .gpu-bin
cargo build --release --examples
cargo build --release -p symm-run
cargo test --release --no-run --message-format=json -p symm -p symm-difftest 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])' \
  | while read -r name exe; do cp "$exe" ".gpu-bin/$name"; done
# Examples in their own folder: `all_reduce` is both a test and an example.
mkdir -p .gpu-bin/examples
for e in target/release/examples/*; do
  [ -f "$e" ] && [ -x "$e" ] && case "$e" in *-*|*.d) ;; *) cp "$e" .gpu-bin/examples/ ;; esac
done
# The launcher, which tests/multiprocess.rs looks for next to itself.
cp target/release/symm-run .gpu-bin/
find .gpu-bin -type f -exec strip {} +
ls -la .gpu-bin
