//! A tensor-parallel decode step of a Llama-style decoder stack, with its
//! two all-reduces per layer done three ways: NCCL, symm's all-reduce
//! (both through `symm::functional`), and symm's fused all-reduce +
//! residual add + RMSNorm (`symm::kernels::fused`), plus a control with
//! the all-reduces left out (the step's compute alone).
//!
//! Per layer: RMSNorm, column-parallel QKV projection, the new token's K
//! and V appended to the KV cache, single-query attention over the cache
//! (grouped KV heads), row-parallel output projection, **all-reduce**,
//! residual add and RMSNorm, column-parallel gate/up projection, SwiGLU,
//! row-parallel down projection, **all-reduce**, residual add. Weights,
//! cache and input are random bf16 (a hash of each element's place in the
//! full matrix, so every rank's slice and a world-1 model's whole agree).
//! The projections run through symm's GEMV kernels (a warp per two weight
//! rows, a batch of 1 to 8 rows; SwiGLU fused into the gate/up
//! projection), or through cuBLAS with `--cublas`; the residual add and
//! the norm after it are one kernel, and every kernel of the step is
//! launched with programmatic dependent launch where each rank has a GPU.
//!
//! Every variant's step is checked against a world-1 reference that holds
//! the full weights, and every rank's final hidden state must equal rank
//! 0's bit for bit. Then each step is captured in one CUDA graph and
//! replayed: µs per step, tokens per second, the share spent in
//! communication (against the control), and the speedup over NCCL.
//! `--shard N` instead times what one rank of TP N computes (rank 0's
//! slices, alone on one GPU) per layer against the floor of its weights and
//! cache at the HBM's bandwidth; with `--profile`, also what each kernel
//! costs in the step and each projection's GEMV in every form.
//!
//! ```text
//! cargo run --release --example tp_decode -- --shape 8b --layers 4 --worlds 1,2
//! cargo run --release --example tp_decode -- --shape 8b --shard 4   # one rank's compute
//! cargo run --release --example tp_decode -- --shape 8b --shard 4 --profile
//! cargo run --example tp_decode -- --emulator --worlds 2,4     # toy sizes
//! ```

#[path = "kernels.rs"]
pub mod kernels;

use std::time::Duration;

use symm::functional::{Collectives, Options, Prefer};
use symm::kernels::collectives::ReduceOp;
use symm::kernels::fused::all_reduce_residual_rms_norm;
use symm::{
    bf16, run, Comm, CommOptions, DeviceBuffer, DeviceSlice, LaunchConfig, PoolTensor, Ranks,
    Result,
};

use bench::other;
use kernels::*;

/// A norm kernel's launch for rows of `$h`, with the `N` that
/// [`norm_vectors`] picks.
macro_rules! by_vectors {
    ($h:expr, $k:ident, $($arg:expr),* $(,)?) => {
        match norm_vectors($h) {
            1 => $k::launch::<T, V, 1>($($arg),*),
            2 => $k::launch::<T, V, 2>($($arg),*),
            _ => $k::launch::<T, V, 4>($($arg),*),
        }
    };
}

/// The model's sizes.
#[derive(Clone, Copy, Debug)]
struct Shape {
    hidden: usize,
    inter: usize,
    heads: usize,
    kv_heads: usize,
    layers: usize,
    batch: usize,
    ctx: usize,
}

impl Shape {
    fn dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// Whether `n` ranks each take a whole share of the heads, the KV heads
    /// and the intermediate size (TP `n` needs it).
    fn splits_over(&self, n: usize) -> bool {
        n > 0
            && self.heads.is_multiple_of(n)
            && self.kv_heads.is_multiple_of(n)
            && self.inter.is_multiple_of(n)
    }

    /// One rank's share of TP `n`: its query heads, KV heads and
    /// intermediate columns (`splits_over(n)` checked first).
    fn share(&self, n: usize) -> (usize, usize, usize) {
        (self.heads / n, self.kv_heads / n, self.inter / n)
    }
}

/// The flags (also what `tests/run_examples.rs` passes).
#[derive(clap::Parser)]
pub struct Args {
    /// Model shape: 8b (hidden 4096, intermediate 14336, 32 heads, 8 KV
    /// heads), 70b (8192, 28672, 64, 8) or toy (256, 512, 8, 4).
    #[arg(long, default_value = "8b")]
    pub shape: String,
    /// Decoder layers.
    #[arg(long, default_value_t = 4)]
    pub layers: usize,
    /// Tokens per step (1-8).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Context length (positions in the KV cache, at most 4096).
    #[arg(long, default_value_t = 2048)]
    pub ctx: usize,
    /// TP world sizes (ranks share GPUs where there are fewer).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub worlds: Vec<usize>,
    /// Run on the CPU emulator: the toy shape, at most 2 layers and a
    /// context of 16, a batch of at least 2.
    #[arg(long)]
    pub emulator: bool,
    /// Timed replays per variant, in graphs of 9 replays (rounded up; the
    /// median graph's median counts); 0: check only, no timing.
    #[arg(long, default_value_t = 9)]
    pub replays: usize,
    /// Time one rank's compute of a TP-N step on one GPU instead: rank 0's
    /// slices of TP N at world 1, the control only (no all-reduce, no
    /// check against the whole model), per layer against the floor of
    /// its weights and KV cache at the HBM's bandwidth.
    #[arg(long, value_name = "N")]
    pub shard: Option<usize>,
    /// The projections through cuBLAS (its split-K GEMMs, and SwiGLU a
    /// kernel of its own) instead of symm's GEMV kernels: the step before
    /// NOTES v46, for comparison. GPU only.
    #[arg(long)]
    pub cublas: bool,
    /// With `--shard`: where the layer's time goes. The step again with
    /// each of its kernels left out (what each costs in the step), then
    /// each projection's GEMV alone in every form (graphs of back-to-back
    /// calls over the layers' weights: µs a call and the HBM bandwidth it
    /// reaches). GPU only.
    #[arg(long)]
    pub profile: bool,
    /// Cache positions a block of attention reads (4 to 2048, at most 256
    /// blocks a head); default: about eight blocks of attention a
    /// multiprocessor.
    #[arg(long, value_name = "POSITIONS")]
    pub attention_chunk: Option<usize>,
}

/// How a run builds its model: `--shard`, `--cublas`, and the kernel
/// `--profile` leaves out.
#[derive(Clone, Copy, Default)]
struct Build {
    shard: Option<usize>,
    cublas: bool,
    chunk: Option<usize>,
    leave_out: Option<Kernel>,
}

/// The kernels of a layer's step, as `--profile` leaves them out one at a
/// time (the residual adds and norms as one: both leave).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Qkv,
    KvWrite,
    AttentionSplit,
    AttentionCombine,
    Output,
    AddNorm,
    GateUp,
    Down,
}

impl Kernel {
    /// The layer's kernels in the step's order.
    const ALL: [Kernel; 8] = [
        Kernel::Qkv,
        Kernel::KvWrite,
        Kernel::AttentionSplit,
        Kernel::AttentionCombine,
        Kernel::Output,
        Kernel::AddNorm,
        Kernel::GateUp,
        Kernel::Down,
    ];

