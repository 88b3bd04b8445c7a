//! End-to-end tests of the `symm-run` binary, with `sh -c` scripts as ranks.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_symm-run");

/// Runs symm-run with `args` followed by `-- sh -c SCRIPT`, with `DIR` set to
/// `dir` in the environment; returns its output and how long it took.
fn run_sh(args: &[&str], dir: &Path, script: &str) -> (Output, Duration) {
    let start = Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .args(["--", "sh", "-c", script])
        .env("DIR", dir)
        .stdin(Stdio::null())
        .output()
        .expect("run symm-run");
    (out, start.elapsed())
}

/// symm-run's stderr as text.
fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls `cond` every 20 ms for up to `timeout`; returns whether it held.
fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The PID stored in file `name` of `dir`.
fn read_pid(dir: &Path, name: &str) -> i32 {
    let text = fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {text:?}: {e}"))
}

/// Whether `pid` exists and is not a zombie (a zombie no longer runs).
fn running(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Asserts that `pid`, a direct child of symm-run, is gone (reaped), and
/// kills it if not so that a failing test leaves nothing behind.
fn assert_reaped(pid: i32) {
    let gone = kill(Pid::from_raw(pid), None).is_err();
    if !gone {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(
        gone,
        "rank process {pid} still exists after symm-run returned"
    );
}

/// Asserts that `pid`, a grandchild of symm-run, stops running soon (it may
/// linger briefly as a zombie until init reaps it).
fn assert_stops(pid: i32) {
    let stopped = eventually(Duration::from_secs(2), || !running(pid));
    if !stopped {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(stopped, "process {pid} started by a rank survived symm-run");
}

#[test]
fn success_sets_environment_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run_sh(
        &["-n", "3"],
        dir.path(),
        "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT \
         $SYMM_RUN $GROUP_RANK > $DIR/out$RANK",
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));

    let first = fs::read_to_string(dir.path().join("out0")).unwrap();
    let port: u16 = first.split(' ').nth(5).unwrap().parse().unwrap();
    assert!(port > 0);
    for rank in 0..3 {
        let got = fs::read_to_string(dir.path().join(format!("out{rank}"))).unwrap();
        assert_eq!(got, format!("{rank} 3 {rank} 3 127.0.0.1 {port} 1 0\n"));
    }
    assert!(!dir.path().join("out3").exists());
}

#[test]
fn failing_rank_stops_the_others() {
    let dir = tempfile::tempdir().unwrap();
    // Every rank records its shell's PID; ranks other than 2 record their
    // `sleep` too and wait for it. Rank 2 fails once all of them are recorded.
    let script = r#"
        if [ "$RANK" = 2 ]; then
            for r in 0 1 3; do
                while [ ! -s "$DIR/sleep$r" ]; do sleep 0.02; done
            done
            exit 3
        fi
        echo $$ > "$DIR/sh$RANK.tmp" && mv "$DIR/sh$RANK.tmp" "$DIR/sh$RANK"
        sleep 60 &
        echo $! > "$DIR/sleep$RANK.tmp" && mv "$DIR/sleep$RANK.tmp" "$DIR/sleep$RANK"
        wait
    "#;
    let (out, took) = run_sh(&["-n", "4"], dir.path(), script);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "stderr: {err}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(
        err.contains("rank 2 failed (exit code 3); stopping the other ranks"),
        "stderr: {err}"
    );
    for rank in [0, 1, 3] {
        assert_reaped(read_pid(dir.path(), &format!("sh{rank}")));
        assert_stops(read_pid(dir.path(), &format!("sleep{rank}")));
    }
}

#[test]
fn rank_killed_by_signal_gives_128_plus_signal() {
    let dir = tempfile::tempdir().unwrap();
    let (out, took) = run_sh(
        &["-n", "2"],
        dir.path(),
        r#"if [ "$RANK" = 1 ]; then kill -9 $$; fi; exec sleep 60"#,
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(137), "stderr: {err}");
    // Rank 0's `sleep` got SIGTERM and died of it; SIGKILL would take 5 s.
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert!(
        err.contains("rank 1 failed (killed by signal 9"),
        "stderr: {err}"
    );
}

