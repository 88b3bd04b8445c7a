//! Collectives benchmark: symm's `all_gather`, `reduce_scatter` (sum),
//! `broadcast` (root 0), `all_to_all` (equal splits, and the same exchange
//! through `all_to_all_single` and `all_to_all_v`), `all_reduce_op` by max,
//! and the fp8 (f8e4m3) all-reduce beside bf16 at the same element count,
//! against NCCL (plain buffers, and symmetric windows where the loaded NCCL
//! has them), in one process on the same GPUs. Timed as
//! `bench_all_reduce` times (`examples/support/bench.rs`): a CUDA graph of
//! 32 back-to-back calls, the median of 9 replays, µs per call.
//!
//! ```text
//! cargo run --release --example bench_collectives -- --worlds 1,2,4,8 --csv out.csv
//! ```
//!
//! Sizes are per-rank message bytes, 1 KiB to `--max-bytes` (64 MiB) in
//! powers of 4, of f32 unless named: what each rank contributes to an
//! all-gather, receives from a reduce-scatter (its input is world times
//! that), broadcasts or all-reduces, and sends in all (its whole send
//! buffer) in an all-to-all. The fp8 table's sizes are fp8 bytes (element
//! counts); its bf16 rows move twice the bytes. Bus bandwidth follows
//! nccl-tests (see [`Coll::bus_bw`]).
//!
//! Before a call is timed, its first output at that size is checked on
//! every rank against a host reference (copies exactly, sums within their
//! rounding): a call whose output is wrong on any rank is reported, not
//! timed. NCCL's calls are checked the same way, which also checks how
//! this program calls them; `--emulator N` runs only the checks of symm's
//! outputs, on N ranks of the CPU emulator (no GPU). `--collectives` picks
//! some; `--no-pdl` and `--lead-in` are as in `bench_all_reduce`.
//! `scripts/bench.sh` runs this
//! with the torch baseline (`bench/torch_collectives.py`) and merges the
//! tables (`bench/report_collectives.py`).

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Mutex;

use symm::cudarc::driver::sys as cu;
use symm::cudarc::nccl::{result as nccl, sys as nccl_sys};
use symm::dsl::Scalar;
use symm::kernels::all_reduce::AllReduceElem;
use symm::kernels::collectives::{self as coll, ReduceElem, ReduceOp};
use symm::{bf16, f8e4m3, run, Comm, CommOptions, DeviceBuffer, Ranks, Result};

#[path = "support/bench.rs"]
#[allow(dead_code)] // what the other benchmarks use
mod bench;
use bench::{drv, other, sizes, time_graph, Barrier, Nccl, Window, LEAD_IN, T};

/// The collectives this program times.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
enum Coll {
    AllGather,
    ReduceScatter,
    Broadcast,
    AllToAll,
    AllReduceMax,
    AllReduceFp8,
}

impl Coll {
    const ALL: [Coll; 6] = [
        Coll::AllGather,
        Coll::ReduceScatter,
        Coll::Broadcast,
        Coll::AllToAll,
        Coll::AllReduceMax,
        Coll::AllReduceFp8,
    ];

    fn name(self) -> &'static str {
        match self {
            Coll::AllGather => "all_gather",
            Coll::ReduceScatter => "reduce_scatter",
            Coll::Broadcast => "broadcast",
            Coll::AllToAll => "all_to_all",
            Coll::AllReduceMax => "all_reduce_max",
            Coll::AllReduceFp8 => "all_reduce_fp8",
        }
    }

    /// What a table's size is.
    fn size_note(self) -> &'static str {
        match self {
            Coll::AllGather => "size: each rank's input; the output is world × it",
            Coll::ReduceScatter => "size: each rank's output; the input is world × it; sum",
            Coll::Broadcast => "size: the message; root 0",
            Coll::AllToAll => "size: each rank's send buffer, world equal splits",
            Coll::AllReduceMax => "size: the message; max",
            Coll::AllReduceFp8 => {
                "size: the fp8 message (element count); bf16 moves twice the bytes; sum"
            }
        }
    }

    /// Bus bandwidth in GB/s as nccl-tests defines it, for a per-rank
    /// message of `bytes` taking `us`: algbw = size / time, where the size
    /// is the whole output (all-gather) or input (reduce-scatter), world ×
    /// the per-rank bytes, and the per-rank bytes otherwise; busbw = algbw
    /// × (n−1)/n for all-gather, reduce-scatter and all-to-all, × 2(n−1)/n
    /// for all-reduce, × 1 for broadcast. None where the factor is 0 (one
    /// rank moves nothing over the bus).
    fn bus_bw(self, world: usize, bytes: usize, us: f64) -> Option<f64> {
        let n = world as f64;
        let (size, factor) = match self {
            Coll::AllGather | Coll::ReduceScatter => (bytes as f64 * n, (n - 1.0) / n),
            Coll::AllToAll => (bytes as f64, (n - 1.0) / n),
            Coll::Broadcast => (bytes as f64, 1.0),
            Coll::AllReduceMax | Coll::AllReduceFp8 => (bytes as f64, 2.0 * (n - 1.0) / n),
        };
        (factor > 0.0).then(|| size / (us * 1e-6) / 1e9 * factor)
    }
}

