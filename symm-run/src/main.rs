//! `symm-run`: launch one process per GPU for a symm program, torchrun-style.
//!
//! ```text
//! symm-run -n 4 -- ./my-prog --its-flags
//! symm-run -n 8 --master-port 29500 --tag-output -- ./my-prog
//! ```
//!
//! `symm-run` starts `N` copies of the program on this host and supervises
//! them until they have all exited.
//!
//! On several hosts, as torchrun: run `symm-run --nnodes M --node-rank R
//! --master-addr H --master-port P -n N prog` on each host `R` of `0..M`,
//! with the same `SYMM_STORE_TOKEN` (a secret of the job's) in every
//! host's environment. Host `R` starts ranks `R × N .. (R + 1) × N` of
//! `M × N`; rank 0, on host 0, hosts the group's store at `H:P`, which
//! every host must reach.
//!
//! # Environment of each rank
//!
//! | variable           | value                                                 |
//! |--------------------|-------------------------------------------------------|
//! | `RANK`             | the rank, `node_rank × N + local rank`                |
//! | `WORLD_SIZE`       | `nnodes × N`                                          |
//! | `LOCAL_RANK`       | the rank on this host, `0..N`                         |
//! | `LOCAL_WORLD_SIZE` | `N`                                                   |
//! | `GROUP_RANK`       | `--node-rank` (this host's index), default `0`        |
//! | `MASTER_ADDR`      | `--master-addr`, default `127.0.0.1`                  |
//! | `MASTER_PORT`      | `--master-port`, default (one host only) a port that was free at start |
//! | `SYMM_STORE_TOKEN` | a random token for this job (32 hex digits), unless already set |
//! | `SYMM_RUN`         | `1`                                                   |
//!
//! Every rank presents `SYMM_STORE_TOKEN` to the store rank 0 hosts, which
//! refuses clients without it, so that nobody else who reaches the port can
//! read or forge the rendezvous records. On one host symm-run draws a fresh
//! one from the OS's random source for every job; a `SYMM_STORE_TOKEN`
//! already in symm-run's environment is passed on unchanged instead. With
//! `--nnodes` above 1 it must be in the environment (the hosts cannot draw
//! the same one), and so must `--master-port`.
//!
//! The rest of the environment is inherited. Without `--tag-output` the ranks
//! share symm-run's stdin, stdout and stderr; with it, every line a rank writes
//! to stdout or stderr is copied to the same stream of symm-run prefixed with
//! `[RANK] `.
//!
//! # Stopping and signals
//!
//! Each rank runs in a process group of its own, so a Ctrl-C typed at the
//! terminal reaches symm-run only, and symm-run alone decides who gets what:
//! every signal it sends to a rank goes to that rank's process group (the rank
//! and anything it started that stayed in its group), exactly once.
//!
//! * SIGINT, SIGTERM and SIGHUP received by symm-run are forwarded to every
//!   rank still running.
//! * When the first rank fails (non-zero exit code, or killed by a signal),
//!   symm-run reports it on stderr and sends SIGTERM to the other ranks.
//! * Either way, ranks still running `--grace` seconds (default 5) later get
//!   SIGKILL. symm-run reaps every rank before it exits.
//! * If symm-run itself dies, even by SIGKILL (which it cannot forward),
//!   every rank gets SIGTERM (Linux's parent-death signal), so no rank goes
//!   on holding its GPU with no one to stop it.
//!
//! A consequence of the separate process groups: a rank reading stdin from the
//! terminal is stopped by the terminal (SIGTTIN). Ranks should not read the
//! terminal; redirect stdin from a file if they need input.
//!
//! # Exit status
//!
//! Decided by whichever comes first:
//!
//! * every rank exits 0: `0`;
//! * the first rank to fail: its exit code, or `128 + S` if it was killed by
//!   signal `S` (e.g. `137` for SIGKILL);
//! * symm-run received SIGINT, SIGTERM or SIGHUP: `128 + S` (130, 143, 129),
//!   as a shell reports a process killed by that signal, even when the ranks
//!   then exit 0 in response to the forwarded signal;
//! * the program could not be started for some rank: `127`;
//! * symm-run itself could not work (e.g. no free port): `1`; a command-line
//!   error: `2`.

