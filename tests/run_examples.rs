//! The examples as tests: each runs to completion on the emulator (they
//! check their own results and exit non-zero when wrong), and the kernels
//! they define compile to CUBIN with NVRTC (sm_90 and sm_80).

// Each example brings `examples/support` in as its own module, as its own
// binary does, so here it is compiled once per example.
#![allow(clippy::duplicate_mod)]

#[path = "support/targets.rs"]
mod targets;
#[path = "support/tier.rs"]
mod tier;

#[path = "../examples/all_reduce.rs"]
#[allow(dead_code)]
mod all_reduce;
#[path = "../examples/custom_all_gather.rs"]
#[allow(dead_code)]
mod custom_all_gather;
#[path = "../examples/peer_exchange.rs"]
#[allow(dead_code)]
mod peer_exchange;
#[path = "../examples/ping_pong.rs"]
#[allow(dead_code)]
mod ping_pong;

#[path = "../examples/mesh.rs"]
#[allow(dead_code)]
mod mesh;

#[path = "../examples/tp_decode/main.rs"]
#[allow(dead_code)]
mod tp_decode;

#[path = "../examples/bench_moe.rs"]
#[allow(dead_code)]
mod bench_moe;

/// The MoE benchmark's emulator check: its steps on 3 emulated ranks, each
/// rank's combined rows against its reference.
#[test]
fn bench_moe_checks_its_steps_on_the_emulator() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    assert_eq!(bench_moe::check(3), 0);
}

#[path = "../examples/moe_layer.rs"]
#[allow(dead_code)]
mod moe_layer;

/// The MoE layer (gate, dispatch, SwiGLU experts, combine) on 3 emulated
/// ranks against the world-1 layer, each element within one rounding (the
/// combine adds each rank's slots first).
#[test]
fn moe_layer_matches_the_world_1_layer_on_the_emulator() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    assert_eq!(moe_layer::check_emulator(3), 0);
}

#[test]
fn the_main_job_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    all_reduce::main();
}

#[test]
fn ping_pong_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    ping_pong::main();
}

#[test]
fn custom_all_gather_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    custom_all_gather::main();
}

#[test]
fn peer_exchange_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    peer_exchange::main();
}

/// The tensor-parallel decode step on the emulator at toy sizes (hidden
/// 256, 2 layers, batch 2, context 16) at worlds 2 and 4, every variant
/// checked against the world-1 reference and across ranks.
#[test]
fn tp_decode_matches_its_world_one_reference() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    let args = tp_decode::Args {
        shape: "toy".into(),
        layers: 2,
        batch: 2,
        ctx: 16,
        worlds: vec![2, 4],
        emulator: true,
        replays: 0,
        shard: None,
        cublas: false,
        profile: false,
        attention_chunk: None,
    };
    assert_eq!(tp_decode::run_main(args), 0, "tp_decode's checks failed");
}

/// The 2-D mesh (TP in each simulated node's domain, DP hierarchically
/// across them) on the emulator at 2 × 2 and, in the full tier, 2 × 4 and
/// 4 × 2: every rank against the world-1 reference and every other rank.
#[test]
fn mesh_matches_its_world_one_reference() {
    for (world, nodes) in tier::split([(4, 2), (8, 2), (8, 4)], |&(w, _)| w == 4) {
        let args = mesh::Args {
            world: Some(world),
            nodes,
            grad_mib: 0,
            buckets: 4,
            work: 4,
            emulator: true,
        };
        assert_eq!(
            mesh::run_main(args),
            0,
            "mesh at {world} ranks in {nodes} nodes"
        );
    }
}