/// The element types timed, with NCCL's name for each and how far a sum
/// of them may be from the exact one.
trait Elem: ReduceElem + AllReduceElem {
    const NCCL: nccl_sys::ncclDataType_t;
    /// A sum's error bound relative to Σ|x| when it is rounded once (as
    /// symm's reductions round): half an ulp, doubled for safety.
    const TOL: f64;
}

impl Elem for f32 {
    const NCCL: nccl_sys::ncclDataType_t = nccl_sys::ncclDataType_t::ncclFloat32;
    const TOL: f64 = 1e-6;
}

impl Elem for bf16 {
    const NCCL: nccl_sys::ncclDataType_t = nccl_sys::ncclDataType_t::ncclBfloat16;
    const TOL: f64 = 1.0 / 128.0;
}

impl Elem for f8e4m3 {
    const NCCL: nccl_sys::ncclDataType_t = nccl_sys::ncclDataType_t::ncclFloat8e4m3;
    const TOL: f64 = 1.0 / 8.0;
}

fn dtype<T: symm::Element>() -> &'static str {
    T::DTYPE.name()
}

/// The bytes of one element of the type named `dtype`.
fn dsize(dtype: &str) -> usize {
    match dtype {
        "f8e4m3" => 1,
        "bf16" => 2,
        _ => 4,
    }
}

/// Which of 15 values rank `r`'s input element `i` is (a hash, so that an
/// element from the wrong place shows).
fn code(r: usize, i: usize) -> usize {
    let h = (i as u64 ^ (r as u64) << 48).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 40) % 15) as usize
}

/// Every rank's input values as `T` holds them, by code: the references
/// are computed from these (a lookup per element, not a conversion).
struct Inputs<T> {
    elems: Vec<[T; 15]>,
    values: Vec<[f64; 15]>,
}

impl<T: Elem> Inputs<T> {
    /// Value `k` of rank `r` is the integer k − 7 plus r/16, so that sums
    /// of a few ranks are exact in f32, a maximum has one right answer, and
    /// the fraction names the rank an element came from.
    fn new(world: usize) -> Inputs<T> {
        let elems: Vec<[T; 15]> = (0..world)
            .map(|r| std::array::from_fn(|k| T::from_f32(k as f32 - 7.0 + r as f32 / 16.0)))
            .collect();
        let values = elems
            .iter()
            .map(|e| e.map(|x| f64::from(x.to_f32())))
            .collect();
        Inputs { elems, values }
    }

    /// Rank `r`'s first `len` input elements.
    fn data(&self, r: usize, len: usize) -> Vec<T> {
        (0..len).map(|i| self.elems[r][code(r, i)]).collect()
    }

    /// Rank `r`'s element `i`, as a float.
    fn x(&self, r: usize, i: usize) -> f64 {
        self.values[r][code(r, i)]
    }

    /// The sum over ranks of element `i`, and Σ|x| (its rounding's scale).
    fn sum(&self, i: usize) -> (f64, f64) {
        (0..self.values.len()).fold((0.0, 0.0), |(s, a), r| {
            let x = self.x(r, i);
            (s + x, a + x.abs())
        })
    }
}

/// What an output element should be: its value and the scale its error is
/// measured against (0 for a copy, which must be exact).
type Want<'a> = &'a dyn Fn(usize) -> (f64, f64);

/// None if every element of `got` is within `tol` × scale of its `want`,
/// else what is wrong.
fn verify<T: Scalar>(got: &[T], want: Want<'_>, tol: f64) -> Option<String> {
    let mut bad = 0usize;
    let mut first = None;
    for (i, g) in got.iter().enumerate() {
        let (w, scale) = want(i);
        let g = f64::from(g.to_f32());
        // A NaN (an element never written) fails too.
        if (g - w).abs().is_nan() || (g - w).abs() > tol * scale {
            bad += 1;
            first.get_or_insert((i, g, w));
        }
    }
    first.map(|(i, g, w)| {
        format!(
            "{bad} of {} elements wrong, the first at {i}: {g} where {w} was due",
            got.len()
        )
    })
}

/// Fills `bytes` at `ptr` with 0xff bytes (a NaN in every float type
/// here), so that an output the call never wrote fails the check.
fn poison(c: &Comm, ptr: u64, bytes: usize) -> Result<()> {
    // The emulator's fresh buffers are zeros, which most references are not.
    let Some(stream) = c.cuda_stream() else {
        return Ok(());
    };
    // SAFETY: `ptr` is `bytes` of device memory of this rank, alive until the
    // caller synchronises (every caller checks its output after a sync).
    unsafe { cu::cuMemsetD8Async(ptr, 0xff, bytes, stream.cu_stream()) }
        .result()
        .map_err(drv(c, "cuMemsetD8Async"))
}

/// Copies `len` elements of device memory at `src` (a window) into a new
/// buffer, to read or check.
fn copy_out<T: Scalar>(c: &Comm, src: u64, len: usize) -> Result<DeviceBuffer<T>> {
    let dst = c.device_buffer::<T>(len)?;
    let stream = c.cuda_stream().ok_or_else(|| other(c, "GPU"))?;
    // SAFETY: both hold `len` elements on this rank's device; the sync below
    // ends the copy before either can go.
    unsafe {
        cu::cuMemcpyDtoDAsync_v2(
            dst.device_ptr(),
            src,
            len * std::mem::size_of::<T>(),
            stream.cu_stream(),
        )
    }
    .result()
    .map_err(drv(c, "cuMemcpyDtoDAsync"))?;
    c.synchronize()?;
    Ok(dst)
}

