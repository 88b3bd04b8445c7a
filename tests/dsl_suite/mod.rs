//! DSL test kernels, their CPU references, and the drivers that run them
//! on a rank of either backend and check every output: one driver per
//! behaviour, run on the emulator by `tests/emulator_kernels.rs` (CI) and on
//! GPU ranks by the same tests under `SYMM_KERNEL_TESTS_ON=gpu`, and compiled
//! for sm_80 and sm_90 by `tests/dsl_kernels_compile.rs`.
//!
//! The drivers draw fresh random data, poison every output first, compare
//! bit for bit, and size the work by the backend ([`sized`]): GPU-sized on a
//! GPU rank, small on the emulator so that CI stays fast.

#![allow(dead_code)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use symm::dsl::*;
use symm::kernels::{broadcast, ping_pong, ring_all_gather};
use symm::signal::Channel;
use symm::{symm_kernel, Comm, DeviceBuffer, LaunchConfig};

// Each suite brings its own copy, so that a test file may include both.
#[allow(clippy::duplicate_mod)]
#[path = "../support/checks.rs"]
mod checks;
pub use checks::{check, check_bits, sized};

/// Floating-point arithmetic, min/max/abs/fma/sqrt, casts and a helper.
#[symm_kernel(device)]
pub fn mix<T: DslFloat>(a: T, b: T) -> T {
    let c = a * b + a - b / (abs(b) + T::one());
    max(min(c, a * T::from_f32(2.0f32)), fma(a, b, c))
}

#[symm_kernel]
pub fn arith<T: DslFloat>(x: &[T], y: &[T], out: &mut [T], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let a = x[i];
        let b = y[i];
        let m = mix(a, b);
        let q = (abs(m) + T::one()).sqrt();
        out[i] = if a > b { m - q } else { -(m + q) };
    }
}

pub fn arith_ref<T: DslFloat>(a: T, b: T) -> T {
    let c = a * b + a - b / (Num::abs(b) + T::one());
    let m = Num::max(Num::min(c, a * T::from_f32(2.0)), Num::fma(a, b, c));
    let q = DslFloat::sqrt(Num::abs(m) + T::one());
    if a > b {
        m - q
    } else {
        -(m + q)
    }
}

/// `exp` (the one intrinsic that is not exact).
#[symm_kernel]
pub fn exps(x: &[f32], out: &mut [f32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        out[i] = exp(x[i]);
    }
}

/// Integer operators, shifts, remainders, wrapping, casts and `!`.
#[symm_kernel]
pub fn int_ops(x: &[u32], out: &mut [u32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let a = x[i];
        let s = (a as i32) >> 3;
        let f = (a % 1000) as f32 * 0.5f32;
        let mut r = (a ^ (a << 3)) >> 2;
        r = r.wrapping_add(a % 7 * (a / 13 + 1));
        r |= !a & 0xff;
        out[i] = r ^ (s as u32) ^ (f as u32) ^ ((a as u64 * 3) >> 33) as u32;
    }
}

pub fn int_ops_ref(a: u32) -> u32 {
    let s = (a as i32) >> 3;
    let f = (a % 1000) as f32 * 0.5;
    let mut r = (a ^ (a << 3)) >> 2;
    r = r.wrapping_add(a % 7 * (a / 13 + 1));
    r |= !a & 0xff;
    r ^ (s as u32) ^ (f as u32) ^ ((a as u64 * 3) >> 33) as u32
}

/// Names the generated C must keep apart, and narrow integers that C++
/// would promote to `int` (the misuse pass's cases): a slice `x` beside a
/// scalar `x_len`, shadowed `x`s beside a parameter `x_2` and a local `x_3`,
/// a non-ASCII name, C++ keywords as names, and `u8`/`u16` shifts whose
/// bits must fall off at the type's width.
#[symm_kernel]
pub fn names_and_narrow(x: &[u32], x_len: u32, x_2: u32, out: &mut [u32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let v = x[i];
        let x_3 = v ^ x_2;
        let x = v;
        let x = x.wrapping_add(x_2);
        let größe = x ^ x_len;
        let int = größe >> 1;
        let b = (v & 0xff) as u8;
        let s = b << 4;
        let t = s >> 4;
        let h = (v >> 8) as u16;
        let hs = h << 9;
        let hr = hs >> 9;
        let auto = (b << 7) >> 7;
        out[i] = int ^ x_3 ^ ((t as u32) << 8) ^ ((hr as u32) << 16) ^ ((auto as u32) << 24);
    }
}

pub fn names_and_narrow_ref(v: u32, x_len: u32, x_2: u32) -> u32 {
    let x_3 = v ^ x_2;
    let x = v.wrapping_add(x_2);
    let int = (x ^ x_len) >> 1;
    let b = (v & 0xff) as u8;
    let t = (b << 4) >> 4;
    let h = (v >> 8) as u16;
    let hr = (h << 9) >> 9;
    let auto = (b << 7) >> 7;
    int ^ x_3 ^ ((t as u32) << 8) ^ ((hr as u32) << 16) ^ ((auto as u32) << 24)
}

/// Device functions of one name: `helper` from two modules (one of them
/// called through a renamed import), and a `lane_id` of this module's that
/// shadows the intrinsic while a callee elsewhere calls the intrinsic. Each
/// keeps a C name of its own in the kernel (the C calls dependencies by
/// index), so the GPU runs what Rust's name resolution picked.
pub mod one_name {
    use symm::dsl::*;
    use symm::symm_kernel;

    pub mod a {
        use symm::dsl::*;
        use symm::symm_kernel;

        #[symm_kernel(device)]
        pub fn helper(v: u32) -> u32 {
            v.wrapping_mul(3)
        }

        #[symm_kernel(device)]
        pub fn real_lane() -> u32 {
            lane_id()
        }
    }

    pub mod b {
        use symm::symm_kernel;

        #[symm_kernel(device)]
        pub fn helper(v: u32) -> u32 {
            v ^ 0x5a5a
        }
    }

    use b::helper as other;

    /// Not the intrinsic: this module's own.
    #[symm_kernel(device)]
    fn lane_id() -> u32 {
        7
    }

    #[symm_kernel]
    pub fn same_names(x: &[u32], out: &mut [u32], n: u32) {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        if i < n {
            out[i] = a::helper(x[i]) ^ other(x[i]) ^ lane_id() ^ (a::real_lane() << 8);
        }
    }

    /// What `same_names` writes at `i` (blocks of whole warps).
    pub fn same_names_ref(v: u32, i: usize) -> u32 {
        v.wrapping_mul(3) ^ (v ^ 0x5a5a) ^ 7 ^ (((i % 32) as u32) << 8)
    }
}
pub use one_name::{same_names, same_names_ref};

/// Loops (unrolled over a const generic, stepped, `loop` with break and
/// continue, `while`), register arrays, `if` as a value, early return.
#[symm_kernel]
pub fn control<const W: usize>(x: &[i32], out: &mut [i32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i >= n {
        return;
    }
    let v = x[i];
    let mut acc: [i32; W] = [0; W];
    for j in 0..W {
        acc[j] = v.wrapping_mul(j as i32 + 1);
    }
    let mut s: i32 = 0;
    for j in (0..W).step_by(2) {
        s = s.wrapping_add(acc[j]);
    }
    let mut k: u32 = 0;
    loop {
        k += 1;
        if k > 10 {
            break;
        }
        if k % 3 == 0 {
            continue;
        }
        s ^= k as i32;
    }
    let mut w = v;
    while w > 100 {
        w /= 2;
    }
    let sign = if v < 0 { -1i32 } else { 1 };
    out[i] = s.wrapping_add(w * sign);
}

pub fn control_ref<const W: usize>(v: i32) -> i32 {
    let acc: Vec<i32> = (0..W).map(|j| v.wrapping_mul(j as i32 + 1)).collect();
    let mut s: i32 = 0;
    for j in (0..W).step_by(2) {
        s = s.wrapping_add(acc[j]);
    }
    for k in 1..=10u32 {
        if k % 3 != 0 {
            s ^= k as i32;
        }
    }
    let mut w = v;
    while w > 100 {
        w /= 2;
    }
    let sign = if v < 0 { -1 } else { 1 };
    s.wrapping_add(w * sign)
}

/// Atomics on local memory: add, max, min, exchange and a CAS loop.
/// `counters`: [0..8) add, [8..12) max, [12..16) min, 16 CAS-max, 17 exch count.
#[symm_kernel]
pub fn atomics(x: &[u32], counters: &mut [u32], fsum: &mut [f32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let v = x[i];
        counters.atomic_add(i % 8, 1, RmwOrder::Relaxed, Scope::Gpu);
        counters.atomic_max(8 + i % 4, v, RmwOrder::Relaxed, Scope::Gpu);
        counters.atomic_min(12 + i % 4, v, RmwOrder::Relaxed, Scope::Gpu);
        let mut cur = counters.load(16, LoadOrder::Relaxed, Scope::Gpu);
        while cur < v {
            let seen = counters.atomic_cas(16, cur, v, RmwOrder::AcqRel, Scope::Gpu);
            if seen == cur {
                break;
            }
            cur = seen;
        }
        let old = counters.atomic_exch(18, v, RmwOrder::Relaxed, Scope::Gpu);
        if old != 0xFFFF_FFFFu32 {
            counters.atomic_add(17, 1, RmwOrder::Relaxed, Scope::Gpu);
        }
        fsum.atomic_add(i % 2, (v % 1024) as f32, RmwOrder::Relaxed, Scope::Gpu);
    }
}

/// 16-byte vector loads and stores: each thread reverses a group of 4 f32
/// and a group of 8 bf16.
#[symm_kernel]
pub fn vectors(x: &[f32], out: &mut [f32], h: &[bf16], hout: &mut [bf16], groups: u32) {
    let g = block_idx_x() * block_dim_x() + thread_idx_x();
    if g < groups {
        let v = x.load_vec::<4>(g * 4);
        let r: [f32; 4] = [v[3], v[2], v[1], v[0]];
        out.store_vec::<4>(g * 4, r);
        let w = h.load_vec::<8>(g * 8);
        let mut q: [bf16; 8] = w;
        for k in 0..8u32 {
            q[k] = w[7 - k];
        }
        hout.store_vec::<8>(g * 8, q);
    }
}

/// Shared memory and block barriers: each block sums its 256 inputs by a
/// tree reduction in shared memory, and writes the block's inputs reversed.
#[symm_kernel]
pub fn shared_reduce(x: &[f32], sums: &mut [f32], rev: &mut [f32]) {
    let s = shared_array::<f32, 256>();
    let t = thread_idx_x();
    let base = block_idx_x() * 256;
    s[t] = x[base + t];
    sync_threads();
    rev[base + t] = s[255 - t];
    sync_threads();
    let mut width: u32 = 128;
    while width > 0 {
        if t < width {
            s[t] = s[t] + s[t + width];
        }
        sync_threads();
        width /= 2;
    }
    if t == 0 {
        sums[block_idx_x()] = s[0];
    }
}

/// Reference for one block of `shared_reduce`: the same tree order.
pub fn shared_reduce_ref(block: &[f32]) -> f32 {
    let mut s = block.to_vec();
    let mut width = 128;
    while width > 0 {
        for t in 0..width {
            s[t] += s[t + width];
        }
        width /= 2;
    }
    s[0]
}

/// Warp shuffles and ballot: a butterfly sum of u32 (wrapping) per warp, and
/// the ballot of odd inputs.
#[symm_kernel]
pub fn shuffles(x: &[u32], sums: &mut [u32], votes: &mut [u32]) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    let mut v = x[i];
    let mut m: u32 = 16;
    while m > 0 {
        v = v.wrapping_add(shfl_xor(v, m));
        m /= 2;
    }
    let b = ballot((x[i] & 1) == 1);
    sums[i] = v;
    if lane_id() == 0 {
        votes[i / 32] = b;
    }
}

