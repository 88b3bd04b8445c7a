//! An expert-parallel MoE layer on `symm::kernels::moe`: a gate on the
//! GPU (the token's logits, its top-k experts and their softmax weights),
//! dispatch, each local expert's SwiGLU feed-forward (`y = (silu(x·Wgᵀ) ⊙
//! x·Wuᵀ)·Wdᵀ`) over its rows of the expert-major layout, then combine.
//! Two shapes: DeepSeek-V3-like (hidden 7168, top-8, expert width 2048,
//! 128 experts by default: `--experts`, at most 146, whose up projections
//! the weight fill's 32-bit index still reaches) and Mixtral-like (hidden
//! 4096, 8 experts, top-2, width 14336).
//!
//! On GPUs the GEMMs run through cuBLAS: the gate as one GEMM, the experts
//! as one grouped GEMM (`cublasGemmGroupedBatchedEx`) a projection, whose
//! per-expert row counts the host reads after the dispatch, and whose
//! pointer arrays it then writes (each a synchronisation: cuBLAS takes
//! its sizes from the host). It
//! prints tokens/s a layer: every rank's tokens over the layer's time,
//! each layer alone, median of 10. On the emulator (`--emulator N`, or no
//! GPU) the GEMMs are DSL kernels, reading the expert-major layout on the
//! device.
//!
//! `--check` compares every rank's output with a world-1 run of the same
//! layer (all experts on one rank, every rank's tokens and routing), and
//! fails if any element differs by more than one rounding of the row
//! type: each expert's GEMM sees the same rows in the same order in both
//! runs (on a GPU, cuBLAS could in principle split a group differently; on
//! 2 H200s it did not), and the combine adds each rank's slots before the
//! ranks' sums (`symm::kernels::moe`), so a token whose experts span ranks
//! may round once differently from the world-1 layer's. It also says how
//! many elements are the same bits.
//!
//! Beside symm, the same layer with NCCL moving the rows (symm's layout
//! kernels around grouped `ncclSend`/`ncclRecv`, sizes read on the host:
//! `support/moe_nccl.rs`). torch's `all_to_all_vdev_2d` is timed apart
//! (`bench/torch_moe.py`): it takes fewer than 16 experts a rank.

use symm::dsl::*;
use symm::kernels::moe::{Moe, MoeConfig};
use symm::{bf16, run, symm_kernel, Comm, CommOptions, DeviceBuffer, LaunchConfig, Ranks, Result};

#[path = "tp_decode/kernels.rs"]
#[allow(dead_code)] // the decode step's other kernels
mod kernels;
use kernels::{fill_slice, gemm_xwt, lin, swiglu};

#[path = "support/bench.rs"]
#[allow(dead_code)] // what the other benchmarks use
mod bench;
use bench::{other, time_steps};

#[path = "support/gemm.rs"]
mod gemm;

#[path = "support/moe_nccl.rs"]
mod moe_nccl;
use moe_nccl::NcclMoe;

type T = bf16;

#[derive(clap::Parser)]
struct Args {
    /// Ranks (one per GPU; default: every GPU).
    #[arg(long)]
    world: Option<usize>,
    /// Shapes: deepseek, mixtral.
    #[arg(long, value_delimiter = ',', default_value = "deepseek,mixtral")]
    shape: Vec<String>,
    /// Experts of the DeepSeek-like shape (a multiple of the ranks, at
    /// least 8, at most 146).
    #[arg(long, default_value_t = 128)]
    experts: usize,
    /// Tokens a rank, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128,4096")]
    tokens: Vec<usize>,
    /// Compare with a world-1 run of the same layer.
    #[arg(long)]
    check: bool,
    /// Run on N emulated ranks at toy sizes, checked.
    #[arg(long, value_name = "N")]
    emulator: Option<usize>,
}

/// A layer's sizes.
#[derive(Clone, Copy, Debug)]
struct Shape {
    name: &'static str,
    hidden: usize,
    experts: usize,
    top_k: usize,
    inter: usize,
}