/// An NCCL call's status as symm's error.
fn nccl_ok(
    c: &Comm,
    what: &str,
    r: std::result::Result<nccl::NcclStatus, nccl::NcclError>,
) -> Result<()> {
    r.map(|_| ())
        .map_err(|e| other(c, format!("{what}: {e:?}")))
}

/// An NCCL call on (source, destination) device pointers.
type NcclCall<'a> = dyn Fn(&Nccl, (u64, u64)) -> Result<()> + 'a;

/// One timed row.
struct Row {
    coll: Coll,
    imp: String,
    world: usize,
    dtype: &'static str,
    bytes: usize,
    us: f64,
}

/// What rank 0 of every world reports: rows, and notes on what was not
/// timed and why.
#[derive(Default)]
struct Out {
    rows: Mutex<Vec<Row>>,
    notes: Mutex<Vec<String>>,
}

/// Names a measurement.
#[derive(Clone)]
struct Id {
    coll: Coll,
    imp: String,
    dtype: &'static str,
    bytes: usize,
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Id {
            coll,
            imp,
            dtype,
            bytes,
        } = self;
        write!(f, "{} {imp} {dtype} {bytes} B", coll.name())
    }
}

/// One rank's benchmark of one world.
struct Bench<'a> {
    c: &'a Comm,
    nc: Option<&'a Nccl>,
    barrier: &'a Barrier,
    out: &'a Out,
    /// Whether the loaded NCCL has symmetric windows and `ncclAlltoAll`.
    windows: bool,
    alltoall: bool,
    /// False on the emulator (`--emulator`): checks only.
    timed: bool,
    /// Also time symm's calls forced onto each path (`--paths`).
    paths: bool,
}