    /// The kernel as `--profile`'s table names it.
    fn name(self) -> &'static str {
        match self {
            Kernel::Qkv => "QKV GEMV",
            Kernel::KvWrite => "KV-cache append",
            Kernel::AttentionSplit => "attention, splits",
            Kernel::AttentionCombine => "attention, merge",
            Kernel::Output => "output GEMV",
            Kernel::AddNorm => "residual add + RMSNorm (both)",
            Kernel::GateUp => "gate/up GEMV + SwiGLU",
            Kernel::Down => "down GEMV",
        }
    }
}

/// How a step does its all-reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// None: the compute alone (each rank's partial sums taken as the sum).
    Control,
    Nccl,
    /// NCCL with the all-reduces' pool registered with it (symmetric
    /// windows where the loaded NCCL has them): NCCL's fastest.
    NcclWindow,
    Symm,
    Fused,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Control => "control (no all-reduce)",
            Variant::Nccl => "NCCL all-reduce",
            Variant::NcclWindow => "NCCL all-reduce, registered pool",
            Variant::Symm => "symm all-reduce",
            Variant::Fused => "symm fused all-reduce + residual + RMSNorm",
        }
    }
}

type T = bf16;

/// Elements of `T` in a 16-byte vector.
const V: usize = 16 / std::mem::size_of::<T>();

/// A GEMV's form: `r` weight rows a warp and `u` 16-byte vectors of each
/// row a lane in flight (`gemv_xwt`'s and `gemv_swiglu`'s `R` and `U`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Form {
    r: usize,
    u: usize,
}

impl Form {
    /// Every form the host launches; `--profile` times them all.
    const ALL: [Form; 8] = [
        Form { r: 1, u: 2 },
        Form { r: 1, u: 4 },
        Form { r: 1, u: 8 },
        Form { r: 1, u: 16 },
        Form { r: 2, u: 2 },
        Form { r: 2, u: 4 },
        Form { r: 2, u: 8 },
        Form { r: 2, u: 16 },
    ];

    /// The form for `rows` weight rows of `k` at a batch of `m` (a
    /// SwiGLU's rows: its gate and up rows), from `--profile` on an H200
    /// (NOTES v47, v54): two rows a warp, and the largest power of two `u`
    /// (2 to 16) with fewer vectors in flight a lane the more warps there
    /// are (at batch 1 at most 8 from 2048 rows and 4 from 6144; past it 4
    /// and 2: registers spent on loads in flight are warps that cannot be
    /// resident), a step of at most the row (`32 × u` vectors), and the
    /// step's vectors of w and x in registers (`(r + m) × u × V` elements at
    /// most 384 below 2048 rows, where the warps are few, and 192 from 2048,
    /// which at batch 1 never binds: at batch 2, 2 × 16 took 255 registers
    /// and spilled, and at batch 8 the 2 × 4 form took 1.4 times 2 × 2's
    /// time on gate/up and down).
    fn for_rows(m: usize, rows: usize, k: usize) -> Form {
        let r = 2;
        let few = rows < 2048;
        let mut u = match rows {
            0..2048 => 16,
            2048..6144 => 8,
            _ => 4,
        };
        if !few && m > 1 {
            u /= 2;
        }
        let cap = if few { 384 } else { 192 };
        while u > 2 && (32 * u > k / V || (r + m) * u * V > cap) {
            u /= 2;
        }
        Form { r, u }
    }

    /// Whether the kernels take this form at a batch of `m` (and, for
    /// `gemv_swiglu`, whether `r` is even).
    fn fits(self, m: usize, swiglu: bool) -> bool {
        (1..=8).contains(&m)
            && self.r * m <= 32
            && self.r * self.u * V <= 256
            && m * self.u * V <= 256
            && (!swiglu || self.r.is_multiple_of(2))
    }
}

/// Launches `gemv_xwt` or `gemv_swiglu` (`$k`) at batch `$m` (1 to 8) with
/// `R` and `U` the literals `$r` and `$u`: the batch, rows and vectors are
/// constants, so that the accumulators and loads stay in registers.
macro_rules! by_batch {
    ($c:expr, $m:expr, $k:ident, $r:literal, $u:literal, $($arg:expr),+) => {
        match $m {
            1 => $k::launch::<T, V, 1, $r, $u>($c, $($arg),+),
            2 => $k::launch::<T, V, 2, $r, $u>($c, $($arg),+),
            3 => $k::launch::<T, V, 3, $r, $u>($c, $($arg),+),
            4 => $k::launch::<T, V, 4, $r, $u>($c, $($arg),+),
            5 => $k::launch::<T, V, 5, $r, $u>($c, $($arg),+),
            6 => $k::launch::<T, V, 6, $r, $u>($c, $($arg),+),
            7 => $k::launch::<T, V, 7, $r, $u>($c, $($arg),+),
            8 => $k::launch::<T, V, 8, $r, $u>($c, $($arg),+),
            m => Err(other($c, format!("{}: a batch of 1 to 8, not {m}", stringify!($k)))),
        }
    };
}

/// Launches `$k` in form `$f` (one of `Form::ALL`) at batch `$m`.
macro_rules! by_form {
    ($c:expr, $m:expr, $f:expr, $k:ident, $($arg:expr),+ $(,)?) => {
        match ($f.r, $f.u) {
            (1, 2) => by_batch!($c, $m, $k, 1, 2, $($arg),+),
            (1, 4) => by_batch!($c, $m, $k, 1, 4, $($arg),+),
            (1, 8) => by_batch!($c, $m, $k, 1, 8, $($arg),+),
            (1, 16) => by_batch!($c, $m, $k, 1, 16, $($arg),+),
            (2, 2) => by_batch!($c, $m, $k, 2, 2, $($arg),+),
            (2, 4) => by_batch!($c, $m, $k, 2, 4, $($arg),+),
            (2, 8) => by_batch!($c, $m, $k, 2, 8, $($arg),+),
            (2, 16) => by_batch!($c, $m, $k, 2, 16, $($arg),+),
            (r, u) => Err(other($c, format!("{}: no form of {r} rows × {u} vectors", stringify!($k)))),
        }
    };
}

/// The GEMVs' grid for `groups` groups of rows: a warp each, four warps a
/// block.
fn warp_grid(groups: usize) -> LaunchConfig {
    LaunchConfig::linear(groups.div_ceil(4).clamp(1, 1 << 20) as u32, 128)
}

/// `y[m × n] = x[m × k] · w[n × k]ᵀ` through `gemv_xwt` in form `f`.
fn gemv(
    c: &Comm,
    f: Form,
    x: &(impl DeviceSlice<T> + ?Sized),
    w: &DeviceBuffer<T>,
    y: &mut (impl DeviceSlice<T> + ?Sized),
    (m, n, k): (usize, usize, usize),
) -> Result<()> {
    if !f.fits(m, false) {
        return Err(other(
            c,
            format!("gemv_xwt: no form {f:?} at a batch of {m}"),
        ));
    }
    let grid = pdl(c, warp_grid(n.div_ceil(f.r)));
    by_form!(c, m, f, gemv_xwt, grid, x, w, y, n as u32, k as u32)
}