/// Peer stores and loads with ordering (message passing around the ring):
/// for k in 1..=iters, rank r writes k-dependent data into the next rank's
/// slots with relaxed stores, then releases flag k there; it acquires the
/// previous rank's flag k, checks the data, and acknowledges. Slot layout:
/// 0 flag (from prev), 1 ack (from next), 2 errors, 3 timeouts, 8.. data.
#[symm_kernel]
pub fn message_passing(buf: SymmBuf<u32>, iters: u32, seed: u32) {
    if thread_idx_x() != 0 || block_idx_x() != 0 {
        return;
    }
    let rank = buf.rank();
    let world = buf.world_size();
    let next = buf.peer((rank + 1) % world);
    let prev_rank = (rank + world - 1) % world;
    let prev = buf.peer(prev_rank);
    let me = buf.local();
    for k in 1..iters + 1 {
        // Wait until next has consumed round k - 1 before overwriting.
        let t0 = globaltimer();
        while me.load(1, LoadOrder::Acquire, Scope::System) < k - 1 {
            if globaltimer() - t0 > 2_000_000_000u64 {
                me.atomic_add(3, 1, RmwOrder::Relaxed, Scope::System);
                return;
            }
        }
        for j in 0..16u32 {
            next.store(
                8 + j,
                seed ^ (k * 16 + j) ^ rank,
                StoreOrder::Relaxed,
                Scope::System,
            );
        }
        next.store(0, k, StoreOrder::Release, Scope::System);
        let t1 = globaltimer();
        while me.load(0, LoadOrder::Acquire, Scope::System) < k {
            if globaltimer() - t1 > 2_000_000_000u64 {
                me.atomic_add(3, 1, RmwOrder::Relaxed, Scope::System);
                return;
            }
        }
        for j in 0..16u32 {
            if me.load(8 + j, LoadOrder::Relaxed, Scope::System) != seed ^ (k * 16 + j) ^ prev_rank
            {
                me.atomic_add(2, 1, RmwOrder::Relaxed, Scope::System);
            }
        }
        prev.store(1, k, StoreOrder::Release, Scope::System);
    }
}

/// The smallest kernel, for launch-overhead measurements.
#[symm_kernel]
pub fn copy_n(x: &[f32], y: &mut [f32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = x[i];
    }
}

/// `y[t] = Σ_i a[i] · (s + i)` over thread `t`'s 128 values `a` of `x`
/// (from `t × 128`), where `s` is their sum: every value is live until `s`
/// is known, more registers a thread than a block of 1024 holds unless the
/// kernel is compiled for such blocks.
#[symm_kernel(device)]
pub fn many_live(x: Slice<f32>, y: SliceMut<f32>) {
    let t = block_idx_x() * block_dim_x() + thread_idx_x();
    let mut a: [f32; 128] = [0.0f32; 128];
    for i in 0..128 {
        a[i] = x[t * 128u32 + i as u32];
    }
    let mut s = 0.0f32;
    for i in 0..128 {
        s += a[i];
    }
    let mut o = 0.0f32;
    for i in 0..128 {
        o += a[i] * (s + i as f32);
    }
    y[t] = o;
}

/// [`many_live`] as compiled by default: as many registers as it wants.
#[symm_kernel]
pub fn many_live_any(x: &[f32], y: &mut [f32]) {
    many_live(x, y);
}

/// [`many_live`] compiled for blocks of up to 1024 threads
/// (`__launch_bounds__`): its registers fit such a block.
#[symm_kernel(max_threads = 1024)]
pub fn many_live_1024(x: &[f32], y: &mut [f32]) {
    many_live(x, y);
}

/// [`copy_n`] compiled for blocks of at most 64 threads.
#[symm_kernel(max_threads = 64)]
pub fn copy_n_64(x: &[f32], y: &mut [f32], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        y[i] = x[i];
    }
}

/// `max_threads`: [`copy_n_64`] runs with blocks of 64 threads and refuses
/// 96 (to launch, and to size a co-resident grid for), alike on both
/// backends; [`many_live_1024`] runs with blocks of 1024
/// threads, and on a GPU [`many_live_any`] does not, with an error that
/// says why (its registers) and what fits. Outputs poisoned first and
/// checked against the host's sums in the kernel's order.
pub fn run_block_bounds(c: &Comm) -> symm::Result<()> {
    let mut rng = StdRng::seed_from_u64(rand::random());
    let n = 256usize;
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let xb = c.device_buffer_from(&x)?;
    let mut yb = c.device_buffer_from(&vec![f32::NAN; n])?;
    copy_n_64::launch(c, LaunchConfig::linear(4, 64), &xb, &mut yb, n as u32)?;
    c.synchronize()?;
    check(c, yb.to_host()? == x, || {
        "copy_n_64: the copy differs".into()
    })?;
    let e = copy_n_64::launch(c, LaunchConfig::linear(3, 96), &xb, &mut yb, n as u32)
        .map(|_| "launched".to_string())
        .unwrap_or_else(|e| e.to_string());
    check(
        c,
        e.contains("a block of 96 threads") && e.contains("max_threads = 64"),
        || format!("copy_n_64 with blocks of 96: {e}"),
    )?;
    let e = copy_n_64::co_resident_grid(c, 96, 0)
        .map(|g| format!("{g:?}"))
        .unwrap_or_else(|e| e.to_string());
    check(c, e.contains("max_threads = 64"), || {
        format!("copy_n_64's co-resident grid for blocks of 96: {e}")
    })?;
    let threads = 1024usize;
    let x: Vec<f32> = (0..threads * 128)
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect();
    let want: Vec<f32> = x
        .chunks(128)
        .map(|a| {
            let s = a.iter().fold(0.0f32, |s, &v| s + v);
            a.iter()
                .enumerate()
                .fold(0.0f32, |o, (i, &v)| o + v * (s + i as f32))
        })
        .collect();
    let xb = c.device_buffer_from(&x)?;
    let mut yb = c.device_buffer_from(&vec![f32::NAN; threads])?;
    let block = LaunchConfig::linear(1, threads as u32);
    many_live_1024::launch(c, block, &xb, &mut yb)?;
    c.synchronize()?;
    check_bits(c, "many_live_1024", &yb.to_host()?, &want)?;
    if c.backend_kind() != symm::BackendKind::Emulator {
        // (Registers are a GPU's: the emulator has no such limit.)
        let e = many_live_any::launch(c, block, &xb, &mut yb)
            .map(|_| "launched".to_string())
            .unwrap_or_else(|e| e.to_string());
        check(
            c,
            e.contains("its registers (") && e.contains("max_threads = 1024"),
            || format!("many_live_any with blocks of 1024: {e}"),
        )?;
    }
    Ok(())
}

/// Every block of every rank counts itself in rank 0's word 0, then waits
/// (at most `timeout_ns`) until all `world × grid` blocks have: it finishes
/// only if every block of every rank is resident at once. A block that
/// gives up counts itself in its own rank's word 1.
#[symm_kernel]
pub fn all_arrive(buf: SymmBuf<u32>, timeout_ns: u64) {
    if thread_idx_x() == 0 {
        let total = buf.world_size() * grid_dim_x();
        let home = buf.peer(0);
        home.atomic_add(0, 1, RmwOrder::Relaxed, Scope::System);
        let t0 = globaltimer();
        while home.load(0, LoadOrder::Relaxed, Scope::System) < total {
            if globaltimer() - t0 > timeout_ns {
                buf.local()
                    .atomic_add(1, 1, RmwOrder::Relaxed, Scope::System);
                return;
            }
        }
    }
}

/// Thread 0 of block 0 waits for a signal from `src` that may never come.
#[symm_kernel]
pub fn wait_on(buf: SymmBuf<u32>, src: u32, channel: u32) {
    if thread_idx_x() == 0 && block_idx_x() == 0 {
        buf.wait_signal(src, channel);
    }
}

/// A plain one-shot all-reduce (sum, fixed rank order, so every rank gets
/// the same bits): per-block barrier, pull-and-sum, closing barrier, on
/// channels `entry` and `exit`.
#[symm_kernel]
pub fn one_shot_sum(buf: SymmBuf<f32>, out: &mut [f32], n: u32, entry: u32, exit: u32) {
    let rank = buf.rank();
    let world = buf.world_size();
    let t = thread_idx_x();
    if t < world && t != rank {
        buf.put_signal(t, entry);
        buf.wait_signal(t, entry);
    }
    sync_threads();
    let mut i = block_idx_x() * block_dim_x() + t;
    while i < n {
        let mut acc: f32 = 0.0;
        for r in 0..world {
            acc += buf.peer(r)[i];
        }
        out[i] = acc;
        i += grid_dim_x() * block_dim_x();
    }
    sync_threads();
    if t < world && t != rank {
        buf.put_signal(t, exit);
        buf.wait_signal(t, exit);
    }
}