#![warn(missing_docs)]

use std::ffi::{c_int, OsString};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::Pid;
use rand::TryRngCore;
use signal_hook::iterator::Signals;

/// Signals that symm-run forwards to the ranks.
const FORWARDED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// How long to wait, once every rank is reaped, for `--tag-output` to copy the
/// last lines (a pipe stays open while a rank's leftover child holds it).
const OUTPUT_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Exit status when the program cannot be started, as in a shell.
const EXIT_SPAWN_FAILED: i32 = 127;

/// Exit status for a command line that cannot run (as clap's own errors).
const EXIT_USAGE: i32 = 2;

/// The variable through which every rank gets the store's token.
const TOKEN_VAR: &str = "SYMM_STORE_TOKEN";

/// Prints a line to stderr, ignoring write errors (stderr may be a closed
/// terminal after SIGHUP; `eprintln!` would panic).
macro_rules! note {
    ($($arg:tt)*) => {{
        let _ = writeln!(io::stderr(), "symm-run: {}", format_args!($($arg)*));
    }};
}

/// Command line of symm-run.
#[derive(Parser, Debug)]
#[command(
    version,
    about = "Launch one process per GPU for a symm program, torchrun-style",
    override_usage = "symm-run [OPTIONS] -n <N> [--] <PROGRAM> [ARGS]...",
    after_help = "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK \
                  (--node-rank), MASTER_ADDR, MASTER_PORT, SYMM_STORE_TOKEN (random per job, \
                  unless already set; required, the same on every host, with --nnodes > 1) and \
                  SYMM_RUN=1 in its environment.\n\
                  Exit status: 0 if every rank exits 0; else the first failing rank's exit code \
                  (128+S if killed by signal S); 128+S if symm-run got signal S; 127 if the \
                  program cannot be started."
)]
struct Cli {
    /// Number of ranks (processes) to launch on this host, normally one
    /// per GPU.
    #[arg(short = 'n', long = "nproc", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    nproc: u32,

    /// Number of hosts of the job, each running symm-run with the same
    /// flags but its own --node-rank.
    #[arg(long, value_name = "M", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    nnodes: u32,

    /// This host's index, 0..M; exported as GROUP_RANK.
    #[arg(long, value_name = "R", default_value_t = 0)]
    node_rank: u32,

    /// Address of the rendezvous host (node 0), exported as MASTER_ADDR
    /// [default with one node: 127.0.0.1; required with several]
    #[arg(long, value_name = "ADDR")]
    master_addr: Option<String>,

    /// Port exported as MASTER_PORT [default: a free port of 127.0.0.1]
    #[arg(long, value_name = "PORT")]
    master_port: Option<u16>,

    /// Seconds between SIGTERM and SIGKILL when stopping ranks.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    grace: u64,

    /// Prefix every line a rank writes to stdout/stderr with `[RANK] `.
    #[arg(long)]
    tag_output: bool,

    /// The program to run as every rank.
    #[arg(value_name = "PROGRAM", required = true)]
    program: OsString,

    /// Arguments passed to the program.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    args: Vec<OsString>,
}

/// One launched rank, shared by the thread that waits for it and the main
/// thread that signals it.
struct Rank {
    /// The rank number.
    rank: u32,
    /// The child's PID, which is also its process group ID.
    pid: Pid,
    /// The child until it is reaped, `None` after. Reaping happens with this
    /// lock held, so a PID signalled under it cannot have been recycled.
    child: Mutex<Option<Child>>,
}

impl Rank {
    /// Locks the child slot, tolerating a poisoned lock.
    fn slot(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `sig` to the rank's process group, if the rank is not yet reaped.
    fn signal(&self, sig: Signal) {
        let slot = self.slot();
        if slot.is_some() {
            // ESRCH can only mean the group just emptied; nothing to do then.
            let _ = killpg(self.pid, sig);
        }
    }
}

/// What the main thread is told about.
enum Event {
    /// A rank exited and has been reaped.
    Exited {
        /// Which rank.
        rank: u32,
        /// Its status, or why it could not be read.
        status: io::Result<ExitStatus>,
    },
    /// symm-run received one of [`FORWARDED`].
    Signal(Signal),
}

/// How a rank failed.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// Exited with this non-zero code.
    Code(i32),
    /// Killed by this signal number.
    Killed(i32),
    /// Its status could not be read.
    Unknown,
}