/// `out[m × inter] = silu(x · gateᵀ) · (x · upᵀ)` (`w`: the gate rows, then
/// the up rows) through `gemv_swiglu` in form `f`.
fn gemv_glu(
    c: &Comm,
    f: Form,
    x: &(impl DeviceSlice<T> + ?Sized),
    w: &DeviceBuffer<T>,
    out: &mut (impl DeviceSlice<T> + ?Sized),
    (m, inter, k): (usize, usize, usize),
) -> Result<()> {
    if !f.fits(m, true) {
        return Err(other(
            c,
            format!("gemv_swiglu: no form {f:?} at a batch of {m}"),
        ));
    }
    let grid = pdl(c, warp_grid(inter.div_ceil(f.r / 2)));
    by_form!(
        c,
        m,
        f,
        gemv_swiglu,
        grid,
        x,
        w,
        out,
        inter as u32,
        k as u32
    )
}

/// One layer's weights and KV cache on one rank (its slices).
struct Layer {
    attn_w: DeviceBuffer<T>,
    ffn_w: DeviceBuffer<T>,
    wqkv: DeviceBuffer<T>,
    wo: DeviceBuffer<T>,
    wgu: DeviceBuffer<T>,
    wdown: DeviceBuffer<T>,
    kc: DeviceBuffer<T>,
    vc: DeviceBuffer<T>,
}

/// How the projections run: symm's GEMV kernels, or cuBLAS (`--cublas`).
enum Gemm {
    Cublas(symm::cudarc::cublas::CudaBlas),
    Dsl,
}

/// One rank's model: its slices of every layer and the step's buffers.
struct Model {
    s: Shape,
    world: usize,
    layers: Vec<Layer>,
    final_w: DeviceBuffer<T>,
    x: DeviceBuffer<T>,
    a: DeviceBuffer<T>,
    qkv: DeviceBuffer<T>,
    att: DeviceBuffer<T>,
    /// The row-parallel projections' partial sums: symmetric, the
    /// all-reduces' input.
    p: PoolTensor<T>,
    y: DeviceBuffer<T>,
    gu: DeviceBuffer<T>,
    act: DeviceBuffer<T>,
    /// Attention's per-split softmax partials.
    part: DeviceBuffer<f32>,
    /// Attention's (splits, positions per split, threads a block): about
    /// eight blocks of 128 threads a multiprocessor, in fewer blocks of
    /// more threads where the splits are fewer.
    splits: (usize, usize, u32),
    gemm: Gemm,
    /// A kernel left out of every layer (`--profile`; the step's result
    /// is then not checked).
    leave_out: Option<Kernel>,
    _pool: symm::SymmPool,
}

impl Model {
    /// Rank `c.rank()` of `world`'s slices (`world` 1: the whole model),
    /// or, where `shard` is `Some(n)` (one rank alone), rank 0's slices of
    /// a TP-`n` model: what each rank of TP `n` computes, timed with no
    /// peer.
    fn new(c: &Comm, s: Shape, build: Build) -> Result<Model> {
        let (w, r) = match build.shard {
            Some(n) => (n, 0),
            None => (c.world_size(), c.rank()),
        };
        let (d, h) = (s.dim(), s.hidden);
        let (nh, nkv, il) = s.share(w);
        let qkv_rows = (nh + 2 * nkv) * d;
        let mut layers = Vec::with_capacity(s.layers);
        for l in 0..s.layers {
            let seed = |m: u32| 0x5eed_0000 ^ ((l as u32) << 8) ^ m;
            let buf = |n: usize| c.device_buffer::<T>(n);
            let mut lay = Layer {
                attn_w: buf(h)?,
                ffn_w: buf(h)?,
                wqkv: buf(qkv_rows * h)?,
                wo: buf(h * nh * d)?,
                wgu: buf(2 * il * h)?,
                wdown: buf(h * il)?,
                kc: buf(s.batch * s.ctx * nkv * d)?,
                vc: buf(s.batch * s.ctx * nkv * d)?,
            };
            // Norm weights near 1; projections scaled by 1/sqrt(fan-in).
            fill_slice(c, &mut lay.attn_w, 1, h, 0, (0, 0, h), seed(1), 0.2)?;
            fill_slice(c, &mut lay.ffn_w, 1, h, 0, (0, 0, h), seed(2), 0.2)?;
            let one = c.device_buffer_from(&vec![T::from_f32(1.0); h])?;
            add::launch::<T>(c, lin(h), &mut lay.attn_w, &one, h as u32)?;
            add::launch::<T>(c, lin(h), &mut lay.ffn_w, &one, h as u32)?;
            let sc = 1.0 / (h as f32).sqrt();
            // QKV: this rank's query heads, then its K heads, then its V
            // heads, of the full [(heads + 2 kv_heads) × dim, hidden].
            fill_slice(
                c,
                &mut lay.wqkv,
                nh * d,
                h,
                0,
                (r * nh * d, 0, h),
                seed(3),
                sc,
            )?;
            fill_slice(
                c,
                &mut lay.wqkv,
                nkv * d,
                h,
                nh * d,
                (s.heads * d + r * nkv * d, 0, h),
                seed(3),
                sc,
            )?;
            fill_slice(
                c,
                &mut lay.wqkv,
                nkv * d,
                h,
                (nh + nkv) * d,
                ((s.heads + s.kv_heads) * d + r * nkv * d, 0, h),
                seed(3),
                sc,
            )?;
            // Row-parallel: this rank's columns of the full matrices.
            let sco = 1.0 / ((s.heads * d) as f32).sqrt();
            fill_slice(
                c,
                &mut lay.wo,
                h,
                nh * d,
                0,
                (0, r * nh * d, s.heads * d),
                seed(4),
                sco,
            )?;
            fill_slice(c, &mut lay.wgu, il, h, 0, (r * il, 0, h), seed(5), sc)?;
            fill_slice(
                c,
                &mut lay.wgu,
                il,
                h,
                il,
                (s.inter + r * il, 0, h),
                seed(5),
                sc,
            )?;
            let scd = 1.0 / (s.inter as f32).sqrt();
            fill_slice(
                c,
                &mut lay.wdown,
                h,
                il,
                0,
                (0, r * il, s.inter),
                seed(6),
                scd,
            )?;
            // The cache: [batch × ctx, kv_heads × dim], this rank's heads.
            let rows = s.batch * s.ctx;
            fill_slice(
                c,
                &mut lay.kc,
                rows,
                nkv * d,
                0,
                (0, r * nkv * d, s.kv_heads * d),
                seed(7),
                1.0,
            )?;
            fill_slice(
                c,
                &mut lay.vc,
                rows,
                nkv * d,
                0,
                (0, r * nkv * d, s.kv_heads * d),
                seed(8),
                1.0,
            )?;
            layers.push(lay);
        }
        let mut final_w = c.device_buffer::<T>(h)?;
        fill_slice(c, &mut final_w, 1, h, 0, (0, 0, h), 0xf1a1, 0.2)?;
        let gemm = match c.cuda_stream() {
            Some(stream) if build.cublas => Gemm::Cublas(
                symm::cudarc::cublas::CudaBlas::new(stream)
                    .map_err(|e| other(c, format!("cuBLAS: {e:?}")))?,
            ),
            _ => Gemm::Dsl,
        };
        let pool = c.pool();
        let b = s.batch;
        // Eight blocks of attention a multiprocessor (1056 on an H200's
        // 132; `bench/NOTES.md` v41: the split positions a warp reads one
        // after another are what its time goes to).
        let sms = c.cuda_stream().map_or(132, |s| {
            use symm::cudarc::driver::sys::CUdevice_attribute as A;
            s.context()
                .attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_or(132, |n| n as usize)
        });
        let want = (8 * sms).div_ceil(b * nh).clamp(1, 64);
        let chunk = build
            .chunk
            .unwrap_or_else(|| s.ctx.div_ceil(want))
            .clamp(4, 2048)
            .min(s.ctx);
        let splits = s.ctx.div_ceil(chunk);
        // The same threads (1024 a multiprocessor) in fewer, larger blocks
        // where the grid is small: each warp then walks fewer rows of its
        // split one after another, which is what a block's time goes to
        // (NOTES v52: 49.7 → 46.2 µs a layer at TP 4, batch 1). At most
        // 512 threads, and `warps × dim` at most 2048.
        let mut threads = 128;
        while threads < 512
            && b * nh * splits * threads * 2 <= 1024 * sms
            && (threads * 2 / 32) * d <= 2048
        {
            threads *= 2;
        }
        Ok(Model {
            s,
            world: w,
            layers,
            final_w,
            x: c.device_buffer(b * h)?,
            a: c.device_buffer(b * h)?,
            qkv: c.device_buffer(b * qkv_rows)?,
            att: c.device_buffer(b * nh * d)?,
            p: pool.alloc(b * h)?,
            y: c.device_buffer(b * h)?,
            gu: c.device_buffer(b * 2 * il)?,
            act: c.device_buffer(b * il)?,
            part: c.device_buffer(b * nh * splits * (d + 2))?,
            splits: (splits, chunk, threads as u32),
            gemm,
            leave_out: build.leave_out,
            _pool: pool,
        })
    }