fn shape(name: &str, experts: usize) -> Option<Shape> {
    match name {
        "deepseek" => Some(Shape {
            name: "DeepSeek-V3-like",
            hidden: 7168,
            experts,
            top_k: 8,
            inter: 2048,
        }),
        "mixtral" => Some(Shape {
            name: "Mixtral-like",
            hidden: 4096,
            experts: 8,
            top_k: 2,
            inter: 14336,
        }),
        _ => None,
    }
}

/// Each token's `top_k` largest of its `experts` logits (ties to the lower
/// expert), and their softmax weights in f32: a block a token, thread 0
/// choosing (at most 1024 experts, a few passes over them).
#[symm_kernel]
pub fn gate_topk(logits: &[bf16], experts: u32, top_k: u32, idx: &mut [i32], w: &mut [f32]) {
    let t = block_idx_x();
    let taken = shared_array::<u32, 1024>();
    let mut e = thread_idx_x();
    while e < experts {
        taken[e] = 0u32;
        e += block_dim_x();
    }
    sync_threads();
    if thread_idx_x() == 0u32 {
        let mut first = 0.0f32;
        let mut sum = 0.0f32;
        for k in 0..top_k {
            let mut best = 0u32;
            let mut bv = -3.0e38f32;
            for x in 0..experts {
                let v = logits[t * experts + x].to_f32();
                if taken[x] == 0u32 && v > bv {
                    best = x;
                    bv = v;
                }
            }
            taken[best] = 1u32;
            if k == 0u32 {
                first = bv;
            }
            let p = exp(bv - first);
            idx[t * top_k + k] = best as i32;
            w[t * top_k + k] = p;
            sum += p;
        }
        for k in 0..top_k {
            w[t * top_k + k] = w[t * top_k + k] / sum;
        }
    }
}

/// The experts' GEMM on the emulator: row `r` of `x` (`k` wide), in local
/// expert `l`'s rows of the expert-major `layout` (`local` experts), gets
/// `y[r] = x[r] · w_lᵀ` (`w` holds each local expert's `n × k`), f32
/// accumulation; padding rows are left alone.
#[symm_kernel]
#[allow(clippy::too_many_arguments)]
pub fn grouped_xwt(
    x: &[bf16],
    w: &[bf16],
    y: &mut [bf16],
    layout: &[u32],
    local: u32,
    n: u32,
    k: u32,
) {
    let used = layout[2u32 * local + 1u32];
    let mut i = block_idx_x() * block_dim_x() + thread_idx_x();
    while i < used * n {
        let r = i / n;
        let c = i % n;
        let mut l = 0u32;
        let mut found = false;
        for e in 0..local {
            if r >= layout[local + e] && r < layout[local + e] + layout[e] {
                l = e;
                found = true;
            }
        }
        if found {
            let mut acc = 0.0f32;
            for j in 0..k {
                acc += x[r * k + j].to_f32() * w[(l * n + c) * k + j].to_f32();
            }
            y[i] = bf16::from_f32(acc);
        }
        i += grid_dim_x() * block_dim_x();
    }
}

/// One rank's layer: the gate (every rank's the whole), its experts'
/// weights, the plan and the step's buffers.
struct Layer {
    s: Shape,
    local: usize,
    wg: DeviceBuffer<T>,
    /// Each local expert's gate and up projections, `2 × inter` rows of
    /// `hidden`.
    w1: DeviceBuffer<T>,
    /// Each local expert's down projection, `hidden` rows of `inter`.
    w2: DeviceBuffer<T>,
    moe: Mover,
    logits: DeviceBuffer<T>,
    idx: DeviceBuffer<i32>,
    w: DeviceBuffer<f32>,
    gu: DeviceBuffer<T>,
    act: DeviceBuffer<T>,
    y: DeviceBuffer<T>,
    out: DeviceBuffer<T>,
    blas: Option<Blas>,
}

