//! The back-to-back pieces of `symm::dsl::sync` (call counters, barriers
//! that need no reset, parity staging, sentinel messages) and a `Stage`
//! from the group: kernels built on them, launched 1000 times back to back
//! with no host synchronisation, are exact on every call at worlds 2–8.
//! The same sentinel all-reduce written by hand runs beside the one built
//! on the pieces, as the measure of what the pieces save.
//!
//! On the emulator by default; on GPU ranks (sharing GPUs where there are
//! fewer) under `SYMM_KERNEL_TESTS_ON=gpu`.

use rand::Rng;
use symm::dsl::*;
use symm::{run, symm_kernel, Comm, CommOptions, LaunchConfig, Stage};

#[path = "support/targets.rs"]
mod targets;
use targets::ranks;
#[macro_use]
#[path = "support/testgen.rs"]
mod testgen;
#[path = "support/checks.rs"]
mod checks;
#[path = "support/tier.rs"]
mod tier;
use checks::{check, check_bits, sized};
#[path = "support/data.rs"]
mod data;

/// Launches of each kernel per test, back to back.
const CALLS: usize = 1000;

// ANCHOR: pieces
/// The all-reduce (sum) of `x` into `y` through a sentinel stage, `V`
/// elements (16 bytes) at a time, on the pieces: the data movement and
/// nothing else.
#[symm_kernel]
fn sentinel_sum<T: DslFloat, const V: usize>(
    x: &[T],
    y: &mut [T],
    n: u32,
    stage: SymmBuf<T>,
    ch: u32,
) {
    let call = call_begin(stage, ch);
    let mut i = grid_thread() * V as u32;
    while i < n {
        let v = load_padded::<T, V>(x, i, n);
        for r in 0..stage.world_size() {
            sentinel_send::<T, V>(stage, call, r, i, v);
        }
        let got = sentinel_take::<T, V>(stage, call, all_ranks(stage), i);
        let mut acc: [T; V] = [T::zero(); V];
        for r in 0..stage.world_size() {
            for k in 0..V {
                acc[k] += got[r][k];
            }
        }
        store_padded::<T, V>(y, i, n, acc);
        i += grid_threads() * V as u32;
    }
    call_end(stage, ch, call);
}
// ANCHOR_END: pieces

// ANCHOR: by_hand
/// The same all-reduce as [`sentinel_sum`], written by hand as a user did
/// before the pieces: the call counter, the parity halves, the ragged
/// tail, the sentinel's scrub, poll and reset, all in the kernel.
#[symm_kernel]
fn hand_made_sentinel_sum(
    x: &[f32],
    y: &mut [f32],
    n: u32,
    stage: SymmBuf<f32>,
    cap: u32,
    ch: u32,
) {
    let rank = stage.rank();
    let world = stage.world_size();
    // This block's call counter lives in its own slot of channel `ch`.
    let slot = signal_slot(ch, block_idx_x(), rank);
    let call = stage
        .pad(rank)
        .load(slot, LoadOrder::Relaxed, Scope::Gpu)
        .wrapping_add(1);
    // Calls alternate halves, so a fast rank never overwrites what a slow
    // one still reads.
    let half = (call & 1) * world * cap;
    let empty = f32::from_bits(0xFFFF_FFFFu32);
    let mine = stage.local();
    let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) * 4;
    while i < n {
        let mut v = [0.0f32; 4];
        if i + 4 <= n {
            v = x.load_vec::<4>(i);
        } else {
            for k in 0..4 {
                if i + k < n {
                    v[k] = x[i + k];
                }
            }
        }
        // All ones means "empty": send another NaN instead.
        for k in 0..4 {
            if v[k].to_bits() == 0xFFFF_FFFFu32 {
                v[k] = f32::from_bits(0x7FFF_FFFFu32);
            }
        }
        for r in 0..world {
            stage
                .peer(r)
                .store_vec_volatile::<4>(half + rank * cap + i, v);
        }
        let got: [[f32; 4]; 8] = mine.gather_ready::<4>(half + i, cap, (1u32 << world) - 1, empty);
        // Empty again for the call after next.
        let cleared: [f32; 4] = [empty; 4];
        for r in 0..world {
            mine.store_vec::<4>(half + r * cap + i, cleared);
        }
        let mut acc = [0.0f32; 4];
        for r in 0..world {
            for k in 0..4 {
                acc[k] += got[r][k];
            }
        }
        if i + 4 <= n {
            y.store_vec::<4>(i, acc);
        } else {
            for k in 0..4 {
                if i + k < n {
                    y[i + k] = acc[k];
                }
            }
        }
        i += grid_dim_x() * block_dim_x() * 4;
    }
    sync_threads();
    if thread_idx_x() == 0 {
        stage
            .pad(rank)
            .store(slot, call, StoreOrder::Relaxed, Scope::Gpu);
    }
}
// ANCHOR_END: by_hand