impl Failure {
    /// The failure in `status`, `None` for a clean exit.
    fn of(status: &io::Result<ExitStatus>) -> Option<Failure> {
        match status {
            Ok(s) if s.success() => None,
            Ok(s) => match (s.code(), s.signal()) {
                (Some(code), _) => Some(Failure::Code(code)),
                (None, Some(sig)) => Some(Failure::Killed(sig)),
                (None, None) => Some(Failure::Unknown),
            },
            Err(_) => Some(Failure::Unknown),
        }
    }

    /// symm-run's exit status for this failure.
    fn exit_code(self) -> i32 {
        match self {
            Failure::Code(code) => code,
            Failure::Killed(sig) => 128 + sig,
            Failure::Unknown => 1,
        }
    }

    /// Human-readable description for the failure message.
    fn describe(self) -> String {
        match self {
            Failure::Code(code) => format!("exit code {code}"),
            Failure::Killed(sig) => match Signal::try_from(sig) {
                Ok(name) => format!("killed by signal {sig} ({name})"),
                Err(_) => format!("killed by signal {sig}"),
            },
            Failure::Unknown => "status unknown".to_owned(),
        }
    }
}

/// Why symm-run is stopping the ranks; the first one decides the exit status.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// A rank failed.
    RankFailed(Failure),
    /// symm-run received a signal.
    Signalled(Signal),
    /// The program could not be spawned.
    SpawnFailed,
}

impl Outcome {
    /// symm-run's exit status for this outcome.
    fn exit_code(self) -> i32 {
        match self {
            Outcome::RankFailed(failure) => failure.exit_code(),
            Outcome::Signalled(sig) => 128 + sig as i32,
            Outcome::SpawnFailed => EXIT_SPAWN_FAILED,
        }
    }
}

/// The ranks and the state of their shutdown.
struct Supervisor {
    /// Every rank launched so far.
    ranks: Vec<Arc<Rank>>,
    /// The first reason to stop, if any.
    outcome: Option<Outcome>,
    /// When to send SIGKILL to the ranks still running.
    kill_at: Option<Instant>,
    /// Whether SIGKILL was sent already.
    killed: bool,
    /// Time between SIGTERM (or a forwarded signal) and SIGKILL.
    grace: Duration,
}

impl Supervisor {
    /// Sends `sig` to every rank not yet reaped.
    fn signal_all(&self, sig: Signal) {
        for rank in &self.ranks {
            rank.signal(sig);
        }
    }

    /// Records `outcome` if it is the first, and starts the SIGKILL countdown.
    fn stopping(&mut self, outcome: Outcome) {
        self.outcome.get_or_insert(outcome);
        if !self.killed && self.kill_at.is_none() {
            // A grace too long to represent means "never SIGKILL".
            self.kill_at = Instant::now().checked_add(self.grace);
            self.killed |= self.kill_at.is_none();
        }
    }

    /// Handles one event; returns whether it was a rank exiting.
    fn handle(&mut self, event: Event) -> bool {
        match event {
            Event::Signal(sig) => {
                note!("received {sig}; forwarding it to the ranks");
                self.signal_all(sig);
                self.stopping(Outcome::Signalled(sig));
                false
            }
            Event::Exited { rank, status } => {
                if let Err(e) = &status {
                    note!("cannot read the exit status of rank {rank}: {e}");
                }
                if let Some(failure) = Failure::of(&status) {
                    if self.outcome.is_none() {
                        note!(
                            "rank {rank} failed ({}); stopping the other ranks",
                            failure.describe()
                        );
                        self.signal_all(Signal::SIGTERM);
                        self.stopping(Outcome::RankFailed(failure));
                    }
                }
                true
            }
        }
    }

    /// Sends SIGKILL to every rank still running.
    fn kill_all(&mut self) {
        self.signal_all(Signal::SIGKILL);
        self.killed = true;
        self.kill_at = None;
    }
}

fn main() {
    let cli = Cli::parse();
    std::process::exit(run(&cli));
}

