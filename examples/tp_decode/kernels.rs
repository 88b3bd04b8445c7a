//! The decode step's own kernels, in the DSL: weight and cache fill (a
//! hash of each element's place in the full, unsplit matrix, so every
//! rank's slice and the world-1 reference's whole agree), RMSNorm,
//! residual add (and the two in one), the KV-cache append, single-query
//! attention with grouped KV heads, SwiGLU, the projections as GEMV (a
//! warp per weight row or two; SwiGLU fused into the gate/up one), and the
//! plain GEMM `moe_layer`'s emulator runs; and the host's launches of the
//! fill (`moe_layer` shares them). The step's kernels wait for the kernel
//! before them (`grid_dependency_wait`) before they read what it wrote, so
//! they can be launched with programmatic dependent launch: first thing,
//! except the GEMVs and the norms, which load their first weights (no
//! kernel of the step writes a weight) before.

use symm::dsl::*;
use symm::kernels::fused::{block_reduce, block_sum, warp_reduce};
use symm::symm_kernel;

/// A value in `[-scale, scale)` from the element's place `g` in its full
/// matrix and the matrix's `seed`.
#[symm_kernel(device)]
pub fn hashed(seed: u32, g: u32, scale: f32) -> f32 {
    let mut h = g.wrapping_mul(0x9E37_79B1u32) ^ seed;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6Bu32);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35u32);
    h ^= h >> 16;
    ((h >> 8) as f32 / 8_388_608.0f32 - 1.0f32) * scale
}

/// Rows `dst_row0..dst_row0 + rows` of `out` (`cols` wide) get the full
/// matrix's rows from `src_row0` and columns from `src_col0` (`full_cols`
/// wide): a rank's slice of a column- or row-parallel weight.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn fill<T: Scalar>(
    out: &mut [T],
    rows: u32,
    cols: u32,
    dst_row0: u32,
    src_row0: u32,
    src_col0: u32,
    full_cols: u32,
    seed: u32,
    scale: f32,
) {
    let n = rows * cols;
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        let r = i / cols;
        let c = i % cols;
        let g = (src_row0 + r) * full_cols + src_col0 + c;
        out[(dst_row0 + r) * cols + c] = T::from_f32(hashed(seed, g, scale));
        i += grid_dim_x() * block_dim_x();
    }
}

/// One block per row: `out = T(x · (1 / sqrt(mean(x²) + eps)) · w)` in
/// f32, each thread taking whole 16-byte vectors (`V` elements; `hidden`
/// a multiple of `V`), so a row's reads are few and wide (a thread per
/// element, one after another, waited on memory each time: NOTES v41).
/// A thread holds its `N` vectors from the first pass to the second, and
/// loads its vectors of `w` (a weight: no kernel of the step writes it)
/// before `grid_dependency_wait`, so the row costs one round trip after the
/// kernel before (NOTES v48). `hidden` at most `N × block_dim × V`; `N` no
/// larger than that needs (each vector of `[T; V]` of 2-byte types takes
/// `V` registers).
#[symm_kernel(max_threads = 1024)]
pub fn rms_norm<T: Scalar, const V: usize, const N: usize>(
    x: &[T],
    w: &[T],
    out: &mut [T],
    hidden: u32,
    eps: f32,
) {
    let partial = shared_array::<f32, 32>();
    let v = V as u32;
    let step = block_dim_x() * v;
    kernel_assert!(
        hidden % v == 0u32 && hidden <= N as u32 * step,
        "rms_norm: hidden must be a multiple of V, at most N vectors a thread"
    );
    let wv = norm_weights::<T, V, N>(w, hidden);
    // Programmatic dependent launch: wait for the kernel before, then let
    // the next one's blocks in as this one's free their places.
    grid_dependency_wait();
    launch_dependents();
    let base = block_idx_x() * hidden;
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut xv: [[T; V]; N] = [zero; N];
    let mut ss: f32 = 0.0;
    for k in 0..N {
        let i = thread_idx_x() * v + k as u32 * step;
        if i < hidden {
            xv[k] = x.load_vec::<V>(base + i);
        }
    }
    for k in 0..N {
        for e in 0..V {
            let f = xv[k][e].to_f32();
            ss += f * f;
        }
    }
    norm_out::<T, V, N>(out, base, xv, wv, ss, hidden, eps, partial);
}