impl Bench<'_> {
    /// Every rank's check of `id`, agreed through the store: the first
    /// rank's problem, if any rank has one. Every rank then times, or
    /// skips, alike.
    fn agree(&self, id: &Id, problem: Option<String>) -> Result<Option<String>> {
        let c = self.c;
        let key = |r: usize| c.store_key(&format!("bench/check/{id}/{r}"));
        let store = |source| c.store_error(source);
        c.store()
            .set(&key(c.rank()), problem.as_deref().unwrap_or("").as_bytes())
            .map_err(store)?;
        for r in 0..c.world_size() {
            let v = c.store().get(&key(r), T).map_err(store)?;
            if !v.is_empty() {
                return Ok(Some(format!("rank {r}: {}", String::from_utf8_lossy(&v))));
            }
        }
        Ok(None)
    }

    fn note(&self, what: String) {
        if self.c.rank() == 0 {
            eprintln!("world {}: {what}", self.c.world_size());
            let mut notes = self.out.notes.lock().unwrap_or_else(|p| p.into_inner());
            notes.push(format!("world {}: {what}", self.c.world_size()));
        }
    }

    /// Runs `call` on `s` once, checks the output (`check`) on every rank,
    /// and times `call` if it was right everywhere. A wrong or failed call
    /// is a note; an NCCL call that cannot be captured or timed is too
    /// (symm's errors end the world: its group may be unusable).
    fn measure<S>(
        &self,
        id: Id,
        s: &mut S,
        call: &dyn Fn(&mut S) -> Result<()>,
        check: &dyn Fn(&S) -> Result<Option<String>>,
    ) -> Result<()> {
        let c = self.c;
        let problem = match call(s).and_then(|()| c.synchronize()) {
            Err(e) => Some(format!("the call failed: {e}")),
            Ok(()) => check(s)?,
        };
        if let Some(p) = self.agree(&id, problem)? {
            self.note(format!("{id}: not timed, wrong or failed: {p}"));
            return Ok(());
        }
        let saved = id.clone();
        if !self.timed {
            if c.rank() == 0 {
                eprintln!("world {} {id}: right", c.world_size());
            }
        } else {
            match time_graph(c, self.barrier, &mut || call(s)) {
                Ok(us) => {
                    if c.rank() == 0 {
                        eprintln!("world {} {id}: {us:.2} µs", c.world_size());
                        let mut rows = self.out.rows.lock().unwrap_or_else(|p| p.into_inner());
                        rows.push(Row {
                            coll: id.coll,
                            imp: id.imp,
                            world: c.world_size(),
                            dtype: id.dtype,
                            bytes: id.bytes,
                            us,
                        });
                    }
                }
                Err(e) if id.imp.starts_with("nccl") => {
                    self.note(format!("{id}: not timed: {e}"));
                }
                Err(e) => return Err(e),
            }
        }
        // The sum all-reduce (fp8 here) is the built-in's, with its own
        // paths (bench_all_reduce times them).
        if self.paths && saved.imp == "symm" && saved.coll != Coll::AllReduceFp8 {
            // (The copy engines' path for the copies that have it.)
            let ce = matches!(saved.coll, Coll::AllGather | Coll::AllToAll);
            for (path, tag) in [
                (coll::CollectivePath::Ll, "symm_ll"),
                (coll::CollectivePath::Pull, "symm_pull"),
                (coll::CollectivePath::CopyEngine, "symm_ce"),
            ]
            .into_iter()
            .filter(|(p, _)| ce || *p != coll::CollectivePath::CopyEngine)
            {
                coll::force_path(c, Some(path))?;
                let forced = Id {
                    imp: tag.into(),
                    ..saved.clone()
                };
                let r = self.measure(forced, s, call, check);
                coll::force_path(c, None)?;
                r?;
            }
        }
        Ok(())
    }

    /// `call(src, dst)` on NCCL's plain buffers (`nccl{tag}`) and on
    /// symmetric windows (`nccl_window{tag}`) where the loaded NCCL has
    /// them: the source holds `data`, the output `out_len` elements, which
    /// must match `want` within `tol`.
    #[allow(clippy::too_many_arguments)]
    fn nccl_variants<T: Elem>(
        &self,
        coll: Coll,
        tag: &str,
        bytes: usize,
        data: &[T],
        out_len: usize,
        want: Want<'_>,
        tol: f64,
        call: &NcclCall<'_>,
    ) -> Result<()> {
        let (c, Some(nc)) = (self.c, self.nc) else {
            return Ok(());
        };
        let id = |imp: &str| Id {
            coll,
            imp: format!("{imp}{tag}"),
            dtype: dtype::<T>(),
            bytes,
        };
        let src = c.device_buffer_from(data)?;
        let dst = c.device_buffer::<T>(out_len)?;
        poison(c, dst.device_ptr(), out_len * size_of::<T>())?;
        let ptrs = (src.device_ptr(), dst.device_ptr());
        self.measure(id("nccl"), &mut (), &|_| call(nc, ptrs), &|_| {
            Ok(verify(&dst.to_host()?, want, tol))
        })?;
        if !self.windows {
            return Ok(());
        }
        let in_bytes = std::mem::size_of_val(data);
        let out_bytes = out_len * size_of::<T>();
        // Collective registrations, the same on every rank: both are made
        // before either can fail, as in bench_all_reduce.
        let (a, b) = match (Window::new(c, nc, in_bytes), Window::new(c, nc, out_bytes)) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                let e = [a, b]
                    .into_iter()
                    .filter_map(|w| match w {
                        Ok(w) => {
                            w.free(nc);
                            None
                        }
                        Err(e) => Some(e.to_string()),
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                self.note(format!("{}: no window: {e}", id("nccl_window")));
                return Ok(());
            }
        };
        let (pa, pb) = (a.ptr as u64, b.ptr as u64);
        let filled = (|| -> Result<()> {
            let stream = c.cuda_stream().ok_or_else(|| other(c, "GPU"))?;
            // SAFETY: both hold `in_bytes` on this rank's device; the
            // synchronisation ends the copy before `src` can go.
            unsafe { cu::cuMemcpyDtoDAsync_v2(pa, src.device_ptr(), in_bytes, stream.cu_stream()) }
                .result()
                .map_err(drv(c, "cuMemcpyDtoDAsync"))?;
            poison(c, pb, out_bytes)?;
            c.synchronize()
        })();
        let r = filled.and_then(|()| {
            self.measure(id("nccl_window"), &mut (), &|_| call(nc, (pa, pb)), &|_| {
                Ok(verify(
                    &copy_out::<T>(c, pb, out_len)?.to_host()?,
                    want,
                    tol,
                ))
            })
        });
        a.free(nc);
        b.free(nc);
        r
    }

    fn all_gather(&self, bytes: usize) -> Result<()> {
        let (c, w, r) = (self.c, self.c.world_size(), self.c.rank());
        let n = bytes / 4;
        let inputs = Inputs::<f32>::new(w);
        let data = inputs.data(r, n);
        let want = |j: usize| (inputs.x(j / n, j % n), 0.0);
        let inp = c.alloc::<f32>(n)?;
        inp.copy_from_host(&data)?;
        let smem = inp.rendezvous()?;
        let mut out = c.device_buffer::<f32>(w * n)?;
        poison(c, out.device_ptr(), w * bytes)?;
        self.measure(
            Id {
                coll: Coll::AllGather,
                imp: "symm".into(),
                dtype: "f32",
                bytes,
            },
            &mut out,
            &|o| coll::all_gather(c, &smem, o, n),
            &|o| Ok(verify(&o.to_host()?, &want, 0.0)),
        )?;
        self.nccl_variants(
            Coll::AllGather,
            "",
            bytes,
            &data,
            w * n,
            &want,
            0.0,
            &|nc, (s, d)| {
                // SAFETY: `s` holds n and `d` world × n f32 on this device,
                // alive until the benchmark synchronises.
                let r = unsafe {
                    nccl::all_gather(s as _, d as _, n, f32::NCCL, nc.comm, Nccl::stream(c)?)
                };
                nccl_ok(c, "ncclAllGather", r)
            },
        )
    }

    fn reduce_scatter(&self, bytes: usize) -> Result<()> {
        let (c, w, r) = (self.c, self.c.world_size(), self.c.rank());
        let m = bytes / 4;
        let inputs = Inputs::<f32>::new(w);
        let data = inputs.data(r, w * m);
        let want = |j: usize| inputs.sum(r * m + j);
        let inp = c.alloc::<f32>(w * m)?;
        inp.copy_from_host(&data)?;
        let smem = inp.rendezvous()?;
        let mut out = c.device_buffer::<f32>(m)?;
        poison(c, out.device_ptr(), bytes)?;
        self.measure(
            Id {
                coll: Coll::ReduceScatter,
                imp: "symm".into(),
                dtype: "f32",
                bytes,
            },
            &mut out,
            &|o| coll::reduce_scatter(c, &smem, o, w * m, ReduceOp::Sum),
            &|o| Ok(verify(&o.to_host()?, &want, f32::TOL)),
        )?;
        self.nccl_variants(
            Coll::ReduceScatter,
            "",
            bytes,
            &data,
            m,
            &want,
            f32::TOL * w as f64,
            &|nc, (s, d)| {
                // SAFETY: `s` holds world × m and `d` m f32 on this device,
                // alive until the benchmark synchronises.
                let r = unsafe {
                    nccl::reduce_scatter(
                        s as _,
                        d as _,
                        m,
                        f32::NCCL,
                        nccl_sys::ncclRedOp_t::ncclSum,
                        nc.comm,
                        Nccl::stream(c)?,
                    )
                };
                nccl_ok(c, "ncclReduceScatter", r)
            },
        )
    }

    fn broadcast(&self, bytes: usize) -> Result<()> {
        let (c, w, r) = (self.c, self.c.world_size(), self.c.rank());
        let n = bytes / 4;
        let inputs = Inputs::<f32>::new(w);
        let data = inputs.data(r, n);
        let want = |i: usize| (inputs.x(0, i), 0.0);
        let id = |imp: &str| Id {
            coll: Coll::Broadcast,
            imp: imp.into(),
            dtype: "f32",
            bytes,
        };
        let inp = c.alloc::<f32>(n)?;
        inp.copy_from_host(&data)?;
        let smem = inp.rendezvous()?;
        let mut out = c.device_buffer::<f32>(n)?;
        poison(c, out.device_ptr(), bytes)?;
        self.measure(
            id("symm"),
            &mut out,
            &|o| coll::broadcast(c, &smem, o, n, 0),
            &|o| Ok(verify(&o.to_host()?, &want, 0.0)),
        )?;
        // In place, as torch's broadcast: the root copies nothing.
        let buf = c.alloc::<f32>(n)?;
        buf.copy_from_host(&data)?;
        self.measure(
            id("symm_in_place"),
            &mut (),
            &|_| coll::broadcast_in_place(c, &buf, n, 0),
            &|_| Ok(verify(&buf.to_host()?, &want, 0.0)),
        )?;
        self.nccl_variants(
            Coll::Broadcast,
            "",
            bytes,
            &data,
            n,
            &want,
            0.0,
            &|nc, (s, d)| {
                // SAFETY: `s` and `d` hold n f32 on this device, alive
                // until the benchmark synchronises.
                let r = unsafe {
                    nccl::broadcast(s as _, d as _, n, f32::NCCL, 0, nc.comm, Nccl::stream(c)?)
                };
                nccl_ok(c, "ncclBroadcast", r)
            },
        )
    }

    fn all_to_all(&self, nominal: usize) -> Result<()> {
        let (c, w, r) = (self.c, self.c.world_size(), self.c.rank());
        // Elements per peer; the send buffer is world of them.
        let m = nominal / 4 / w;
        if m == 0 {
            return Ok(());
        }
        let bytes = m * w * 4;
        let inputs = Inputs::<f32>::new(w);
        let data = inputs.data(r, w * m);
        let want = |j: usize| (inputs.x(j / m, r * m + j % m), 0.0);
        let id = |imp: &str| Id {
            coll: Coll::AllToAll,
            imp: imp.into(),
            dtype: "f32",
            bytes,
        };
        let inp = c.alloc::<f32>(w * m)?;
        inp.copy_from_host(&data)?;
        let smem = inp.rendezvous()?;
        let mut out = c.device_buffer::<f32>(w * m)?;
        poison(c, out.device_ptr(), bytes)?;
        self.measure(
            id("symm"),
            &mut out,
            &|o| coll::all_to_all(c, &smem, o, m),
            &|o| Ok(verify(&o.to_host()?, &want, 0.0)),
        )?;
        // The same exchange with host split sizes (torch's
        // all_to_all_single) and device split sizes (all_to_all_vdev).
        let splits = vec![m; w];
        poison(c, out.device_ptr(), bytes)?;
        self.measure(
            id("symm_single"),
            &mut out,
            &|o| coll::all_to_all_single(c, &smem, o, &splits, &splits),
            &|o| Ok(verify(&o.to_host()?, &want, 0.0)),
        )?;
        let dev_splits = c.device_buffer_from(&vec![m as u64; w])?;
        poison(c, out.device_ptr(), bytes)?;
        let mut v = (out, c.device_buffer::<u64>(2 * w)?);
        let report: Vec<u64> = (0..2 * w)
            .map(|k| if k < w { m } else { (k - w) * m } as u64)
            .collect();
        self.measure(
            id("symm_v"),
            &mut v,
            &|(o, rep)| coll::all_to_all_v(c, &smem, o, &dev_splits, rep),
            &|(o, rep)| {
                let got = rep.to_host()?;
                Ok(verify(&o.to_host()?, &want, 0.0).or_else(|| {
                    (got != report).then(|| format!("sizes and offsets {got:?}, not {report:?}"))
                }))
            },
        )?;
        // NCCL: the grouped sends and receives that torch's
        // all_to_all_single makes, and ncclAlltoAll where it exists.
        let p2p = |nc: &Nccl, (s, d): (u64, u64)| -> Result<()> {
            let stream = Nccl::stream(c)?;
            nccl_ok(c, "ncclGroupStart", nccl::group_start())?;
            let mut first = Ok(());
            for p in 0..w {
                let off = (p * m * 4) as u64;
                // SAFETY: `s` and `d` hold world × m f32 on this device,
                // alive until the benchmark synchronises; p's span is
                // inside them.
                let sent =
                    unsafe { nccl::send((s + off) as _, m, f32::NCCL, p as i32, nc.comm, stream) };
                // SAFETY: as for the send.
                let got =
                    unsafe { nccl::recv((d + off) as _, m, f32::NCCL, p as i32, nc.comm, stream) };
                first = first
                    .and_then(|()| nccl_ok(c, "ncclSend", sent))
                    .and_then(|()| nccl_ok(c, "ncclRecv", got));
            }
            // The group ends whatever failed in it.
            let end = nccl_ok(c, "ncclGroupEnd", nccl::group_end());
            first.and(end)
        };
        self.nccl_variants(Coll::AllToAll, "", bytes, &data, w * m, &want, 0.0, &p2p)?;
        if self.alltoall {
            self.nccl_variants(
                Coll::AllToAll,
                "_alltoall",
                bytes,
                &data,
                w * m,
                &want,
                0.0,
                &|nc, (s, d)| {
                    // SAFETY: as above; `m` is the count per peer. Probed:
                    // the symbol exists in the loaded NCCL.
                    let r = unsafe {
                        nccl_sys::ncclAlltoAll(
                            s as _,
                            d as _,
                            m,
                            f32::NCCL,
                            nc.comm,
                            Nccl::stream(c)? as _,
                        )
                    };
                    nccl_ok(c, "ncclAlltoAll", r.result())
                },
            )?;
        }
        Ok(())
    }

    fn all_reduce_max(&self, bytes: usize) -> Result<()> {
        let (c, w, r) = (self.c, self.c.world_size(), self.c.rank());
        let n = bytes / 4;
        let inputs = Inputs::<f32>::new(w);
        let data = inputs.data(r, n);
        let want = |i: usize| {
            let max = (0..w).map(|p| inputs.x(p, i)).fold(f64::MIN, f64::max);
            (max, 0.0)
        };
        let inp = c.alloc::<f32>(n)?;
        inp.copy_from_host(&data)?;
        let smem = inp.rendezvous()?;
        let mut out = c.device_buffer::<f32>(n)?;
        poison(c, out.device_ptr(), bytes)?;
        self.measure(
            Id {
                coll: Coll::AllReduceMax,
                imp: "symm".into(),
                dtype: "f32",
                bytes,
            },
            &mut out,
            &|o| coll::all_reduce_op(c, &smem, o, n, ReduceOp::Max),
            &|o| Ok(verify(&o.to_host()?, &want, 0.0)),
        )?;
        self.nccl_variants(
            Coll::AllReduceMax,
            "",
            bytes,
            &data,
            n,
            &want,
            0.0,
            &|nc, ptrs| nc.all_reduce(c, ptrs, n, f32::NCCL, nccl_sys::ncclRedOp_t::ncclMax),
        )
    }

    /// The sum all-reduce of `n` elements of `T` (the fp8 table: f8e4m3,
    /// then bf16 at the same element count).
    fn all_reduce_sum<T: Elem>(&self, n: usize) -> Result<()> {
        let (c, w, r) = (self.c, self.c.world_size(), self.c.rank());
        let bytes = n * size_of::<T>();
        let inputs = Inputs::<T>::new(w);
        let data = inputs.data(r, n);
        let want = |i: usize| inputs.sum(i);
        let inp = c.alloc::<T>(n)?;
        inp.copy_from_host(&data)?;
        let smem = inp.rendezvous()?;
        let mut out = c.device_buffer::<T>(n)?;
        poison(c, out.device_ptr(), bytes)?;
        self.measure(
            Id {
                coll: Coll::AllReduceFp8,
                imp: "symm".into(),
                dtype: dtype::<T>(),
                bytes,
            },
            &mut out,
            &|o| coll::all_reduce_op(c, &smem, o, n, ReduceOp::Sum),
            &|o| Ok(verify(&o.to_host()?, &want, T::TOL)),
        )?;
        // NCCL may round at each step of a ring: allow world times the
        // error of one rounding. NCCL without fp8 fails the first call
        // (ncclInvalidArgument), which becomes a note, not a row.
        self.nccl_variants(
            Coll::AllReduceFp8,
            "",
            bytes,
            &data,
            n,
            &want,
            T::TOL * w as f64,
            &|nc, ptrs| nc.all_reduce(c, ptrs, n, T::NCCL, nccl_sys::ncclRedOp_t::ncclSum),
        )
    }

    fn run(&self, which: Coll, bytes: usize) -> Result<()> {
        match which {
            Coll::AllGather => self.all_gather(bytes),
            Coll::ReduceScatter => self.reduce_scatter(bytes),
            Coll::Broadcast => self.broadcast(bytes),
            Coll::AllToAll => self.all_to_all(bytes),
            Coll::AllReduceMax => self.all_reduce_max(bytes),
            Coll::AllReduceFp8 => {
                self.all_reduce_sum::<f8e4m3>(bytes)?;
                self.all_reduce_sum::<bf16>(bytes)
            }
        }
    }
}