symm::check_kernels!(
    fn example_kernels_compile_with_nvrtc;
    tp_decode::kernels::fill::<symm::bf16>,
    tp_decode::kernels::rms_norm::<symm::bf16, 8, 1>,
    tp_decode::kernels::rms_norm::<symm::bf16, 8, 2>,
    tp_decode::kernels::rms_norm::<symm::bf16, 8, 4>,
    tp_decode::kernels::add::<symm::bf16>,
    tp_decode::kernels::add_rms_norm::<symm::bf16, 8, 1>,
    tp_decode::kernels::add_rms_norm::<symm::bf16, 8, 2>,
    tp_decode::kernels::add_rms_norm::<symm::bf16, 8, 4>,
    tp_decode::kernels::kv_write::<symm::bf16>,
    tp_decode::kernels::attention_split::<symm::bf16, 8, 32>,
    tp_decode::kernels::attention_split::<symm::bf16, 8, 64>,
    tp_decode::kernels::attention_split::<symm::bf16, 8, 128>,
    tp_decode::kernels::attention_split::<symm::bf16, 8, 256>,
    tp_decode::kernels::attention_combine::<symm::bf16, 1>,
    tp_decode::kernels::attention_combine::<symm::bf16, 2>,
    tp_decode::kernels::attention_combine::<symm::bf16, 4>,
    tp_decode::kernels::attention_combine::<symm::bf16, 8>,
    tp_decode::kernels::attention_combine::<symm::bf16, 16>,
    tp_decode::kernels::swiglu::<symm::bf16>,
    tp_decode::kernels::gemm_xwt::<symm::bf16>,
    tp_decode::kernels::gemv_xwt::<symm::bf16, 8, 1, 2, 16>,
    tp_decode::kernels::gemv_xwt::<symm::bf16, 8, 1, 2, 8>,
    tp_decode::kernels::gemv_xwt::<symm::bf16, 8, 2, 2, 8>,
    tp_decode::kernels::gemv_xwt::<symm::bf16, 8, 8, 2, 4>,
    tp_decode::kernels::gemv_swiglu::<symm::bf16, 8, 1, 2, 8>,
    tp_decode::kernels::gemv_swiglu::<symm::bf16, 8, 1, 2, 4>,
    tp_decode::kernels::gemv_swiglu::<symm::bf16, 8, 8, 2, 2>,
    ping_pong::ping_pong,
    bench_moe::copy_rows,
    moe_layer::gate_topk,
    moe_layer::grouped_xwt,
    mesh::gradient,
    custom_all_gather::push_all_gather::<f32>,
);