#[test]
fn rank_ignoring_sigterm_is_killed_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0 ignores SIGTERM (and so does its `sleep`, which inherits that);
    // rank 1 fails once rank 0 has set that up.
    let script = r#"
        if [ "$RANK" = 1 ]; then
            while [ ! -s "$DIR/sleep0" ]; do sleep 0.02; done
            exit 5
        fi
        trap '' TERM
        echo $$ > "$DIR/sh0.tmp" && mv "$DIR/sh0.tmp" "$DIR/sh0"
        sleep 60 &
        echo $! > "$DIR/sleep0.tmp" && mv "$DIR/sleep0.tmp" "$DIR/sleep0"
        wait
    "#;
    let (out, took) = run_sh(&["-n", "2", "--grace", "1"], dir.path(), script);
    assert_eq!(out.status.code(), Some(5), "stderr: {}", stderr(&out));
    // SIGTERM could not have stopped rank 0: only SIGKILL, a grace later.
    assert!(took >= Duration::from_secs(1), "took {took:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_reaped(read_pid(dir.path(), "sh0"));
    assert_stops(read_pid(dir.path(), "sleep0"));
}

#[test]
fn sigterm_is_forwarded_once_to_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        trap 'echo got >> "$DIR/got$RANK"; exit 0' TERM
        touch "$DIR/ready$RANK"
        while :; do sleep 0.1; done
    "#;
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .args(["-n", "2", "--", "sh", "-c", script])
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = eventually(Duration::from_secs(10), || {
        (0..2).all(|r| dir.path().join(format!("ready{r}")).exists())
    });
    if !ready {
        let _ = child.kill();
    }
    assert!(ready, "ranks never became ready");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    // symm-run was signalled: 128 + SIGTERM, though the ranks exited 0.
    assert_eq!(out.status.code(), Some(143), "stderr: {err}");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "SIGKILL was needed"
    );
    assert!(err.contains("received SIGTERM"), "stderr: {err}");
    assert!(!err.contains("failed"), "stderr: {err}");
    for rank in 0..2 {
        let got = fs::read_to_string(dir.path().join(format!("got{rank}"))).unwrap();
        assert_eq!(got, "got\n", "rank {rank}");
    }
}

#[test]
fn ranks_start_with_no_signal_blocked() {
    // symm-run's own signal handling must not leak into the ranks.
    let out = Command::new(BIN)
        .args(["-n", "1", "--", "grep", "^SigBlk:", "/proc/self/status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    let mask = line.trim().trim_start_matches("SigBlk:").trim();
    assert_eq!(u64::from_str_radix(mask, 16), Ok(0), "{line}");
}

#[test]
fn missing_or_non_executable_program_exits_127() {
    let dir = tempfile::tempdir().unwrap();
    let not_exec = dir.path().join("not-executable");
    fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let missing = dir.path().join("no-such-program");
    for prog in [&missing, &not_exec] {
        let out = Command::new(BIN)
            .args(["-n", "2", "--"])
            .arg(prog)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(127), "stderr: {err}");
        assert!(
            err.contains(&format!("cannot start `{}`", prog.display())),
            "stderr: {err}"
        );
    }
}

#[test]
fn zero_ranks_is_a_usage_error() {
    let out = Command::new(BIN)
        .args(["-n", "0", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--nproc"), "stderr: {}", stderr(&out));
}

#[test]
fn tag_output_prefixes_every_line_with_the_rank() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run_sh(
        &["-n", "2", "--tag-output"],
        dir.path(),
        "echo one; echo two; printf 'oops' >&2",
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for rank in 0..2 {
        let prefix = format!("[{rank}] ");
        let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with(&prefix)).collect();
        assert_eq!(lines, [format!("{prefix}one"), format!("{prefix}two")]);
    }
    assert_eq!(stdout.lines().count(), 4, "stdout: {stdout}");
    let mut err_lines: Vec<String> = stderr(&out).lines().map(str::to_owned).collect();
    err_lines.sort();
    assert_eq!(err_lines, ["[0] oops", "[1] oops"]);
}

#[test]
fn args_after_the_program_reach_it_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "-n",
            "1",
            "sh",
            "-c",
            r#"printf '%s|' "$@" > "$DIR/args""#,
            "sh",
            "-n",
            "--grace",
        ])
        .env("DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let args = fs::read_to_string(dir.path().join("args")).unwrap();
    assert_eq!(args, "-n|--grace|");
}

#[test]
fn ranks_get_sigterm_when_symm_run_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    // Each rank records its PID and then becomes a long sleep (`exec`, so
    // nothing of the test outlives it).
    let script = r#"
        echo $$ > "$DIR/sh$RANK.tmp" && mv "$DIR/sh$RANK.tmp" "$DIR/sh$RANK"
        exec sleep 60
    "#;
    let mut child = Command::new(BIN)
        .args(["-n", "2", "--", "sh", "-c", script])
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .spawn()
        .expect("start symm-run");
    let recorded = eventually(Duration::from_secs(10), || {
        (0..2).all(|r| dir.path().join(format!("sh{r}")).exists())
    });
    // SIGKILL: symm-run can neither forward it nor clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(recorded, "the ranks never started");
    for rank in 0..2 {
        assert_stops(read_pid(dir.path(), &format!("sh{rank}")));
    }
}

