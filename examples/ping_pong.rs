//! A put/signal ping-pong between rank pairs (0↔1, 2↔3, …), written with
//! `#[symm_kernel]`: the kernel of the book's "Your first kernel" chapter.
//! Checks every rank's counter and prints the round-trip time.
//!
//! Runs on every local GPU when there are any, otherwise on 2 emulated ranks.
//!
//! ```text
//! cargo run --release --example ping_pong
//! ```

use std::time::{Duration, Instant};

use symm::dsl::*;
use symm::signal::Channel;
use symm::{run, symm_kernel, BackendKind, CommOptions, LaunchConfig, Ranks};

/// `rounds` round trips between this rank and its partner (`rank ^ 1`): the
/// even rank pings, the odd one pongs. A hop stores the local counter plus
/// one into the partner's buffer and signals it on `channel`.
#[symm_kernel]
pub(crate) fn ping_pong(buf: SymmBuf<u32>, rounds: u32, channel: u32) {
    // Signals are per block and one thread carries a counter: only thread 0
    // of block 0 plays.
    if block_idx_x() != 0 || thread_idx_x() != 0 {
        return;
    }
    let me = buf.rank();
    let partner = me ^ 1;
    if partner >= buf.world_size() {
        return; // an odd world: the last rank has no partner
    }
    for _ in 0..rounds {
        if me % 2 == 0 {
            buf.peer(partner)[0] = buf.local()[0] + 1; // ping
            buf.put_signal(partner, channel); // release: the store above lands first
            buf.wait_signal(partner, channel); // acquire: the pong is visible after
        } else {
            buf.wait_signal(partner, channel);
            buf.peer(partner)[0] = buf.local()[0] + 1; // pong
            buf.put_signal(partner, channel);
        }
    }
}

const TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn main() {
    let ranks = Ranks::auto(2);
    println!("backend: {}", ranks.describe());
    // ANCHOR: host
    let result = run(ranks, CommOptions::default(), |comm| {
        let buf = comm.alloc::<u32>(1)?; // collective: every rank allocates
        buf.copy_from_host(&[0])?;
        let smem = buf.rendezvous()?; // every rank's buffer, mapped
        let cfg = LaunchConfig::linear(1, 32);
        // Signal channels, requested from the group (the same on every rank):
        // one for the kernel, one for the host barrier.
        let (ch, start) = (Channel::request(comm)?, Channel::request(comm)?);

        // Warm up (on a GPU, the first launch compiles the kernel).
        ping_pong::launch(comm, cfg, &smem, 10, ch.index())?;
        let rounds: u32 = if comm.backend_kind() == BackendKind::Cuda {
            10_000
        } else {
            200
        };
        smem.barrier(&start, TIMEOUT)?; // start the timed run together
        comm.synchronize()?;
        let t = Instant::now();
        ping_pong::launch(comm, cfg, &smem, rounds, ch.index())?;
        comm.synchronize()?;
        let us = t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);

        // Every round adds 2 on the even side, and the odd side is one behind.
        let total = 2 * (10 + rounds);
        let r = comm.rank();
        let want = if r ^ 1 >= comm.world_size() {
            0
        } else if r % 2 == 0 {
            total
        } else {
            total - 1
        };
        Ok((buf.to_host()?[0], want, us))
    });
    // ANCHOR_END: host
    let rows = result.unwrap_or_else(|e| {
        eprintln!("FAILED: {e}");
        std::process::exit(1);
    });
    let mut bad = 0;
    for (r, (got, want, us)) in rows.iter().enumerate() {
        let ok = if got == want { "ok" } else { "WRONG" };
        println!("rank {r}: counter {got} (want {want}) {ok}; {us:.2} µs per round trip");
        bad += usize::from(got != want);
    }
    if bad > 0 {
        println!("FAILED: {bad} rank(s) hold a wrong counter");
        std::process::exit(1);
    }
    println!("OK");
}
