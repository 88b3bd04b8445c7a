//! What the symmetric memory pool saves: a table of the cost of a pool
//! allocation and free, of a pool tensor's rendezvous (no collective), and
//! of its first collective use (every rank's placement compared through the
//! store), against a plain `comm.alloc` plus its rendezvous, per world size.
//!
//! ```text
//! cargo run --release --example bench_pool [-- --worlds 1,2,3,4]
//! ```
//! On a machine with fewer GPUs than ranks, ranks share GPUs (as the tests
//! do); without a GPU it runs on the emulator, with fewer repetitions, and
//! says so. Times are host wall clock per operation, the median of 5
//! batches, measured on rank 0 (every rank runs the same loops).

use std::time::{Duration, Instant};

use symm::{run, Comm, CommOptions, Ranks};

fn main() {
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { symm::prepare_shared_gpus() };
    let worlds: Vec<usize> = std::env::args()
        .skip_while(|a| a != "--worlds")
        .nth(1)
        .unwrap_or_else(|| "1,2,3,4".into())
        .split(',')
        .map(|w| w.trim().parse().expect("--worlds takes numbers, as 1,2,4"))
        .collect();
    let gpu = symm::cuda_available();
    println!(
        "backend: {}",
        if gpu {
            "CUDA (ranks share GPUs where there are fewer)"
        } else {
            "CPU emulator (no CUDA device found)"
        }
    );
    println!(
        "\n| ranks | pool alloc+free (µs) | tensor rendezvous (µs) | first collective use (µs) | \
         comm.alloc + rendezvous (µs) |"
    );
    println!("|---|---|---|---|---|");
    for w in worlds {
        let ranks = if gpu {
            match Ranks::gpus(w) {
                Some(r) => r,
                None => {
                    println!("| {w} | cannot place {w} ranks here | | | |");
                    continue;
                }
            }
        } else {
            Ranks::Emulator(w)
        };
        let opts = CommOptions::default().with_timeout(Duration::from_secs(120));
        match run(ranks, opts, |c| measure(c, gpu)) {
            Ok(rows) => {
                let [a, r, u, p] = rows[0];
                println!("| {w} | {a:.2} | {r:.2} | {u:.1} | {p:.0} |");
            }
            Err(e) => println!("| {w} | error: {e} | | | |"),
        }
    }
}

/// The median over 5 batches of `per` runs of `f`, in µs per run.
fn median_us(per: usize, mut f: impl FnMut() -> symm::Result<()>) -> symm::Result<f64> {
    let mut batches = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..per {
            f()?;
        }
        batches.push(t.elapsed().as_secs_f64() * 1e6 / per as f64);
    }
    batches.sort_by(f64::total_cmp);
    Ok(batches[2])
}

/// This rank's four costs, in µs.
fn measure(c: &Comm, gpu: bool) -> symm::Result<[f64; 4]> {
    let pool = c.pool();
    // One segment exists: what a warm pool costs.
    let _warm = pool.alloc::<u8>(4096)?;
    let scale = if gpu { 10 } else { 1 };
    let alloc_free = median_us(1000 * scale, || {
        let t = pool.alloc::<f32>(1024)?;
        drop(t);
        Ok(())
    })?;
    let keep: Vec<_> = (0..100 * scale)
        .map(|_| pool.alloc::<f32>(1024))
        .collect::<symm::Result<_>>()?;
    let mut it = keep.iter().cycle();
    // Each batch rendezvouses fresh tensors: 20 × 5 of the 100 × scale.
    let rendezvous = median_us(20 * scale, || {
        it.next().expect("cycled").rendezvous().map(|_| ())
    })?;
    // A first use compares every rank's placement through the store; a
    // signal barrier on the tensor is the collective use, and a barrier on
    // one already used is subtracted.
    let ch = symm::signal::Channel::request(c)?;
    let fresh: Vec<_> = keep[..20]
        .iter()
        .map(|t| t.rendezvous())
        .collect::<symm::Result<_>>()?;
    let used = keep[20].rendezvous()?;
    used.barrier(&ch, Duration::from_secs(30))?;
    c.synchronize()?;
    let mut fresh_it = fresh.iter();
    let first_use = median_us(4, || {
        fresh_it
            .next()
            .expect("20")
            .barrier(&ch, Duration::from_secs(30))?;
        c.synchronize()
    })?;
    let again = median_us(4, || {
        used.barrier(&ch, Duration::from_secs(30))?;
        c.synchronize()
    })?;
    let plain = median_us(if gpu { 4 } else { 2 }, || {
        let b = c.alloc::<f32>(1024)?;
        b.rendezvous().map(|_| ())
    })?;
    Ok([alloc_free, rendezvous, first_use - again, plain])
}