/// tp_decode's GEMV kernels (a warp per `R` weight rows, `U` 16-byte
/// vectors of each and of x in flight a lane, then the warp's
/// butterflies) against a host reference in f64 on random data, in the
/// forms the example launches (`R` 1 and 2, `U` 2 to 16) and in SwiGLU's
/// two outputs a warp (`R` 4): 1 to 8 rows of x; rows of 1 to 513 vectors
/// (fewer than a warp, a step and a rest, several steps); weight rows and
/// SwiGLU outputs that do not fill the last group; more groups than
/// warps, so warps loop, and fewer, so some have none. Outputs are poisoned before each form; each
/// element must be within its bf16 rounding plus the f32 sum's error. On
/// the emulator, or on a GPU where `SYMM_KERNEL_TESTS_ON=gpu`.
#[test]
fn tp_decode_gemv_matches_a_host_reference() {
    use rand::{Rng, SeedableRng};
    use symm::{bf16, run, CommOptions, LaunchConfig};
    use tp_decode::kernels::{gemv_swiglu, gemv_xwt};
    if !tier::quick() {
        return;
    }
    let seed: u64 = rand::random();
    // (Vectors a row: 1; 40, fewer than a step of 64; 70, a step of 64
    // and a rest; 100, 129 and 137, several steps; 257 and 513, a step of
    // 256 or 512 and one vector more. 3 SwiGLU outputs: fewer groups of
    // rows than warps.)
    for (m, n, k, threads) in [
        (1usize, 40usize, 8usize, 64u32),
        (1, 3, 320, 128),
        (3, 19, 320, 64),
        (8, 70, 560, 64),
        (2, 33, 800, 64),
        (5, 37, 1032, 64),
        (8, 70, 1096, 64),
        (1, 70, 2056, 128),
        (2, 33, 4104, 128),
    ] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (m * 1_000_000 + k) as u64);
        let mut draw = |len: usize| -> Vec<bf16> {
            (0..len)
                .map(|_| bf16::from_f32(rng.random_range(-1.0f32..1.0)))
                .collect()
        };
        let (x, w) = (draw(m * k), draw(2 * n * k));
        // On a GPU where the GPU suite runs (SYMM_KERNEL_TESTS_ON=gpu), as
        // compiled by NVRTC; else on the emulator.
        let Some(ranks) = targets::ranks(1) else {
            return;
        };
        let seen = run(ranks, CommOptions::default(), |c| {
            let (xb, wb) = (c.device_buffer_from(&x)?, c.device_buffer_from(&w)?);
            let mut y = c.device_buffer::<bf16>(m * 2 * n)?;
            let mut act = c.device_buffer::<bf16>(m * n)?;
            // 2 blocks of 2 or 4 warps: fewer warps than groups of rows.
            let grid = LaunchConfig::linear(2, threads);
            let (wide, inter, k32) = ((2 * n) as u32, n as u32, k as u32);
            let mut seen = Vec::new();
            // gemv_xwt at (R, U) and gemv_swiglu at (SR, SU), each on
            // poisoned outputs.
            macro_rules! form {
                ($m:literal, $r:literal, $u:literal, $sr:literal, $su:literal) => {{
                    y.write(0, &vec![bf16::NAN; m * 2 * n])?;
                    act.write(0, &vec![bf16::NAN; m * n])?;
                    gemv_xwt::launch::<bf16, 8, $m, $r, $u>(c, grid, &xb, &wb, &mut y, wide, k32)?;
                    gemv_swiglu::launch::<bf16, 8, $m, $sr, $su>(
                        c, grid, &xb, &wb, &mut act, inter, k32,
                    )?;
                    c.synchronize()?;
                    seen.push((
                        format!("R {} U {}, SwiGLU's R {} U {}", $r, $u, $sr, $su),
                        y.to_host()?,
                        act.to_host()?,
                    ));
                }};
            }
            // (Every form the example's rule picks, `Form::for_rows`: 2
            // rows a warp with 16, 8, 4 or 2 vectors at batch 1, 8, 4 or 2
            // at batches 2 to 4, 4 or 2 at 5 to 8, in both kernels; and
            // others the kernels take.)
            match m {
                1 => {
                    form!(1, 2, 16, 2, 16);
                    form!(1, 2, 8, 2, 8);
                    form!(1, 2, 4, 4, 2);
                    form!(1, 1, 16, 2, 4);
                    form!(1, 1, 2, 2, 2);
                    form!(1, 2, 2, 2, 2);
                }
                2 => {
                    form!(2, 2, 8, 2, 8);
                    form!(2, 2, 16, 4, 4);
                    form!(2, 1, 16, 2, 16);
                    form!(2, 2, 4, 2, 2);
                    form!(2, 2, 2, 2, 4);
                }
                3 => {
                    form!(3, 2, 8, 2, 8);
                    form!(3, 1, 8, 4, 4);
                    form!(3, 2, 4, 2, 2);
                    form!(3, 2, 2, 2, 4);
                }
                5 => {
                    form!(5, 2, 4, 2, 4);
                    form!(5, 2, 2, 2, 2);
                }
                _ => {
                    form!(8, 2, 4, 2, 2);
                    form!(8, 2, 2, 4, 2);
                }
            }
            Ok(seen)
        })
        .expect("the GEMVs run")
        .remove(0);
        let f = |v: bf16| f64::from(v.to_f32());
        let dot = |r: usize, j: usize| {
            (0..k)
                .map(|i| f(x[r * k + i]) * f(w[j * k + i]))
                .sum::<f64>()
        };
        // A bf16 rounding (2^-8 relative) plus a margin for the f32 sum
        // of k products of magnitude at most 1: k · 2^-23, about 30 times
        // the expected error of such sums (not a worst-case bound, which
        // is near k² · 2^-24).
        let tol = |want: f64| want.abs() * 2f64.powi(-8) + k as f64 * 2f64.powi(-23) + 1e-30;
        for (form, y, act) in &seen {
            for r in 0..m {
                for j in 0..2 * n {
                    let (want, have) = (dot(r, j), f(y[r * 2 * n + j]));
                    assert!(
                        (have - want).abs() <= tol(want),
                        "gemv ({form}) m {m} n {} k {k} threads {threads} (seed {seed}): y[{r}, {j}] = {have}, want {want}",
                        2 * n
                    );
                }
                for j in 0..n {
                    let (g, u) = (dot(r, j), dot(r, n + j));
                    let want = g / (1.0 + (-g).exp()) * u;
                    let have = f(act[r * n + j]);
                    assert!(
                        (have - want).abs() <= tol(want) + 1e-5 * (g.abs() + u.abs()),
                        "gemv_swiglu ({form}) m {m} inter {n} k {k} threads {threads} (seed {seed}): out[{r}, {j}] = {have}, want {want}"
                    );
                }
            }
        }
    }
}