/// What moves the rows: symm's `Moe`, or NCCL's grouped sends and
/// receives around symm's layout kernels (`support/moe_nccl.rs`).
enum Mover {
    Symm(Box<Moe<T>>),
    Nccl(Box<NcclMoe>),
}

impl Mover {
    fn received(&self) -> &DeviceBuffer<T> {
        match self {
            Mover::Symm(m) => m.received(),
            Mover::Nccl(m) => &m.received,
        }
    }

    fn layout(&self) -> &DeviceBuffer<u32> {
        match self {
            Mover::Symm(m) => m.layout(),
            Mover::Nccl(m) => &m.layout,
        }
    }

    fn received_rows(&self) -> usize {
        match self {
            Mover::Symm(m) => m.received_rows(),
            Mover::Nccl(m) => m.received_rows(),
        }
    }
}

/// cuBLAS, and the device arrays of a grouped GEMM's pointers.
struct Blas {
    handle: symm::cudarc::cublas::CudaBlas,
    ptrs: DeviceBuffer<u64>,
}

impl Layer {
    /// This rank's part of the layer, for `tokens` tokens, its rows moved
    /// by symm or (`nccl`) by NCCL.
    fn new(c: &Comm, s: Shape, tokens: usize, nccl: bool) -> Result<Layer> {
        let (world, rank) = (c.world_size(), c.rank());
        let local = s.experts / world;
        let (h, i) = (s.hidden, s.inter);
        // The fill indexes the full up projection (every expert's) in u32.
        if s.experts * 2 * i * h > u32::MAX as usize || !s.experts.is_multiple_of(world) {
            return Err(other(
                c,
                format!(
                    "{} experts of {}: a multiple of {world} ranks whose up projections hold at most 2^32 - 1 elements",
                    s.experts, s.name
                ),
            ));
        }
        let cfg = MoeConfig::new(h, s.experts, s.top_k, tokens).with_align(8);
        let moe = if nccl {
            Mover::Nccl(Box::new(NcclMoe::new(c, cfg)?))
        } else {
            Mover::Symm(Box::new(Moe::<T>::new(c, cfg)?))
        };
        let rows = moe.received_rows();
        let mut wg = c.device_buffer::<T>(s.experts * h)?;
        let mut w1 = c.device_buffer::<T>(local * 2 * i * h)?;
        let mut w2 = c.device_buffer::<T>(local * h * i)?;
        // Each expert's weights from its global index: the same on every
        // world size.
        let scale = 1.0 / (h as f32).sqrt();
        fill_slice(c, &mut wg, s.experts, h, 0, (0, 0, h), 0x6a7e, scale)?;
        let (r1, r2) = (2 * i, h);
        fill_slice(
            c,
            &mut w1,
            local * r1,
            h,
            0,
            (rank * local * r1, 0, h),
            0x1111,
            scale,
        )?;
        let down = 1.0 / (i as f32).sqrt();
        fill_slice(
            c,
            &mut w2,
            local * r2,
            i,
            0,
            (rank * local * r2, 0, i),
            0x2222,
            down,
        )?;
        let blas = match c.cuda_stream() {
            Some(stream) => Some(Blas {
                handle: symm::cudarc::cublas::CudaBlas::new(stream)
                    .map_err(|e| other(c, format!("cuBLAS: {e:?}")))?,
                ptrs: c.device_buffer(6 * local)?,
            }),
            None => None,
        };
        Ok(Layer {
            s,
            local,
            wg,
            w1,
            w2,
            moe,
            logits: c.device_buffer(tokens * s.experts)?,
            idx: c.device_buffer(tokens * s.top_k)?,
            w: c.device_buffer(tokens * s.top_k)?,
            gu: c.device_buffer(rows * 2 * i)?,
            act: c.device_buffer(rows * i)?,
            y: c.device_buffer(rows * h)?,
            out: c.device_buffer(tokens * h)?,
            blas,
        })
    }