/// A reduce-scatter whose world size is compiled in: rank r sums chunk r
/// (`n` elements) of every rank's `W` chunks into `out`, in rank order,
/// between barriers that thread 0 runs. Launched with `W` other than the
/// world size, it would read chunks of ranks that do not exist or skip
/// ranks that do, and wait for signals nobody sends (the issue's "`Ok`
/// with wrong data on two ranks, the third hung"); its assertion stops it
/// first. Thread 0 checks before the block's first barrier, so that no
/// other thread records a failure before it.
#[symm_kernel]
pub fn reduce_scatter_w<const W: usize>(
    buf: SymmBuf<f32>,
    out: &mut [f32],
    n: u32,
    entry: u32,
    exit: u32,
) {
    let rank = buf.rank();
    let t = thread_idx_x();
    if t == 0 {
        kernel_assert!(
            W as u32 == buf.world_size(),
            "reduce_scatter_w was compiled for another world size"
        );
        for p in 0..W as u32 {
            if p != rank {
                buf.put_signal(p, entry);
            }
        }
        for p in 0..W as u32 {
            if p != rank {
                buf.wait_signal(p, entry);
            }
        }
    }
    sync_threads();
    let mut i = t;
    while i < n {
        let mut acc: f32 = 0.0;
        for r in 0..W as u32 {
            acc += buf.peer(r)[rank * n + i];
        }
        out[i] = acc;
        i += block_dim_x();
    }
    sync_threads();
    if t == 0 {
        for p in 0..W as u32 {
            if p != rank {
                buf.put_signal(p, exit);
                buf.wait_signal(p, exit);
            }
        }
    }
}

/// An all-to-all of one `u32` per rank pair, with a handshake per peer:
/// thread p writes this rank's word for p (`local()[p]`) into p's slot for
/// this rank (`peer(p)[world + rank]`), signals p and waits for p's word.
/// With fewer threads than ranks, some peers' words never come and their
/// partners wait forever (the second case); thread 0's assertion
/// stops it first.
#[symm_kernel]
pub fn all_to_all_one(buf: SymmBuf<u32>, out: &mut [u32], ch: u32) {
    let world = buf.world_size();
    let rank = buf.rank();
    let p = thread_idx_x();
    if p == 0 {
        kernel_assert!(
            block_dim_x() >= world,
            "all_to_all_one needs a thread per rank"
        );
    }
    sync_threads();
    if p < world {
        let mine = buf.local();
        buf.peer(p)[world + rank] = mine[p];
        if p != rank {
            buf.put_signal(p, ch);
            buf.wait_signal(p, ch);
        }
        out[p] = mine[world + p];
    }
}

/// Thread t writes `buf.ring_peer(steps[t])` (odd threads through a local
/// bound to `buf`): a handle method defined by path (`symm::dsl::methods`),
/// whose CUDA C and Rust stub must agree.
#[symm_kernel]
pub fn ring_peers(buf: SymmBuf<u32>, steps: &[u32], out: &mut [u32]) {
    let t = thread_idx_x() as usize;
    if t < out.len() {
        // Through the parameter, and through a local bound to it.
        if t % 2 == 0 {
            out[t] = buf.ring_peer(steps[t]);
        } else {
            let b = buf;
            out[t] = b.ring_peer(steps[t]);
        }
    }
}

/// [`ring_peers`] on `c`'s rank, for random steps, the steps around the
/// world size and `u32::MAX`, against `(rank + step) mod world` in 64 bits.
pub fn run_ring_peers(c: &Comm, seed: u64) -> symm::Result<()> {
    let (r, world) = (c.rank() as u64, c.world_size() as u32);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut steps: Vec<u32> = (0..2 * world + 2).collect();
    steps.extend([u32::MAX, u32::MAX - 1, u32::MAX - world]);
    steps.extend((0..32).map(|_| rng.random::<u32>()));
    let want: Vec<u32> = steps
        .iter()
        .map(|&s| ((r + u64::from(s)) % u64::from(world)) as u32)
        .collect();
    let buf = c.alloc::<u32>(1)?;
    let s = buf.rendezvous()?;
    let d_steps = c.device_buffer_from(&steps)?;
    let mut out = c.device_buffer_from(&vec![u32::MAX; steps.len()])?;
    ring_peers::launch(c, LaunchConfig::linear(1, 64), &s, &d_steps, &mut out)?;
    c.synchronize()?;
    check_bits(c, "ring_peers", &out.to_host()?, &want)
}

/// The thread of linear index `bad` (over the grid, x fastest) stops at an
/// assertion: the kernel's own (its message the condition), or with
/// `in_helper` that of a device function (a message of its own). Every
/// other thread writes its index.
#[symm_kernel]
pub fn one_thread_asserts(out: &mut [u32], bad: u32, in_helper: bool) {
    let t = thread_idx_x() + block_dim_x() * thread_idx_y();
    let i = block_idx_x() * block_dim_x() * block_dim_y() + t;
    if in_helper {
        out[i] = not_the_bad_one(i, bad);
    } else {
        kernel_assert!(i != bad);
        out[i] = i;
    }
}

/// `i`, after asserting that it is not `bad`.
#[symm_kernel(device)]
pub fn not_the_bad_one(i: u32, bad: u32) -> u32 {
    kernel_assert!(i != bad, "not_the_bad_one reached the bad index");
    i
}

/// Where the `kernel_assert!` whose text contains `needle` (found once in
/// this file) starts, as a failure reports it: `file:line:column`, counted
/// here in the source text, apart from the macro's spans.
pub fn assert_place(needle: &str) -> String {
    let src = include_str!("mod.rs");
    let mut hits = src.match_indices(needle).map(|(at, _)| at);
    let (Some(at), None) = (hits.next(), hits.next()) else {
        panic!("tests/dsl_suite/mod.rs does not hold {needle:?} exactly once")
    };
    let start = src[..at + needle.len()]
        .rfind("kernel_assert!")
        .expect("a kernel_assert! before the needle");
    let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
    let line = src[..start].matches('\n').count() + 1;
    format!("tests/dsl_suite/mod.rs:{line}:{}", start - line_start + 1)
}

/// [`reduce_scatter_w`] with `W = w` (1 to 9) over `buf` (`world × n`
/// elements), on channels `entry` and `exit`, in one block of 64 threads.
pub fn launch_reduce_scatter(
    c: &Comm,
    w: usize,
    buf: &symm::SymmetricMemory,
    out: &mut symm::DeviceBuffer<f32>,
    n: u32,
    (entry, exit): (u32, u32),
) -> symm::Result<()> {
    let cfg = LaunchConfig::linear(1, 64);
    let k = match w {
        1 => reduce_scatter_w::launch::<1>,
        2 => reduce_scatter_w::launch::<2>,
        3 => reduce_scatter_w::launch::<3>,
        4 => reduce_scatter_w::launch::<4>,
        5 => reduce_scatter_w::launch::<5>,
        6 => reduce_scatter_w::launch::<6>,
        7 => reduce_scatter_w::launch::<7>,
        8 => reduce_scatter_w::launch::<8>,
        9 => reduce_scatter_w::launch::<9>,
        _ => {
            return Err(symm::Error::InvalidArgument {
                rank: c.rank(),
                group: c.group_name().clone(),
                message: format!("no reduce_scatter_w for W = {w}"),
            })
        }
    };
    k(c, cfg, buf, out, n, entry, exit)
}