/// tp_decode's norms (`rms_norm`, and `add_rms_norm`, which also adds
/// the partial sums into the residual) against a host reference in f64 on
/// random data: one to four vectors a thread (`N`), whole and partial
/// last vectors of a block, two rows. `add_rms_norm`'s residual must be
/// the bf16 sums exactly, its output `rms_norm`'s of that residual bit for
/// bit; the norms within a bf16 rounding or two of the reference; and a
/// row longer than `N` vectors a thread is the kernels' assertion. On the
/// GPU where the GPU suite runs (`SYMM_KERNEL_TESTS_ON=gpu`), else on the
/// emulator.
#[test]
fn tp_decode_norms_match_a_host_reference() {
    use rand::{Rng, SeedableRng};
    use symm::{bf16, run, CommOptions, LaunchConfig};
    use tp_decode::kernels::{add_rms_norm, rms_norm};
    if !tier::quick() {
        return;
    }
    let seed: u64 = rand::random();
    let (rows, eps) = (2usize, 1e-5f32);
    // (hidden, threads, N): 1 vector a thread with idle threads; 2 and 4
    // with a partial last round; 4 exactly.
    for (hidden, threads, n) in [
        (200usize, 32u32, 1usize),
        (520, 64, 2),
        (1800, 64, 4),
        (2048, 64, 4),
    ] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ hidden as u64);
        let mut draw = |len: usize, lo: f32, hi: f32| -> Vec<bf16> {
            (0..len)
                .map(|_| bf16::from_f32(rng.random_range(lo..hi)))
                .collect()
        };
        let (x, y, w) = (
            draw(rows * hidden, -2.0, 2.0),
            draw(rows * hidden, -2.0, 2.0),
            draw(hidden, 0.5, 1.5),
        );
        let Some(ranks) = targets::ranks(1) else {
            return;
        };
        let got = run(ranks, CommOptions::default(), |c| {
            let (xb, yb, wb) = (
                c.device_buffer_from(&x)?,
                c.device_buffer_from(&y)?,
                c.device_buffer_from(&w)?,
            );
            let mut res = c.device_buffer_from(&x)?;
            let mut a = c.device_buffer_from(&vec![bf16::NAN; rows * hidden])?;
            let mut b = c.device_buffer_from(&vec![bf16::NAN; rows * hidden])?;
            let mut again = c.device_buffer_from(&vec![bf16::NAN; rows * hidden])?;
            let cfg = LaunchConfig::linear(rows as u32, threads);
            // (`again`: rms_norm of add_rms_norm's residual, which must be
            // add_rms_norm's output bit for bit.)
            macro_rules! both {
                ($n:literal) => {{
                    rms_norm::launch::<bf16, 8, $n>(c, cfg, &xb, &wb, &mut a, hidden as u32, eps)?;
                    add_rms_norm::launch::<bf16, 8, $n>(
                        c,
                        cfg,
                        &mut res,
                        &yb,
                        &wb,
                        &mut b,
                        hidden as u32,
                        eps,
                    )?;
                    rms_norm::launch::<bf16, 8, $n>(
                        c,
                        cfg,
                        &res,
                        &wb,
                        &mut again,
                        hidden as u32,
                        eps,
                    )?;
                }};
            }
            match n {
                1 => both!(1),
                2 => both!(2),
                _ => both!(4),
            }
            c.synchronize()?;
            Ok((a.to_host()?, res.to_host()?, b.to_host()?, again.to_host()?))
        })
        .expect("the norms run")
        .remove(0);
        let (normed, res, added, again) = got;
        assert_eq!(
            added, again,
            "hidden {hidden}, N {n} (seed {seed}): add_rms_norm and rms_norm of its sum differ"
        );
        let f = |v: bf16| f64::from(v.to_f32());
        for r in 0..rows {
            let row = |v: &[bf16]| v[r * hidden..][..hidden].to_vec();
            let sums: Vec<bf16> = (0..hidden)
                .map(|i| bf16::from_f32(x[r * hidden + i].to_f32() + y[r * hidden + i].to_f32()))
                .collect();
            assert_eq!(
                row(&res),
                sums,
                "hidden {hidden}, N {n} (seed {seed}): row {r}'s residual"
            );
            for (input, out, what) in [
                (row(&x), row(&normed), "rms_norm"),
                (sums, row(&added), "add_rms_norm"),
            ] {
                let ms: f64 = input.iter().map(|&v| f(v) * f(v)).sum::<f64>() / hidden as f64;
                let inv = 1.0 / (ms + f64::from(eps)).sqrt();
                for i in 0..hidden {
                    let want = f(input[i]) * inv * f(w[i]);
                    let have = f(out[i]);
                    assert!(
                        (have - want).abs() <= 2.0f64.powi(-7) * want.abs() + 1e-6,
                        "{what}, hidden {hidden}, N {n} (seed {seed}): row {r}, element {i}: {have} against {want}"
                    );
                }
            }
        }
    }
    // A row longer than N vectors a thread is the kernels' assertion, not
    // a row normalised in part.
    let Some(ranks) = targets::ranks(1) else {
        return;
    };
    let e = run(ranks, CommOptions::default(), |c| {
        let x = c.device_buffer_from(&vec![bf16::from_f32(1.0); 2048])?;
        let mut a = c.device_buffer::<bf16>(2048)?;
        rms_norm::launch::<bf16, 8, 2>(c, LaunchConfig::linear(1, 64), &x, &x, &mut a, 2048, eps)?;
        c.synchronize()
    })
    .expect_err("a row of 2048 with 2 vectors of 8 a thread of 64");
    assert!(
        e.to_string().contains("at most N vectors a thread"),
        "the assertion: {e}"
    );
}

