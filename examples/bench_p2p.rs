//! Point-to-point benchmark: symm's send/recv (`symm::kernels::p2p`
//! through `symm::functional`, forced onto symm's kernels) against NCCL's
//! `ncclSend`/`ncclRecv` (the same calls forced onto NCCL), in one process
//! on the same GPUs. Timed as `bench_all_reduce` times
//! (`examples/support/bench.rs`): a CUDA graph of 32 back-to-back calls,
//! the median of 9 replays.
//!
//! ```text
//! cargo run --release --example bench_p2p -- --max-bytes 64M
//! ```
//!
//! Two ranks, on two GPUs (NCCL allows one rank per GPU; with one GPU the
//! NCCL columns are absent and symm's run as a correctness check, not a
//! timing). Two tables:
//! - **ping-pong**: rank 0 sends, rank 1 receives and sends back; µs per
//!   one-way trip (half a round trip);
//! - **exchange**: both ranks `send_recv` to each other at once; µs per
//!   call and GB/s per direction.
//!
//! Before timing, each variant's first exchange at each size is checked
//! exactly on both ranks.

use symm::functional::{Collectives, Options, P2pOp, Prefer};
use symm::{run, Comm, CommOptions, Ranks, Result};

#[path = "support/bench.rs"]
#[allow(dead_code)] // NCCL runs through `symm::functional` here
mod bench;
use bench::{other, time_graph, Barrier};

#[derive(clap::Parser)]
struct Args {
    /// Largest message, bytes (K, M suffixes).
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    max_bytes: usize,
}

fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let (n, m) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    n.parse::<usize>().map(|n| n * m).map_err(|e| e.to_string())
}

/// Sizes: 4 B, then 64 B to `max` in powers of 4.
fn sizes(max: usize) -> Vec<usize> {
    let mut v = vec![4];
    let mut b = 64;
    while b <= max {
        v.push(b);
        b *= 4;
    }
    v
}

/// One variant's timings at one size: (ping-pong one-way µs, exchange µs).
fn measure(c: &Comm, coll: &Collectives, barrier: &Barrier, bytes: usize) -> Result<(f64, f64)> {
    let n = bytes / 4;
    let me = c.rank();
    let peer = 1 - me;
    let mine: Vec<f32> = (0..n).map(|i| (me * 1_000_003 + i) as f32).collect();
    let theirs: Vec<f32> = (0..n).map(|i| (peer * 1_000_003 + i) as f32).collect();
    let x = c.device_buffer_from(&mine)?;
    let mut y = c.device_buffer::<f32>(n)?;
    // Checked once, exactly.
    coll.send_recv(&mut [
        P2pOp::Send { input: &x, peer },
        P2pOp::Recv { out: &mut y, peer },
    ])?
    .wait_host()?;
    if y.to_host()? != theirs {
        return Err(other(
            c,
            format!("rank {me}: the exchange of {bytes} bytes is wrong"),
        ));
    }
    let pingpong = time_graph(c, barrier, &mut || {
        if me == 0 {
            coll.send(&x, peer)?.wait()?;
            coll.recv(&mut y, peer)?.wait()?;
        } else {
            coll.recv(&mut y, peer)?.wait()?;
            coll.send(&x, peer)?.wait()?;
        }
        Ok(())
    })? / 2.0;
    let exchange = time_graph(c, barrier, &mut || {
        coll.send_recv(&mut [
            P2pOp::Send { input: &x, peer },
            P2pOp::Recv { out: &mut y, peer },
        ])?
        .wait()
    })?;
    Ok((pingpong, exchange))
}

fn main() {
    let args: Args = clap::Parser::parse();
    eprintln!("{}", bench::method_line());
    let Some(ranks) = Ranks::gpus(2) else {
        eprintln!("SKIPPED: bench_p2p needs GPU ranks (2)");
        return;
    };
    let placement = ranks.describe();
    let sizes = sizes(args.max_bytes);
    let got = run(ranks, CommOptions::default(), |c| {
        let barrier = Barrier::new(c)?;
        let symm = Collectives::with_options(c, Options::default().with_backend(Prefer::Symm))?;
        let nccl = if c.max_ranks_on_device() == 1 && symm::functional::nccl_available() {
            Some(Collectives::with_options(
                c,
                Options::default().with_backend(Prefer::Nccl),
            )?)
        } else {
            None
        };
        let mut rows = Vec::new();
        for &b in &sizes {
            let s = measure(c, &symm, &barrier, b)?;
            let n = match &nccl {
                Some(n) => Some(measure(c, n, &barrier, b)?),
                None => None,
            };
            rows.push((b, s, n));
        }
        Ok(rows)
    });
    let got = match got {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!("\n### 2 ranks ({placement})\n");
    println!("ping-pong: µs one way (half a round trip); exchange: µs per send_recv of both directions at once, and GB/s per direction; rank 0\n");
    println!("| bytes | symm ping-pong | NCCL ping-pong | symm / NCCL | symm exchange | NCCL exchange | symm GB/s | NCCL GB/s |");
    println!("|---|---|---|---|---|---|---|---|");
    for (b, (sp, se), n) in &got[0] {
        let gbs = |us: f64| *b as f64 / us / 1e3;
        match n {
            Some((np, ne)) => println!(
                "| {} | {sp:.2} | {np:.2} | {:.2} | {se:.2} | {ne:.2} | {:.1} | {:.1} |",
                bench_size(*b),
                sp / np,
                gbs(*se),
                gbs(*ne)
            ),
            None => println!(
                "| {} | {sp:.2} | – | – | {se:.2} | – | {:.1} | – |",
                bench_size(*b),
                gbs(*se)
            ),
        }
    }
}

fn bench_size(b: usize) -> String {
    symm::functional::rule::size_name(b)
}