/// Launches and supervises the ranks; returns symm-run's exit status.
fn run(cli: &Cli) -> i32 {
    // First, so that signals arriving while ranks start are forwarded too.
    let (tx, rx) = mpsc::channel();
    if let Err(e) = receive_signals(tx.clone()) {
        note!("cannot set up signal handling: {e}");
        return 1;
    }
    // An empty token counts as none, as `store_token` reads it.
    let has_token = std::env::var_os(TOKEN_VAR).is_some_and(|t| !t.is_empty());
    if let Err(e) = check_nodes(cli, has_token) {
        note!("{e}");
        return EXIT_USAGE;
    }
    let token = match store_token() {
        Ok(token) => token,
        Err(e) => {
            note!("cannot draw a random {TOKEN_VAR}: {e}");
            return 1;
        }
    };
    let port = match cli.master_port {
        Some(port) => port,
        None => match free_port() {
            Ok(port) => port,
            Err(e) => {
                note!("cannot find a free port for MASTER_PORT: {e}");
                return 1;
            }
        },
    };

    let mut sup = Supervisor {
        ranks: Vec::new(),
        outcome: None,
        kill_at: None,
        killed: false,
        grace: Duration::from_secs(cli.grace),
    };
    let (done_tx, done_rx) = mpsc::channel();
    let mut pumps = 0;
    for local in 0..cli.nproc {
        // Messages and tags name the job's rank.
        let rank = cli.node_rank * cli.nproc + local;
        let mut child = match spawn_rank(cli, local, port, &token) {
            Ok(child) => child,
            Err(e) => {
                note!(
                    "cannot start `{}` for rank {rank}: {e}",
                    cli.program.to_string_lossy()
                );
                sup.signal_all(Signal::SIGTERM);
                sup.stopping(Outcome::SpawnFailed);
                break;
            }
        };
        if let Some(out) = child.stdout.take() {
            pumps += 1;
            let done = done_tx.clone();
            thread::spawn(move || pump(rank, out, io::stdout, done));
        }
        if let Some(err) = child.stderr.take() {
            pumps += 1;
            let done = done_tx.clone();
            thread::spawn(move || pump(rank, err, io::stderr, done));
        }
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("PIDs fit in pid_t"));
        let slot = Arc::new(Rank {
            rank,
            pid,
            child: Mutex::new(Some(child)),
        });
        let waiter = (Arc::clone(&slot), tx.clone());
        thread::spawn(move || wait_for(waiter.0, waiter.1));
        sup.ranks.push(slot);
    }
    drop(done_tx);

    let mut running = sup.ranks.len();
    while running > 0 {
        let event = match sup.kill_at {
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(event) => event,
                Err(RecvTimeoutError::Timeout) => {
                    sup.kill_all();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(event) => event,
                Err(_) => break,
            },
        };
        if sup.handle(event) {
            running -= 1;
        }
    }

    let drained_by = Instant::now() + OUTPUT_DRAIN_TIMEOUT;
    for _ in 0..pumps {
        let left = drained_by.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    sup.outcome.map_or(0, Outcome::exit_code)
}

/// Starts a thread that receives [`FORWARDED`] and sends them on `tx`.
///
/// signal-hook's handler only writes to a pipe that the thread reads, and
/// exec resets handled signals to their default, so ranks are unaffected.
/// (Blocking the signals and `sigwait`ing would not do: std's `Command` does
/// not reset the signal mask, so the ranks would inherit it.)
fn receive_signals(tx: Sender<Event>) -> io::Result<()> {
    let mut signals = Signals::new(FORWARDED.map(|sig| sig as c_int))?;
    thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || {
            for sig in signals.forever() {
                let Ok(sig) = Signal::try_from(sig) else {
                    continue;
                };
                if tx.send(Event::Signal(sig)).is_err() {
                    break;
                }
            }
        })?;
    Ok(())
}