/// tp_decode's attention (its split kernel, a warp reading several key
/// and value rows a step in 16-byte vectors, then the merge of the
/// splits) against a host reference in f64 on random data: two rows,
/// grouped KV heads, a context the chunk does not divide, at head sizes
/// of 32 to 256 (4 to 32 lanes a row), several splits and block sizes. The
/// example's own check compares against a world-1 run of the same
/// kernels, which would share a mistake of theirs.
#[test]
fn tp_decode_attention_matches_a_host_reference() {
    use rand::{Rng, SeedableRng};
    use symm::{bf16, run, CommOptions};
    if !tier::quick() {
        return;
    }
    // On a GPU where the GPU suite runs (SYMM_KERNEL_TESTS_ON=gpu), as
    // compiled by NVRTC; else on the emulator.
    let Some(ranks) = targets::ranks(1) else {
        return;
    };
    let (rows, heads, kv_heads) = (2usize, 4usize, 2usize);
    let seed: u64 = rand::random();
    // (dim, ctx, chunk, the split kernel's threads): 1 to 8 rows a warp
    // step, a block's rows in 1 to 8 steps, and the merge's splits a warp
    // (`L`) 1, 2, 4, 8 and 16 among them (1, 3, 5, 19, 25, 40, 75 and 130
    // splits).
    for (dim, ctx, chunk, threads) in [
        (32usize, 37usize, 8usize, 128u32),
        (32, 37, 37, 256),
        (128, 37, 16, 128),
        (128, 37, 37, 512),
        (32, 100, 4, 128),
        (64, 160, 4, 256),
        (128, 300, 4, 128),
        (128, 300, 64, 128),
        (32, 520, 4, 256),
        (256, 300, 16, 256),
    ] {
        let stride = (heads + 2 * kv_heads) * dim;
        let mut rng =
            rand::rngs::StdRng::seed_from_u64(seed ^ ((dim * 1024 + ctx) * 64 + chunk) as u64);
        // (Queries 8 times the keys' scale: a peaked softmax, which the
        // scores' and the splits' rescaling must get right.)
        let mut draw = |n: usize, scale: f32| -> Vec<bf16> {
            (0..n)
                .map(|_| bf16::from_f32(rng.random_range(-scale..scale)))
                .collect()
        };
        let (qkv, kc, vc) = (
            draw(rows * stride, 8.0),
            draw(rows * ctx * kv_heads * dim, 1.0),
            draw(rows * ctx * kv_heads * dim, 1.0),
        );
        let scale = 1.0 / (dim as f32).sqrt();
        let splits = ctx.div_ceil(chunk);
        let got = run(ranks.clone(), CommOptions::default(), |c| {
            let (q, k, v) = (
                c.device_buffer_from(&qkv)?,
                c.device_buffer_from(&kc)?,
                c.device_buffer_from(&vc)?,
            );
            let mut part =
                c.device_buffer_from(&vec![f32::NAN; rows * heads * splits * (dim + 2)])?;
            let mut out = c.device_buffer_from(&vec![bf16::NAN; rows * heads * dim])?;
            tp_decode::split(
                c,
                [&q, &k, &v],
                &mut part,
                (rows, threads),
                [stride, heads, kv_heads, dim, ctx, chunk],
                scale,
            )?;
            tp_decode::combine(c, &part, &mut out, rows * heads, dim, splits)?;
            c.synchronize()?;
            out.to_host()
        })
        .expect("the attention runs")
        .remove(0);
        let f = |x: bf16| f64::from(x.to_f32());
        for r in 0..rows {
            for h in 0..heads {
                let g = h / (heads / kv_heads);
                let q = &qkv[r * stride + h * dim..][..dim];
                let row = |cache: &[bf16], t: usize| {
                    cache[((r * ctx + t) * kv_heads + g) * dim..][..dim].to_vec()
                };
                let s: Vec<f64> = (0..ctx)
                    .map(|t| {
                        let k = row(&kc, t);
                        (0..dim).map(|d| f(q[d]) * f(k[d])).sum::<f64>() * f64::from(scale)
                    })
                    .collect();
                let top = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
                let total: f64 = e.iter().sum();
                for d in 0..dim {
                    let want: f64 = (0..ctx).map(|t| e[t] * f(row(&vc, t)[d])).sum::<f64>() / total;
                    let have = f(got[(r * heads + h) * dim + d]);
                    assert!(
                        (have - want).abs() <= 1e-2 * want.abs().max(0.05),
                        "dim {dim}, context {ctx}, chunk {chunk}, {threads} threads (seed {seed}): row {r}, head {h}, element {d}: {have} against {want}"
                    );
                }
            }
        }
    }
}