    /// The step's input: the same random embedding on every rank.
    fn reset(&mut self, c: &Comm) -> Result<()> {
        let (b, h) = (self.s.batch, self.s.hidden);
        fill_slice(c, &mut self.x, b, h, 0, (0, 0, h), 0xe111, 1.0)
    }
}

/// `y[m × n] = x[m × k] · w[n × k]ᵀ`, rounded to bf16 from f32.
fn gemm(
    g: &Gemm,
    c: &Comm,
    x: &(impl DeviceSlice<T> + ?Sized),
    w: &DeviceBuffer<T>,
    y: &mut (impl DeviceSlice<T> + ?Sized),
    (m, n, k): (usize, usize, usize),
) -> Result<()> {
    match g {
        Gemm::Dsl => gemv(c, Form::for_rows(m, n, k), x, w, y, (m, n, k)),
        Gemm::Cublas(blas) => {
            let (bx, bw, by) = (c.bind("x", x)?, c.bind("w", w)?, c.bind_mut("y", y)?);
            if bx.len() < m * k || bw.len() < n * k || by.len() < m * n {
                return Err(other(
                    c,
                    format!(
                        "gemm {m}×{n}×{k} on buffers of {}, {} and {}",
                        bx.len(),
                        bw.len(),
                        by.len()
                    ),
                ));
            }
            // SAFETY: x, w and y are this rank's device memory of at least
            // m × k, n × k and m × n bf16 elements (checked above), bound to
            // the rank's stream, which cuBLAS runs on.
            unsafe {
                gemm::gemm_bf16_xwt(
                    blas,
                    (bx.device_ptr(), bw.device_ptr(), by.device_ptr()),
                    (m, n, k),
                )
            }
            .map_err(|e| other(c, format!("cublasGemmEx: {e:?}")))
        }
    }
}

impl Model {
    /// One decode step of every layer, its all-reduces done as `v` says
    /// (`coll` for NCCL and symm's all-reduce). Leaves the final hidden
    /// state (the residual stream) in `x` and its final norm in `a`.
    fn step(&mut self, c: &Comm, v: Variant, coll: &Collectives) -> Result<()> {
        let s = self.s;
        let (b, h, d) = (s.batch, s.hidden, s.dim());
        let (nh, nkv, il) = s.share(self.world);
        let stride = (nh + 2 * nkv) * d;
        let eps = 1e-5f32;
        let rows = pdl(c, norm_grid(b, h));
        by_vectors!(
            h,
            rms_norm,
            c,
            rows,
            &self.x,
            &self.layers[0].attn_w,
            &mut self.a,
            h as u32,
            eps,
        )?;
        // (`--profile` leaves one kernel of every layer out.)
        let out = self.leave_out;
        let run = |k: Kernel| out != Some(k);
        for l in 0..s.layers {
            let lay = &mut self.layers[l];
            if run(Kernel::Qkv) {
                gemm(
                    &self.gemm,
                    c,
                    &self.a,
                    &lay.wqkv,
                    &mut self.qkv,
                    (b, stride, h),
                )?;
            }
            if run(Kernel::KvWrite) {
                kv_write::launch::<T>(
                    c,
                    pdl(c, lin(b * nkv * d)),
                    &self.qkv,
                    &mut lay.kc,
                    &mut lay.vc,
                    b as u32,
                    stride as u32,
                    (nh * d) as u32,
                    (nkv * d) as u32,
                    s.ctx as u32,
                    (s.ctx - 1) as u32,
                )?;
            }
            let (splits, chunk, threads) = self.splits;
            if run(Kernel::AttentionSplit) {
                split(
                    c,
                    [&self.qkv, &lay.kc, &lay.vc],
                    &mut self.part,
                    (b, threads),
                    [stride, nh, nkv, d, s.ctx, chunk],
                    1.0 / (d as f32).sqrt(),
                )?;
            }
            if run(Kernel::AttentionCombine) {
                combine(c, &self.part, &mut self.att, b * nh, d, splits)?;
            }
            if run(Kernel::Output) {
                gemm(
                    &self.gemm,
                    c,
                    &self.att,
                    &lay.wo,
                    &mut self.p,
                    (b, h, nh * d),
                )?;
            }
            // First all-reduce, residual add, the FFN's norm.
            if run(Kernel::AddNorm) {
                self.reduce_add_norm(c, v, coll, Norm::Ffn(l))?;
            }
            if run(Kernel::GateUp) {
                match &self.gemm {
                    Gemm::Dsl => gemv_glu(
                        c,
                        Form::for_rows(b, 2 * il, h),
                        &self.a,
                        &self.layers[l].wgu,
                        &mut self.act,
                        (b, il, h),
                    )?,
                    Gemm::Cublas(_) => {
                        gemm(
                            &self.gemm,
                            c,
                            &self.a,
                            &self.layers[l].wgu,
                            &mut self.gu,
                            (b, 2 * il, h),
                        )?;
                        swiglu::launch::<T>(
                            c,
                            pdl(c, lin(b * il)),
                            &self.gu,
                            &mut self.act,
                            b as u32,
                            il as u32,
                        )?;
                    }
                }
            }
            if run(Kernel::Down) {
                gemm(
                    &self.gemm,
                    c,
                    &self.act,
                    &self.layers[l].wdown,
                    &mut self.p,
                    (b, h, il),
                )?;
            }
            // Second all-reduce and residual add, then the next layer's
            // attention norm (or the final norm).
            if run(Kernel::AddNorm) {
                self.reduce_add_norm(c, v, coll, Norm::Next(l))?;
            }
        }
        Ok(())
    }
}