/// One Markdown table per collective of `world`: µs per call of every
/// implementation, symm against NCCL's best (plain or window) of the same
/// element type, and bus bandwidth.
fn print_tables(rows: &[Row], world: usize) {
    for which in Coll::ALL {
        let rows: Vec<&Row> = rows
            .iter()
            .filter(|r| r.coll == which && r.world == world)
            .collect();
        let Some(first) = rows.first() else { continue };
        let primary = first.dtype;
        let mut dtypes: Vec<&str> = Vec::new();
        let mut cols: Vec<(&str, &str)> = Vec::new();
        for r in &rows {
            if !dtypes.contains(&r.dtype) {
                dtypes.push(r.dtype);
            }
            if !cols.contains(&(r.imp.as_str(), r.dtype)) {
                cols.push((r.imp.as_str(), r.dtype));
            }
        }
        let label = |(imp, d): (&str, &str)| {
            if dtypes.len() > 1 {
                format!("{imp} {d}")
            } else {
                imp.to_string()
            }
        };
        let us = |elems: usize, imp: &str, d: &str| {
            rows.iter()
                .find(|r| r.imp == imp && r.dtype == d && r.bytes / dsize(d) == elems)
                .map(|r| r.us)
        };
        let best_nccl = |elems: usize, d: &str| {
            rows.iter()
                .filter(|r| r.imp.starts_with("nccl") && r.dtype == d)
                .filter(|r| r.bytes / dsize(d) == elems)
                .map(|r| r.us)
                .min_by(f64::total_cmp)
        };
        let mut ratios: Vec<String> = dtypes
            .iter()
            .map(|d| format!("symm / best NCCL {d}"))
            .collect();
        ratios.extend(dtypes[1..].iter().map(|d| format!("symm / symm {d}")));
        println!(
            "\n### {} — {world} GPUs (µs per call; {})\n",
            which.name(),
            bench::method_line().trim_start_matches("method: ")
        );
        println!("{}\n", which.size_note());
        let head: Vec<String> = cols.iter().map(|&c| label(c)).collect();
        println!(
            "| size | {} | {} | symm busbw GB/s | best NCCL busbw GB/s |",
            head.join(" | "),
            ratios.join(" | ")
        );
        println!("{}|", "|---".repeat(head.len() + ratios.len() + 3));
        let elems: BTreeSet<usize> = rows.iter().map(|r| r.bytes / dsize(r.dtype)).collect();
        let cell = |v: Option<f64>, prec: usize| v.map_or("n/a".into(), |v| format!("{v:.prec$}"));
        for e in elems {
            let bytes = e * dsize(primary);
            let mut line: Vec<String> = vec![fmt_bytes(bytes)];
            line.extend(cols.iter().map(|&(imp, d)| cell(us(e, imp, d), 2)));
            let s = us(e, "symm", primary);
            for d in &dtypes {
                let v = s.zip(best_nccl(e, d)).map(|(a, b)| a / b);
                line.push(v.map_or("n/a".into(), |v| format!("{v:.2}×")));
            }
            for d in &dtypes[1..] {
                let v = s.zip(us(e, "symm", d)).map(|(a, b)| a / b);
                line.push(v.map_or("n/a".into(), |v| format!("{v:.2}×")));
            }
            let bw = |t: Option<f64>| t.and_then(|t| which.bus_bw(world, bytes, t));
            line.push(cell(bw(s), 1));
            line.push(cell(bw(best_nccl(e, primary)), 1));
            println!("| {} |", line.join(" | "));
        }
    }
}

