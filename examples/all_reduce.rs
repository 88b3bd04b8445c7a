//! The main job: the built-in all-reduce on every local GPU (or, with none,
//! on 4 emulated ranks), checked against a float64 reference and bitwise
//! across ranks, with a latency table.
//!
//! ```text
//! cargo run --release --example all_reduce [-- --ranks N]
//! ```
//! Latencies are host-timed back-to-back calls (no graph), so they include
//! launch overhead; `scripts/bench.sh` measures graphs against NCCL and
//! torch.

/// The verdict on each row's results.
#[path = "support/check.rs"]
mod check;
/// Full-mantissa inputs of mixed magnitudes (the tests' data): sums round,
/// so the error column means something.
#[path = "../tests/support/data.rs"]
mod data;
#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use symm::kernels::all_reduce::{all_reduce, AllReduceElem, AllReducePath};
use symm::{bf16, run, CommOptions, Ranks};

/// Calls timed per size on a GPU.
const CALLS: u32 = 200;

pub(crate) fn main() {
    let ranks = support::ranks_from_args(4);
    let gpu = matches!(ranks, Ranks::Cuda(_));
    println!("backend: {}", ranks.describe());
    let world = ranks.world_size();
    // The emulator runs every GPU thread as a CPU coroutine: small sizes only.
    let sizes: &[usize] = if gpu {
        &[1 << 10, 4 << 10, 64 << 10, 1 << 20, 16 << 20]
    } else {
        &[1 << 10, 16 << 10, 64 << 10]
    };
    println!(
        "\n| dtype | size | kernel | µs per call{} | rel. error vs float64 | ranks agree |",
        if gpu { "" } else { " (emulated)" }
    );
    println!("|---|---|---|---|---|---|");
    let mut ok = true;
    for &bytes in sizes {
        ok &= row::<f32>("f32", &ranks, world, bytes, 1e-6, gpu);
        ok &= row::<bf16>("bf16", &ranks, world, bytes, 1e-2, gpu);
    }
    if !ok {
        eprintln!("\nFAILED: some results were wrong");
        std::process::exit(1);
    }
    println!("\nall results match the float64 reference and agree bit for bit across ranks");
}

/// One table row: a checked call, then a timed loop; false if wrong.
fn row<T: AllReduceElem>(
    name: &str,
    ranks: &Ranks,
    world: usize,
    bytes: usize,
    tol: f64,
    gpu: bool,
) -> bool {
    let n = bytes / std::mem::size_of::<T>();
    let inputs: Vec<Vec<T>> = (0..world)
        .map(|_| data::mixed_f32s(n).into_iter().map(T::from_f32).collect())
        .collect();
    let calls = if gpu { CALLS } else { 2 };
    let res = run(
        ranks.clone(),
        CommOptions::default().with_timeout(Duration::from_secs(60)),
        |c| {
            let buf = c.alloc::<T>(n)?;
            buf.copy_from_host(&inputs[c.rank()])?;
            let s = buf.rendezvous()?;
            let mut out = c.device_buffer_from(&vec![T::from_f32(f32::NAN); n])?;
            all_reduce(c, &s, &mut out, n)?;
            c.synchronize()?;
            let got = out.to_host()?;
            let t = Instant::now();
            for _ in 0..calls {
                all_reduce(c, &s, &mut out, n)?;
            }
            c.synchronize()?;
            Ok((got, t.elapsed().as_secs_f64() * 1e6 / f64::from(calls)))
        },
    );
    let outs = match res {
        Ok(o) => o,
        Err(e) => {
            println!("| {name} | {} | error: {e} | | | |", size(bytes));
            return false;
        }
    };
    let results: Vec<Vec<T>> = outs.iter().map(|(o, _)| o.clone()).collect();
    let verdict = check::verdict(&inputs, &results);
    let (rel, agree) = (verdict.rel, verdict.agree);
    let us = outs.iter().map(|(_, t)| *t).fold(0.0, f64::max);
    let path = AllReducePath::choose(world, bytes);
    println!(
        "| {name} | {} | {path:?} | {us:.1} | {rel:.1e} | {} |",
        size(bytes),
        if agree { "yes" } else { "NO" }
    );
    verdict.ok(tol)
}

fn size(b: usize) -> String {
    match b {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b >> 10),
    }
}