/// The norms' second pass: the block's sum of squares from each thread's
/// `ss`, then this thread's `N` vectors of the row (`xv`, of row `base`)
/// times its weights (`wv`) over the root mean square, into `out`.
#[symm_kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn norm_out<T: Scalar, const V: usize, const N: usize>(
    out: SliceMut<T>,
    base: u32,
    xv: [[T; V]; N],
    wv: [[T; V]; N],
    ss: f32,
    hidden: u32,
    eps: f32,
    partial: Shared<f32, 32>,
) {
    let v = V as u32;
    let total = block_sum(ss, partial);
    let inv = 1.0f32 / (total / hidden as f32 + eps).sqrt();
    for k in 0..N {
        let i = thread_idx_x() * v + k as u32 * block_dim_x() * v;
        if i < hidden {
            out.store_vec::<V>(base + i, norm_scaled::<T, V>(xv[k], wv[k], inv));
        }
    }
}

/// This thread's `N` vectors of the norm's weight `w` (zeros past
/// `hidden`): vector `k` at `(thread + k × block_dim) × V`.
#[symm_kernel(device)]
pub fn norm_weights<T: Scalar, const V: usize, const N: usize>(
    w: Slice<T>,
    hidden: u32,
) -> [[T; V]; N] {
    let v = V as u32;
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut wv: [[T; V]; N] = [zero; N];
    for k in 0..N {
        let i = thread_idx_x() * v + k as u32 * block_dim_x() * v;
        if i < hidden {
            wv[k] = w.load_vec::<V>(i);
        }
    }
    wv
}

/// `T(x · inv · w)` a 16-byte vector at a time: the norms' second pass
/// ([`rms_norm`] and [`add_rms_norm`] give the same bits).
#[symm_kernel(device)]
pub fn norm_scaled<T: Scalar, const V: usize>(x: [T; V], w: [T; V], inv: f32) -> [T; V] {
    let mut o: [T; V] = x;
    for e in 0..V {
        o[e] = T::from_f32(x[e].to_f32() * inv * w[e].to_f32());
    }
    o
}

/// `x = T(x + y)`.
#[symm_kernel]
pub fn add<T: Scalar>(x: &mut [T], y: &[T], n: u32) {
    grid_dependency_wait();
    launch_dependents();
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        x[i] = T::from_f32(x[i].to_f32() + y[i].to_f32());
        i += grid_dim_x() * block_dim_x();
    }
}

/// [`add`] then [`rms_norm`] in one kernel, with the same bits (the same
/// block gives the same order): each row of `x` becomes `T(x + y)`, and
/// `out` that rounded row times `w` over its root mean square. One block
/// per row, whole 16-byte vectors a thread (`hidden` a multiple of `V`, at
/// most `N` a thread), `w`'s loaded before the wait.
#[symm_kernel(max_threads = 1024)]
pub fn add_rms_norm<T: Scalar, const V: usize, const N: usize>(
    x: &mut [T],
    y: &[T],
    w: &[T],
    out: &mut [T],
    hidden: u32,
    eps: f32,
) {
    let partial = shared_array::<f32, 32>();
    let v = V as u32;
    let step = block_dim_x() * v;
    kernel_assert!(
        hidden % v == 0u32 && hidden <= N as u32 * step,
        "add_rms_norm: hidden must be a multiple of V, at most N vectors a thread"
    );
    let wv = norm_weights::<T, V, N>(w, hidden);
    grid_dependency_wait();
    launch_dependents();
    let base = block_idx_x() * hidden;
    let zero: [T; V] = [T::from_f32(0.0f32); V];
    let mut xv: [[T; V]; N] = [zero; N];
    let mut yv: [[T; V]; N] = [zero; N];
    for k in 0..N {
        let i = thread_idx_x() * v + k as u32 * step;
        if i < hidden {
            xv[k] = x.load_vec::<V>(base + i);
            yv[k] = y.load_vec::<V>(base + i);
        }
    }
    let mut ss: f32 = 0.0;
    for k in 0..N {
        let mut sum: [T; V] = xv[k];
        for e in 0..V {
            sum[e] = T::from_f32(xv[k][e].to_f32() + yv[k][e].to_f32());
            let f = sum[e].to_f32();
            ss += f * f;
        }
        xv[k] = sum;
        let i = thread_idx_x() * v + k as u32 * step;
        if i < hidden {
            x.store_vec::<V>(base + i, xv[k]);
        }
    }
    norm_out::<T, V, N>(out, base, xv, wv, ss, hidden, eps, partial);
}

