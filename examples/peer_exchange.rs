//! Every rank writes into every peer's symmetric buffer, synchronises with
//! a barrier, checks what it received, and times rendezvous, barriers and
//! put/wait round trips.
//!
//! Runs on every local GPU when there are any, otherwise on 4 emulated ranks.
//!
//! ```text
//! cargo run --release --example peer_exchange [-- --ranks N]
//! ```

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use symm::signal::Channel;
use symm::{run, BackendKind, CommOptions};

const TIMEOUT: Duration = Duration::from_secs(10);
const ELEMS: usize = 1 << 16;

pub(crate) fn main() {
    let ranks = support::ranks_from_args(4);
    println!("backend: {}", ranks.describe());
    let world = ranks.world_size();
    let result = run(ranks, CommOptions::default(), |comm| {
        let (rank, n) = (comm.rank(), comm.world_size());
        // The first rendezvous also waits for the slowest rank to open its
        // device; time a second one, which is what steady state costs.
        comm.alloc::<u8>(1)?.rendezvous()?;
        let buf = comm.alloc::<f32>(ELEMS * n)?;
        let t = Instant::now();
        let smem = buf.rendezvous()?;
        let rendezvous_us = t.elapsed().as_secs_f64() * 1e6;
        // One channel per use: the exchange's barriers, the timed barriers
        // and the timed ring (every rank requests them in the same order).
        let [a, b, c] = [(); 3].map(|_| Channel::request(comm));
        let (sync, timed, ring) = (a?, b?, c?);

        // Each rank writes its block into slot `rank` of every peer.
        let mine: Vec<f32> = (0..ELEMS)
            .map(|i| (rank * ELEMS + i) as f32 * 0.5)
            .collect();
        smem.barrier(&sync, TIMEOUT)?;
        comm.synchronize()?;
        for p in 0..n {
            smem.peer_buffer::<f32>(p)?.write(rank * ELEMS, &mine)?;
        }
        smem.barrier(&sync, TIMEOUT)?;
        comm.synchronize()?;
        let got = buf.to_host()?;
        let wrong = (0..n * ELEMS).filter(|&i| got[i] != i as f32 * 0.5).count();

        let iters = if comm.backend_kind() == BackendKind::Cuda {
            1000
        } else {
            200
        };
        let t = Instant::now();
        for _ in 0..iters {
            smem.barrier(&timed, TIMEOUT)?;
        }
        comm.synchronize()?;
        let barrier_us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;

        let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
        let t = Instant::now();
        for _ in 0..iters {
            smem.put_signal(next, &ring, TIMEOUT)?;
            smem.wait_signal(prev, &ring, TIMEOUT)?;
        }
        comm.synchronize()?;
        let ring_us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        Ok((comm.device(), wrong, rendezvous_us, barrier_us, ring_us))
    });
    match result {
        Ok(rows) => {
            println!(
                "{:<5} {:<36} {:>8} {:>15} {:>12} {:>14}",
                "rank", "device", "wrong", "rendezvous µs", "barrier µs", "put+wait µs"
            );
            for (r, (dev, wrong, rdv, bar, ring)) in rows.iter().enumerate() {
                println!("{r:<5} {dev:<36} {wrong:>8} {rdv:>15.0} {bar:>12.2} {ring:>14.2}");
            }
            let bad: usize = rows.iter().map(|r| r.1).sum();
            if bad > 0 {
                println!("FAILED: {bad} elements wrong across {world} ranks");
                std::process::exit(1);
            }
            println!(
                "OK: {world} ranks exchanged {} KiB each; every element checked",
                ELEMS * 4 / 1024
            );
        }
        Err(e) => {
            eprintln!("FAILED: {e}");
            std::process::exit(1);
        }
    }
}