/// A mixed value of rank `rank`'s element `i` in call `call` (a hash, so
/// that a value read from the wrong call or rank shows).
#[symm_kernel(device)]
fn value(seed: u32, call: u32, rank: u32, i: u32) -> u32 {
    let mut h = seed ^ call.wrapping_mul(0x9E37_79B9u32);
    h = (h ^ rank.wrapping_mul(0x85EB_CA6Bu32)).wrapping_mul(0xC2B2_AE35u32);
    h = (h ^ i).wrapping_mul(0x27D4_EB2Fu32);
    h ^ (h >> 15)
}

/// Each call overwrites this rank's `x` with the call's values, pulls every
/// rank's after the entry barrier, and leaves after the exit barrier, so
/// no rank overwrites `x` while a peer still reads it: the wrapping sum of
/// every rank's values lands in `y[(call - 1) * n ..]`. A call counter and
/// both barriers, on one channel.
#[symm_kernel]
fn overwrite_and_pull(x: SymmBuf<u32>, y: &mut [u32], n: u32, seed: u32, ch: u32) {
    let call = call_begin(x, ch);
    let rank = x.rank();
    let mut i = grid_thread();
    while i < n {
        x.local()[i] = value(seed, call, rank, i);
        i += grid_threads();
    }
    enter_barrier(x, ch, call);
    let mut i = grid_thread();
    while i < n {
        let mut acc = 0u32;
        for r in 0..x.world_size() {
            acc = acc.wrapping_add(x.peer(r)[i]);
        }
        y[(call - 1) * n + i] = acc;
        i += grid_threads();
    }
    exit_barrier(x, ch, call);
    call_end(x, ch, call);
}

/// All-gather by pushing into every rank's parity half of a zeroed
/// [`Stage`], then one barrier: call `c` writes half `c & 1`, which no
/// peer reads any more (it passed this call's barrier after finishing the
/// call that last read it).
#[symm_kernel]
fn push_all_gather(x: &[u32], y: &mut [u32], n: u32, stage: SymmBuf<u32>, ch: u32) {
    let call = call_begin(stage, ch);
    let rank = stage.rank();
    let mut i = grid_thread();
    while i < n {
        for r in 0..stage.world_size() {
            stage.peer(r)[stage_at(stage, call, rank) + i] = x[i];
        }
        i += grid_threads();
    }
    enter_barrier(stage, ch, call);
    let mut i = grid_thread();
    while i < n {
        for r in 0..stage.world_size() {
            y[r * n + i] = stage.local()[stage_at(stage, call, r) + i];
        }
        i += grid_threads();
    }
    call_end(stage, ch, call);
}

fn opts() -> CommOptions {
    CommOptions::default().with_timeout(std::time::Duration::from_secs(60))
}