/// What a job of several hosts needs that one host can choose alone: a
/// node rank in range, the store's port, and a token every host shares.
fn check_nodes(cli: &Cli, has_token: bool) -> Result<(), String> {
    if cli.node_rank >= cli.nnodes {
        return Err(format!(
            "--node-rank {} is out of range for --nnodes {} (0 to {})",
            cli.node_rank,
            cli.nnodes,
            cli.nnodes - 1
        ));
    }
    if cli.nnodes > 1 && cli.master_addr.is_none() {
        return Err(format!(
            "--nnodes {} needs --master-addr: node 0's address, which every host reaches",
            cli.nnodes
        ));
    }
    if cli.nnodes > 1 && cli.master_port.is_none() {
        return Err(format!(
            "--nnodes {} needs --master-port: every host must name the port where rank 0 \
             (on node 0, at --master-addr) hosts the store",
            cli.nnodes
        ));
    }
    if cli.nnodes > 1 && !has_token {
        return Err(format!(
            "--nnodes {} needs {TOKEN_VAR} in the environment, the same on every host (a \
             secret of the job's, for example 32 hex digits drawn once and passed to every \
             host's launch): hosts cannot draw one alike",
            cli.nnodes
        ));
    }
    if u64::from(cli.nnodes) * u64::from(cli.nproc) > u64::from(u32::MAX) {
        return Err("--nnodes × --nproc ranks do not fit in 32 bits".into());
    }
    Ok(())
}

/// The job's store token: the one in our environment, else 128 fresh
/// random bits from the OS, in hex.
fn store_token() -> Result<OsString, rand::rand_core::OsError> {
    if let Some(t) = std::env::var_os(TOKEN_VAR).filter(|t| !t.is_empty()) {
        return Ok(t);
    }
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes)?;
    Ok(bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .into())
}

/// Asks the OS for a free TCP port on 127.0.0.1 and releases it.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// Starts local rank `rank` of this host (global rank `node_rank × N +
/// rank`) in a process group of its own.
fn spawn_rank(cli: &Cli, rank: u32, port: u16, token: &OsString) -> io::Result<Child> {
    let mut cmd = Command::new(&cli.program);
    cmd.args(&cli.args)
        .env("RANK", (cli.node_rank * cli.nproc + rank).to_string())
        .env("WORLD_SIZE", (cli.nnodes * cli.nproc).to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("LOCAL_WORLD_SIZE", cli.nproc.to_string())
        .env("GROUP_RANK", cli.node_rank.to_string())
        .env(
            "MASTER_ADDR",
            cli.master_addr.as_deref().unwrap_or("127.0.0.1"),
        )
        .env("MASTER_PORT", port.to_string())
        .env(TOKEN_VAR, token)
        .env("SYMM_RUN", "1")
        .process_group(0);
    let supervisor = nix::unistd::getpid();
    // SAFETY: the closure runs in the child between fork and exec of a
    // multi-threaded process, where only async-signal-safe calls are
    // allowed: it makes two system calls (prctl, getppid) and allocates
    // nothing (errors are raw OS codes).
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
            // symm-run may have died before the signal was armed.
            if nix::unistd::getppid() != supervisor {
                return Err(io::Error::from_raw_os_error(Errno::ESRCH as i32));
            }
            Ok(())
        });
    }
    if cli.tag_output {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    cmd.spawn()
}

/// Waits until `rank` exits, reaps it and reports its status on `tx`.
fn wait_for(rank: Arc<Rank>, tx: Sender<Event>) {
    // Wait without reaping, so that the PID stays ours while `Rank::signal`
    // may still use it; then reap under the lock.
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
    while let Err(Errno::EINTR) = waitid(Id::Pid(rank.pid), flags) {}
    let status = match rank.slot().take() {
        Some(mut child) => child.wait(),
        None => Err(io::Error::other("already reaped")),
    };
    let _ = tx.send(Event::Exited {
        rank: rank.rank,
        status,
    });
}

/// Copies `src` line by line to the stream `sink` returns, each line prefixed
/// with `[rank] `; signals `done` at end of input.
fn pump<W: Write>(rank: u32, src: impl Read, sink: fn() -> W, done: Sender<()>) {
    let prefix = format!("[{rank}] ");
    let mut src = BufReader::new(src);
    let mut line = Vec::new();
    loop {
        line.clear();
        line.extend_from_slice(prefix.as_bytes());
        match src.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                // One write per line keeps lines of different ranks whole.
                // Errors (e.g. our stdout closed) are ignored: keep draining
                // so that the rank never blocks on a full pipe.
                let mut out = sink();
                let _ = out.write_all(&line).and_then(|()| out.flush());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = done.send(());
}