/// Rank `r`'s input to [`run_reduce_scatter`]: `world × n` small integers
/// (so that every sum is exact), drawn from `seed`.
pub fn reduce_scatter_input(seed: u64, r: usize, len: usize) -> Vec<f32> {
    let mut g = StdRng::seed_from_u64(seed ^ (r as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (0..len)
        .map(|_| g.random_range(-1000i32..1000) as f32)
        .collect()
}

/// [`reduce_scatter_w`] launched with `W = w` on every rank of `c`'s group
/// over inputs from `seed`, then synchronised; with `w` the world size, its
/// chunk is checked bit for bit against the sums in rank order.
pub fn run_reduce_scatter(c: &Comm, w: usize, seed: u64) -> symm::Result<()> {
    let (r, world) = (c.rank(), c.world_size());
    let n = sized(c, 37, 4099);
    let buf = c.alloc::<f32>(world * n)?;
    buf.copy_from_host(&reduce_scatter_input(seed, r, world * n))?;
    let s = buf.rendezvous()?;
    let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
    let channels = (Channel::request(c)?.index(), Channel::request(c)?.index());
    launch_reduce_scatter(c, w, &s, &mut out, n as u32, channels)?;
    c.synchronize()?;
    let inputs: Vec<Vec<f32>> = (0..world)
        .map(|p| reduce_scatter_input(seed, p, world * n))
        .collect();
    let want: Vec<f32> = (0..n)
        .map(|i| inputs.iter().fold(0.0f32, |acc, x| acc + x[r * n + i]))
        .collect();
    check_bits(c, "reduce_scatter_w", &out.to_host()?, &want)
}

/// [`all_to_all_one`] on every rank of `c`'s group in one block of
/// `threads`; with enough threads, every word is checked.
pub fn run_all_to_all(c: &Comm, threads: u32) -> symm::Result<()> {
    let (r, world) = (c.rank() as u32, c.world_size() as u32);
    let word = |from: u32, to: u32| 0x5700_0000 | (from << 8) | to;
    let buf = c.alloc::<u32>(2 * world as usize)?;
    let mut init: Vec<u32> = (0..world).map(|p| word(r, p)).collect();
    init.extend(std::iter::repeat_n(u32::MAX, world as usize));
    buf.copy_from_host(&init)?;
    let s = buf.rendezvous()?;
    let ch = Channel::request(c)?;
    // Every rank's slots are poisoned before any peer writes them.
    s.barrier(&ch, std::time::Duration::from_secs(20))?;
    let mut out = c.device_buffer_from(&vec![u32::MAX; world as usize])?;
    all_to_all_one::launch(
        c,
        LaunchConfig::linear(1, threads),
        &s,
        &mut out,
        ch.index(),
    )?;
    c.synchronize()?;
    let want: Vec<u32> = (0..world).map(|p| word(p, r)).collect();
    check_bits(c, "all_to_all_one", &out.to_host()?, &want)
}

/// A device function's shared array: its own, apart from its caller's.
#[symm_kernel(device)]
pub fn stash_reversed(v: u32) -> u32 {
    let s = shared_array::<u32, 32>();
    let t = thread_idx_x();
    s[t] = v;
    sync_threads();
    s[31 - t]
}

/// Keeps `x` in a shared array across a call to [`stash_reversed`] (whose
/// shared array has the same type and size): `out[t] = x[t] + 3 x[31 - t] + 1`
/// for one block of 32 threads.
#[symm_kernel]
pub fn shared_scopes(x: &[u32], out: &mut [u32]) {
    let s = shared_array::<u32, 32>();
    let t = thread_idx_x();
    s[t] = x[t];
    sync_threads();
    let other = stash_reversed(x[t] * 3 + 1);
    sync_threads();
    out[t] = s[t] + other;
}

/// `lanes[linear thread id] = lane_id()`, for 2-D blocks of 16 × `y` threads.
#[symm_kernel]
pub fn lanes(lanes: &mut [u32]) {
    lanes[thread_idx_y() * 16 + thread_idx_x()] = lane_id();
}

/// Sentinel-marked pushes from every peer, received at once: each rank
/// but `silent` stores `src[0..N]` into slot `rank` (elements `rank * N..`)
/// of every other rank's `stage`, which starts all ones (empty); then every
/// rank gathers the other ranks' slots with `gather_ready` into
/// `out[r * N..]`. Thread 0 of block 0 only.
#[symm_kernel]
pub fn gather_vectors<T: Scalar, const N: usize>(
    stage: SymmBuf<T>,
    src: &[T],
    out: &mut [T],
    silent: u32,
) {
    if thread_idx_x() != 0 || block_idx_x() != 0 {
        return;
    }
    let rank = stage.rank();
    let world = stage.world_size();
    let mut v: [T; N] = [src[0]; N];
    for k in 0..N {
        v[k] = src[k as u32];
    }
    if rank != silent {
        for r in 0..world {
            if r != rank {
                stage.peer(r).store_vec_volatile::<N>(rank * N as u32, v);
            }
        }
    }
    let empty = T::from_bits32(0xFFFF_FFFFu32);
    let peers = ((1u32 << world) - 1) & !(1u32 << rank);
    let got: [[T; N]; 8] = stage
        .local()
        .gather_ready::<N>(0u32, N as u32, peers, empty);
    for r in 0..world {
        if r != rank {
            let g = got[r];
            for k in 0..N {
                out[r * N as u32 + k as u32] = g[k];
            }
        }
    }
}

/// LL packet pairs from every rank (itself included), received at once:
/// each rank stores `(t, seed ^ rank)` and `(t, seed ^ rank ^ 1)` into
/// slot `rank` (elements `2 rank..`) of every rank's `stage`, then gathers
/// every slot into `out[2 r..]`: with `gather_tagged2` for `tag` when
/// `round` is all ones, else with `gather_tagged2_checked` (`round` the
/// bits that say "this round"). `t` is `tag`, except on rank `odd`, whose
/// `t` differs from it outside `round` (bit 24): a packet of this round
/// from another call, which fails every rank's checked gather. Thread 0 of
/// block 0.
#[symm_kernel]
pub fn gather_packets(
    stage: SymmBuf<u64>,
    out: &mut [u64],
    tag: u32,
    seed: u32,
    round: u32,
    odd: u32,
) {
    if thread_idx_x() != 0 || block_idx_x() != 0 {
        return;
    }
    let rank = stage.rank();
    let world = stage.world_size();
    let t = if rank == odd {
        tag ^ 0x0100_0000u32
    } else {
        tag
    };
    let hi = (t as u64) << 32;
    let pkt: [u64; 2] = [hi | ((seed ^ rank) as u64), hi | ((seed ^ rank ^ 1) as u64)];
    for r in 0..world {
        stage.peer(r).store_vec_volatile::<2>(rank * 2, pkt);
    }
    let ranks = (1u32 << world) - 1;
    let got: [[u64; 2]; 8] = if round == 0xFFFF_FFFFu32 {
        stage.local().gather_tagged2(0u32, 2u32, ranks, tag)
    } else {
        stage
            .local()
            .gather_tagged2_checked(0u32, 2u32, ranks, tag, round)
    };
    for r in 0..world {
        let g = got[r];
        out[r * 2] = g[0];
        out[r * 2 + 1] = g[1];
    }
}

/// What [`gather_packets`] writes on every rank of `world` (no odd rank).
pub fn gather_packets_ref(world: u32, tag: u32, seed: u32) -> Vec<u64> {
    (0..world)
        .flat_map(|r| {
            let hi = u64::from(tag) << 32;
            [hi | u64::from(seed ^ r), hi | u64::from(seed ^ r ^ 1)]
        })
        .collect()
}

/// The round masks of [`run_gather_packets`]' rounds: `gather_tagged2`,
/// then `gather_tagged2_checked` (round 1's packets, still in the stage,
/// differ from round 2's tag inside the mask: they must be neither taken
/// nor called another call's).
pub const GATHER_PACKET_ROUNDS: [u32; 2] = [u32::MAX, 0x00FF_FFFF];

/// [`gather_vectors`] on `c`'s rank with `mine` as its vector, on a fresh
/// stage that starts empty (all ones) and no silent rank; returns `out`
/// (rank r's vector at `r * N`, this rank's own slot left as NaN).
pub fn run_gather_vectors<T: Scalar, const N: usize>(
    c: &symm::Comm,
    mine: &[T],
    timeout: std::time::Duration,
) -> symm::Result<Vec<T>> {
    let world = c.world_size();
    let stage = c.alloc::<T>(world * N)?;
    stage.fill_bytes(0xFF)?;
    let s = stage.rendezvous()?;
    let src = c.device_buffer_from(mine)?;
    let mut out = c.device_buffer_from(&vec![T::from_f32(f32::NAN); world * N])?;
    s.barrier(&symm::signal::Channel::request(c)?, timeout)?;
    let cfg = symm::LaunchConfig::linear(2, 32);
    gather_vectors::launch::<T, N>(c, cfg, &s, &src, &mut out, 99)?;
    out.to_host()
}

/// [`gather_packets`] on `c`'s rank, twice on one stage (tags 1 and 2,
/// seed `seed ^ tag`, ranks aligned before each): the second round must
/// wait for its own tag, not take the first's packets. Returns each
/// round's `out`, to compare with [`gather_packets_ref`].
pub fn run_gather_packets(
    c: &symm::Comm,
    seed: u32,
    timeout: std::time::Duration,
) -> symm::Result<Vec<Vec<u64>>> {
    let world = c.world_size();
    let stage = c.alloc::<u64>(2 * world)?;
    stage.fill_bytes(0)?;
    let s = stage.rendezvous()?;
    let mut out = c.device_buffer_from(&vec![u64::MAX; 2 * world])?;
    let mut rounds = Vec::new();
    let ch = symm::signal::Channel::request(c)?;
    for (tag, round) in [1u32, 2].into_iter().zip(GATHER_PACKET_ROUNDS) {
        s.barrier(&ch, timeout)?;
        let cfg = symm::LaunchConfig::linear(1, 32);
        gather_packets::launch(c, cfg, &s, &mut out, tag, seed ^ tag, round, u32::MAX)?;
        rounds.push(out.to_host()?);
    }
    Ok(rounds)
}

/// [`gather_packets`] with a checked gather on `c`'s rank, where rank `odd`
/// sends packets of this round from another call: every rank must fail
/// with [`symm::Error::CallMismatch`] naming `odd`. Returns what the
/// launch and the synchronisation after it returned.
pub fn run_gather_mismatch(
    c: &symm::Comm,
    odd: u32,
    timeout: std::time::Duration,
) -> symm::Result<Vec<u64>> {
    let world = c.world_size();
    let stage = c.alloc::<u64>(2 * world)?;
    stage.fill_bytes(0)?;
    let s = stage.rendezvous()?;
    let mut out = c.device_buffer_from(&vec![u64::MAX; 2 * world])?;
    s.barrier(&symm::signal::Channel::request(c)?, timeout)?;
    let cfg = symm::LaunchConfig::linear(1, 32);
    gather_packets::launch(c, cfg, &s, &mut out, 7, 99, 0x00FF_FFFF, odd)?;
    c.synchronize()?;
    out.to_host()
}

/// `shfl_down`, `shfl_up` and `shfl_idx` on 8-, 4- and 2-byte payloads:
/// deltas that cross the warp's edge (where a lane keeps its own value), and
/// source lanes past 31 (taken modulo 32).
#[symm_kernel]
pub fn warp_moves(
    x: &[u64],
    down: &mut [u64],
    up: &mut [u32],
    idx: &mut [bf16],
    delta: u32,
    s: u32,
) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    let v = x[i];
    down[i] = shfl_down(v, delta);
    up[i] = shfl_up(v as u32, delta);
    let src = (lane_id() * 7 + s) % 37;
    idx[i] = shfl_idx(bf16::from_bits((v >> 16) as u16), src);
}

/// What [`warp_moves`] writes for `x`: (down, up, idx).
pub fn warp_moves_ref(x: &[u64], delta: u32, s: u32) -> (Vec<u64>, Vec<u32>, Vec<bf16>) {
    let (mut down, mut up, mut idx) = (vec![], vec![], vec![]);
    for (i, &v) in x.iter().enumerate() {
        let (lane, w) = ((i % 32) as u32, i - i % 32);
        let at = |l: u32| x[w + l as usize];
        // Only the offset's low 5 bits count, as in PTX.
        let d = delta % 32;
        down.push(if lane + d < 32 { at(lane + d) } else { v });
        up.push(if lane >= d { at(lane - d) } else { v } as u32);
        let src = (lane * 7 + s) % 37 % 32;
        idx.push(bf16::from_bits((at(src) >> 16) as u16));
    }
    (down, up, idx)
}

/// Runs [`warp_moves`] on fresh random data with outputs poisoned first, at
/// several deltas, and checks it bit for bit against [`warp_moves_ref`].
pub fn run_warp_moves(c: &symm::Comm) -> symm::Result<()> {
    let blocks = 1 + rand::rng().random_range(0..3usize);
    let n = blocks * 64;
    let x: Vec<u64> = (0..n).map(|_| rand::rng().random()).collect();
    let dx = c.device_buffer_from(&x)?;
    for delta in [0u32, 1, 5, 16, 31, 32, 33, u32::MAX] {
        let s = rand::rng().random_range(0..37u32);
        let mut down = c.device_buffer_from(&vec![u64::MAX; n])?;
        let mut up = c.device_buffer_from(&vec![0xDEAD_BEEFu32; n])?;
        let mut idx = c.device_buffer_from(&vec![bf16::NAN; n])?;
        let cfg = symm::LaunchConfig::linear(blocks as u32, 64);
        warp_moves::launch(c, cfg, &dx, &mut down, &mut up, &mut idx, delta, s)?;
        let (wd, wu, wi) = warp_moves_ref(&x, delta, s);
        let diffs = [
            ("shfl_down", symm::compare_bits(&down.to_host()?, &wd)),
            ("shfl_up", symm::compare_bits(&up.to_host()?, &wu)),
            ("shfl_idx", symm::compare_bits(&idx.to_host()?, &wi)),
        ];
        if let Some((what, Err(e))) = diffs.iter().find(|d| d.1.is_err()) {
            let lane = match e {
                symm::BitMismatch::Element { index, .. } => format!(" (lane {})", index % 32),
                _ => String::new(),
            };
            return Err(symm::Error::InvalidArgument {
                rank: c.rank(),
                group: c.group_name().clone(),
                message: format!("warp_moves: {what} wrong: {e}{lane}, delta {delta}, s {s}"),
            });
        }
    }
    Ok(())
}

fn lin(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig::linear((n as u32).div_ceil(block), block)
}

/// [`arith`] on fresh random `T` in [-2, 2) (1000+ elements on the
/// emulator, 10 000+ on a GPU) into a NaN-poisoned output, in blocks of
/// `block`: bitwise equal to [`arith_ref`].
pub fn run_arith<T: DslFloat>(c: &Comm, block: u32) -> symm::Result<()> {
    let n: usize = sized(c, 1000, 10_000) + rand::rng().random_range(0..sized(c, 99, 999));
    let draw = || -> Vec<T> {
        (0..n)
            .map(|_| T::from_f32(rand::rng().random_range(-2.0f32..2.0)))
            .collect()
    };
    let (x, y) = (draw(), draw());
    let (dx, dy) = (c.device_buffer_from(&x)?, c.device_buffer_from(&y)?);
    let mut out = c.device_buffer_from(&vec![T::from_f32(f32::NAN); n])?;
    arith::launch::<T>(c, lin(n, block), &dx, &dy, &mut out, n as u32)?;
    c.synchronize()?;
    let want: Vec<T> = x.iter().zip(&y).map(|(&a, &b)| arith_ref(a, b)).collect();
    check_bits(c, &format!("arith<{}>", T::CUDA), &out.to_host()?, &want)
}

/// [`exps`] on fresh random arguments (−104 to 88.7: subnormal results
/// below −87.3, results near f32's largest above 88), against f64's
/// `exp`: within 2 ulp (CUDA's `expf` bound; the emulator's is Rust's
/// `f32::exp`), on the emulator and, with `SYMM_KERNEL_TESTS_ON=gpu`, on a
/// GPU.
pub fn run_exp(c: &Comm) -> symm::Result<()> {
    let n: usize = sized(c, 1000, 100_000);
    let x: Vec<f32> = (0..n)
        .map(|_| rand::rng().random_range(-104.0f32..88.7))
        .collect();
    let dx = c.device_buffer_from(&x)?;
    let mut out = c.device_buffer_from(&vec![f32::NAN; n])?;
    exps::launch(c, lin(n, 128), &dx, &mut out, n as u32)?;
    c.synchronize()?;
    let got = out.to_host()?;
    for (i, (&a, &g)) in x.iter().zip(&got).enumerate() {
        let want = f64::from(a).exp();
        // One ulp at the result (the subnormal spacing at the bottom).
        let w32 = want as f32;
        let ulp = f64::from(f32::from_bits(w32.to_bits() + 1) - w32).max(2f64.powi(-149));
        check(c, (f64::from(g) - want).abs() <= 2.0 * ulp, || {
            format!("exp({a}) at {i}: {g}, want {want}")
        })?;
    }
    Ok(())
}

/// The one-rank kernels on fresh random data (3000+ elements on the
/// emulator, 20 000+ on a GPU), every output poisoned first and checked
/// whole and exactly: [`int_ops`], [`names_and_narrow`], [`same_names`], [`control`], [`vectors`] (f32×4 and
/// bf16×8, the last group left alone), [`shared_reduce`] (tree sums and
/// reversal), [`shuffles`] (butterfly sums and ballots), and [`atomics`]
/// (every add, max and min counter, the CAS maximum, the exchanges and both
/// float sums).
pub fn run_local_suite(c: &Comm) -> symm::Result<()> {
    let mut g = rand::rng();
    let n: usize = sized(c, 3000, 20_000) + g.random_range(0..sized(c, 99, 999));

    // Integer operators.
    let xs: Vec<u32> = (0..n).map(|_| g.random()).collect();
    let (dx, mut out) = (
        c.device_buffer_from(&xs)?,
        c.device_buffer_from(&vec![0xDEAD_BEEFu32; n])?,
    );
    int_ops::launch(c, lin(n, 128), &dx, &mut out, n as u32)?;
    let want: Vec<u32> = xs.iter().map(|&a| int_ops_ref(a)).collect();
    check_bits(c, "int_ops", &out.to_host()?, &want)?;

    // Names and narrow integers.
    let (x_len, x_2) = (g.random::<u32>(), g.random::<u32>());
    names_and_narrow::launch(c, lin(n, 128), &dx, x_len, x_2, &mut out, n as u32)?;
    let want: Vec<u32> = xs
        .iter()
        .map(|&a| names_and_narrow_ref(a, x_len, x_2))
        .collect();
    check_bits(c, "names_and_narrow", &out.to_host()?, &want)?;

    // Device functions of one name.
    same_names::launch(c, lin(n, 128), &dx, &mut out, n as u32)?;
    let want: Vec<u32> = xs
        .iter()
        .enumerate()
        .map(|(i, &a)| same_names_ref(a, i))
        .collect();
    check_bits(c, "same_names", &out.to_host()?, &want)?;

    // Control flow.
    let xi: Vec<i32> = (0..n).map(|_| g.random_range(-100_000..100_000)).collect();
    let (di, mut oi) = (
        c.device_buffer_from(&xi)?,
        c.device_buffer_from(&vec![i32::MIN; n])?,
    );
    control::launch::<8>(c, lin(n, sized(c, 64, 128)), &di, &mut oi, n as u32)?;
    let want: Vec<i32> = xi.iter().map(|&v| control_ref::<8>(v)).collect();
    check_bits(c, "control", &oi.to_host()?, &want)?;

    // 16-byte vectors: every group but the last, which must stay poisoned.
    let xf: Vec<f32> = (0..n.next_multiple_of(8))
        .map(|_| g.random_range(-1e3f32..1e3))
        .collect();
    let xh: Vec<bf16> = (0..2 * xf.len())
        .map(|_| bf16::from_f32(g.random_range(-4.0f32..4.0)))
        .collect();
    let groups = xf.len() / 4 - 1;
    let (df, mut of, dh, mut oh) = (
        c.device_buffer_from(&xf)?,
        c.device_buffer_from(&vec![f32::NAN; xf.len()])?,
        c.device_buffer_from(&xh)?,
        c.device_buffer_from(&vec![bf16::NAN; xh.len()])?,
    );
    let cfg = lin(groups, sized(c, 32, 64));
    vectors::launch(c, cfg, &df, &mut of, &dh, &mut oh, groups as u32)?;
    let want: Vec<f32> = xf[..4 * groups]
        .chunks(4)
        .flat_map(|q| q.iter().rev().copied())
        .chain([f32::NAN; 4])
        .collect();
    check_bits(c, "vectors f32x4", &of.to_host()?, &want)?;
    let want: Vec<bf16> = xh[..8 * groups]
        .chunks(8)
        .flat_map(|q| q.iter().rev().copied())
        .chain([bf16::NAN; 8])
        .collect();
    check_bits(c, "vectors bf16x8", &oh.to_host()?, &want)?;

    // Shared memory and block barriers.
    let blocks = sized(c, 3, 40) + g.random_range(0..sized(c, 4, 20));
    let xr: Vec<f32> = (0..blocks * 256)
        .map(|_| g.random_range(-1.0f32..1.0))
        .collect();
    let (dr, mut sums, mut rev) = (
        c.device_buffer_from(&xr)?,
        c.device_buffer_from(&vec![f32::NAN; blocks])?,
        c.device_buffer_from(&vec![f32::NAN; xr.len()])?,
    );
    let cfg = LaunchConfig::linear(blocks as u32, 256);
    shared_reduce::launch(c, cfg, &dr, &mut sums, &mut rev)?;
    let want: Vec<f32> = xr.chunks(256).map(shared_reduce_ref).collect();
    check_bits(c, "shared_reduce sums", &sums.to_host()?, &want)?;
    let want: Vec<f32> = xr
        .chunks(256)
        .flat_map(|b| b.iter().rev().copied())
        .collect();
    check_bits(c, "shared_reduce reversal", &rev.to_host()?, &want)?;

    // Shuffles and ballots over whole warps.
    let m = n / 256 * 256;
    let (ds, mut ss, mut vs) = (
        c.device_buffer_from(&xs[..m])?,
        c.device_buffer_from(&vec![0xDEAD_BEEFu32; m])?,
        c.device_buffer_from(&vec![0xDEAD_BEEFu32; m / 32])?,
    );
    let cfg = LaunchConfig::linear((m / 256) as u32, 256);
    shuffles::launch(c, cfg, &ds, &mut ss, &mut vs)?;
    let want: Vec<u32> = xs[..m]
        .chunks(32)
        .flat_map(|w| std::iter::repeat_n(w.iter().fold(0u32, |a, &b| a.wrapping_add(b)), 32))
        .collect();
    check_bits(c, "warp sums", &ss.to_host()?, &want)?;
    let want: Vec<u32> = xs[..m]
        .chunks(32)
        .map(|w| {
            w.iter()
                .enumerate()
                .fold(0, |b, (l, &v)| b | ((v & 1) << l))
        })
        .collect();
    check_bits(c, "ballots", &vs.to_host()?, &want)?;

    // Atomics: every counter.
    let xa: Vec<u32> = (0..n).map(|_| g.random::<u32>() >> 1).collect();
    let mut init = vec![0u32; 19];
    init[12..16].fill(u32::MAX);
    init[18] = u32::MAX;
    let (da, mut ctr, mut fs) = (
        c.device_buffer_from(&xa)?,
        c.device_buffer_from(&init)?,
        c.device_buffer_from(&[0.0f32; 2])?,
    );
    atomics::launch(
        c,
        lin(n, sized(c, 128, 256)),
        &da,
        &mut ctr,
        &mut fs,
        n as u32,
    )?;
    c.synchronize()?;
    let got = ctr.to_host()?;
    let every = |k: usize, of: usize| xa.iter().skip(k).step_by(of).copied();
    let mut want = [0u32; 18];
    for (k, w) in want[..8].iter_mut().enumerate() {
        *w = every(k, 8).count() as u32;
    }
    for k in 0..4 {
        want[8 + k] = every(k, 4).max().unwrap_or(0);
        want[12 + k] = every(k, 4).min().unwrap_or(u32::MAX);
    }
    want[16] = every(0, 1).max().unwrap_or(0);
    // Every exchange but the first sees a value, not the sentinel.
    want[17] = n as u32 - 1;
    let what = "atomic counters (add [0, 8), max [8, 12), min [12, 16), CAS max, exchanges)";
    check_bits(c, what, &got[..18], &want)?;
    check(c, xa.contains(&got[18]), || {
        format!("atomic_exch left {}, which nobody wrote", got[18])
    })?;
    let want: Vec<f32> = (0..2)
        .map(|k| every(k, 2).map(|v| f64::from(v % 1024)).sum::<f64>() as f32)
        .collect();
    check_bits(c, "float atomic_add", &fs.to_host()?, &want)
}

/// The built-in collectives and peer-memory ordering on every rank of `c`'s
/// group, with data that every rank draws from `seed` (bigger on GPUs):
/// ring all-gather of f32 and bf16 into NaN-poisoned buffers, broadcast of
/// f32 and f64 from random roots into NaN-poisoned buffers, ping-pong
/// between rank pairs, and release/acquire message passing around the ring
/// (no ordering error, no timeout). Every rank checks its own results.
pub fn run_collectives(c: &Comm, seed: u64, timeout: std::time::Duration) -> symm::Result<()> {
    let mut g = StdRng::seed_from_u64(seed);
    let (r, world) = (c.rank(), c.world_size());
    let chunk: usize = sized(c, 101, 1000) + g.random_range(0..sized(c, 50, 100));
    let draw = |g: &mut StdRng, n: usize| -> Vec<f32> { (0..n).map(|_| g.random()).collect() };
    let data = draw(&mut g, chunk * world);
    let hdata: Vec<bf16> = draw(&mut g, chunk * world)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    // One channel for the host barriers, one for the kernels' handshakes and
    // one more for broadcast's second handshake.
    let (host, ch, done) = (
        Channel::request(c)?,
        Channel::request(c)?,
        Channel::request(c)?,
    );
    let chans = [&host, &ch, &done];

    // Ring all-gather, f32 then bf16.
    let cfg = LaunchConfig::linear(3, sized(c, 32, 128));
    check_all_gather(c, cfg, &data, chans, timeout)?;
    let cfg = LaunchConfig::linear(5, sized(c, 32, 64));
    check_all_gather(c, cfg, &hdata, chans, timeout)?;

    // Broadcast, f32 then f64, each from a random root.
    let nb: usize = sized(c, 333, 4097) + g.random_range(0..sized(c, 50, 100));
    let cfg = LaunchConfig::linear(sized(c, 2, 4), sized(c, 64, 256));
    let (root, bdata) = (g.random_range(0..world), draw(&mut g, nb));
    check_broadcast(c, cfg, root, &bdata, chans, timeout)?;
    let root = g.random_range(0..world);
    let bdata: Vec<f64> = (0..nb).map(|_| g.random()).collect();
    check_broadcast(c, cfg, root, &bdata, chans, timeout)?;

    // Ping-pong between ranks 2k and 2k + 1.
    let start: u32 = g.random_range(0..sized(c, 1000, 1_000_000));
    let rounds: u32 = g.random_range(sized(c, 3..12, 10..60));
    let pb = c.alloc::<u32>(4)?;
    pb.copy_from_host(&[start, 0, 0, 0])?;
    let ps = pb.rendezvous()?;
    ps.barrier(&host, timeout)?;
    ping_pong::launch(c, LaunchConfig::linear(1, 32), &ps, rounds, ch.index())?;
    c.synchronize()?;
    if (r ^ 1) < world {
        // The odd rank receives in even rounds (0, 2, ...), the even in odd ones.
        let want = (0..rounds)
            .rev()
            .find(|&k| (k & 1) != (r as u32 & 1))
            .map_or(start, |k| start + k + 1);
        check_bits(
            c,
            &format!("ping-pong ({rounds} rounds) slot"),
            &pb.read(0, 1)?,
            &[want],
        )?;
    }

    // Message passing with release/acquire on peer memory.
    let iters: u32 = sized(c, 50, 2000);
    let mb = c.alloc::<u32>(64)?;
    mb.copy_from_host(&[0; 64])?; // flags must start at zero
    let ms = mb.rendezvous()?;
    ms.barrier(&host, timeout)?;
    message_passing::launch(c, LaunchConfig::linear(1, 32), &ms, iters, g.random())?;
    c.synchronize()?;
    let m = mb.read(0, 4)?;
    ms.barrier(&host, timeout)?;
    c.synchronize()?;
    check(c, (m[0], m[2], m[3]) == (iters, 0, 0), || {
        format!(
            "message passing: flag {} of {iters}, {} ordering errors, {} timeouts",
            m[0], m[2], m[3]
        )
    })
}

/// [`ring_all_gather`] of `all` (rank r's chunk in place, the others' slots
/// NaN) with `cfg`: every rank's buffer must end as `all`, bit for bit.
fn check_all_gather<T: Scalar>(
    c: &Comm,
    cfg: LaunchConfig,
    all: &[T],
    [host, ch, _]: [&Channel; 3],
    timeout: std::time::Duration,
) -> symm::Result<()> {
    let (r, chunk) = (c.rank(), all.len() / c.world_size());
    let buf = c.alloc::<T>(all.len())?;
    buf.copy_from_host(&vec![T::from_f32(f32::NAN); all.len()])?;
    buf.write(r * chunk, &all[r * chunk..(r + 1) * chunk])?;
    let s = buf.rendezvous()?;
    s.barrier(host, timeout)?;
    ring_all_gather::launch::<T>(c, cfg, &s, chunk as u32, ch.index())?;
    c.synchronize()?;
    check_bits(
        c,
        &format!("ring all-gather<{}>", T::CUDA),
        &buf.to_host()?,
        all,
    )?;
    s.barrier(host, timeout)?;
    c.synchronize()
}

/// [`broadcast`] of `data` from `root`, the other ranks' buffers NaN first,
/// with `cfg`: every rank's buffer must end as `data`, bit for bit.
fn check_broadcast<T: Scalar>(
    c: &Comm,
    cfg: LaunchConfig,
    root: usize,
    data: &[T],
    [host, ready, done]: [&Channel; 3],
    timeout: std::time::Duration,
) -> symm::Result<()> {
    let n = data.len();
    let buf = c.alloc::<T>(n)?;
    if c.rank() == root {
        buf.copy_from_host(data)?;
    } else {
        buf.copy_from_host(&vec![T::from_f32(f32::NAN); n])?;
    }
    let s = buf.rendezvous()?;
    s.barrier(host, timeout)?;
    broadcast::launch::<T>(
        c,
        cfg,
        &s,
        root as u32,
        n as u32,
        ready.index(),
        done.index(),
    )?;
    c.synchronize()?;
    let what = format!("broadcast<{}> from rank {root}", T::CUDA);
    check_bits(c, &what, &buf.to_host()?, data)?;
    s.barrier(host, timeout)?;
    c.synchronize()
}

/// Gathers on every rank of `c`'s group, data drawn from `seed`:
/// [`gather_vectors`] of f32×4 and of bf16×8 (every peer's vector bit for
/// bit, this rank's own slot still poisoned), and [`gather_packets`] over
/// two rounds of tags on one stage.
pub fn run_gathers(c: &Comm, seed: u64, timeout: std::time::Duration) -> symm::Result<()> {
    let mut g = StdRng::seed_from_u64(seed);
    let f: Vec<f32> = (0..4 * c.world_size())
        .map(|_| g.random_range(-1e3..1e3))
        .collect();
    let h: Vec<bf16> = (0..8 * c.world_size())
        .map(|_| bf16::from_f32(g.random_range(-1.0..1.0)))
        .collect();
    check_gathered::<f32, 4>(c, &f, timeout)?;
    check_gathered::<bf16, 8>(c, &h, timeout)?;
    let seed: u32 = g.random();
    for (round, got) in run_gather_packets(c, seed, timeout)?
        .into_iter()
        .enumerate()
    {
        let (tag, mask) = (round as u32 + 1, GATHER_PACKET_ROUNDS[round]);
        let want = gather_packets_ref(c.world_size() as u32, tag, seed ^ tag);
        check_bits(
            c,
            &format!("gather_tagged2, tag {tag}, round {mask:#x}"),
            &got,
            &want,
        )?;
    }
    Ok(())
}

/// [`run_gather_vectors`] with rank r's vector at `all[r * N..]`: each peer's
/// slot must hold its vector, this rank's own the NaN it started with.
fn check_gathered<T: Scalar, const N: usize>(
    c: &Comm,
    all: &[T],
    timeout: std::time::Duration,
) -> symm::Result<()> {
    let r = c.rank();
    let got = run_gather_vectors::<T, N>(c, &all[r * N..(r + 1) * N], timeout)?;
    let mut want = all.to_vec();
    want[r * N..(r + 1) * N].fill(T::from_f32(f32::NAN));
    check_bits(c, &format!("gather_ready of {}×{N}", T::CUDA), &got, &want)
}

/// Compound assignment on a generic `T: Num`, written as on a concrete
/// type: every arithmetic `op=` on a local and on an indexed element, from
/// an array local of non-literals that has no type written.
#[symm_kernel]
pub fn compound<T: Num>(x: &[T], y: &[T], out: &mut [T], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let pair = [x[i], y[i]];
        let mut acc = pair[0];
        acc += pair[1];
        acc *= y[i];
        acc -= x[i];
        acc /= y[i];
        acc %= x[i];
        out[i] = acc;
        out[i] += x[i];
        out[i] *= pair[1];
        out[i] %= y[i] + y[i];
    }
}

