//! Items that `#[symm_kernel]` expansions use. Not a public API: generated
//! code reaches the runtime only through `::symm::__private`.

use std::collections::HashMap;
use std::sync::Mutex;

use cudarc::driver::CudaFunction;

pub use crate::buffer::DeviceSlice;
pub use crate::comm::Comm;
pub use crate::dsl::memory::DslIndex;
pub use crate::dsl::thread::{with_thread, KernelThread};
pub use crate::dsl::{Remote, Scalar, Shared, Slice, SliceMut, SymmBuf};
pub use crate::error::{Error, Result};
pub use crate::launch::LaunchConfig;
pub use crate::symmetric_memory::SymmetricMemory;

use crate::backend::CudaBackend;
use crate::dsl::support::DSL_SUPPORT;

/// Reading `x[i]` in a CPU body, for handles (shared access).
pub trait HandleGet<I> {
    /// The element type.
    type Output;
    /// `x[i]`.
    #[track_caller]
    fn __dsl_get(&self, i: I) -> Self::Output;
}

/// Writing `x[i] = v` in a CPU body, for writable handles.
pub trait HandleSet<I>: HandleGet<I> {
    /// `x[i] = v`.
    #[track_caller]
    fn __dsl_set(&self, i: I, v: Self::Output);
}

/// Indexing register arrays in a CPU body (they need `&mut` to write).
pub trait ArrayIndex<I> {
    /// The element type.
    type Output;
    /// `a[i]`.
    #[track_caller]
    fn __dsl_get(&self, i: I) -> Self::Output;
    /// `a[i] = v`.
    #[track_caller]
    fn __dsl_set(&mut self, i: I, v: Self::Output);
}

macro_rules! handle_get {
    ($($h:ident),*) => {$(
        impl<T: Scalar, I: DslIndex> HandleGet<I> for $h<T> {
            type Output = T;
            #[track_caller]
            fn __dsl_get(&self, i: I) -> T { self.__get(i) }
        }
    )*};
}
macro_rules! handle_set {
    ($($h:ident),*) => {$(
        impl<T: Scalar, I: DslIndex> HandleSet<I> for $h<T> {
            #[track_caller]
            fn __dsl_set(&self, i: I, v: T) { self.__set(i, v) }
        }
    )*};
}
handle_get!(Slice, SliceMut, Remote);
handle_set!(SliceMut, Remote);

impl<T: Scalar, const N: usize, I: DslIndex> HandleGet<I> for Shared<T, N> {
    type Output = T;
    #[track_caller]
    fn __dsl_get(&self, i: I) -> T {
        self.__get(i)
    }
}
impl<T: Scalar, const N: usize, I: DslIndex> HandleSet<I> for Shared<T, N> {
    #[track_caller]
    fn __dsl_set(&self, i: I, v: T) {
        self.__set(i, v)
    }
}

impl<T: Copy, const N: usize, I: DslIndex> ArrayIndex<I> for [T; N] {
    type Output = T;
    #[track_caller]
    fn __dsl_get(&self, i: I) -> T {
        self[array_index(i, N)]
    }
    #[track_caller]
    fn __dsl_set(&mut self, i: I, v: T) {
        self[array_index(i, N)] = v;
    }
}

#[track_caller]
fn array_index<I: DslIndex>(i: I, n: usize) -> usize {
    match i.__index() {
        Some(i) if i < n => i,
        _ => crate::dsl::thread::fault(format!(
            "register array: index out of bounds for length {n}"
        )),
    }
}

/// What a `#[symm_kernel(device)]` function leaves for kernels that call it.
#[derive(Debug)]
pub struct DeviceFn {
    /// The function's name (for diagnostics and de-duplication).
    pub name: &'static str,
    /// Its CUDA C definition.
    pub source: &'static str,
    /// Device functions it calls.
    pub deps: &'static [&'static DeviceFn],
}