/// Runs `-n 3` ranks that each write their `SYMM_STORE_TOKEN` to a file,
/// with `token` (if any) in symm-run's environment; returns the three.
fn tokens_of_a_run(token: Option<&str>) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["-n", "3", "--", "sh", "-c"])
        .arg("printf '%s' \"${SYMM_STORE_TOKEN-unset}\" > $DIR/token$RANK")
        .env("DIR", dir.path())
        .env_remove("SYMM_STORE_TOKEN")
        .stdin(Stdio::null());
    if let Some(t) = token {
        cmd.env("SYMM_STORE_TOKEN", t);
    }
    let out = cmd.output().expect("run symm-run");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    (0..3)
        .map(|r| fs::read_to_string(dir.path().join(format!("token{r}"))).unwrap())
        .collect()
}

#[test]
fn ranks_share_a_fresh_random_store_token() {
    let first = tokens_of_a_run(None);
    // Every rank holds the same token: 128 random bits in hex.
    assert!(first.iter().all(|t| *t == first[0]), "{first:?}");
    let token = &first[0];
    assert_eq!(token.len(), 32, "{token:?}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token:?}");
    // A fresh one for every job.
    let second = tokens_of_a_run(None);
    assert!(second.iter().all(|t| *t == second[0]), "{second:?}");
    assert_ne!(second[0], *token);
    // One the user set is passed on unchanged; an empty one counts as none.
    assert_eq!(tokens_of_a_run(Some("mine")), ["mine"; 3]);
    let drawn = tokens_of_a_run(Some(""));
    assert_eq!(drawn[0].len(), 32, "{drawn:?}");
}

/// `--nnodes M --node-rank R`: this host's ranks are `R × N .. (R + 1) × N`
/// of `M × N`, with their local ranks and `GROUP_RANK` R, and the token and
/// port the job gave every host.
#[test]
fn a_node_of_several_starts_its_slice_of_the_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "--nnodes",
            "3",
            "--node-rank",
            "1",
            "--master-port",
            "29999",
        ])
        .args(["--master-addr", "10.0.0.7", "-n", "2", "--tag-output"])
        .args(["--", "sh", "-c"])
        .arg(
            "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR \
             $MASTER_PORT $SYMM_STORE_TOKEN > $DIR/out$RANK; echo hello",
        )
        .env("DIR", dir.path())
        .env("SYMM_STORE_TOKEN", "0123abcd")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    for (rank, local) in [(2, 0), (3, 1)] {
        let got = fs::read_to_string(dir.path().join(format!("out{rank}"))).unwrap();
        assert_eq!(
            got,
            format!("{rank} 6 {local} 2 1 10.0.0.7 29999 0123abcd\n")
        );
    }
    assert!(!dir.path().join("out0").exists() && !dir.path().join("out4").exists());
    // Output is tagged with the job's rank.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("[2] hello") && stdout.contains("[3] hello"),
        "{stdout}"
    );
}

/// What several hosts cannot choose alone is a usage error (2), said
/// before any rank starts: a node rank out of range, no port, no shared
/// token.
#[test]
fn a_node_of_several_needs_a_port_a_token_and_its_rank_in_range() {
    let run = |args: &[&str], token: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(args).args(["-n", "1", "--", "true"]);
        cmd.env_remove("SYMM_STORE_TOKEN");
        if token {
            cmd.env("SYMM_STORE_TOKEN", "0123abcd");
        }
        cmd.output().unwrap()
    };
    for (args, token, needle) in [
        (
            &["--nnodes", "2", "--node-rank", "2", "--master-port", "1"][..],
            true,
            "--node-rank 2 is out of range",
        ),
        (
            &["--nnodes", "2", "--node-rank", "1", "--master-addr", "h"][..],
            true,
            "needs --master-port",
        ),
        (
            &["--nnodes", "2", "--master-port", "1"][..],
            true,
            "needs --master-addr",
        ),
        (
            &["--nnodes", "2", "--master-port", "1", "--master-addr", "h"][..],
            false,
            "needs SYMM_STORE_TOKEN",
        ),
        (
            &["--node-rank", "1"][..],
            true,
            "out of range for --nnodes 1",
        ),
    ] {
        let out = run(args, token);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}