    /// The gate: logits, then each token's experts and weights.
    fn gate(&mut self, c: &Comm, x: &DeviceBuffer<T>, tokens: usize) -> Result<()> {
        let s = self.s;
        if tokens == 0 {
            return Ok(());
        }
        match &self.blas {
            // SAFETY: x holds tokens × hidden, wg experts × hidden and
            // logits tokens × experts bf16 elements of this rank, on the
            // stream cuBLAS runs on.
            Some(b) => unsafe {
                gemm::gemm_bf16_xwt(
                    &b.handle,
                    (
                        x.device_ptr(),
                        self.wg.device_ptr(),
                        self.logits.device_ptr(),
                    ),
                    (tokens, s.experts, s.hidden),
                )
            }
            .map_err(|e| other(c, format!("cublasGemmEx: {e:?}")))?,
            None => gemm_xwt::launch::<T>(
                c,
                lin(tokens * s.experts),
                x,
                &self.wg,
                &mut self.logits,
                tokens as u32,
                s.experts as u32,
                s.hidden as u32,
            )?,
        }
        gate_topk::launch(
            c,
            LaunchConfig::linear(tokens as u32, 32),
            &self.logits,
            s.experts as u32,
            s.top_k as u32,
            &mut self.idx,
            &mut self.w,
        )
    }

    /// The layer on `tokens` tokens of `x`, the routing its own gate's or
    /// (`routed`) already in `idx` and `w`.
    fn step(&mut self, c: &Comm, x: &DeviceBuffer<T>, tokens: usize, routed: bool) -> Result<()> {
        if !routed {
            self.gate(c, x, tokens)?;
        }
        match &mut self.moe {
            Mover::Symm(m) => m.dispatch(c, x, &self.idx, tokens)?,
            Mover::Nccl(m) => m.dispatch(c, x, &self.idx, tokens)?,
        }
        self.experts(c)?;
        match &mut self.moe {
            Mover::Symm(m) => m.combine(c, &self.y, &self.w, &mut self.out),
            Mover::Nccl(m) => m.combine(c, &self.y, &self.w, &mut self.out),
        }
    }

    /// Each local expert's SwiGLU over its rows of the received layout.
    fn experts(&mut self, c: &Comm) -> Result<()> {
        let (h, i, local) = (self.s.hidden, self.s.inter, self.local);
        match &mut self.blas {
            None => {
                let layout = self.moe.layout();
                let rows = self.moe.received_rows();
                grouped_xwt::launch(
                    c,
                    lin(rows * 2 * i),
                    self.moe.received(),
                    &self.w1,
                    &mut self.gu,
                    layout,
                    local as u32,
                    (2 * i) as u32,
                    h as u32,
                )?;
                swiglu::launch::<T>(
                    c,
                    lin(rows * i),
                    &self.gu,
                    &mut self.act,
                    rows as u32,
                    i as u32,
                )?;
                grouped_xwt::launch(
                    c,
                    lin(rows * h),
                    &self.act,
                    &self.w2,
                    &mut self.y,
                    layout,
                    local as u32,
                    h as u32,
                    i as u32,
                )
            }
            Some(b) => {
                // cuBLAS takes the groups' sizes from the host.
                let layout = self.moe.layout().read(0, 2 * local + 2)?;
                let used = layout[2 * local + 1] as usize;
                let groups: Vec<(usize, usize)> = (0..local)
                    .filter(|&l| layout[l] > 0)
                    .map(|l| (l, layout[l] as usize))
                    .collect();
                let starts: Vec<usize> = (0..local).map(|l| layout[local + l] as usize).collect();
                let received = self.moe.received().device_ptr();
                // Both projections' pointer arrays, written once (a write
                // synchronises the stream).
                let mut ptrs = pointers(
                    &groups,
                    &starts,
                    (received, h),
                    (self.w1.device_ptr(), 2 * i * h),
                    (self.gu.device_ptr(), 2 * i),
                );
                ptrs.extend(pointers(
                    &groups,
                    &starts,
                    (self.act.device_ptr(), i),
                    (self.w2.device_ptr(), h * i),
                    (self.y.device_ptr(), h),
                ));
                b.ptrs.write(0, &ptrs)?;
                let first = b.ptrs.device_ptr();
                let second = first + 8 * 3 * groups.len() as u64;
                grouped(c, b, &groups, first, (2 * i, h, h, 2 * i))?;
                swiglu::launch::<T>(
                    c,
                    lin(used * i),
                    &self.gu,
                    &mut self.act,
                    used as u32,
                    i as u32,
                )?;
                grouped(c, b, &groups, second, (h, i, i, h))
            }
        }
    }
}