/// Launches [`attention_split`] over `rows` rows in blocks of `threads`
/// (a grid of (splits, heads, rows), with PDL where the comm's options
/// ask for it) for heads of `dim` (32, 64, 128 or 256: the kernel's `D`)
/// over the query, key and value rows `[qkv, kc, vc]`, with `[stride,
/// heads, kv_heads, dim, ctx, chunk]` as the kernel takes them.
///
/// Unchecked (`launch_unchecked`) once the arguments are checked here
/// against every index the kernel computes: the checked launch's bounds
/// checks were 37% of the kernel's instructions and cost 2.4 µs a layer
/// at TP 4, batch 1 (NOTES v52). Whatever the arguments, one the kernel
/// could not take in bounds is an `InvalidArgument` error here.
pub fn split(
    c: &Comm,
    [qkv, kc, vc]: [&(impl DeviceSlice<T> + ?Sized); 3],
    part: &mut (impl DeviceSlice<f32> + ?Sized),
    (rows, threads): (usize, u32),
    args: [usize; 6],
    scale: f32,
) -> Result<()> {
    let bad = |what: String| Err(refuse(c, "attention_split", what));
    // Every argument as the kernel takes it, and the sizes computed from
    // them in u128: what is checked here is what the kernel computes.
    let Some(&[stride, heads, kv_heads, dim, ctx, chunk]) = args
        .iter()
        .map(|&n| u32::try_from(n).ok())
        .collect::<Option<Vec<u32>>>()
        .as_deref()
    else {
        return bad(format!("arguments {args:?} past u32"));
    };
    let w = |n: u32| u128::from(n);
    if !matches!(dim, 32 | 64 | 128 | 256) {
        return bad(format!("a head of {dim}, not 32, 64, 128 or 256"));
    }
    if ctx == 0 || !(1..=2048).contains(&chunk) || heads == 0 || kv_heads == 0 {
        return bad(format!(
            "a context of {ctx} in chunks of {chunk} (1 to 2048), {heads} query heads over \
             {kv_heads} KV heads: none of them 0"
        ));
    }
    if !heads.is_multiple_of(kv_heads) {
        return bad(format!(
            "{heads} query heads over {kv_heads} KV heads: not a multiple"
        ));
    }
    if threads == 0 || !threads.is_multiple_of(32) || w(threads / 32) * w(dim) > 2048 {
        return bad(format!(
            "{threads} threads a block: whole warps, and warps × {dim} at most 2048"
        ));
    }
    let splits = w(ctx).div_ceil(w(chunk));
    let Ok(rows) = u32::try_from(rows) else {
        return bad(format!("{rows} rows: past u32"));
    };
    let rows = w(rows);
    // (A grid's y and z are at most 65535.)
    if rows == 0 || rows > 65535 || w(heads) > 65535 || splits > w(u32::MAX >> 1) {
        return bad(format!(
            "a grid of {splits} splits, {heads} heads and {rows} rows: none 0, the heads and \
             rows at most 65535"
        ));
    }
    let blocks = splits * w(heads) * rows;
    // 16-byte loads of each row: a stride of whole vectors, from buffers
    // that start on a vector.
    if w(stride) < w(heads) * w(dim) || !stride.is_multiple_of(V as u32) {
        return bad(format!(
            "query rows {stride} apart: at least {heads} × {dim}, a multiple of {V}"
        ));
    }
    let (q_len, cache_len, part_len) = (
        rows * w(stride),
        rows * w(ctx) * w(kv_heads) * w(dim),
        blocks * (w(dim) + 2),
    );
    if [q_len, cache_len, part_len]
        .iter()
        .any(|&n| n > u128::from(u32::MAX))
    {
        return bad(format!(
            "{q_len} query elements, {cache_len} cache elements or {part_len} partials: \
             past u32"
        ));
    }
    let (qkv, kc, vc) = (c.bind("qkv", qkv)?, c.bind("kc", kc)?, c.bind("vc", vc)?);
    let mut part = c.bind_mut("part", part)?;
    let lens = [qkv.len(), kc.len(), vc.len(), part.len()];
    if lens
        .iter()
        .zip([q_len, cache_len, cache_len, part_len])
        .any(|(&l, n)| (l as u128) < n)
    {
        return bad(format!(
            "{rows} rows want {q_len} query elements, {cache_len} of each cache and \
             {part_len} partials; got {lens:?}"
        ));
    }
    if [&qkv, &kc, &vc]
        .iter()
        .any(|b| !b.device_ptr().is_multiple_of(16))
    {
        return bad("the query rows and caches must start on 16 bytes".into());
    }
    let cfg = pdl(
        c,
        LaunchConfig {
            grid: (splits as u32, heads, rows as u32),
            ..LaunchConfig::linear(1, threads)
        },
    );
    macro_rules! head {
        ($d:literal) => {
            // SAFETY: every index the kernel computes is in bounds of what
            // it indexes, from the checks above (all in u128, of the u32
            // values the kernel gets, so none of its u32 products wraps:
            // each is at most one of the three sizes checked). Query row
            // `b × stride + h × dim + at` (+ V), with `b < rows`, `h <
            // heads` and `at + V <= dim`: below `rows × stride` as `stride
            // >= heads × dim`; 16-byte aligned as the buffer's start and
            // `stride` are. Cache row `((b × ctx + t) × kv_heads + g) × dim +
            // at` with `t < ctx` and `g = h / (heads / kv_heads) < kv_heads`
            // (the heads a multiple of the KV heads): below `rows × ctx ×
            // kv_heads × dim`, aligned as `dim` is a multiple of V.
            // Partials at `((b × heads + h) × splits + split) × (dim + 2) +
            // i`, `i < dim + 2`: below `blocks × (dim + 2)`, from the grid
            // built here: `split < splits`, `h < heads`, `b < rows` (and
            // `split × chunk < ctx`, which the kernel asserts, cannot wrap:
            // `ctx` is at most 2^27 by the cache's size). Shared memory:
            // scores at `t - first < chunk <= 2048` and the sums at `warp ×
            // dim + d < warps × dim <= 2048`, checked above and again by
            // the kernel's own `kernel_assert!`s, which an unchecked launch
            // keeps.
            unsafe {
                attention_split::launch_unchecked::<T, V, $d>(
                    c, cfg, &qkv, &kc, &vc, &mut part, stride, heads, kv_heads, ctx, chunk, scale,
                )
            }
        };
    }
    match dim {
        32 => head!(32),
        64 => head!(64),
        128 => head!(128),
        _ => head!(256),
    }
}

/// Launches [`attention_combine`] over `pairs` (row, query head) pairs of
/// heads of `dim`, each of `splits` splits (1 to 256): a block a pair and
/// 32 dimensions, a warp a split up to 16 warps, and `L` the least power
/// of two of splits a warp that covers them; with PDL where the comm's
/// options ask for it.
pub fn combine(
    c: &Comm,
    part: &(impl DeviceSlice<f32> + ?Sized),
    out: &mut (impl DeviceSlice<T> + ?Sized),
    pairs: usize,
    dim: usize,
    splits: usize,
) -> Result<()> {
    if !(1..=256).contains(&splits) || dim == 0 || !dim.is_multiple_of(32) {
        return Err(refuse(
            c,
            "attention_combine",
            format!("{splits} splits (1 to 256) of heads of {dim} (a multiple of 32)"),
        ));
    }
    let warps = splits.clamp(1, 16);
    let cfg = pdl(
        c,
        LaunchConfig::linear((pairs * dim.div_ceil(32)) as u32, 32 * warps as u32),
    );
    macro_rules! splits_a_warp {
        ($l:literal) => {
            attention_combine::launch::<T, $l>(c, cfg, part, out, dim as u32, splits as u32)
        };
    }
    match splits.div_ceil(warps).next_power_of_two() {
        1 => splits_a_warp!(1),
        2 => splits_a_warp!(2),
        4 => splits_a_warp!(4),
        8 => splits_a_warp!(8),
        _ => splits_a_warp!(16),
    }
}