/// What [`compound`] writes for `x` and `y`.
pub fn compound_ref<T: Num>(x: T, y: T) -> T {
    let mut acc = x;
    acc += y;
    acc *= y;
    acc -= x;
    acc /= y;
    acc %= x;
    let mut out = acc;
    out += x;
    out *= y;
    out %= y + y;
    out
}

/// The bitwise compound assignments and shifts on a generic `T: DslInt`.
#[symm_kernel]
pub fn bit_compound<T: DslInt>(x: &[T], y: &[T], out: &mut [T], n: u32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let mut a = x[i];
        a &= y[i] | x[i];
        a |= y[i] ^ x[i];
        a ^= !y[i];
        a <<= 3u32;
        a >>= 2u32;
        out[i] = a;
        out[i] ^= x[i] >> 1u32;
        out[i] &= !(y[i] << 2u32);
    }
}

/// What [`bit_compound`] writes for `x` and `y`.
pub fn bit_compound_ref<T: DslInt>(x: T, y: T) -> T {
    let mut a = x;
    a &= y | x;
    a |= y ^ x;
    a ^= !y;
    a <<= 3u32;
    a >>= 2u32;
    let mut out = a;
    out ^= x >> 1u32;
    out &= !(y << 2u32);
    out
}

/// A kernel of the compound-assignment tests: `out = f(x, y)` element-wise.
type Binary<T> = fn(
    &Comm,
    LaunchConfig,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    u32,
) -> symm::Result<()>;

