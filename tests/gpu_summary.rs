//! `scripts/gpu-summary.py`, which turns a `scripts/gpu-validate.sh` log
//! into the table of passed, failed and skipped tests per suite and world
//! size that GPU runs are judged by: each kind of line it must count.

use std::process::Command;

const LOG: &str = "\
=== gpu world=1
test jit_compile_times::world_1 ... ok
test leaks_1000_cycles::world_1 ... ok
test test_kernels_compile ... ignored
=== gpu exited 0
CASE test=jit_compile_times::world_1 world=1
=== gpu world=2
test frees_while_a_peer_waits::world_2 ... FAILED
=== gpu exited 101
=== multiprocess world=4
test symm_run::world_4 ... SKIPPED: world=4: one process per GPU needs 4 GPUs, this machine has 1
ok
=== gpu_dsl world=2
test dsl_bad_launches::world_2 ... ok
=== gpu_dsl exited 124
CASE test=dsl_bad_launches::world_2 world=2
=== all_reduce world=2
test ran_here ... ok
test no_case_at_this_size ... ok
test broke ... FAILED
test not_run ... ignored
=== all_reduce exited 101
CASE test=ran_here world=2
CASE test=broke world=2
=== emulator_kernels world=2
=== emulator_kernels exited 127
=== difftest world=1
SKIPPED (1): .gpu-bin/difftest is missing
=== examples/all_reduce world=2
=== ok
=== examples/all_reduce world=3
=== examples/all_reduce exited 1
";

const TABLE: &str = "\
| suite | world | passed | failed | skipped |
|---|---|---|---|---|
| all_reduce | 2 | 1 | 1 | 1 |
| difftest | 1 | 0 | 0 | 1 |
| emulator_kernels | 2 | 0 | 1 | 0 |
| examples/all_reduce | 2 | 1 | 0 | 0 |
| examples/all_reduce | 3 | 0 | 1 | 0 |
| gpu | 1 | 1 | 0 | 1 |
| gpu | 2 | 0 | 1 | 0 |
| gpu_dsl | 2 | 1 | 1 | 0 |
| multiprocess | 4 | 0 | 0 | 1 |
";

#[test]
fn the_summary_counts_every_kind_of_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("log.txt");
    std::fs::write(&log, LOG).expect("write log");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gpu-summary.py");
    let out = match Command::new("python3").arg(script).arg(&log).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIPPED: python3 cannot run ({e}); gpu-summary.py was not checked");
            return;
        }
    };
    assert_eq!(String::from_utf8_lossy(&out.stdout), TABLE);
    // Any failure makes the script fail.
    assert_eq!(out.status.code(), Some(1));
    std::fs::write(
        &log,
        "=== gpu world=1\ntest a::world_1 ... ok\nCASE test=a::world_1 world=1\n",
    )
    .expect("write log");
    let ok = Command::new("python3")
        .arg(script)
        .arg(&log)
        .output()
        .expect("python3");
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
}
