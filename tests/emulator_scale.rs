//! Emulator throughput: a one-shot all-reduce of 1M f32 on 4 simulated
//! ranks (64K in debug builds, where the goal does not apply), checked
//! against a float64 reference and bitwise across ranks.

use std::time::Instant;

use rand::Rng;
use symm::{run, CommOptions, LaunchConfig, Ranks};

#[path = "dsl_suite/mod.rs"]
mod dsl_suite;
use dsl_suite::one_shot_sum;
use symm::signal::Channel;

#[test]
fn one_shot_all_reduce_4_ranks() {
    let n: usize = if cfg!(debug_assertions) {
        1 << 16
    } else {
        1 << 20
    };
    let world = 4;
    let inputs: Vec<Vec<f32>> = (0..world)
        .map(|_| {
            (0..n)
                .map(|_| rand::rng().random_range(-1.0..1.0))
                .collect()
        })
        .collect();
    let t = Instant::now();
    let outs = run(Ranks::Emulator(world), CommOptions::default(), |c| {
        let buf = c.alloc::<f32>(n)?;
        buf.copy_from_host(&inputs[c.rank()])?;
        let s = buf.rendezvous()?;
        let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
        let (entry, exit) = (Channel::request(c)?.index(), Channel::request(c)?.index());
        let t = Instant::now();
        let cfg = LaunchConfig::linear(16, 512);
        one_shot_sum::launch(c, cfg, &s, &mut out, n as u32, entry, exit)?;
        let secs = t.elapsed().as_secs_f64();
        Ok((out.to_host()?, secs))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let total = t.elapsed().as_secs_f64();
    for (r, (o, _)) in outs.iter().enumerate() {
        if let Err(e) = symm::compare_bits(o, &outs[0].0) {
            panic!("rank {r} differs from rank 0: {e}");
        }
    }
    for i in 0..n {
        let want: f64 = inputs.iter().map(|v| f64::from(v[i])).sum();
        assert!(
            (f64::from(outs[0].0[i]) - want).abs() <= 1e-5,
            "element {i}: {} vs {want}",
            outs[0].0[i]
        );
    }
    let launch = outs.iter().map(|o| o.1).fold(0.0, f64::max);
    eprintln!("emulator one-shot all-reduce, {world} ranks × {n} f32: kernel {launch:.2} s, whole run {total:.2} s");
    if !cfg!(debug_assertions) {
        assert!(launch <= 10.0, "goal is ≤ 10 s, took {launch:.2} s");
    }
}