/// `kernel` on `n` fresh elements drawn by `draw` (never zero: they
/// divide), into a poisoned output: bitwise equal to `reference`.
fn run_binary<T: Scalar>(
    c: &Comm,
    name: &str,
    (kernel, reference): (Binary<T>, fn(T, T) -> T),
    poison: T,
    draw: impl Fn(&mut rand::rngs::ThreadRng) -> T,
) -> symm::Result<()> {
    let mut g = rand::rng();
    let n: usize = sized(c, 500, 10_000) + g.random_range(0..sized(c, 99, 999));
    let x: Vec<T> = (0..n).map(|_| draw(&mut g)).collect();
    let y: Vec<T> = (0..n).map(|_| draw(&mut g)).collect();
    let (dx, dy) = (c.device_buffer_from(&x)?, c.device_buffer_from(&y)?);
    let mut out = c.device_buffer_from(&vec![poison; n])?;
    kernel(c, lin(n, 64), &dx, &dy, &mut out, n as u32)?;
    let want: Vec<T> = x.iter().zip(&y).map(|(&a, &b)| reference(a, b)).collect();
    check_bits(c, &format!("{name}<{}>", T::CUDA), &out.to_host()?, &want)
}

/// [`compound`] against [`compound_ref`] (see [`run_binary`]).
pub fn run_compound<T: Num>(
    c: &Comm,
    poison: T,
    draw: impl Fn(&mut rand::rngs::ThreadRng) -> T,
) -> symm::Result<()> {
    let k: Binary<T> = |c, cfg, x, y, out, n| compound::launch::<T>(c, cfg, x, y, out, n);
    run_binary(c, "compound", (k, compound_ref::<T>), poison, draw)
}

