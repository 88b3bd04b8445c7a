//! An all-gather written with `#[symm_kernel]` (the book's "Custom
//! collectives" chapter): every rank pushes its input into its slot of every
//! rank's symmetric output. Checks every rank's output against the
//! concatenation of the random inputs and prints the time per call.
//!
//! Runs on every local GPU when there are any, otherwise on 4 emulated ranks.
//!
//! ```text
//! cargo run --release --example custom_all_gather
//! ```

use std::time::{Duration, Instant};

use rand::Rng;
use symm::dsl::*;
use symm::signal::Channel;
use symm::{run, symm_kernel, CommOptions, LaunchConfig, Ranks};

// ANCHOR: kernel
/// All-gather by push: rank r copies `input` (`chunk` elements) to elements
/// `r * chunk ..` of every rank's `out`, its own included. Every rank must
/// launch the same grid (at most 128 blocks of at least `world` threads).
/// `entry` and `exit` are the handshakes' signal channels.
#[symm_kernel]
pub(crate) fn push_all_gather<T: Scalar>(
    input: &[T],
    out: SymmBuf<T>,
    chunk: u32,
    entry: u32,
    exit: u32,
) {
    let rank = out.rank();
    let world = out.world_size();
    let t = thread_idx_x();
    // Entry handshake: once peer t's block has signalled, peer t
    // has started this call, so its stream is done with `out` (say, copying
    // the previous result to the host) and we may overwrite it.
    if t < world && t != rank {
        out.put_signal(t, entry);
        out.wait_signal(t, entry);
    }
    sync_threads();
    let stride = grid_dim_x() * block_dim_x();
    for k in 0..world {
        let dst = out.peer((rank + k) % world); // start at a different rank each
        let mut i = block_idx_x() * block_dim_x() + t;
        while i < chunk {
            dst[rank * chunk + i] = input[i];
            i += stride;
        }
    }
    // Exit handshake: every thread's stores come before the
    // barrier, and put_signal releases them. When thread t's wait returns,
    // peer t's block with this index has written its share into our `out`.
    sync_threads();
    if t < world && t != rank {
        out.put_signal(t, exit);
        out.wait_signal(t, exit);
    }
}
// ANCHOR_END: kernel

const TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn main() {
    let ranks = Ranks::auto(4);
    let gpu = matches!(ranks, Ranks::Cuda(_));
    println!("backend: {}", ranks.describe());
    let world = ranks.world_size();
    // An odd length, so the grid-stride loop has a ragged end.
    let (chunk, iters) = if gpu { (65_537, 1000) } else { (3_001, 10) };
    let inputs: Vec<Vec<f32>> = (0..world)
        .map(|_| (0..chunk).map(|_| rand::rng().random()).collect())
        .collect();
    let want = inputs.concat();

    let result = run(ranks, CommOptions::default(), |comm| {
        let input = comm.device_buffer_from(&inputs[comm.rank()])?;
        let out = comm.alloc::<f32>(chunk * world)?;
        out.copy_from_host(&vec![f32::NAN; chunk * world])?;
        let smem = out.rendezvous()?;
        let cfg = LaunchConfig::linear(16, 256);
        let n = chunk as u32;
        // Channels come from the group, in the same order on every rank.
        let [a, b, c] = [(); 3].map(|_| Channel::request(comm));
        let (entry, exit, sync) = (a?.index(), b?.index(), c?);

        push_all_gather::launch::<f32>(comm, cfg, &input, &smem, n, entry, exit)?; // warm-up
        smem.barrier(&sync, TIMEOUT)?;
        comm.synchronize()?;
        let t = Instant::now();
        for _ in 0..iters {
            push_all_gather::launch::<f32>(comm, cfg, &input, &smem, n, entry, exit)?;
        }
        comm.synchronize()?;
        let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        let got = out.to_host()?;
        let wrong = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        Ok((wrong, us))
    });
    let rows = result.unwrap_or_else(|e| {
        eprintln!("FAILED: {e}");
        std::process::exit(1);
    });
    for (r, (wrong, us)) in rows.iter().enumerate() {
        println!(
            "rank {r}: {wrong} of {} elements wrong; {us:.2} µs per call",
            chunk * world
        );
    }
    if rows.iter().any(|r| r.0 > 0) {
        println!("FAILED");
        std::process::exit(1);
    }
    println!(
        "OK: {world} ranks gathered {} KiB each ({} f32 per rank)",
        chunk * world * 4 / 1024,
        chunk
    );
}
