//! `scripts/gpu-summary.py`, which turns a `scripts/gpu-validate.sh` log
//! into the table of passed, failed and skipped tests per suite and world
//! size that GPU runs are judged by: each kind of line it must count.

use std::process::Command;

const LOG: &str = "\
=== gpu
placement: world=1: CUDA, 1 GPU rank(s) on devices [0]
PASS peer_writes                  world=1 (0.1 s) ok
SKIPPED (1): world=1: mismatch_same_error needs 2 ranks
FAIL put_wait_ring                world=2 (0.1 s) wrong
=== gpu exited 1
=== gpu_dsl
PASS dsl_collectives              world=2 (0.1 s) ok
=== gpu_dsl exited 124
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
=== examples/all_reduce world=2
=== ok
=== examples/all_reduce world=3
=== examples/all_reduce exited 1
";

const TABLE: &str = "\
| suite | world | passed | failed | skipped |
|---|---|---|---|---|
| all_reduce | 2 | 1 | 1 | 1 |
| emulator_kernels | 2 | 0 | 1 | 0 |
| examples/all_reduce | 2 | 1 | 0 | 0 |
| examples/all_reduce | 3 | 0 | 1 | 0 |
| gpu | 1 | 1 | 0 | 1 |
| gpu | 2 | 0 | 1 | 0 |
| gpu_dsl | - | 0 | 1 | 0 |
| gpu_dsl | 2 | 1 | 0 | 0 |
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
    std::fs::write(&log, "=== gpu\nPASS a world=1 (0.1 s) ok\n").expect("write log");
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