/// `tp_decode::split` launches its kernel unchecked, so every argument it
/// cannot prove in bounds must be its own `InvalidArgument` error before
/// the launch (not the kernel's assertion, nor an out-of-bounds record):
/// each of these would index past a buffer, misalign a 16-byte load,
/// wrap a u32 index or divide by zero if launched.
#[test]
fn tp_decode_split_refuses_what_it_cannot_prove_in_bounds() {
    use symm::{bf16, run, CommOptions, ErrorKind};
    if !tier::quick() {
        return;
    }
    let Some(ranks) = targets::ranks(1) else {
        return;
    };
    // Good: 2 rows, 4 heads over 2 KV heads of 32, a context of 16 in
    // chunks of 8 (2 splits), so 16 blocks.
    let (rows, heads, kv, dim, ctx, chunk) = (2usize, 4usize, 2usize, 32usize, 16usize, 8usize);
    let stride = (heads + 2 * kv) * dim;
    let good = [stride, heads, kv, dim, ctx, chunk];
    let blocks = rows * heads * 2;
    let cache = rows * ctx * kv * dim;
    let with = |i: usize, v: usize| {
        let mut a = good;
        a[i] = v;
        a
    };
    let got = run(ranks, CommOptions::default(), |c| {
        let q = c.device_buffer::<bf16>(rows * stride + 8)?;
        let k = c.device_buffer::<bf16>(cache)?;
        let v = c.device_buffer::<bf16>(cache)?;
        let short_q = c.device_buffer::<bf16>(rows * stride - 1)?;
        let short = c.device_buffer::<bf16>(cache - 1)?;
        let mut part = c.device_buffer::<f32>(blocks * (dim + 2))?;
        let mut few = c.device_buffer::<f32>(blocks * (dim + 2) - 1)?;
        let mut out = Vec::new();
        let mut case = |what: &str, r: symm::Result<()>| {
            out.push((what.to_string(), r.map_err(|e| (e.kind(), e.to_string()))));
        };
        let split = |shape, [q, k, v]: [&symm::DeviceBuffer<bf16>; 3], p: &mut _, a| {
            tp_decode::split(c, [q, k, v], p, shape, a, 0.1)
        };
        let at = (rows, 128u32);
        case("good", split(at, [&q, &k, &v], &mut part, good));
        case(
            "short query rows",
            split(at, [&short_q, &k, &v], &mut part, good),
        );
        case("short keys", split(at, [&q, &short, &v], &mut part, good));
        case("short values", split(at, [&q, &k, &short], &mut part, good));
        case("few partials", split(at, [&q, &k, &v], &mut few, good));
        case(
            "a row more",
            split((rows + 1, 128), [&q, &k, &v], &mut part, good),
        );
        case("no rows", split((0, 128), [&q, &k, &v], &mut part, good));
        case(
            "65536 rows",
            split((65536, 128), [&q, &k, &v], &mut part, good),
        );
        case(
            "rows past u32",
            split((1 << 32, 128), [&q, &k, &v], &mut part, good),
        );
        let bad = [
            ("stride below the heads", with(0, heads * dim - 8)),
            ("stride not whole vectors", with(0, stride + 1)),
            ("stride past u32", with(0, 1 << 40)),
            ("stride past u64", with(0, 1 << 63)),
            ("query rows past u32", with(0, 1 << 31)),
            ("no heads", with(1, 0)),
            ("heads over 3 KV heads", with(2, 3)),
            ("no KV heads", with(2, 0)),
            ("dim 48", with(3, 48)),
            ("no context", with(4, 0)),
            ("chunk 0", with(5, 0)),
            ("chunk 4096", with(5, 4096)),
            ("chunk 2^32 + 8", with(5, (1 << 32) + 8)),
        ];
        for (what, a) in bad {
            case(what, split(at, [&q, &k, &v], &mut part, a));
        }
        // 2^27 splits a head, whose cache would be past u32.
        case(
            "a cache past u32",
            split(at, [&q, &k, &v], &mut part, with(4, 1 << 30)),
        );
        for (what, threads) in [
            ("48 threads", 48),
            ("no threads", 0),
            ("too many warps for the head", 4096),
        ] {
            case(what, split((rows, threads), [&q, &k, &v], &mut part, good));
        }
        // A view one element in: its 16-byte loads would be misaligned.
        let r = {
            let big = c.device_buffer::<bf16>(cache + 8)?;
            let bb = c.bind("big", &big)?;
            // (Long enough for every part: only its start is wrong.)
            let off = bb.sub(1..cache + 1).expect("in range");
            tp_decode::split(c, [&off, &off, &off], &mut part, at, good, 0.1)
        };
        case("misaligned rows", r);
        c.synchronize()?;
        Ok(out)
    })
    .expect("the cases run")
    .remove(0);
    assert!(got[0].1.is_ok(), "the good case runs: {got:#?}");
    for (what, r) in &got[1..] {
        match r {
            Err((ErrorKind::InvalidArgument, m)) if m.contains("attention_split: ") => {}
            other => panic!("{what}: want split's own InvalidArgument, got {other:?}"),
        }
    }
}