/// Appends each row's K and V (after its `q_width` query columns of the
/// `stride`-wide QKV row) to the caches at position `pos` of `ctx`.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn kv_write<T: Scalar>(
    qkv: &[T],
    kc: &mut [T],
    vc: &mut [T],
    rows: u32,
    stride: u32,
    q_width: u32,
    kv_width: u32,
    ctx: u32,
    pos: u32,
) {
    grid_dependency_wait();
    launch_dependents();
    let n = rows * kv_width;
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        let b = i / kv_width;
        let j = i % kv_width;
        let at = (b * ctx + pos) * kv_width + j;
        kc[at] = qkv[b * stride + q_width + j];
        vc[at] = qkv[b * stride + q_width + kv_width + j];
        i += grid_dim_x() * block_dim_x();
    }
}

/// Single-query attention, split over the context (flash-decoding): block
/// (split, query head, row) of a grid (splits, heads, rows) scores the
/// row's query against the cached keys of its KV head (`heads / kv_heads`
/// query heads share one) at positions `split × chunk ..`, and leaves in
/// `part` its softmax partials: the scores' maximum, the sum of their
/// exponentials, and the exponential-weighted sum of the values (`D + 2`
/// floats, heads of `D`, at `((row × heads + head) × splits + split) × (D
/// + 2)`). [`attention_combine`] merges the splits.
///
/// Each lane reads one 16-byte vector of a key or value row (`V`
/// elements), so `D / V` lanes cover a row and a warp reads `32 ×
/// V / D` rows at once: a warp's loads are whole vectors, several rows
/// in flight (one element a lane, a row at a time, left it waiting on
/// memory one row after another: `bench/NOTES.md` v41). `chunk` at most
/// 2048; `D / V` a power of two up to 32, and `warps × D` at most 2048;
/// a multiple of 32 threads.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_split<T: Scalar, const V: usize, const D: usize>(
    qkv: &[T],
    kc: &[T],
    vc: &[T],
    part: &mut [f32],
    stride: u32,
    heads: u32,
    kv_heads: u32,
    ctx: u32,
    chunk: u32,
    scale: f32,
) {
    let scores = shared_array::<f32, 2048>();
    let partial = shared_array::<f32, 32>();
    let acc_s = shared_array::<f32, 2048>();
    grid_dependency_wait();
    launch_dependents();
    let v = V as u32;
    // The head's size a constant: the lanes a row and the rows a warp
    // step are then constants too, and the row sums' shuffles unrolled
    // (NOTES v52: the kernel is bound by instruction issue).
    let dim = D as u32;
    let lpp = dim / v;
    kernel_assert!(
        dim % v == 0u32 && lpp >= 1u32 && lpp <= 32u32 && 32u32 % lpp == 0u32,
        "attention_split: D / V must be a power of two up to 32"
    );
    kernel_assert!(
        chunk <= 2048u32 && (block_dim_x() / 32u32) * dim <= 2048u32 && block_dim_x() % 32u32 == 0u32,
        "attention_split: a chunk of at most 2048 positions, whole warps, and warps × dim at most 2048"
    );
    let ppw = 32u32 / lpp;
    // Block (split, head, row) of a grid (splits, heads, rows): no
    // division by the split count or the heads (NOTES v52: the kernel is
    // bound by issue, and a u32 division is some 20 instructions).
    let splits = grid_dim_x();
    let split = block_idx_x();
    let h = block_idx_y();
    let b = block_idx_z();
    kernel_assert!(
        split * chunk < ctx && h < heads,
        "attention_split: a grid of (splits, heads, rows), each split starting inside the context"
    );
    let g = h / (heads / kv_heads);
    let q = b * stride + h * dim;
    let warp = thread_idx_x() / 32;
    let warps = block_dim_x() / 32;
    let lane = lane_id();
    // This lane's row of the warp's step, and its dimensions in it.
    let sub = lane / lpp;
    let at = (lane % lpp) * v;
    let first = split * chunk;
    let end = min(ctx, first + chunk);
    let qx: [T; V] = qkv.load_vec::<V>(q + at);
    let mut qf: [f32; V] = [0.0f32; V];
    for e in 0..V {
        qf[e] = qx[e].to_f32();
    }
    let mut best: f32 = -3.0e38;
    let mut base = first + warp * ppw;
    while base < end {
        let t = base + sub;
        let mut s: f32 = 0.0;
        if t < end {
            let kx: [T; V] = kc.load_vec::<V>(((b * ctx + t) * kv_heads + g) * dim + at);
            for e in 0..V {
                s += qf[e] * kx[e].to_f32();
            }
        }
        // The row's sum, over its `lpp` lanes (every lane takes part).
        let mut m = lpp / 2u32;
        while m > 0u32 {
            s += shfl_xor(s, m);
            m /= 2u32;
        }
        s *= scale;
        if t < end {
            if lane % lpp == 0u32 {
                scores[t - first] = s;
            }
            best = max(best, s);
        }
        base += warps * ppw;
    }
    let top = block_reduce::<1>(best, partial);
    let mut sum: f32 = 0.0;
    let mut u = thread_idx_x();
    while u < end - first {
        let e = exp(scores[u] - top);
        scores[u] = e;
        sum += e;
        u += block_dim_x();
    }
    let total = block_sum(sum, partial);
    let mut acc: [f32; V] = [0.0f32; V];
    let mut pbase = first + warp * ppw;
    while pbase < end {
        let p = pbase + sub;
        if p < end {
            let w = scores[p - first];
            let vx: [T; V] = vc.load_vec::<V>(((b * ctx + p) * kv_heads + g) * dim + at);
            for e in 0..V {
                acc[e] += w * vx[e].to_f32();
            }
        }
        pbase += warps * ppw;
    }
    // The warp's rows summed into the lanes of its first row.
    let mut m2 = lpp;
    while m2 < 32u32 {
        for e in 0..V {
            acc[e] += shfl_xor(acc[e], m2);
        }
        m2 *= 2u32;
    }
    if sub == 0u32 {
        for e in 0..V {
            acc_s[warp * dim + at + e as u32] = acc[e];
        }
    }
    sync_threads();
    let out_at = ((b * heads + h) * splits + split) * (dim + 2);
    if thread_idx_x() == 0 {
        part[out_at] = top;
        part[out_at + 1] = total;
    }
    let mut d = thread_idx_x();
    while d < dim {
        let mut o: f32 = 0.0;
        for w in 0..warps {
            o += acc_s[w * dim + d];
        }
        part[out_at + 2 + d] = o;
        d += block_dim_x();
    }
}