/// The error of a launch helper (`split`, `combine`) whose arguments its
/// kernel could not take: `kernel` and `what`, on this rank.
fn refuse(c: &Comm, kernel: &str, what: String) -> symm::Error {
    c.error(
        symm::ErrorKind::InvalidArgument,
        format!("{kernel}: {what}"),
    )
}

/// `rms_norm`'s and `add_rms_norm`'s grid for `b` rows of `h`: a block a
/// row, a thread a 16-byte vector of it (up to 1024; then `norm_vectors`
/// a thread).
fn norm_grid(b: usize, h: usize) -> LaunchConfig {
    let vectors = h / V;
    LaunchConfig::linear(
        b as u32,
        vectors.next_multiple_of(32).clamp(32, 1024) as u32,
    )
}

/// The norms' vectors a thread (their `N`) for rows of `h`: 1 up to 1024
/// threads' worth, then 2 or 4 (`Shape`'s check keeps `h` within 4).
fn norm_vectors(h: usize) -> usize {
    (h / V).div_ceil(1024).next_power_of_two()
}

/// `cfg` with programmatic dependent launch, as symm's own kernels have it
/// (unless the comm's options turned it off). Where ranks share a GPU the
/// runtime launches these kernels (no `SymmBuf`) without it: launched
/// early after a barrier kernel (the fused all-reduce), their waiting
/// blocks filled the GPU and the other rank's barrier kernel found no
/// room (seen at world 2 on one H200, NOTES v46).
fn pdl(c: &Comm, cfg: LaunchConfig) -> LaunchConfig {
    if c.options().pdl {
        cfg.with_pdl()
    } else {
        cfg
    }
}

/// Which norm follows an all-reduce: layer `l`'s FFN norm, or the one
/// after layer `l` (the next layer's attention norm, or the final norm).
#[derive(Clone, Copy)]
enum Norm {
    Ffn(usize),
    Next(usize),
}

impl Model {
    /// The row-parallel partial sums `p` all-reduced as `v` says, added to
    /// the residual `x`, and `x` normalised by `norm` into `a`: one fused
    /// kernel, or the all-reduce (none for the control), an add and a norm.
    fn reduce_add_norm(
        &mut self,
        c: &Comm,
        v: Variant,
        coll: &Collectives,
        norm: Norm,
    ) -> Result<()> {
        let s = self.s;
        let (b, h, eps) = (s.batch, s.hidden, 1e-5f32);
        let w = match norm {
            Norm::Ffn(l) => &self.layers[l].ffn_w,
            Norm::Next(l) => self
                .layers
                .get(l + 1)
                .map_or(&self.final_w, |next| &next.attn_w),
        };
        if v == Variant::Fused {
            let p = self.p.rendezvous()?;
            return all_reduce_residual_rms_norm(c, &p, &mut self.x, w, &mut self.a, b, h, eps);
        }
        let grid = pdl(c, norm_grid(b, h));
        if v == Variant::Control {
            return by_vectors!(
                h,
                add_rms_norm,
                c,
                grid,
                &mut self.x,
                &self.p,
                w,
                &mut self.a,
                h as u32,
                eps,
            );
        }
        coll.all_reduce(&self.p, &mut self.y, ReduceOp::Sum)?
            .wait()?;
        by_vectors!(
            h,
            add_rms_norm,
            c,
            grid,
            &mut self.x,
            &self.y,
            w,
            &mut self.a,
            h as u32,
            eps
        )
    }
}

#[path = "../support/bench.rs"]
#[allow(dead_code)] // the NCCL baselines of the other benchmarks
mod bench;
#[path = "../support/gemm.rs"]
mod gemm;

/// The shape the flags ask for.
fn shape(args: &Args) -> std::result::Result<Shape, String> {
    let (hidden, inter, heads, kv_heads) = match args.shape.as_str() {
        "8b" if !args.emulator => (4096, 14336, 32, 8),
        "70b" if !args.emulator => (8192, 28672, 64, 8),
        "toy" | "8b" => (256, 512, 8, 4),
        other => return Err(format!("--shape {other}: expected 8b, 70b or toy")),
    };
    let s = Shape {
        hidden,
        inter,
        heads,
        kv_heads,
        layers: if args.emulator {
            args.layers.min(2)
        } else {
            args.layers
        },
        batch: if args.emulator {
            args.batch.max(2)
        } else {
            args.batch
        },
        ctx: if args.emulator {
            args.ctx.min(16)
        } else {
            args.ctx
        },
    };
    if !(1..=8).contains(&s.batch) || s.ctx == 0 || s.ctx > 4096 || s.layers == 0 {
        return Err(format!("batch 1-8, context 1-4096 and a layer: got {s:?}"));
    }
    // (The norms hold at most 4 vectors a thread of 1024.)
    if s.hidden > 4 * 1024 * V || !s.hidden.is_multiple_of(V) {
        return Err(format!(
            "a hidden size that is a multiple of {V}, at most {}: got {}",
            4 * 1024 * V,
            s.hidden
        ));
    }
    // (`attention_split` spreads a row over `dim / V` lanes, a power of
    // two up to a warp.)
    let lanes = s.dim() / (16 / std::mem::size_of::<T>());
    if !s.dim().is_multiple_of(32) || s.dim() > 256 || !lanes.is_power_of_two() || lanes > 32 {
        return Err(format!(
            "the head size {} is not 32, 64, 128 or 256",
            s.dim()
        ));
    }
    Ok(s)
}

/// One variant's outcome on one rank: final hidden state and µs per step
/// (GPU only).
type Outcome = (Vec<f32>, Option<f64>);

/// Runs the model on `ranks` (one variant after another), each step
/// checked afterwards against the reference by the caller.
fn run_variants(
    ranks: Ranks,
    s: Shape,
    variants: &[Variant],
    replays: usize,
    build: Build,
) -> std::result::Result<Vec<Vec<Option<Outcome>>>, symm::RunError> {
    let variants = variants.to_vec();
    run(
        ranks,
        CommOptions::default().with_timeout(Duration::from_secs(120)),
        move |c| {
            let mut m = Model::new(c, s, build)?;
            if c.rank() == 0 {
                eprintln!("world {}: model ready", c.world_size());
            }
            let symm_coll =
                Collectives::with_options(c, Options::default().with_backend(Prefer::Symm))?;
            // The group's facts say whether NCCL can run here at all.
            let nccl_ok = symm_coll.group_facts().no_nccl.is_none();
            let nccl =
                || Collectives::with_options(c, Options::default().with_backend(Prefer::Nccl));
            let (nccl_coll, window_coll) = if nccl_ok {
                let window = nccl()?;
                window.register_pool(&m._pool);
                (Some(nccl()?), Some(window))
            } else {
                (None, None)
            };
            m.p.rendezvous()?;
            let barrier = if c.cuda_stream().is_some() {
                Some(bench::Barrier::new(c)?)
            } else {
                None
            };
            let mut out = Vec::new();
            for &v in &variants {
                if c.rank() == 0 {
                    eprintln!("world {}: {}", c.world_size(), v.name());
                }
                let coll = match v {
                    Variant::Nccl => nccl_coll.as_ref(),
                    Variant::NcclWindow => window_coll.as_ref(),
                    _ => Some(&symm_coll),
                };
                let Some(coll) = coll else {
                    out.push(None);
                    continue;
                };
                m.reset(c)?;
                m.step(c, v, coll)?;
                c.synchronize()?;
                if c.rank() == 0 {
                    eprintln!("world {}: {}: step checked", c.world_size(), v.name());
                }
                let x: Vec<f32> = m.x.to_host()?.iter().map(|v| v.to_f32()).collect();
                let us = match &barrier {
                    Some(bar) if replays > 0 => {
                        let mut med = Vec::new();
                        for _ in 0..replays.div_ceil(9) {
                            med.push(bench::time_graph(c, bar, &mut || m.step(c, v, coll))?);
                        }
                        med.sort_by(f64::total_cmp);
                        Some(med[med.len() / 2])
                    }
                    _ => None,
                };
                out.push(Some((x, us)));
            }
            Ok(out)
        },
    )
}

