//! `symm::check_kernels!` fails, naming the kernel, for a kernel NVRTC
//! rejects, and fails (or, asked to, skips loudly) without NVRTC. Each case
//! runs one of the ignored tests below in a child process of this binary.

use std::process::Command;

use symm::dsl::*;
use symm::symm_kernel;

#[path = "support/targets.rs"]
mod targets;
use targets::nvrtc;

/// A kernel the emulator runs at any `N`, but whose shared array at
/// `N = 1 << 20` (4 MiB) is far over a block's static shared memory (48 KiB):
/// ptxas, inside NVRTC, rejects that instantiation.
#[symm_kernel]
fn staged_copy<const N: usize>(x: &[f32], y: &mut [f32]) {
    let s = shared_array::<f32, N>();
    let t = thread_idx_x();
    s[t] = x[t];
    sync_threads();
    y[t] = s[t];
}

// Run only as children of the tests below.
symm::check_kernels!(
    #[ignore = "a child of a_rejected_kernel_fails_naming_it"]
    fn rejected;
    staged_copy::<256>,
    staged_copy::<{ 1 << 20 }>,
);
symm::check_kernels!(
    #[ignore = "a child of a_missing_nvrtc_fails_unless_skipped"]
    fn one_kernel;
    staged_copy::<256>,
);

/// Runs the ignored test `name` of this binary with `env` set (and CI's
/// NVRTC variables unset unless `env` sets them); returns whether it
/// passed, and its stdout and stderr.
fn child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args(["--ignored", "--exact", name, "--test-threads=1"])
        .env_remove("SYMM_REQUIRE_NVRTC")
        .env_remove("SYMM_SKIP_NVRTC");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the test binary");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("1 passed") || text.contains("1 failed"),
        "{name} did not run:\n{text}"
    );
    (out.status.success(), text)
}

#[test]
fn a_rejected_kernel_fails_naming_it() {
    if !nvrtc("staged_copy") {
        return;
    }
    let (passed, out) = child("rejected", &[]);
    assert!(!passed, "{out}");
    for want in [
        "NVRTC rejected 1 of 2 kernel instantiation(s)",
        "`staged_copy::<{1<<20}>` (sm_90, unchecked (launch_unchecked); also sm_90, checked \
         (launch), sm_80, unchecked (launch_unchecked)):",
        "too much shared data",
    ] {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
    assert!(!out.contains("`staged_copy::<256>`"), "{out}");
}

#[test]
fn a_missing_nvrtc_fails_unless_skipped() {
    let no_nvrtc = [("LD_LIBRARY_PATH", "/nonexistent")];
    let (passed, out) = child("one_kernel", &no_nvrtc);
    if passed {
        // libnvrtc is on the system's own library path: it cannot be hidden.
        use std::io::Write;
        let _ = std::io::stderr().write_all(
            b"SKIPPED: NVRTC loads without LD_LIBRARY_PATH here; a missing NVRTC was not tested\n",
        );
        return;
    }
    for want in [
        "kernel `staged_copy::<256>` (test `one_kernel`) cannot be compiled: NVRTC is not \
         available",
        "pip install",
        "LD_LIBRARY_PATH",
        "set SYMM_SKIP_NVRTC=1 to skip these tests instead",
    ] {
        assert!(out.contains(want), "no {want:?} in:\n{out}");
    }
    let skip = [no_nvrtc[0], ("SYMM_SKIP_NVRTC", "1")];
    let (passed, out) = child("one_kernel", &skip);
    assert!(passed, "{out}");
    assert!(
        out.contains(
            "SKIPPED: NVRTC not found (SYMM_SKIP_NVRTC=1); kernel `staged_copy::<256>` (test \
             `one_kernel`) not compiled with NVRTC"
        ),
        "{out}"
    );
    let ci = [skip[0], skip[1], ("SYMM_REQUIRE_NVRTC", "1")];
    let (passed, out) = child("one_kernel", &ci);
    assert!(!passed, "{out}");
    assert!(
        out.contains("(SYMM_REQUIRE_NVRTC=1 overrides SYMM_SKIP_NVRTC=1)"),
        "{out}"
    );
}

/// The gap `check_kernels!` covers: the emulator runs the instantiation
/// that NVRTC rejects (it runs the Rust body, and has no shared-memory
/// limit).
#[test]
fn the_emulator_runs_what_nvrtc_rejects() {
    use symm::{run, CommOptions, LaunchConfig, Ranks};
    let out = run(Ranks::Emulator(1), CommOptions::default(), |comm| {
        let x = comm.device_buffer_from(&[7.0f32; 32])?;
        let mut y = comm.device_buffer::<f32>(32)?;
        staged_copy::launch::<{ 1 << 20 }>(comm, LaunchConfig::linear(1, 32), &x, &mut y)?;
        y.to_host()
    })
    .unwrap();
    assert_eq!(out, [vec![7.0f32; 32]]);
}