/// A grouped GEMM's device pointers for each `(expert, rows)` of
/// `groups`: the weights (`w` + expert × `ws` elements), then the rows of
/// `x` from `starts[expert]` (row stride `xs` elements), then the same
/// rows of `y` (row stride `ys`).
fn pointers(
    groups: &[(usize, usize)],
    starts: &[usize],
    (x, xs): (u64, usize),
    (w, ws): (u64, usize),
    (y, ys): (u64, usize),
) -> Vec<u64> {
    let e = std::mem::size_of::<T>() as u64;
    let mut ptrs = Vec::with_capacity(3 * groups.len());
    ptrs.extend(groups.iter().map(|&(l, _)| w + (l * ws) as u64 * e));
    ptrs.extend(groups.iter().map(|&(l, _)| x + (starts[l] * xs) as u64 * e));
    ptrs.extend(groups.iter().map(|&(l, _)| y + (starts[l] * ys) as u64 * e));
    ptrs
}

/// One grouped GEMM: for each `(expert, rows)` of `groups`, `y = x · wᵀ`
/// (`w` `n × k`, `x` rows of stride `xs`, `y` of stride `ys`), with the
/// `3 × groups` device pointers ([`pointers`]) at `base`.
fn grouped(
    c: &Comm,
    b: &Blas,
    groups: &[(usize, usize)],
    base: u64,
    (n, k, xs, ys): (usize, usize, usize, usize),
) -> Result<()> {
    use symm::cudarc::cublas::sys;
    if groups.is_empty() {
        return Ok(());
    }
    let g = groups.len();
    let ta = vec![sys::cublasOperation_t::CUBLAS_OP_T; g];
    let tb = vec![sys::cublasOperation_t::CUBLAS_OP_N; g];
    let ms = vec![n as i32; g];
    let ns: Vec<i32> = groups.iter().map(|&(_, r)| r as i32).collect();
    let ks = vec![k as i32; g];
    let (alpha, beta) = (vec![1.0f32; g], vec![0.0f32; g]);
    let (lda, ldb, ldc) = (vec![k as i32; g], vec![xs as i32; g], vec![ys as i32; g]);
    let sizes = vec![1i32; g];
    // SAFETY: every pointer at `base` is this rank's device memory: each
    // expert's weight inside its weights, its rows (below the layout's
    // rows in use) inside its input and output; the pointer arrays were
    // written (synchronously) before this call, and are not rewritten
    // before the next layer's synchronisation; the host arrays live past
    // the call, which reads them before it returns.
    let status = unsafe {
        sys::cublasGemmGroupedBatchedEx(
            *b.handle.handle(),
            ta.as_ptr(),
            tb.as_ptr(),
            ms.as_ptr(),
            ns.as_ptr(),
            ks.as_ptr(),
            alpha.as_ptr() as *const _,
            base as *const *const _,
            sys::cudaDataType_t::CUDA_R_16BF,
            lda.as_ptr(),
            (base + 8 * g as u64) as *const *const _,
            sys::cudaDataType_t::CUDA_R_16BF,
            ldb.as_ptr(),
            beta.as_ptr() as *const _,
            (base + 16 * g as u64) as *const *mut _,
            sys::cudaDataType_t::CUDA_R_16BF,
            ldc.as_ptr(),
            g as i32,
            sizes.as_ptr(),
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        )
    };
    if status != sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Err(other(c, format!("cublasGemmGroupedBatchedEx: {status:?}")));
    }
    Ok(())
}