/// Merges [`attention_split`]'s `splits` partials of each (row, query
/// head): rescaled to the largest maximum, summed, divided by the summed
/// exponentials. A block per (row, head, 32 dimensions): warp `w` takes
/// splits `w, w + warps, …` (at most `L`), a dimension a lane, and every
/// load of the block (the warps' `L` values a lane, the splits' maxima and
/// sums) is issued before any is used: one round trip (NOTES v52). Each
/// split's weight is computed once (by thread `s`, into shared memory);
/// the first warp adds the warps' shares. `dim` a multiple of 32, at most
/// 256 splits, at least one thread a split and `warps × L` at least
/// `splits` ([`combine`](super::combine) picks such a block).
#[symm_kernel]
pub fn attention_combine<T: Scalar, const L: usize>(
    part: &[f32],
    out: &mut [T],
    dim: u32,
    splits: u32,
) {
    let partial = shared_array::<f32, 32>();
    let weight = shared_array::<f32, 256>();
    let shares = shared_array::<f32, 1024>();
    grid_dependency_wait();
    launch_dependents();
    let warps = block_dim_x() / 32u32;
    kernel_assert!(
        dim % 32u32 == 0u32 && splits <= 256u32 && splits <= block_dim_x() && splits <= warps * (L as u32) && block_dim_x() % 32u32 == 0u32,
        "attention_combine: dim a multiple of 32, at most 256 splits, whole warps, a thread a split and L splits a warp at most"
    );
    let slices = dim / 32u32;
    let bh = block_idx_x() / slices;
    let lane = lane_id();
    let d = (block_idx_x() % slices) * 32u32 + lane;
    let t = thread_idx_x();
    let w = t / 32u32;
    let base = bh * splits * (dim + 2u32);
    let mut vals: [f32; L] = [0.0f32; L];
    for k in 0..L {
        let s = w + k as u32 * warps;
        if s < splits {
            vals[k] = part[base + s * (dim + 2u32) + 2u32 + d];
        }
    }
    let mut m: f32 = -3.0e38;
    let mut l: f32 = 0.0;
    if t < splits {
        m = part[base + t * (dim + 2u32)];
        l = part[base + t * (dim + 2u32) + 1u32];
    }
    let top = block_reduce::<1>(m, partial);
    let mut e: f32 = 0.0;
    if t < splits {
        e = exp(m - top);
        weight[t] = e;
        e *= l;
    }
    // (`block_sum` ends with a barrier: `weight` is complete.)
    let total = block_sum(e, partial);
    let mut o: f32 = 0.0;
    for k in 0..L {
        let s = w + k as u32 * warps;
        if s < splits {
            o += vals[k] * weight[s];
        }
    }
    shares[t] = o;
    sync_threads();
    if w == 0u32 {
        let mut sum: f32 = 0.0;
        for k in 0..warps {
            sum += shares[k * 32u32 + lane];
        }
        out[bh * dim + d] = T::from_f32(sum / total);
    }
}