fn main() {
    std::process::exit(run_main(clap::Parser::parse()));
}

/// Runs what `args` asks for and prints the table; the exit status (0:
/// every check passed).
pub fn run_main(args: Args) -> i32 {
    let s = match shape(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let on_gpu = !args.emulator && symm::cuda_available();
    if !args.emulator && !on_gpu {
        eprintln!("no GPU: running on the emulator at toy sizes (--emulator)");
    }
    let s = if on_gpu {
        s
    } else {
        let toy = Args {
            emulator: true,
            shape: "toy".into(),
            worlds: Vec::new(),
            ..args
        };
        shape(&toy).expect("the toy shape")
    };
    let worlds = args.worlds.clone();
    let place = |w: usize| {
        if on_gpu {
            Ranks::gpus(w)
        } else {
            Some(Ranks::Emulator(w))
        }
    };
    println!(
        "# tp_decode: hidden {}, intermediate {}, heads {}/{} KV, {} layers, batch {}, context {} ({})",
        s.hidden,
        s.inter,
        s.heads,
        s.kv_heads,
        s.layers,
        s.batch,
        s.ctx,
        if on_gpu { "GPU" } else { "emulator" }
    );
    let variants = [
        Variant::Control,
        Variant::Nccl,
        Variant::NcclWindow,
        Variant::Symm,
        Variant::Fused,
    ];
    // The world-1 reference: the full weights on one device.
    let build = Build {
        shard: None,
        cublas: args.cublas && on_gpu,
        chunk: args.attention_chunk,
        leave_out: None,
    };
    if args.cublas && !on_gpu {
        eprintln!("--cublas: no GPU, so no cuBLAS: the projections run symm's GEMV kernels");
    }
    if let Some(n) = args.attention_chunk {
        if !(4..=2048).contains(&n) || s.ctx.div_ceil(n) > 256 {
            eprintln!(
                "--attention-chunk {n}: expected 4 to 2048 positions, at most 256 blocks a head \
                 (a context of {})",
                s.ctx
            );
            return 2;
        }
    }
    if args.profile && args.shard.is_none() {
        eprintln!("--profile: only with --shard; not used");
    }
    if let Some(n) = args.shard {
        if args.worlds != [1] {
            eprintln!("--shard {n}: one rank alone; --worlds is not used");
        }
        let build = Build {
            shard: Some(n),
            ..build
        };
        let status = shard_table(s, n, args.replays, place(1).expect("one rank"), build);
        if status != 0 || !args.profile {
            return status;
        }
        if !on_gpu {
            println!("\n--profile: no GPU here, nothing timed");
            return 0;
        }
        return profile(s, n, args.replays, build);
    }
    let reference = match run_variants(
        place(1).expect("one rank"),
        s,
        &[Variant::Control],
        0,
        build,
    ) {
        Ok(r) => r[0][0].clone().expect("the control runs"),
        Err(e) => {
            eprintln!("reference: {e}");
            return 1;
        }
    };
    let scale = reference.0.iter().fold(0f32, |m, v| m.max(v.abs()));
    let mut failed = false;
    for &w in &worlds {
        if !s.splits_over(w) {
            eprintln!("world {w}: the heads, KV heads and intermediate size must divide by it");
            failed = true;
            continue;
        }
        let Some(ranks) = place(w) else {
            eprintln!("SKIPPED: world {w}: no GPUs to place it on");
            continue;
        };
        let placement = ranks.describe();
        let got = match run_variants(ranks, s, &variants, args.replays, build) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("world {w}: {e}");
                failed = true;
                continue;
            }
        };
        // A bound from the all-reduces' rounding, with a margin: each
        // sums `w` partial rows rounded to bf16 where the reference rounds
        // the whole sum once, up to w + 1 more half-ulps (at most 2^-8 of
        // the value each) per element, two all-reduces a layer, and a
        // layer carries the relative error it receives on roughly
        // unchanged (its norms rescale, its weights are scaled by
        // 1 / sqrt(fan-in)); plus one half-ulp. The other roundings that
        // differ (the projections' sums over slices of k, the later
        // intermediates) are of the same order and inside the margin: the
        // measured errors sit 3-8× below it, and a step without its
        // all-reduces 5-10× above.
        let tol =
            (2 * s.layers * (w + 1)) as f32 / 2.0 * 2f32.powi(-8) * scale + 2f32.powi(-8) * scale;
        println!("\n## world {w}: {placement}\n");
        println!("| variant | µs per step | µs per token | tokens/s | communication share (against the control) | speedup over the best NCCL | max error vs world 1 (tolerance {tol:.3}) | ranks agree |");
        println!("|---|---|---|---|---|---|---|---|");
        let us = |k: usize| got[0][k].as_ref().and_then(|o| o.1);
        // The faster of NCCL's two variants.
        let best_nccl = match (us(1), us(2)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (k, v) in variants.iter().enumerate() {
            let Some((x, t)) = &got[0][k] else {
                println!("| {} | skipped: no NCCL here (the emulator, or ranks sharing a GPU) | | | | | | |", v.name());
                continue;
            };
            let err = x
                .iter()
                .zip(&reference.0)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            let agree = *v == Variant::Control
                || got.iter().all(|r| {
                    r[k].as_ref().is_some_and(|o| {
                        o.0.iter()
                            .map(|f| f.to_bits())
                            .eq(x.iter().map(|f| f.to_bits()))
                    })
                });
            let ok = agree && (*v == Variant::Control || err <= tol);
            failed |= !ok && (*v != Variant::Control || w == 1);
            let (step, per_token, tps, share, speed) = match t {
                Some(t) => (
                    format!("{t:.1}"),
                    format!("{:.1}", t / s.batch as f64),
                    format!("{:.0}", s.batch as f64 * 1e6 / t),
                    us(0).map_or("".into(), |c| {
                        format!("{:.0} %", (1.0 - c / t).max(0.0) * 100.0)
                    }),
                    best_nccl.map_or("".into(), |n| format!("{:.2}×", n / t)),
                ),
                None => ("".into(), "".into(), "".into(), "".into(), "".into()),
            };
            let agree_s = if *v == Variant::Control {
                "n/a".into()
            } else {
                agree.to_string()
            };
            println!(
                "| {} | {step} | {per_token} | {tps} | {share} | {speed} | {err:.4}{} | {agree_s} |",
                v.name(),
                if ok || *v == Variant::Control {
                    ""
                } else {
                    " FAIL"
                }
            );
        }
        println!(
            "\nThe communication share is 1 − control / step, at least 0: the fused step's \
             kernel also does the control's add and norm, so it can be faster than the control."
        );
    }
    if failed {
        eprintln!("tp_decode: a check failed");
        return 1;
    }
    0
}