/// Rank `rank`'s tokens: the same on every world size.
fn tokens_of(c: &Comm, s: Shape, rank: usize, n: usize) -> Result<DeviceBuffer<T>> {
    let mut x = c.device_buffer::<T>((n * s.hidden).max(1))?;
    if n > 0 {
        fill_slice(
            c,
            &mut x,
            n,
            s.hidden,
            0,
            (rank * n, 0, s.hidden),
            0x7075,
            1.0,
        )?;
    }
    Ok(x)
}

/// What [`check`] found: the largest relative difference, the elements
/// whose bits differ, those that differ by more than one rounding of
/// `T` (relative 2^-7 of the larger, at least of 0.01), and all.
struct Compared {
    worst: f32,
    differ: usize,
    beyond: usize,
    total: usize,
}

/// Every rank's outputs and routing (`idx`, `w`) on `ranks` world-N
/// ranks, the rows moved by symm or (`nccl`) NCCL; then the world-1 layer
/// (symm's) on all their tokens and routings, compared.
fn check(
    ranks: Ranks,
    one: Ranks,
    s: Shape,
    tokens: usize,
    nccl: bool,
) -> std::result::Result<Compared, symm::RunError> {
    let world = ranks.world_size();
    let parts = run(ranks, CommOptions::default(), |c| {
        let mut layer = Layer::new(c, s, tokens, nccl)?;
        let x = tokens_of(c, s, c.rank(), tokens)?;
        layer.step(c, &x, tokens, false)?;
        c.synchronize()?;
        Ok((
            layer.out.read(0, tokens * s.hidden)?,
            layer.idx.to_host()?,
            layer.w.to_host()?,
        ))
    })?;
    let all = world * tokens;
    let reference = run(one, CommOptions::default(), |c| {
        let mut layer = Layer::new(c, s, all, false)?;
        let mut x = c.device_buffer::<T>(all * s.hidden)?;
        fill_slice(c, &mut x, all, s.hidden, 0, (0, 0, s.hidden), 0x7075, 1.0)?;
        let idx: Vec<i32> = parts.iter().flat_map(|p| p.1.clone()).collect();
        let w: Vec<f32> = parts.iter().flat_map(|p| p.2.clone()).collect();
        layer.idx.write(0, &idx)?;
        layer.w.write(0, &w)?;
        layer.step(c, &x, all, true)?;
        c.synchronize()?;
        layer.out.read(0, all * s.hidden)
    })?;
    let want = &reference[0];
    let total = parts.len() * tokens * s.hidden;
    // A layer whose every output is zero would agree with anything.
    if want.iter().all(|v| v.to_f32() == 0.0) {
        return Ok(Compared {
            worst: f32::INFINITY,
            differ: total,
            beyond: total,
            total,
        });
    }
    let (mut worst, mut differ, mut beyond) = (0.0f32, 0, 0);
    for (r, (got, _, _)) in parts.iter().enumerate() {
        for (j, g) in got.iter().enumerate() {
            let w = want[r * tokens * s.hidden + j];
            if g.to_bits() != w.to_bits() {
                differ += 1;
                let (g, w) = (g.to_f32(), w.to_f32());
                let scale = g.abs().max(w.abs()).max(1e-2);
                worst = worst.max((g - w).abs() / scale);
                // NaN is beyond too.
                if (g - w).abs() <= scale / 128.0 {
                    continue;
                }
                beyond += 1;
            }
        }
    }
    Ok(Compared {
        worst,
        differ,
        beyond,
        total,
    })
}