/// `out[r, i] = T(silu(gate) · up)` for the `inter` gate and up columns of
/// each row of `gu` (gate first).
#[symm_kernel]
pub fn swiglu<T: Scalar>(gu: &[T], out: &mut [T], rows: u32, inter: u32) {
    grid_dependency_wait();
    launch_dependents();
    let n = rows * inter;
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < n {
        let r = i / inter;
        let c = i % inter;
        let g = gu[r * 2 * inter + c].to_f32();
        let u = gu[r * 2 * inter + inter + c].to_f32();
        out[i] = T::from_f32(g / (1.0f32 + exp(-g)) * u);
        i += grid_dim_x() * block_dim_x();
    }
}

/// One warp's dot products of `R` rows of `w` (`k` wide, a multiple of
/// `V`) with each of the `M` rows of `x`, in f32: row `q` is
/// `min(r0 + q % per, last) + (q / per) × off` (`per` consecutive rows,
/// then as many `off` further on: gate rows, then their up rows), and lane
/// `q × M + r` (below `R × M`) gets row `q`'s product with row `r` of x
/// (every other lane 0). Lanes take the rows' 16-byte vectors `lane,
/// lane + 32, …` in steps of `32 × U` vectors; every load of a step (the
/// rows' `R × U` vectors and x's `M × U`) is issued before any is used,
/// and each product is one `fma`. Then the warp's butterflies. No block
/// barrier: while one warp sums, the others' loads keep the memory busy
/// (NOTES v47).
///
/// The weights never depend on the kernel before, x does: the first
/// step's weights are loaded before `grid_dependency_wait`, so that with
/// programmatic dependent launch they are in flight while the kernel
/// before ends. The caller's kernel must not have waited already, and
/// must write nothing before this returns. Every lane of the warp calls
/// it; `R × U × V` and `M × U × V` at most 256, `R × M` at most 32.
#[symm_kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn warp_dots<T: Scalar, const V: usize, const M: usize, const R: usize, const U: usize>(
    x: Slice<T>,
    w: Slice<T>,
    r0: u32,
    per: u32,
    off: u32,
    last: u32,
    k: u32,
) -> f32 {
    let v = V as u32;
    kernel_assert!(
        M as u32 >= 1u32
            && R as u32 >= 1u32
            && U as u32 >= 1u32
            && block_dim_x() % 32u32 == 0u32
            && (M * R) as u32 <= 32u32
            && (R * U * V) as u32 <= 256u32
            && (M * U * V) as u32 <= 256u32
            && k % v == 0u32
            && k > 0u32,
        "gemv: whole warps, R and U at least 1, R × M at most 32, R × U × V and M × U × V at most 256, k a positive multiple of V"
    );
    let vecs = k / v;
    let lane = lane_id();
    let mut acc: [f32; 32] = [0.0f32; 32];
    let mut wb: [T; 256] = [T::from_f32(0.0f32); 256];
    let mut xb: [T; 256] = [T::from_f32(0.0f32); 256];
    let mut base = 0u32;
    while base < vecs {
        // (`R`, `U`, `M` and `V` constants: the loops unroll, and `wb` and
        // `xb` stay in registers.)
        for q in 0..R {
            let row = min(r0 + q as u32 % per, last) + (q as u32 / per) * off;
            for u in 0..U {
                // A vector past the row's end reads the last again (the
                // same address across the warp) and adds nothing.
                let i = min(base + u as u32 * 32u32 + lane, vecs - 1u32);
                let a: [T; V] = w.load_vec::<V>(row * k + i * v);
                for e in 0..V {
                    wb[(q * U + u) * V + e] = a[e];
                }
            }
        }
        // (Once the kernel before has ended, this returns at once.)
        grid_dependency_wait();
        for r in 0..M {
            for u in 0..U {
                let i = min(base + u as u32 * 32u32 + lane, vecs - 1u32);
                let a: [T; V] = x.load_vec::<V>(r as u32 * k + i * v);
                for e in 0..V {
                    xb[(r * U + u) * V + e] = a[e];
                }
            }
        }
        for u in 0..U {
            if base + u as u32 * 32u32 + lane < vecs {
                for r in 0..M {
                    for e in 0..V {
                        let f = xb[(r * U + u) * V + e].to_f32();
                        for q in 0..R {
                            acc[q * M + r] =
                                fma(f, wb[(q * U + u) * V + e].to_f32(), acc[q * M + r]);
                        }
                    }
                }
            }
        }
        base += 32u32 * U as u32;
    }
    let mut mine: f32 = 0.0;
    for q in 0..R * M {
        let s = warp_reduce::<0>(acc[q]);
        if lane == q as u32 {
            mine = s;
        }
    }
    mine
}