/// `--shard n`: rank 0's compute of a TP-`n` step alone on one rank, per
/// step and per layer, against the floor of the bytes it must read (its
/// weight slices and its heads' KV cache) at `HBM_BYTES_PER_S`; the exit
/// status.
fn shard_table(s: Shape, n: usize, replays: usize, one: Ranks, build: Build) -> i32 {
    if !s.splits_over(n) {
        eprintln!("--shard {n}: the heads, KV heads and intermediate size must divide by it");
        return 2;
    }
    let got = match run_variants(one, s, &[Variant::Control], replays, build) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("--shard {n}: {e}");
            return 1;
        }
    };
    let (h, d) = (s.hidden, s.dim());
    let (nh, nkv, il) = s.share(n);
    let weights = ((nh + 2 * nkv) * d * h + h * nh * d + 3 * il * h + 2 * h) * 2;
    let cache = 2 * s.batch * s.ctx * nkv * d * 2;
    let floor = (weights + cache) as f64 / HBM_BYTES_PER_S * 1e6;
    println!("\n## one rank of TP {n}, alone (its compute: the control, no all-reduce)\n");
    println!("| µs per step | µs per layer | bytes per layer (weights + KV cache) | floor µs per layer at {:.1} TB/s | layer / floor |", HBM_BYTES_PER_S / 1e12);
    println!("|---|---|---|---|---|");
    match got[0][0].as_ref().and_then(|o| o.1) {
        Some(t) => {
            let per = t / s.layers as f64;
            println!(
                "| {t:.1} | {per:.1} | {} + {} | {floor:.1} | {:.2}× |",
                weights,
                cache,
                per / floor
            );
            0
        }
        None => {
            println!("| not timed (the emulator, or --replays 0) | | {weights} + {cache} | {floor:.1} | |");
            0
        }
    }
}

/// `--profile` (after `shard_table`'s row): the layer's time with each
/// kernel left out, then `gemv_table`; the exit status.
fn profile(s: Shape, n: usize, replays: usize, build: Build) -> i32 {
    if replays == 0 {
        println!("\n--profile: --replays 0, nothing timed");
        return 0;
    }
    let per_layer = |leave_out: Option<Kernel>| -> Option<f64> {
        let build = Build { leave_out, ..build };
        let one = Ranks::gpus(1)?;
        match run_variants(one, s, &[Variant::Control], replays, build) {
            Ok(got) => Some(got[0][0].as_ref()?.1? / s.layers as f64),
            Err(e) => {
                eprintln!("--profile: {e}");
                None
            }
        }
    };
    let Some(whole) = per_layer(None) else {
        eprintln!("--profile: the whole step could not be timed");
        return 1;
    };
    println!("\n## where one layer's {whole:.1} µs go: the step with one kernel of every layer left out\n");
    println!("| left out | µs per layer | the kernel's cost in the step, µs |");
    println!("|---|---|---|");
    for k in Kernel::ALL {
        match per_layer(Some(k)) {
            Some(t) => println!("| {} | {t:.1} | {:.1} |", k.name(), whole - t),
            None => println!("| {} | failed | |", k.name()),
        }
    }
    println!(
        "\n(A kernel's cost is the step's time less the step's time without it: \
         what leaving it out saves, overlap with its neighbours included.)"
    );
    gemv_table(s, n, build)
}

/// Each projection of rank 0's TP-`n` slices timed alone in every GEMV
/// form that takes the batch (a graph of back-to-back calls, each on the
/// next layer's weights, so that they come from HBM unless the layers'
/// weights fit in L2), against the HBM's bandwidth; the exit status.
fn gemv_table(s: Shape, n: usize, build: Build) -> i32 {
    let Some(one) = Ranks::gpus(1) else {
        return 1;
    };
    let got = run(one, CommOptions::default(), move |c| {
        let mut m = Model::new(c, s, build)?;
        let bar = bench::Barrier::new(c)?;
        let (b, h, d) = (s.batch, s.hidden, s.dim());
        let (nh, nkv, il) = s.share(n);
        let stride = (nh + 2 * nkv) * d;
        let mut rows = Vec::new();
        for proj in 0..4 {
            // (name, weight rows, k, the form the step takes)
            let (name, rn, k, chosen) = match proj {
                0 => ("QKV", stride, h, Form::for_rows(b, stride, h)),
                1 => ("output", h, nh * d, Form::for_rows(b, h, nh * d)),
                2 => ("gate/up + SwiGLU", 2 * il, h, Form::for_rows(b, 2 * il, h)),
                _ => ("down", h, il, Form::for_rows(b, h, il)),
            };
            for f in Form::ALL {
                if !f.fits(b, proj == 2) {
                    continue;
                }
                let Model {
                    layers,
                    a,
                    qkv,
                    att,
                    act,
                    p,
                    ..
                } = &mut m;
                let mut l = 0;
                let t = bench::time_graph(c, &bar, &mut || {
                    let lay = &layers[l % layers.len()];
                    l += 1;
                    match proj {
                        0 => gemv(c, f, &*a, &lay.wqkv, &mut *qkv, (b, stride, h)),
                        1 => gemv(c, f, &*att, &lay.wo, &mut *p, (b, h, nh * d)),
                        2 => gemv_glu(c, f, &*a, &lay.wgu, &mut *act, (b, il, h)),
                        _ => gemv(c, f, &*act, &lay.wdown, &mut *p, (b, h, il)),
                    }
                })?;
                rows.push((name, rn, k, f, f == chosen, t));
            }
        }
        Ok(rows)
    });
    let rows = match got {
        Ok(mut r) => r.remove(0),
        Err(e) => {
            eprintln!("--profile: {e}");
            return 1;
        }
    };
    println!(
        "\n## rank 0's GEMVs of TP {n}, batch {}, each alone (graphs of back-to-back calls over {} layers' weights)\n",
        s.batch, s.layers
    );
    println!(
        "| projection | rows × k | MB | rows a warp × vectors in flight a lane | µs a call | TB/s | floor µs at {:.1} TB/s |",
        HBM_BYTES_PER_S / 1e12
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, rn, k, f, chosen, t) in rows {
        let bytes = (rn * k * std::mem::size_of::<T>()) as f64;
        println!(
            "| {name} | {rn} × {k} | {:.1} | {} × {}{} | {t:.2} | {:.2} | {:.2} |",
            bytes / 1e6,
            f.r,
            f.u,
            if chosen { " (the step's)" } else { "" },
            bytes / t / 1e6,
            bytes / HBM_BYTES_PER_S * 1e6
        );
    }
    0
}

/// The HBM bandwidth the floors assume: an H200's 4.8 TB/s.
const HBM_BYTES_PER_S: f64 = 4.8e12;
