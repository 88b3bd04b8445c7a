//! DSL test kernels and their CPU references, shared by the CPU compile
//! test and the GPU suite.

#![allow(dead_code)]

use symm::dsl::*;
use symm::symm_kernel;

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
/// each rank stores `(tag, seed ^ rank)` and `(tag, seed ^ rank ^ 1)` into
/// slot `rank` (elements `2 rank..`) of every rank's `stage`, then gathers
/// every slot with `gather_tagged2` into `out[2 r..]`. Thread 0 of block 0.
#[symm_kernel]
pub fn gather_packets(stage: SymmBuf<u64>, out: &mut [u64], tag: u32, seed: u32) {
    if thread_idx_x() != 0 || block_idx_x() != 0 {
        return;
    }
    let rank = stage.rank();
    let world = stage.world_size();
    let hi = (tag as u64) << 32;
    let pkt: [u64; 2] = [hi | ((seed ^ rank) as u64), hi | ((seed ^ rank ^ 1) as u64)];
    for r in 0..world {
        stage.peer(r).store_vec_volatile::<2>(rank * 2, pkt);
    }
    let got: [[u64; 2]; 8] = stage
        .local()
        .gather_tagged2(0u32, 2u32, (1u32 << world) - 1, tag);
    for r in 0..world {
        let g = got[r];
        out[r * 2] = g[0];
        out[r * 2 + 1] = g[1];
    }
}

/// What [`gather_packets`] writes on every rank of `world`.
pub fn gather_packets_ref(world: u32, tag: u32, seed: u32) -> Vec<u64> {
    let hi = u64::from(tag) << 32;
    (0..world)
        .flat_map(|r| [hi | u64::from(seed ^ r), hi | u64::from(seed ^ r ^ 1)])
        .collect()
}

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
    for tag in [1u32, 2] {
        s.barrier(&ch, timeout)?;
        let cfg = symm::LaunchConfig::linear(1, 32);
        gather_packets::launch(c, cfg, &s, &mut out, tag, seed ^ tag)?;
        rounds.push(out.to_host()?);
    }
    Ok(rounds)
}