/// `y[r, j] = T(Σ_i x[r, i] · w[j, i])` in f32 for the `M` rows of `x`
/// (the decode step's batch, 1 to 8) and the `n` rows of `w` (`k` wide, a
/// multiple of `V`): the step's projections. A warp per `R` consecutive
/// rows of `w` ([`warp_dots`]); warps loop over the row groups. Launch it
/// with whole warps.
#[symm_kernel]
pub fn gemv_xwt<T: Scalar, const V: usize, const M: usize, const R: usize, const U: usize>(
    x: &[T],
    w: &[T],
    y: &mut [T],
    n: u32,
    k: u32,
) {
    // (`warp_dots` waits for the kernel before, after its first loads.)
    launch_dependents();
    let m = M as u32;
    let rows = R as u32;
    let lane = lane_id();
    let warps = grid_dim_x() * (block_dim_x() / 32u32);
    let groups = (n + rows - 1u32) / rows;
    let mut g = block_idx_x() * (block_dim_x() / 32u32) + thread_idx_x() / 32u32;
    while g < groups {
        let r0 = g * rows;
        let got = warp_dots::<T, V, M, R, U>(x, w, r0, rows, 0u32, n - 1u32, k);
        let row = r0 + lane / m;
        if lane < rows * m && row < n {
            y[(lane % m) * n + row] = T::from_f32(got);
        }
        g += warps;
    }
}