fn fmt_bytes(b: usize) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn write_csv(path: &str, rows: &[Row]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    writeln!(f, "collective,impl,world,dtype,bytes,us")?;
    for r in rows {
        writeln!(
            f,
            "{},{},{},{},{},{:.3}",
            r.coll.name(),
            r.imp,
            r.world,
            r.dtype,
            r.bytes,
            r.us
        )?;
    }
    Ok(())
}

/// Times symm's collectives against NCCL's on the same GPUs (see the top
/// of examples/bench_collectives.rs).
#[derive(clap::Parser)]
struct Args {
    /// World sizes, comma-separated (those above the machine's GPU count
    /// are skipped, with a note).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    worlds: Vec<usize>,
    /// Collectives to time, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    collectives: Vec<Coll>,
    /// Where the rows go.
    #[arg(long, default_value = "bench_collectives.csv")]
    csv: String,
    /// The largest per-rank message, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    max_bytes: usize,
    /// Without programmatic dependent launch, for comparison.
    #[arg(long)]
    no_pdl: bool,
    /// Untimed calls in each graph before the timed ones (as in
    /// bench_all_reduce).
    #[arg(long, default_value_t = 0)]
    lead_in: usize,
    /// Per-rank message sizes in bytes, comma-separated (default: 1 KiB
    /// to --max-bytes in steps of 4×).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Also time symm's calls forced onto each of its paths (LL and pull,
    /// and the copy engines' for the all-gather and all-to-all)
    /// where the call has both: the crossovers of their dispatch. (Above
    /// `LL_LIMIT_BYTES` per peer a forced LL call pulls, so its `symm_ll`
    /// column is the pull path there.)
    #[arg(long)]
    paths: bool,
    /// Only check symm's outputs against this program's references, on N
    /// ranks of the CPU emulator: no GPU, no NCCL, nothing timed (keep
    /// --max-bytes small: the emulator runs every GPU thread).
    #[arg(long, value_name = "N")]
    emulator: Option<usize>,
}