/// [`bit_compound`] against [`bit_compound_ref`] (see [`run_binary`]).
pub fn run_bit_compound<T: DslInt>(
    c: &Comm,
    poison: T,
    draw: impl Fn(&mut rand::rngs::ThreadRng) -> T,
) -> symm::Result<()> {
    let k: Binary<T> = |c, cfg, x, y, out, n| bit_compound::launch::<T>(c, cfg, x, y, out, n);
    run_binary(c, "bit_compound", (k, bit_compound_ref::<T>), poison, draw)
}

/// [`run_compound`] for every numeric element type (integers small enough
/// not to overflow, of either sign where signed; floats of magnitude in
/// [0.5, 2)), and [`run_bit_compound`] for the unsigned types (a signed
/// left shift of a negative value is undefined in C++17).
pub fn run_compounds(c: &Comm) -> symm::Result<()> {
    use rand::rngs::ThreadRng;
    let sign = |g: &mut ThreadRng| if g.random() { 1.0f32 } else { -1.0 };
    let float = move |g: &mut ThreadRng| sign(g) * g.random_range(0.5f32..2.0);
    run_compound(c, f32::NAN, float)?;
    run_compound(c, f64::NAN, move |g| {
        f64::from(float(g)) * (1.0 + g.random::<f64>())
    })?;
    run_compound(c, bf16::NAN, move |g| bf16::from_f32(float(g)))?;
    run_compound(c, f16::NAN, move |g| f16::from_f32(float(g)))?;
    run_compound(c, f8e4m3::NAN, move |g| f8e4m3::from_f32(float(g)))?;
    run_compound(c, f8e5m2::NAN, move |g| f8e5m2::from_f32(float(g)))?;
    run_compound(c, u8::MAX, |g| g.random_range(1u8..=10))?;
    run_compound(c, u32::MAX, |g| g.random_range(1u32..=1000))?;
    run_compound(c, u64::MAX, |g| g.random_range(1u64..=1_000_000))?;
    let nonzero =
        |g: &mut ThreadRng, m: i64| g.random_range(1..=m) * if g.random() { 1 } else { -1 };
    run_compound(c, i32::MIN, move |g| nonzero(g, 1000) as i32)?;
    run_compound(c, i64::MIN, move |g| nonzero(g, 1_000_000))?;
    run_bit_compound(c, 0xA5u8, |g| g.random())?;
    run_bit_compound(c, 0xDEAD_BEEFu32, |g| g.random())?;
    run_bit_compound(c, u64::MAX, |g| g.random())
}

/// 8-byte receives from every rank at once, the world size unrolled as
/// `W` (launched through `symm::with_world!`): each rank pushes its two
/// elements `src[0..2]` into slot `rank` (elements `2 rank..`) of every
/// other rank's `stage` (all `empty` before), and its 8 bytes `bits[0]`, as
/// an LL packet tagged `tag`, into slot `rank` of every rank's `ll` (itself
/// included). Then it takes every peer's elements one slot at a time
/// (`load_vec_ready`, into `one[2 r..]`) and all at once (`gather_ready`,
/// into `all[2 r..]`), and every rank's 8 bytes one at a time
/// (`load_tagged64`, into `got[r]`) and all at once (`gather_tagged64`,
/// into `got[W + r]`). Thread 0 of block 0.
#[allow(clippy::too_many_arguments)]
#[symm_kernel]
pub fn receive64<T: Scalar, const W: usize>(
    stage: SymmBuf<T>,
    ll: SymmBuf<u64>,
    src: &[T],
    bits: &[u64],
    one: &mut [T],
    all: &mut [T],
    got: &mut [u64],
    empty: T,
    tag: u32,
) {
    if thread_idx_x() != 0 || block_idx_x() != 0 {
        return;
    }
    let rank = stage.rank();
    let world = W as u32;
    let mine = src.load_vec::<2>(0u32);
    for r in 0..world {
        if r != rank {
            stage.peer(r).store_vec_volatile::<2>(rank * 2, mine);
        }
        ll.peer(r).store_tagged64(rank * 2, bits[0], tag);
    }
    for r in 0..world {
        if r != rank {
            let v = stage.local().load_vec_ready::<2>(r * 2, empty, r);
            one[r * 2] = v[0];
            one[r * 2 + 1] = v[1];
        }
        got[r] = ll.local().load_tagged64(r * 2, tag, r);
    }
    let peers = ((1u32 << world) - 1) & !(1u32 << rank);
    let g: [[T; 2]; 8] = stage.local().gather_ready::<2>(0u32, 2u32, peers, empty);
    let p: [u64; 8] = ll
        .local()
        .gather_tagged64(0u32, 2u32, (1u32 << world) - 1, tag);
    for r in 0..world {
        if r != rank {
            let v = g[r];
            all[r * 2] = v[0];
            all[r * 2 + 1] = v[1];
        }
        got[world + r] = p[r];
    }
}

/// [`receive64`] of `T` (made from random bits by `from_bits`) on every
/// rank of `c`'s group, data drawn from `seed`, over two rounds on one LL
/// stage (tags 1 and 2, ranks aligned before each: the second round must
/// wait for its own tag, not take the first's packets): every peer's
/// elements and every rank's 8 bytes arrive bit for bit, both ways, and
/// this rank's own slots stay poisoned.
pub fn run_receive64<T: Scalar>(
    c: &Comm,
    seed: u64,
    from_bits: fn(u64) -> T,
    timeout: std::time::Duration,
) -> symm::Result<()> {
    let mut g = StdRng::seed_from_u64(seed);
    let (rank, world) = (c.rank(), c.world_size());
    // All ones is the empty mark: data never has those bits.
    let empty = from_bits(u64::MAX);
    let poison = from_bits(0x5A5A_5A5A_5A5A_5A5A);
    let mut draw = || match g.random::<u64>() {
        u64::MAX | 0x5A5A_5A5A_5A5A_5A5A => 0,
        b => b,
    };
    let stage = c.alloc::<T>(2 * world)?;
    let ll = c.alloc::<u64>(2 * world)?;
    ll.fill_bytes(0)?;
    let (s, l) = (stage.rendezvous()?, ll.rendezvous()?);
    let ch = Channel::request(c)?;
    for tag in [1u32, 2] {
        let elems: Vec<T> = (0..2 * world).map(|_| from_bits(draw())).collect();
        let packets: Vec<u64> = (0..world).map(|_| draw()).collect();
        stage.fill_bytes(0xFF)?;
        let src = c.device_buffer_from(&elems[2 * rank..2 * rank + 2])?;
        let bits = c.device_buffer_from(&packets[rank..=rank])?;
        let mut one = c.device_buffer_from(&vec![poison; 2 * world])?;
        let mut all = c.device_buffer_from(&vec![poison; 2 * world])?;
        let mut got = c.device_buffer_from(&vec![0x5A5A_5A5A_5A5A_5A5Au64; 2 * world])?;
        s.barrier(&ch, timeout)?;
        let cfg = LaunchConfig::linear(1, 32);
        symm::with_world!(world, W => receive64::launch::<T, W>(
            c, cfg, &s, &l, &src, &bits, &mut one, &mut all, &mut got, empty, tag,
        ))??;
        c.synchronize()?;
        let mut want = elems.clone();
        want[2 * rank..2 * rank + 2].fill(poison);
        let what = |how: &str| format!("{how} of {}×2, round {tag}", T::CUDA);
        check_bits(c, &what("load_vec_ready"), &one.to_host()?, &want)?;
        check_bits(c, &what("gather_ready"), &all.to_host()?, &want)?;
        let want: Vec<u64> = packets.iter().chain(&packets).copied().collect();
        check_bits(
            c,
            &format!("load_tagged64 then gather_tagged64, round {tag}"),
            &got.to_host()?,
            &want,
        )?;
    }
    s.barrier(&ch, timeout)?;
    c.synchronize()
}