/// `--emulator N`: the layer at toy sizes (2 experts a rank, top-2, rows
/// of 64, 6 tokens a rank) on N emulated ranks against the world-1 layer;
/// 0 when every element agrees within one rounding.
pub(crate) fn check_emulator(n: usize) -> i32 {
    let s = Shape {
        name: "toy",
        hidden: 64,
        experts: 2 * n,
        top_k: 2,
        inter: 32,
    };
    match check(Ranks::Emulator(n), Ranks::Emulator(1), s, 6, false) {
        Ok(c) if c.beyond == 0 => {
            println!(
                "moe_layer --emulator {n}: all {} elements within one rounding of the world-1 layer's ({} of them other bits)",
                c.total, c.differ
            );
            0
        }
        Ok(c) => {
            eprintln!(
                "moe_layer --emulator {n}: {} of {} elements differ from the world-1 layer's by more than one rounding (worst relative {:e})",
                c.beyond, c.total, c.worst
            );
            1
        }
        Err(e) => {
            eprintln!("moe_layer --emulator {n}: {e}");
            1
        }
    }
}

fn main() {
    let args: Args = clap::Parser::parse();
    if let Some(n) = args.emulator {
        std::process::exit(check_emulator(n));
    }
    let world = args.world.unwrap_or_else(symm::cuda_device_count);
    let (Some(ranks), Some(one)) = (Ranks::gpus(world).filter(|_| world >= 2), Ranks::gpus(1))
    else {
        eprintln!("SKIPPED: moe_layer needs 2 or more GPUs (one rank per GPU); --emulator N runs it on the CPU");
        return;
    };
    println!("method: each layer alone (host-synchronised: cuBLAS's grouped GEMM takes its sizes from the host), median of 10 after 2 warm-ups");
    for name in &args.shape {
        let Some(s) = shape(name, args.experts) else {
            eprintln!("--shape {name}: deepseek or mixtral");
            std::process::exit(2);
        };
        println!(
            "\n### {} layer, {world} ranks: hidden {}, {} experts, top-{}, expert width {} (rank 0)\n",
            s.name, s.hidden, s.experts, s.top_k, s.inter
        );
        println!("| tokens a rank | symm µs a layer | NCCL µs a layer | symm tokens/s | NCCL tokens/s | symm / NCCL |");
        println!("|---|---|---|---|---|---|");
        for &tokens in &args.tokens {
            for nccl in [false, true] {
                if !args.check {
                    break;
                }
                let by = if nccl { "NCCL" } else { "symm" };
                match check(ranks.clone(), one.clone(), s, tokens, nccl) {
                    Ok(c) => {
                        eprintln!(
                            "check {} ({by}) at {tokens} tokens a rank: {} of {} elements other bits than the world-1 layer's, {} beyond one rounding, worst relative {:e}",
                            s.name, c.differ, c.total, c.beyond, c.worst
                        );
                        if c.beyond > 0 {
                            std::process::exit(1);
                        }
                    }
                    Err(e) => {
                        eprintln!("check {} ({by}) at {tokens} tokens: {e}", s.name);
                        std::process::exit(1);
                    }
                }
            }
            let res = run(ranks.clone(), CommOptions::default(), |c| {
                let mut times = [0.0; 2];
                for (v, nccl) in [false, true].into_iter().enumerate() {
                    let mut layer = Layer::new(c, s, tokens, nccl)?;
                    let x = tokens_of(c, s, c.rank(), tokens)?;
                    // Two warm-ups: this one and time_steps' own.
                    layer.step(c, &x, tokens, false)?;
                    times[v] = time_steps(c, 10, &mut || layer.step(c, &x, tokens, false))?;
                }
                Ok(times)
            });
            match res {
                Ok(r) => {
                    let [symm_us, nccl_us] = r[0];
                    let rate = |us: f64| (world * tokens) as f64 / us * 1e6;
                    println!(
                        "| {tokens} | {symm_us:.1} | {nccl_us:.1} | {:.0} | {:.0} | {:.2}× |",
                        rate(symm_us),
                        rate(nccl_us),
                        symm_us / nccl_us
                    );
                }
                Err(e) => {
                    eprintln!("moe_layer {} at {tokens} tokens: {e}", s.name);
                    std::process::exit(1);
                }
            }
        }
    }
}