/// SwiGLU fused into its gate/up projection: for the `M` rows of `x`,
/// `out[r, j] = T(silu(g) · u)` with `g` and `u` the f32 products of `x`
/// with rows `j` and `inter + j` of `w` (gate rows first), never rounded
/// on the way ([`gemv_xwt`] and [`swiglu`] in one pass, without the
/// `2 × inter` intermediate). A warp per `R / 2` outputs: their gate rows
/// and their up rows ([`warp_dots`]). Launch it with whole warps.
#[symm_kernel]
pub fn gemv_swiglu<T: Scalar, const V: usize, const M: usize, const R: usize, const U: usize>(
    x: &[T],
    w: &[T],
    out: &mut [T],
    inter: u32,
    k: u32,
) {
    launch_dependents();
    kernel_assert!(
        R as u32 % 2u32 == 0u32 && R as u32 >= 2u32,
        "gemv_swiglu: R gate and up rows, an even number"
    );
    let m = M as u32;
    let per = (R / 2) as u32;
    let lane = lane_id();
    let warps = grid_dim_x() * (block_dim_x() / 32u32);
    let groups = (inter + per - 1u32) / per;
    let mut g = block_idx_x() * (block_dim_x() / 32u32) + thread_idx_x() / 32u32;
    while g < groups {
        let j0 = g * per;
        let got = warp_dots::<T, V, M, R, U>(x, w, j0, per, inter, inter - 1u32, k);
        // Lane q × M + r holds gate q's product; its up is `per × M` lanes
        // on (every lane takes part).
        let up = shfl_down(got, per * m);
        let col = j0 + lane / m;
        if lane < per * m && col < inter {
            out[(lane % m) * inter + col] = T::from_f32(got / (1.0f32 + exp(-got)) * up);
        }
        g += warps;
    }
}

/// `y[m, n] = T(Σ_k x[m, k] · w[n, k])` in f32: the emulator's GEMM
/// (`y = x · wᵀ`, as the GPU runs it through cuBLAS).
#[symm_kernel]
pub fn gemm_xwt<T: Scalar>(x: &[T], w: &[T], y: &mut [T], m: u32, n: u32, k: u32) {
    let total = m * n;
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < total {
        let r = i / n;
        let c = i % n;
        let mut acc: f32 = 0.0;
        for j in 0..k {
            acc += x[r * k + j].to_f32() * w[c * k + j].to_f32();
        }
        y[i] = T::from_f32(acc);
        i += grid_dim_x() * block_dim_x();
    }
}

/// A grid-stride launch over `n` elements.
pub fn lin(n: usize) -> symm::LaunchConfig {
    symm::LaunchConfig::linear((n.div_ceil(256) as u32).clamp(1, 1024), 256)
}

/// Fills `rows × cols` of `out` from row `dst_row0` with the full matrix
/// (`seed`, `full_cols` wide) from (`src_row0`, `src_col0`).
#[allow(clippy::too_many_arguments)]
pub fn fill_slice<T: Scalar>(
    c: &symm::Comm,
    out: &mut symm::DeviceBuffer<T>,
    rows: usize,
    cols: usize,
    dst_row0: usize,
    (src_row0, src_col0, full_cols): (usize, usize, usize),
    seed: u32,
    scale: f32,
) -> symm::Result<()> {
    fill::launch::<T>(
        c,
        lin(rows * cols),
        out,
        rows as u32,
        cols as u32,
        dst_row0 as u32,
        src_row0 as u32,
        src_col0 as u32,
        full_cols as u32,
        seed,
        scale,
    )
}