/// `--emulator`: symm's outputs against the references on `n` emulated
/// ranks; the exit status.
fn check_on_emulator(n: usize, which: &[Coll], sizes: &[usize], paths: bool) -> i32 {
    let out = Out::default();
    let res = run(Ranks::Emulator(n), CommOptions::default(), |c| {
        let barrier = Barrier::new(c)?;
        let b = Bench {
            c,
            nc: None,
            barrier: &barrier,
            out: &out,
            windows: false,
            alltoall: false,
            timed: false,
            paths,
        };
        for &k in which {
            for &bytes in sizes {
                b.run(k, bytes)?;
            }
        }
        Ok(())
    });
    let notes = out.notes.lock().unwrap_or_else(|p| p.into_inner());
    match res {
        Err(e) => {
            eprintln!("failed: {e}");
            1
        }
        Ok(_) if !notes.is_empty() => 1,
        Ok(_) => 0,
    }
}

fn main() {
    let Args {
        worlds,
        collectives,
        csv,
        max_bytes,
        no_pdl,
        lead_in,
        sizes: picked,
        paths,
        emulator,
    } = clap::Parser::parse();
    if let Some(b) = picked.iter().find(|&&b| b > max_bytes) {
        eprintln!("note: sizes above --max-bytes ({max_bytes}) are skipped, {b} among them");
    }
    let sizes = |max: usize| -> Vec<usize> {
        if picked.is_empty() {
            sizes(max)
        } else {
            picked.iter().copied().filter(|&b| b <= max).collect()
        }
    };
    let which: Vec<Coll> = if collectives.is_empty() {
        Coll::ALL.to_vec()
    } else {
        collectives
    };
    LEAD_IN.set(lead_in).expect("set once");
    if let Some(n) = emulator {
        std::process::exit(check_on_emulator(n, &which, &sizes(max_bytes), paths));
    }
    eprintln!("{}", bench::method_line());
    let gpus = symm::cuda_device_count();
    let (run_worlds, too_big): (Vec<usize>, Vec<usize>) = worlds
        .into_iter()
        .filter(|&w| w > 0)
        .partition(|&w| w <= gpus);
    if run_worlds.is_empty() {
        eprintln!(
            "SKIPPED: bench_collectives needs GPUs, as many as a world size it is given; this \
             machine has {gpus} (no CUDA driver or device counts as 0)"
        );
        std::process::exit(2);
    }
    if !too_big.is_empty() {
        eprintln!("note: worlds {too_big:?} skipped: this machine has {gpus} GPUs");
    }
    // SAFETY: only probes whether the library can be opened.
    let have_nccl = unsafe { nccl_sys::is_culib_present() };
    let (windows, alltoall) = (
        Window::available(),
        symm::functional::nccl_exports("ncclAlltoAll"),
    );
    if have_nccl {
        let version = nccl::get_nccl_version().map_or("?".into(), |v| v.to_string());
        eprintln!(
            "NCCL {version}: symmetric windows {}, ncclAlltoAll {}",
            if windows { "yes" } else { "no" },
            if alltoall { "yes" } else { "no" }
        );
    } else {
        eprintln!(
            "warning: no NCCL (libnccl.so) on the library path (scripts/gpu-libs.sh puts \
             torch's there): timing symm alone"
        );
    }
    let out = Out::default();
    let mut failed = false;
    for w in run_worlds {
        let res = run(
            Ranks::Cuda((0..w).collect()),
            CommOptions::default().with_timeout(T).with_pdl(!no_pdl),
            |c| {
                // Raw driver calls (poisoning, window copies) need the
                // rank's context on its thread.
                c.cuda_stream()
                    .ok_or_else(|| other(c, "benchmarks need GPU ranks"))?
                    .context()
                    .bind_to_thread()
                    .map_err(drv(c, "bind"))?;
                let nc = if have_nccl { Some(Nccl::new(c)?) } else { None };
                let barrier = Barrier::new(c)?;
                let b = Bench {
                    c,
                    nc: nc.as_ref(),
                    barrier: &barrier,
                    out: &out,
                    windows: have_nccl && windows,
                    alltoall: have_nccl && alltoall,
                    timed: true,
                    paths,
                };
                for &k in &which {
                    for bytes in sizes(max_bytes) {
                        b.run(k, bytes)?;
                    }
                }
                Ok(())
            },
        );
        if let Err(e) = res {
            eprintln!("world {w} failed: {e}");
            failed = true;
        }
        let rows = out.rows.lock().unwrap_or_else(|p| p.into_inner());
        print_tables(&rows, w);
        if let Err(e) = write_csv(&csv, &rows) {
            eprintln!("cannot write {csv}: {e}");
            std::process::exit(1);
        }
    }
    let notes = out.notes.lock().unwrap_or_else(|p| p.into_inner());
    if !notes.is_empty() {
        println!("\nNot timed:\n");
        for n in notes.iter() {
            println!("- {n}");
        }
    }
    eprintln!("wrote {csv}");
    if failed {
        std::process::exit(1);
    }
}