/// Definitions of `direct` and everything they call, callees first, once each.
pub fn device_sources(direct: &[&'static DeviceFn]) -> String {
    fn visit(f: &'static DeviceFn, seen: &mut Vec<*const DeviceFn>, out: &mut String) {
        if seen.contains(&(f as *const _)) {
            return;
        }
        seen.push(f);
        for d in f.deps {
            visit(d, seen, out);
        }
        out.push_str(f.source);
        out.push('\n');
    }
    let (mut seen, mut out) = (Vec::new(), String::new());
    for f in direct {
        visit(f, &mut seen, &mut out);
    }
    out
}

/// The complete CUDA C of one kernel instantiation: support code, device
/// functions, the kernel body and its `extern "C"` entry.
pub fn kernel_source(deps: &[&'static DeviceFn], body: &str, entry: &str) -> String {
    format!(
        "{}\n{}\n{body}\n{entry}\n",
        &*DSL_SUPPORT,
        device_sources(deps)
    )
}

/// A kernel parameter slot holding a scalar (the driver reads its size).
pub fn slot<T: Scalar>(v: T) -> [u8; 8] {
    v.__to_bits64().to_le_bytes()
}

/// A kernel parameter slot holding a 64-bit value (pointer, length).
pub fn slot_u64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// A kernel parameter slot holding a `bool`.
pub fn slot_bool(v: bool) -> [u8; 8] {
    slot_u64(u64::from(v))
}

/// Checks that a slice argument lives on `comm`'s rank; returns (ptr, len).
pub fn slice_arg<T: crate::Element, S: DeviceSlice<T> + ?Sized>(
    comm: &Comm,
    name: &str,
    s: &S,
) -> Result<(u64, usize)> {
    if s.__owner() != comm.owner_id() {
        return Err(comm.invalid(format!(
            "argument `{name}` belongs to another rank or group than this launch"
        )));
    }
    Ok((s.device_ptr(), s.len()))
}

/// Checks a symmetric-buffer argument; returns its parameter slots.
pub fn symm_arg<T: Scalar>(
    comm: &Comm,
    name: &str,
    s: &SymmetricMemory,
) -> Result<[[u8; 8]; SYMM_BUF_SLOTS]> {
    if s.rank() != comm.rank() || s.world_size() != comm.world_size() {
        return Err(comm.invalid(format!(
            "argument `{name}` is rank {} of {}, but the launch is on rank {} of {}",
            s.rank(),
            s.world_size(),
            comm.rank(),
            comm.world_size()
        )));
    }
    if s.dtype() != T::DTYPE {
        return Err(comm.invalid(format!(
            "argument `{name}` holds {}, but the kernel expects {}",
            s.dtype(),
            T::DTYPE
        )));
    }
    Ok(symm_buf_slots(SymmBufArg {
        ptrs: s.buffer_ptrs_dev(),
        pads: s.signal_pad_ptrs_dev(),
        rank: s.rank(),
        world: s.world_size(),
        len: s.buffer_size() / std::mem::size_of::<T>(),
        local: s.buffer_ptrs()[s.rank()],
        local_pad: s.signal_pad_ptrs()[s.rank()],
    }))
}

/// What a kernel's `SymmBuf` parameter carries.
pub(crate) struct SymmBufArg {
    /// Device array of every rank's buffer address.
    pub ptrs: u64,
    /// Device array of every rank's signal-pad address.
    pub pads: u64,
    pub rank: usize,
    pub world: usize,
    /// Elements in each rank's buffer.
    pub len: usize,
    /// This rank's own buffer and pad, also by value: a kernel reaches them
    /// without first loading its pointer tables (a memory round trip at the
    /// start of every call).
    pub local: u64,
    pub local_pad: u64,
}

/// The parameter slots of a `SymmBuf`, in the order of the CUDA entry that
/// `#[symm_kernel]` writes (`ptrs, pads, rank, world, len, local, lpad`).
pub(crate) fn symm_buf_slots(a: SymmBufArg) -> [[u8; 8]; SYMM_BUF_SLOTS] {
    [
        slot_u64(a.ptrs),
        slot_u64(a.pads),
        slot_u64(a.rank as u64),
        slot_u64(a.world as u64),
        slot_u64(a.len as u64),
        slot_u64(a.local),
        slot_u64(a.local_pad),
    ]
}

/// Parameter slots of one `SymmBuf` argument (see [`symm_arg`]).
pub const SYMM_BUF_SLOTS: usize = 7;

/// The CPU body's view of a symmetric-buffer argument.
pub fn symm_handle<T: Scalar>(s: &SymmetricMemory) -> SymmBuf<T> {
    SymmBuf::__new(
        s.buffer_ptrs_dev(),
        s.signal_pad_ptrs_dev(),
        s.rank() as u32,
        s.world_size() as u32,
        s.buffer_size() / std::mem::size_of::<T>(),
    )
}

/// Number of leading parameter slots the runtime fills (status record,
/// timeout, rank).
pub const HIDDEN_SLOTS: usize = 3;

/// Compiled instantiations of one kernel, per device.
pub struct KernelCache {
    name: &'static str,
    /// Whether the kernel takes a `SymmBuf`, so it may wait on peers, which
    /// ranks sharing a GPU can do only with grids that fit together.
    peers: bool,
    fns: Mutex<Option<HashMap<(usize, u64), CudaFunction>>>,
}

fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// [`KERNEL_OPTIONS`] as the JIT takes them.
pub(crate) fn kernel_options() -> Vec<String> {
    KERNEL_OPTIONS.iter().map(|s| s.to_string()).collect()
}

/// Options every DSL kernel is compiled with. `--fmad=false` because Rust
/// never contracts `a * b + c` into an FMA, and the GPU must compute what the
/// CPU body computes.
pub const KERNEL_OPTIONS: &[&str] = &["--fmad=false"];

impl KernelCache {
    /// An empty cache for kernel `name`, which takes a `SymmBuf` if `peers`.
    pub const fn new(name: &'static str, peers: bool) -> KernelCache {
        KernelCache {
            name,
            peers,
            fns: Mutex::new(None),
        }
    }

    /// Launches the instantiation named by `key` (its generic arguments),
    /// compiling `source(entry)` the first time on each device.
    pub fn launch(
        &self,
        comm: &Comm,
        key: &[&str],
        cfg: LaunchConfig,
        params: &mut [[u8; 8]],
        source: &dyn Fn(&str) -> String,
        cpu: &dyn Fn(),
    ) -> Result<()> {
        check_config(comm, &cfg)?;
        let Some(b) = comm.backend.as_any().downcast_ref::<CudaBackend>() else {
            // Not a GPU: run the CPU body on the emulator.
            return comm.note_kernel_result(crate::emulator::run(comm, self.name, cfg, cpu));
        };
        let f = self.function(comm, b, key, source)?;
        // Only kernels that can wait on peers, and only where ranks share a
        // GPU, must fit beside the other ranks' kernels.
        if self.peers && comm.max_ranks_on_device() > 1 {
            let blocks = u64::from(cfg.grid.0) * u64::from(cfg.grid.1) * u64::from(cfg.grid.2);
            let threads = cfg.block.0 * cfg.block.1 * cfg.block.2;
            let (limit, per_sm) = co_resident(comm, b, &f, threads, cfg.shared_mem)?;
            if blocks > u64::from(limit) {
                return Err(comm.invalid(not_co_resident(
                    self.name, comm, blocks, threads, limit, per_sm, &b.dev,
                )));
            }
        }
        params[0] = slot_u64(b.status_ptr());
        params[1] = slot_u64(comm.options().kernel_timeout_ns());
        params[2] = slot_u64(comm.rank() as u64);
        b.dev
            .launch(&f, &b.stream, &cfg, params)
            .map_err(|e| b.dev.error(comm.rank(), e))
    }

    /// The largest grid of the instantiation `key` with `block` threads and
    /// `shared_mem` bytes of dynamic shared memory per block that may be
    /// launched on `comm` (see [`Comm::co_resident_blocks`]); `None` when any
    /// grid may (no rank shares its GPU, or the emulator).
    pub fn co_resident_grid(
        &self,
        comm: &Comm,
        key: &[&str],
        block: u32,
        shared_mem: u32,
        source: &dyn Fn(&str) -> String,
    ) -> Result<Option<u32>> {
        if comm.max_ranks_on_device() == 1 {
            return Ok(None);
        }
        let Some(b) = comm.backend.as_any().downcast_ref::<CudaBackend>() else {
            return Ok(None);
        };
        let f = self.function(comm, b, key, source)?;
        Ok(Some(co_resident(comm, b, &f, block, shared_mem)?.0))
    }

    /// The loaded instantiation `key` on `b`'s device, compiled on first use.
    fn function(
        &self,
        comm: &Comm,
        b: &CudaBackend,
        key: &[&str],
        source: &dyn Fn(&str) -> String,
    ) -> Result<CudaFunction> {
        let h = fnv(key);
        let ord = b.dev.ordinal;
        let cached = self
            .fns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(HashMap::new)
            .get(&(ord, h))
            .cloned();
        let f = match cached {
            Some(f) => f,
            None => {
                let entry = format!("{}__{h:016x}", self.name);
                let src = source(&entry);
                dump(&entry, &src, b.dev.arch);
                let opts = kernel_options();
                let f = b
                    .dev
                    .function_with(comm.rank(), &entry, &src, &entry, &opts)?;
                self.fns
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert_with(HashMap::new)
                    .insert((ord, h), f.clone());
                f
            }
        };
        Ok(f)
    }
}

/// (largest co-resident grid, blocks per multiprocessor) of `f` launched
/// with `threads` per block on `comm`, whose ranks share a GPU.
fn co_resident(
    comm: &Comm,
    b: &CudaBackend,
    f: &CudaFunction,
    threads: u32,
    shared_mem: u32,
) -> Result<(u32, u32)> {
    let per_sm = b
        .dev
        .occupancy(f, threads, shared_mem)
        .map_err(|e| b.dev.error(comm.rank(), e))?;
    Ok((comm.co_resident_blocks(per_sm).unwrap_or(u32::MAX), per_sm))
}

/// Why a grid of `blocks` cannot run on a GPU that ranks share.
fn not_co_resident(
    kernel: &str,
    comm: &Comm,
    blocks: u64,
    threads: u32,
    limit: u32,
    per_sm: u32,
    dev: &crate::cuda::CudaDevice,
) -> String {
    if per_sm == 0 {
        return format!(
            "kernel `{kernel}`: the driver reports that no block of {threads} threads fits on a \
             multiprocessor of {dev:?} (too many registers or too much shared memory per block); \
             use smaller blocks"
        );
    }
    format!(
        "kernel `{kernel}`: a grid of {blocks} blocks of {threads} threads cannot be resident \
         together with the kernels of the other ranks that share {dev:?} ({} ranks on this \
         GPU, up to {} on one in this group), and kernels that wait on peers need that: \
         the GPU holds {per_sm} such blocks per multiprocessor, and each rank may use half \
         of its share (its next kernel can become resident early); launch at most {limit} \
         blocks (`{kernel}::co_resident_grid` gives this number)",
        comm.ranks_on_device(),
        comm.max_ranks_on_device()
    )
}

fn check_config(comm: &Comm, cfg: &LaunchConfig) -> Result<()> {
    let (g, b) = (cfg.grid, cfg.block);
    if [g.0, g.1, g.2, b.0, b.1, b.2].contains(&0) {
        return Err(comm.invalid(format!(
            "launch config has a zero dimension: grid {g:?}, block {b:?}"
        )));
    }
    let threads = u64::from(b.0) * u64::from(b.1) * u64::from(b.2);
    if threads > 1024 {
        return Err(comm.invalid(format!(
            "a block of {threads} threads is more than the 1024 a GPU allows"
        )));
    }
    Ok(())
}

/// Writes a kernel's CUDA C and PTX under `$SYMM_DUMP`, if set.
fn dump(entry: &str, src: &str, arch: crate::jit::Arch) {
    let Some(dir) = std::env::var_os("SYMM_DUMP") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        tracing::warn!("SYMM_DUMP: cannot create {}: {e}", dir.display());
        return;
    }
    if let Err(e) = std::fs::write(dir.join(format!("{entry}.cu")), src) {
        tracing::warn!("SYMM_DUMP: {e}");
    }
    let opts = kernel_options();
    let req = crate::jit::CompileRequest {
        kernel_name: entry,
        source: src,
        arch,
        options: &opts,
    };
    match crate::jit::JitEngine::global().compile_ptx(&req) {
        Ok(ptx) => {
            if let Err(e) = std::fs::write(dir.join(format!("{entry}.ptx")), ptx) {
                tracing::warn!("SYMM_DUMP: {e}");
            }
        }
        Err(e) => tracing::warn!("SYMM_DUMP: PTX for {entry}: {e}"),
    }
}

/// Compiles an instantiation's source to CUBIN without a GPU (CI's check that
/// every kernel compiles).
pub fn compile_check(entry: &str, src: &str, arch: crate::jit::Arch) -> Result<()> {
    dump(entry, src, arch);
    let opts = kernel_options();
    let req = crate::jit::CompileRequest {
        kernel_name: entry,
        source: src,
        arch,
        options: &opts,
    };
    crate::jit::JitEngine::global().compile(&req)?;
    Ok(())
}