/// The grid and length of every test: small on the emulator, several
/// blocks with a ragged tail on a GPU (all ranks' blocks fit at once even
/// with eight ranks on one GPU).
fn shape(c: &Comm) -> (LaunchConfig, usize) {
    sized(
        c,
        (LaunchConfig::linear(2, 32), 37),
        (LaunchConfig::linear(4, 128), 1021),
    )
}

/// Runs `f` on `world` ranks (or says why not) and checks that every rank
/// got the same bits.
fn on_ranks<R: PartialEq + Send>(world: usize, f: impl Fn(&Comm) -> symm::Result<Vec<R>> + Sync) {
    let Some(r) = ranks(world) else { return };
    let out = run(r, opts(), |c| {
        let got = f(c)?;
        c.synchronize()?;
        Ok(got)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for (k, o) in out.iter().enumerate() {
        assert!(
            o == &out[0],
            "rank {k}'s results differ from rank 0's (first at {:?})",
            o.iter().zip(&out[0]).position(|(a, b)| a != b)
        );
    }
}

/// Element types of [`sentinel_sum`], each with its 16-byte vector.
trait SentinelElem: DslFloat {
    /// Launches `sentinel_sum` for this type.
    fn launch_sum(
        c: &Comm,
        cfg: LaunchConfig,
        x: &symm::SymmView<'_, Self>,
        y: &mut symm::SymmView<'_, Self>,
        n: u32,
        stage: &Stage<Self>,
    ) -> symm::Result<()>;
}

macro_rules! sentinel_elem {
    ($($t:ty => $v:literal),*) => {$(
        impl SentinelElem for $t {
            fn launch_sum(
                c: &Comm,
                cfg: LaunchConfig,
                x: &symm::SymmView<'_, Self>,
                y: &mut symm::SymmView<'_, Self>,
                n: u32,
                stage: &Stage<Self>,
            ) -> symm::Result<()> {
                sentinel_sum::launch::<$t, $v>(c, cfg, x, y, n, stage.memory(), stage.channel())
            }
        }
    )*};
}
sentinel_elem!(f32 => 4, f64 => 2, symm::bf16 => 8);

/// The launch of one call of a sentinel all-reduce.
type Launch<T> = fn(
    &Comm,
    LaunchConfig,
    &symm::SymmView<'_, T>,
    &mut symm::SymmView<'_, T>,
    u32,
    &Stage<T>,
) -> symm::Result<()>;

/// Every call of a sentinel all-reduce (`launch`: on the pieces, or by
/// hand) gives the sum in rank order of that call's inputs, in `T`, on
/// every rank.
fn sentinel_all_reduce<T: SentinelElem>(world: usize, launch: Launch<T>) {
    on_ranks(world, |c| {
        let (cfg, n) = shape(c);
        // Each call reads its own slice of fresh data and writes its own
        // slice of a poisoned output, so every call's result survives.
        // Call k's slices start at k * stride, 16-byte aligned.
        let stride = n.next_multiple_of(16);
        // Some inputs hold the stage's empty bits (all ones, a NaN), which
        // the pieces must send as another NaN: else they never arrive.
        let empty = T::from_bits64(u64::MAX);
        let x: Vec<Vec<T>> = comm_data(c, stride)?
            .into_iter()
            .enumerate()
            .map(|(r, v)| {
                v.into_iter()
                    .enumerate()
                    .map(|(e, f)| {
                        if e % 53 == 5 + r {
                            empty
                        } else {
                            T::from_f32(f)
                        }
                    })
                    .collect()
            })
            .collect();
        let xbuf = c.alloc::<T>(CALLS * stride)?;
        xbuf.copy_from_host(&x[c.rank()])?;
        let y = c.alloc::<T>(CALLS * stride)?;
        y.fill_bytes(0xA5)?;
        let stage = Stage::<T>::sentinel(c, n)?;
        for k in 0..CALLS {
            let xs = xbuf.slice(k * stride..k * stride + n)?;
            let mut ys = y.slice(k * stride..k * stride + n)?;
            launch(c, cfg, &xs, &mut ys, n as u32, &stage)?;
        }
        let all = y.to_host()?;
        let got: Vec<T> = (0..CALLS)
            .flat_map(|k| all[k * stride..k * stride + n].to_vec())
            .collect();
        let want: Vec<T> = (0..CALLS)
            .flat_map(|k| k * stride..k * stride + n)
            .map(|e| {
                let mut acc = T::zero();
                for xr in &x {
                    acc += xr[e];
                }
                acc
            })
            .collect();
        // Exact, but for a NaN sum, which is a NaN of any payload.
        let bad = got.iter().zip(&want).position(|(g, w)| {
            if w.to_f32().is_nan() {
                !g.to_f32().is_nan()
            } else {
                g.to_bits64() != w.to_bits64()
            }
        });
        check(c, bad.is_none(), || {
            let i = bad.unwrap_or(0);
            format!(
                "sentinel all-reduce: element {i} holds bits {:#x}, want {:#x}",
                got[i].to_bits64(),
                want[i].to_bits64()
            )
        })?;
        assert!(
            want.iter().any(|w| w.to_f32().is_nan()),
            "no empty bits were sent"
        );
        Ok(got.iter().map(|v| v.to_bits64()).collect())
    });
}

/// Every rank's inputs for every call ([`data::mixed_f32`], which shows a
/// wrong summation order), the same on every rank: drawn from one seed.
fn comm_data(c: &Comm, n: usize) -> symm::Result<Vec<Vec<f32>>> {
    let seed = shared_seed(c)?;
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    Ok((0..c.world_size())
        .map(|_| (0..CALLS * n).map(|_| data::mixed_f32(&mut rng)).collect())
        .collect())
}

/// A random seed that every rank of `c` agrees on: rank 0's, read by every
/// rank from rank 0's part of a symmetric buffer (host copies only).
fn shared_seed(c: &Comm) -> symm::Result<u64> {
    let buf = c.alloc::<u64>(1)?;
    if c.rank() == 0 {
        buf.copy_from_host(&[rand::rng().random::<u64>()])?;
    }
    let smem = buf.rendezvous()?;
    let ch = symm::signal::Channel::request(c)?;
    smem.barrier(&ch, std::time::Duration::from_secs(30))?;
    c.synchronize()?;
    let seed = smem.peer_buffer::<u64>(0)?.read(0, 1)?[0];
    smem.barrier(&ch, std::time::Duration::from_secs(30))?;
    c.synchronize()?;
    Ok(seed)
}

fn sentinel_on_pieces(world: usize) {
    sentinel_all_reduce::<f32>(world, f32::launch_sum);
    sentinel_all_reduce::<f64>(world, f64::launch_sum);
    sentinel_all_reduce::<symm::bf16>(world, symm::bf16::launch_sum);
}

fn sentinel_by_hand(world: usize) {
    sentinel_all_reduce::<f32>(world, |c, cfg, x, y, n, stage| {
        hand_made_sentinel_sum::launch(
            c,
            cfg,
            x,
            y,
            n,
            stage.memory(),
            stage.cap() as u32,
            stage.channel(),
        )
    })
}

/// Every call of [`overwrite_and_pull`] sees every rank's values of that
/// call, never an earlier or later call's: the barriers hold back to back.
fn barriers(world: usize) {
    on_ranks(world, |c| {
        let (cfg, n) = shape(c);
        let seed = shared_seed(c)? as u32;
        let x = c.alloc::<u32>(n)?;
        let smem = x.rendezvous()?;
        let y = c.alloc::<u32>(CALLS * n)?;
        y.fill_bytes(0xA5)?;
        let ch = symm::signal::Channel::request(c)?;
        for _ in 0..CALLS {
            overwrite_and_pull::launch(
                c,
                cfg,
                &smem,
                &mut y.slice(..)?,
                n as u32,
                seed,
                ch.index(),
            )?;
        }
        let got = y.to_host()?;
        let want: Vec<u32> = (0..CALLS * n)
            .map(|e| {
                let (call, i) = ((e / n + 1) as u32, (e % n) as u32);
                (0..world as u32).fold(0u32, |a, r| a.wrapping_add(value(seed, call, r, i)))
            })
            .collect();
        check_bits(c, "overwrite and pull", &got, &want)?;
        Ok(got)
    });
}

/// Every call of [`push_all_gather`] gathers that call's inputs.
fn parity_staging(world: usize) {
    on_ranks(world, |c| {
        let (cfg, n) = shape(c);
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(shared_seed(c)?);
        let xs: Vec<Vec<u32>> = (0..world)
            .map(|_| (0..CALLS * n).map(|_| rng.random()).collect())
            .collect();
        let x = c.alloc::<u32>(CALLS * n)?;
        x.copy_from_host(&xs[c.rank()])?;
        let y = c.alloc::<u32>(CALLS * world * n)?;
        y.fill_bytes(0xA5)?;
        let stage = Stage::<u32>::new(c, n)?;
        for k in 0..CALLS {
            let xk = x.slice(k * n..(k + 1) * n)?;
            let mut yk = y.slice(k * world * n..(k + 1) * world * n)?;
            push_all_gather::launch(
                c,
                cfg,
                &xk,
                &mut yk,
                n as u32,
                stage.memory(),
                stage.channel(),
            )?;
        }
        let got = y.to_host()?;
        let want: Vec<u32> = (0..CALLS)
            .flat_map(|k| {
                xs.iter()
                    .flat_map(move |xr| xr[k * n..(k + 1) * n].to_vec())
            })
            .collect();
        check_bits(c, "push all-gather", &got, &want)?;
        Ok(got)
    });
}

per_world! {
    sampled;
    sentinel_all_reduce_on_the_pieces_is_exact_back_to_back: sentinel_on_pieces =>
        [world_1, world_2, world_3, world_4, world_5, world_6, world_7, world_8];
    sentinel_all_reduce_by_hand_is_exact_back_to_back: sentinel_by_hand =>
        [world_2, world_3, world_4, world_8];
    barriers_hold_back_to_back: barriers =>
        [world_1, world_2, world_3, world_4, world_5, world_6, world_7, world_8];
    parity_staging_holds_back_to_back: parity_staging =>
        [world_2, world_3, world_4, world_5, world_6, world_7, world_8];
}

/// A stage of no elements, or of more than kernels can index, is an error
/// on every rank.
#[test]
fn a_stage_of_a_bad_size_is_an_error_on_every_rank() {
    if !tier::quick_test() {
        return;
    }
    let Some(r) = ranks(2) else { return };
    let err = run(r, opts(), |c| Stage::<f32>::sentinel(c, 0).map(|_| ()))
        .expect_err("a stage of 0 elements per region");
    assert_eq!(err.errors.len(), 2, "{err}");
    assert!(err.to_string().contains("at least one element"), "{err}");
    let err = run(ranks(2).unwrap(), opts(), |c| {
        Stage::<u32>::new(c, 1 << 31).map(|_| ())
    })
    .expect_err("a stage past 2^32 elements");
    assert_eq!(err.errors.len(), 2, "{err}");
    assert!(err.to_string().contains("2^32"), "{err}");
}

// Every kernel here, and so every piece, compiles with NVRTC, with bounds
// checks and without.
symm::check_kernels!(
    fn the_pieces_compile_with_nvrtc;
    sentinel_sum::<f32, 4>,
    sentinel_sum::<f64, 2>,
    sentinel_sum::<symm::bf16, 8>,
    hand_made_sentinel_sum,
    overwrite_and_pull,
    push_all_gather,
);

/// A message longer than the stage's regions, and a barrier in a block of
/// fewer threads than ranks, stop the kernel with the pieces' assertion,
/// on every rank (each rank's own threads find the condition false).
fn misuse(world: usize) {
    let Some(r) = ranks(world) else { return };
    let err = run(
        r.clone(),
        opts().with_kernel_timeout(std::time::Duration::from_secs(2)),
        |c| {
            let stage = Stage::<f32>::sentinel(c, 8)?;
            let x = c.device_buffer_from(&[1.0f32; 64])?;
            let mut y = c.device_buffer::<f32>(64)?;
            let cfg = LaunchConfig::linear(1, 32);
            sentinel_sum::launch::<f32, 4>(
                c,
                cfg,
                &x,
                &mut y,
                64,
                stage.memory(),
                stage.channel(),
            )?;
            c.synchronize()
        },
    )
    .expect_err("a message past the stage");
    every_rank_asserts(
        &err,
        world,
        "sentinel_send: elements at..at + V pass the stage's region",
    );
    if world < 2 {
        return;
    }
    let err = run(
        r,
        opts().with_kernel_timeout(std::time::Duration::from_secs(2)),
        |c| {
            let x = c.alloc::<u32>(64)?;
            let smem = x.rendezvous()?;
            let y = c.alloc::<u32>(64)?;
            let ch = symm::signal::Channel::request(c)?;
            let cfg = LaunchConfig::linear(1, world as u32 - 1);
            overwrite_and_pull::launch(c, cfg, &smem, &mut y.slice(..)?, 8, 1, ch.index())?;
            c.synchronize()
        },
    )
    .expect_err("a barrier with too few threads");
    every_rank_asserts(
        &err,
        world,
        "a barrier needs at least world_size threads per block",
    );
}

/// Every one of the `world` ranks failed with a `kernel_assert!` of the
/// pieces whose message contains `message`.
fn every_rank_asserts(err: &symm::RunError, world: usize, message: &str) {
    assert_eq!(err.errors.len(), world, "{err}");
    for (_, e) in &err.errors {
        let m = e.to_string();
        assert!(matches!(e, symm::Error::KernelAssert { .. }), "{m}");
        assert!(m.contains(message), "{m}");
        assert!(m.contains("symm-runtime/src/dsl/sync.rs:"), "{m}");
    }
}

per_world! {
    sampled;
    misuse_stops_at_the_pieces_assertions: misuse => [world_1, world_2, world_3, world_4];
}

/// A device function of the user's named like one the pieces call.
#[symm_kernel(device)]
fn flag_barrier(buf: SymmBuf<u32>, ch: u32, value: u32) {
    buf.signal_flag(0, ch, value);
}

/// Calls both the pieces' barrier (which calls their `flag_barrier`) and
/// the user's `flag_barrier`.
#[symm_kernel]
fn two_flag_barriers(buf: SymmBuf<u32>, ch: u32) {
    enter_barrier(buf, ch, 1);
    flag_barrier(buf, ch, 7);
}

/// Two device functions of one name, the user's and the one the pieces'
/// barrier calls, each keep a C name of their own (the runtime's
/// `symm_fn<k>_`), so the kernel compiles and runs on both backends, each
/// call reaching the function Rust resolved (before, the GPU's C++ picked
/// the user's for both; then the launch was refused).
#[test]
fn device_functions_named_alike_both_run() {
    if !tier::quick_test() {
        return;
    }
    let Some(r) = ranks(2) else { return };
    run(r, opts(), |c| {
        let buf = c.alloc::<u32>(8)?;
        let smem = buf.rendezvous()?;
        let ch = symm::signal::Channel::request(c)?;
        two_flag_barriers::launch(c, LaunchConfig::linear(1, 32), &smem, ch.index())?;
        c.synchronize()
    })
    .expect("two device functions named flag_barrier");
    if symm::jit::require_nvrtc("two_flag_barriers") {
        two_flag_barriers::compile_for(targets::ARCHES[0]).expect("compiles with NVRTC");
    }
}