/// [`run_receive64`] of f64, u64 and i64.
pub fn run_receives64(c: &Comm, seed: u64, timeout: std::time::Duration) -> symm::Result<()> {
    run_receive64(c, seed, f64::from_bits, timeout)?;
    run_receive64(c, seed ^ 1, |b| b, timeout)?;
    run_receive64(c, seed ^ 2, |b| b as i64, timeout)
}

/// A torn 8-byte LL packet is never taken: block 1 takes the packet at
/// `ll[0..2]` with `tag`, whose low word the host wrote with `tag` and
/// whose high word with `tag - 1` (what a read half before and half after
/// the store sees); block 0 waits until block 1 is about to poll, lets it
/// poll for `delay_ns`, then writes the high word, tagged, with `hi`.
/// `out[0]`: what block 1 took. Thread 0 of blocks 0 and 1.
#[symm_kernel]
pub fn torn_packet(
    ll: &mut [u64],
    flag: &mut [u32],
    out: &mut [u64],
    hi: u32,
    tag: u32,
    delay_ns: u64,
) {
    if thread_idx_x() != 0 {
        return;
    }
    if block_idx_x() == 1 {
        flag.store(0u32, 1u32, StoreOrder::Release, Scope::Gpu);
        out[0] = ll.load_tagged64(0u32, tag, 0u32);
    } else if block_idx_x() == 0 {
        while flag.load(0u32, LoadOrder::Acquire, Scope::Gpu) == 0u32 {}
        let start = globaltimer();
        while globaltimer() - start < delay_ns {
            let _ = flag.load(0u32, LoadOrder::Volatile, Scope::Gpu);
        }
        ll.store(
            1u32,
            ((tag as u64) << 32) | hi as u64,
            StoreOrder::Volatile,
            Scope::Gpu,
        );
    }
}

/// [`torn_packet`] on fresh random words: block 1 must take the completed
/// packet (the low word's data and the late high word's), never the torn
/// one (whose high half is other data).
pub fn run_torn_packet(c: &Comm) -> symm::Result<()> {
    let mut g = rand::rng();
    let (lo, hi, junk): (u32, u32, u32) = (g.random(), g.random(), g.random());
    let tag: u32 = g.random_range(2..u32::MAX);
    let packet = [
        u64::from(tag) << 32 | u64::from(lo),
        u64::from(tag - 1) << 32 | u64::from(junk ^ hi ^ 1),
    ];
    let mut ll = c.device_buffer_from(&packet)?;
    let mut flag = c.device_buffer_from(&[0u32])?;
    let mut out = c.device_buffer_from(&[u64::from(junk)])?;
    let cfg = LaunchConfig::linear(2, 32);
    torn_packet::launch(c, cfg, &mut ll, &mut flag, &mut out, hi, tag, 2_000_000)?;
    let want = u64::from(hi) << 32 | u64::from(lo);
    check_bits(
        c,
        "load_tagged64 of a packet completed late",
        &out.to_host()?,
        &[want],
    )
}

/// The fp8 conversions both ways, for `T` = f8e4m3 or f8e5m2: `bits[i]`
/// (its low byte) as a `T`, widened by `to_f32`; and `x[i]` rounded to `T`
/// by `T::from_f32`, stored both as a `T` and as its `to_bits32`.
#[symm_kernel]
pub fn fp8_convert<T: Scalar>(
    bits: &[u32],
    x: &[f32],
    wide: &mut [f32],
    narrow: &mut [T],
    narrow_bits: &mut [u32],
    n: u32,
) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        wide[i] = T::from_bits32(bits[i]).to_f32();
        let v = T::from_f32(x[i]);
        narrow[i] = v;
        narrow_bits[i] = v.to_bits32();
    }
}

/// f32s that probe a conversion to `T`: every value of `T` and, between
/// every two neighbours, the midpoint and the f32s beside it (in both
/// signs), the specials, then `random` random f32s, half any bit pattern
/// and half near `T`'s range.
pub fn fp8_probes<T: Scalar>(random: usize, g: &mut impl Rng) -> Vec<f32> {
    let beside = |x: f32| {
        [
            f32::from_bits(x.to_bits() - 1),
            x,
            f32::from_bits(x.to_bits() + 1),
        ]
    };
    let mut xs = vec![
        f32::INFINITY,
        f32::MAX,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
    ];
    for b in 0..0x80u32 {
        let (v, w) = (T::from_bits32(b).to_f32(), T::from_bits32(b + 1).to_f32());
        xs.push(v);
        if v.is_finite() && w.is_finite() && b + 1 < 0x80 {
            xs.extend(beside(((f64::from(v) + f64::from(w)) / 2.0) as f32));
        }
    }
    // The midpoints past the largest finite values (of e4m3fn, of e5m2).
    xs.extend(beside(464.0));
    xs.extend(beside(61440.0));
    xs.extend((0..random).map(|k| {
        if k % 2 == 0 {
            f32::from_bits(g.random())
        } else {
            let e = g.random_range(127 - 30..=127 + 18u32);
            f32::from_bits((g.random::<u32>() & 0x807f_ffff) | (e << 23))
        }
    }));
    xs.iter().flat_map(|&x| [x, -x]).collect()
}

/// [`fp8_convert`] on `c`'s rank for every bit pattern and every probe of
/// [`fp8_probes`] (5000 random ones on the emulator, 4M on a GPU), bit for
/// bit against the Rust conversions; returns how many f32s it rounded.
pub fn run_fp8_convert<T: Scalar>(c: &Comm) -> symm::Result<usize> {
    let x = fp8_probes::<T>(sized(c, 5000, 1 << 22), &mut rand::rng());
    let n = x.len();
    let bits: Vec<u32> = (0..n as u32).map(|i| i % 256).collect();
    let (db, dx) = (c.device_buffer_from(&bits)?, c.device_buffer_from(&x)?);
    let mut wide = c.device_buffer_from(&vec![f32::from_bits(0xDEAD_BEEF); n])?;
    let mut narrow = c.device_buffer_from(&vec![T::from_bits32(0x55); n])?;
    let mut narrow_bits = c.device_buffer_from(&vec![0xDEAD_BEEFu32; n])?;
    let cfg = lin(n, 128);
    fp8_convert::launch::<T>(
        c,
        cfg,
        &db,
        &dx,
        &mut wide,
        &mut narrow,
        &mut narrow_bits,
        n as u32,
    )?;
    c.synchronize()?;
    let want_wide: Vec<f32> = bits.iter().map(|&b| T::from_bits32(b).to_f32()).collect();
    let want: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
    let want_bits: Vec<u32> = want.iter().map(|v| v.to_bits32()).collect();
    let name = T::CUDA;
    check_bits(c, &format!("{name} to f32"), &wide.to_host()?, &want_wide)?;
    check_bits(c, &format!("{name} from f32"), &narrow.to_host()?, &want)?;
    check_bits(
        c,
        &format!("{name} bits"),
        &narrow_bits.to_host()?,
        &want_bits,
    )?;
    Ok(n)
}

/// Copies rank `src`'s symmetric buffer into `out`, 16 one-byte elements at
/// a time, with one `load_vec::<16>` and one `store_vec` each (`n` a
/// multiple of 16), in a grid-stride loop: a small grid fits beside the
/// other ranks' kernels on a GPU they share.
#[symm_kernel]
pub fn copy_vec16<T: Scalar>(buf: SymmBuf<T>, out: &mut [T], src: u32, n: u32) {
    let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) * 16;
    while i < n {
        let v = buf.peer(src).load_vec::<16>(i);
        out.store_vec(i, v);
        i += grid_dim_x() * block_dim_x() * 16;
    }
}

/// A symmetric buffer of a one-byte `T` on every rank of `c`'s group: each
/// fills its own from the host (every bit pattern, then random bytes, drawn
/// from `seed` and the rank) and reads it back; then copies its next rank's
/// with [`copy_vec16`] into a poisoned buffer. Both bit for bit.
pub fn run_fp8_copies<T: Scalar>(
    c: &Comm,
    seed: u64,
    timeout: std::time::Duration,
) -> symm::Result<()> {
    let n = 256 * sized(c, 4, 4096);
    let data = |r: usize| -> Vec<T> {
        let mut g = StdRng::seed_from_u64(seed ^ r as u64);
        (0..n)
            .map(|k| match k {
                0..256 => T::from_bits32((k as u32 ^ (r as u32 * 0x5b)) & 0xff),
                _ => T::from_bits32(u32::from(g.random::<u8>())),
            })
            .collect()
    };
    let (rank, world) = (c.rank(), c.world_size());
    let buf = c.alloc::<T>(n)?;
    buf.copy_from_host(&data(rank))?;
    check_bits(c, "the host's round trip", &buf.to_host()?, &data(rank))?;
    let s = buf.rendezvous()?;
    let ch = Channel::request(c)?;
    s.barrier(&ch, timeout)?;
    let mut out = c.device_buffer_from(&vec![T::from_bits32(0x7f); n])?;
    let src = (rank + 1) % world;
    let cfg = LaunchConfig::linear(Ord::min(((n / 16) as u32).div_ceil(64), 32), 64);
    copy_vec16::launch::<T>(c, cfg, &s, &mut out, src as u32, n as u32)?;
    c.synchronize()?;
    check_bits(
        c,
        &format!("rank {src}'s {}", T::CUDA),
        &out.to_host()?,
        &data(src),
    )?;
    // No rank frees its buffer while a peer may still read it.
    s.barrier(&ch, timeout)
}
