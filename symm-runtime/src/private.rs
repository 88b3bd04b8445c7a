//! Items that `#[symm_kernel]` expansions use. Not a public API: generated
//! code reaches the runtime only through `::symm::__private_<version>`.

pub use crate::comm::Comm;
pub use crate::comm::Owner;
pub use crate::dsl::device_fn::{device_sources, DeviceFn};
pub use crate::dsl::memory::DslIndex;
pub use crate::dsl::thread::assert_failed;
pub use crate::dsl::{Remote, Scalar, Shared, Slice, SliceMut, SymmBuf};
pub use crate::error::{Error, Result};
pub use crate::jit::KERNEL_OPTIONS;
pub use crate::launch::LaunchConfig;
pub use crate::memory::slice::{BoundSlice, DeviceSlice, Memory};
pub use crate::memory::symmetric::SymmetricMemory;
pub use crate::status::AssertSite;
pub use symm_abi::{SliceArg, SymmBufArg};

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

/// Largest register array a kernel may hold: a GPU thread's local memory.
pub const MAX_REGISTER_ARRAY_BYTES: usize = 512 * 1024;

/// Fails to compile, where a kernel or device function is instantiated,
/// if an array of its body is larger than [`MAX_REGISTER_ARRAY_BYTES`].
#[inline(always)]
pub fn register_array_fits<T, const N: usize>(_: &[T; N]) {
    const {
        assert!(
            std::mem::size_of::<[T; N]>() <= MAX_REGISTER_ARRAY_BYTES,
            "a register array of this kernel is larger than a GPU thread's 512 KiB of local memory; keep large data in a buffer or `shared_array`"
        )
    }
}

/// The complete CUDA C of one kernel instantiation: support code, device
/// functions, the kernel body and its `extern "C"` entry.
pub fn kernel_source(deps: &[&'static DeviceFn], body: &str, entry: &str) -> String {
    format!(
        "{}\n{}\n#undef SYMM_SITE_FN\n#define SYMM_SITE_FN 0u\n{body}\n{entry}\n",
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

/// Checks that a `&[T]` argument is memory `comm`'s rank may use, and
/// binds it to `comm`'s stream (see [`Comm::bind`]); keep the result until
/// the launch is enqueued.
pub fn slice_arg<'a, T: crate::Element, S: DeviceSlice<T> + ?Sized>(
    comm: &'a Comm,
    name: &str,
    s: &'a S,
) -> Result<BoundSlice<'a, T>> {
    comm.bind(name, s)
}

/// [`slice_arg`] for a `&mut [T]` argument, which the kernel may write.
pub fn slice_arg_mut<'a, T: crate::Element, S: DeviceSlice<T> + ?Sized>(
    comm: &'a Comm,
    name: &str,
    s: &'a mut S,
) -> Result<BoundSlice<'a, T>> {
    comm.bind_mut(name, s)
}

/// Checks a symmetric-buffer argument; returns what the kernel's `SymmBuf`
/// parameter carries (its slots and the emulator's handle are both made
/// from it).
pub fn symm_arg<T: Scalar>(comm: &Comm, name: &str, s: &SymmetricMemory) -> Result<SymmBufArg> {
    s.before_collective_use()?;
    if s.rank() != comm.rank() || s.world_size() != comm.world_size() {
        return Err(comm.invalid(format!(
            "argument `{name}` is rank {} of {}, but the launch is on rank {} of {}",
            s.rank(),
            s.world_size(),
            comm.rank(),
            comm.world_size()
        )));
    }
    if s.owner() != comm.owner_id() {
        return Err(comm.invalid(format!(
            "argument `{name}` is symmetric memory of group {}, and this launch runs on group \
             {}: symmetric memory maps its own group's ranks only (pass it as a `&[T]`, or \
             copy it into this group's memory)",
            s.group_label(),
            comm.group_label()
        )));
    }
    if s.dtype() != T::DTYPE {
        return Err(comm.invalid(format!(
            "argument `{name}` holds {}, but the kernel expects {}",
            s.dtype(),
            T::DTYPE
        )));
    }
    Ok(s.abi_arg(std::mem::size_of::<T>()))
}

/// The CPU body's view of a symmetric-buffer argument.
///
/// # Safety
///
/// `a` must come from [`symm_arg`] (or the runtime's own fill) of a
/// `SymmetricMemory` that outlives every use of the handle (the launcher
/// uses it only inside the launch, which borrows the memory).
pub unsafe fn symm_handle<T: Scalar>(a: SymmBufArg) -> SymmBuf<T> {
    // SAFETY: a rendezvoused SymmetricMemory holds device-visible tables of
    // every rank's buffer and pad, mapped for as long as it lives, and the
    // caller keeps it alive while the handle is used (the emulator runs
    // the kernel to completion inside the launch).
    unsafe { SymmBuf::__from_abi(a) }
}

/// Number of leading parameter slots the runtime fills (see
/// [`symm_abi::HIDDEN`]).
pub const HIDDEN_SLOTS: usize = symm_abi::KernelCtx::SLOTS;

/// One `#[symm_kernel]`: the static that its launcher goes through. Its
/// address names the kernel's compiled instantiations on each device.
pub struct KernelDef {
    name: &'static str,
    /// Whether the kernel takes a `SymmBuf`, so it may wait on peers, which
    /// ranks sharing a GPU can do only with grids that fit together.
    peers: bool,
    /// The file that defines the kernel, and the line of its name (which
    /// the lines its indexing sites record are relative to).
    file: &'static str,
    line: u32,
    /// Its `kernel_assert!`s, in the order its CUDA C numbers them.
    asserts: &'static [AssertSite],
    /// The device functions it calls (directly or not), for the places of
    /// their indexing sites.
    deps: fn() -> Vec<&'static DeviceFn>,
    /// Parameter slots of its CUDA entry: a launch must fill exactly these.
    slots: usize,
    /// `#[symm_kernel(max_threads = N)]`'s N (its entry's
    /// `__launch_bounds__`), or 0: no block of the kernel has more threads.
    max_threads: u32,
}

/// Hash of an instantiation's generic arguments.
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Whether `SYMM_CHECK_ALL=1` asks for bounds checks in unchecked launches
/// too (GPU validation runs prove built-in kernels in bounds with it).
fn check_all() -> bool {
    static ALL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALL.get_or_init(|| std::env::var("SYMM_CHECK_ALL").is_ok_and(|v| v == "1"))
}

impl KernelDef {
    /// Kernel `name`, which takes a `SymmBuf` if `peers`, defined in `file`
    /// with its name at `line` and the assertions `asserts`, calling the
    /// device functions `deps` lists, whose entry has `slots` parameter
    /// slots.
    pub const fn new(
        name: &'static str,
        peers: bool,
        file: &'static str,
        line: u32,
        asserts: &'static [AssertSite],
        deps: fn() -> Vec<&'static DeviceFn>,
        slots: usize,
    ) -> KernelDef {
        KernelDef {
            name,
            peers,
            file,
            line,
            asserts,
            deps,
            slots,
            max_threads: 0,
        }
    }

    /// This kernel, compiled for blocks of at most `n` threads
    /// (`#[symm_kernel(max_threads = n)]`): a launch with larger blocks is
    /// refused.
    pub const fn with_max_threads(self, n: u32) -> KernelDef {
        KernelDef {
            max_threads: n,
            ..self
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Identifies this kernel among all kernels of the process.
    pub(crate) fn id(&'static self) -> usize {
        self as *const KernelDef as usize
    }

    /// The id an instantiation records with an index out of bounds or a
    /// failed assertion: a hash of the kernel's name, file and generic
    /// arguments, so that its source, and NVRTC's disk cache, are the same in
    /// every process (and for its checked and unchecked forms, whose sites
    /// are the same).
    fn fault_id(&self, key: &[&str]) -> u32 {
        let mut parts = vec![self.name, self.file];
        parts.extend_from_slice(key);
        let h = fnv(&parts);
        (h ^ (h >> 32)) as u32
    }

    /// The complete CUDA C of instantiation `key`, with bounds checks if
    /// `checked`: what `source` gives, after the `#define`s that select
    /// them. Its id is registered, for the report of its faults and failed
    /// assertions (which unchecked instantiations record too).
    fn instantiation(
        &self,
        key: &[&str],
        checked: bool,
        source: &dyn Fn(&str) -> String,
        entry: &str,
    ) -> String {
        let id = self.fault_id(key);
        let mut functions = vec![crate::status::SiteFunction {
            name: self.name,
            file: self.file,
            line: self.line,
            asserts: self.asserts,
        }];
        functions.extend(
            crate::dsl::device_fn::device_fns(&(self.deps)())
                .iter()
                .map(|f| crate::status::SiteFunction {
                    name: f.name,
                    file: f.file,
                    line: f.line,
                    asserts: f.asserts,
                }),
        );
        crate::status::register_kernel(
            id,
            crate::status::KernelSites {
                kernel: self.name,
                functions,
            },
        );
        format!(
            "#define SYMM_CHECKED {}\n#define SYMM_KERNEL_ID {id}u\n{}",
            u8::from(checked),
            source(entry)
        )
    }

    /// Refuses blocks of more `threads` than `#[symm_kernel(max_threads)]`
    /// compiled the kernel for.
    fn check_block(&self, comm: &Comm, threads: u64) -> Result<()> {
        if self.max_threads != 0 && threads > u64::from(self.max_threads) {
            return Err(comm.invalid(format!(
                "kernel `{}`: a block of {threads} threads, but it is compiled for at most {} \
                 (`#[symm_kernel(max_threads = {})]`)",
                self.name, self.max_threads, self.max_threads
            )));
        }
        Ok(())
    }

    /// Runs `f` with the backend's view of instantiation `key` (checked or
    /// not), whose source comes from `source`.
    fn with_spec<R>(
        &'static self,
        key: &[&str],
        checked: bool,
        source: &dyn Fn(&str) -> String,
        cpu: &dyn Fn(),
        f: impl FnOnce(&crate::backend::KernelSpec<'_>) -> R,
    ) -> R {
        let full = |entry: &str| self.instantiation(key, checked, source, entry);
        f(&crate::backend::KernelSpec {
            name: self.name,
            id: (self.id(), fnv(key)),
            checked,
            peers: self.peers,
            max_threads: self.max_threads,
            source: &full,
            cpu,
        })
    }

    /// Launches the instantiation named by `key` (its generic arguments)
    /// with every index bounds-checked, compiling `source(entry)` the first
    /// time on each device; the emulator runs `cpu` instead.
    ///
    /// # Safety
    ///
    /// `source` must be this kernel's CUDA C, and `params` its entry's
    /// parameters packed by the kernel ABI from arguments the launcher
    /// checked (every address valid for its length, on this rank); `cpu`
    /// must be its body over the same arguments.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch(
        &'static self,
        comm: &Comm,
        key: &[&str],
        cfg: LaunchConfig,
        params: &mut [[u8; 8]],
        source: &dyn Fn(&str) -> String,
        cpu: &dyn Fn(),
    ) -> Result<()> {
        self.launch_as(true, comm, key, cfg, params, source, cpu)
    }

    /// [`Self::launch`] without bounds checks on the GPU (unless
    /// `SYMM_CHECK_ALL=1`; the emulator checks every index either way).
    ///
    /// # Safety
    ///
    /// As for [`Self::launch`]; and every index the kernel computes from
    /// `params` must be in bounds.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch_unchecked(
        &'static self,
        comm: &Comm,
        key: &[&str],
        cfg: LaunchConfig,
        params: &mut [[u8; 8]],
        source: &dyn Fn(&str) -> String,
        cpu: &dyn Fn(),
    ) -> Result<()> {
        self.launch_as(check_all(), comm, key, cfg, params, source, cpu)
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_as(
        &'static self,
        checked: bool,
        comm: &Comm,
        key: &[&str],
        cfg: LaunchConfig,
        params: &mut [[u8; 8]],
        source: &dyn Fn(&str) -> String,
        cpu: &dyn Fn(),
    ) -> Result<()> {
        comm.one_domain(|| format!("kernel `{}`", self.name))?;
        check_config(comm, &cfg)?;
        let b = cfg.block;
        self.check_block(comm, u64::from(b.0) * u64::from(b.1) * u64::from(b.2))?;
        if params.len() != self.slots {
            return Err(comm.invalid(format!(
                "kernel `{}`: {} parameter slots for an entry of {}",
                self.name,
                params.len(),
                self.slots
            )));
        }
        let r = self.with_spec(key, checked, source, cpu, |spec| {
            comm.backend.launch(spec, &cfg, params, &comm.launch_ctx())
        });
        comm.note_kernel_result(r)
    }

    /// The largest grid of the instantiation `key` (checked or not) with
    /// `block` threads and `shared_mem` bytes of dynamic shared memory per
    /// block that may be launched on `comm` (see
    /// [`Comm::co_resident_blocks`]); `None` when any grid may (no rank
    /// shares its GPU, or the emulator).
    pub fn co_resident_grid(
        &'static self,
        comm: &Comm,
        key: &[&str],
        checked: bool,
        block: u32,
        shared_mem: u32,
        source: &dyn Fn(&str) -> String,
    ) -> Result<Option<u32>> {
        self.check_block(comm, u64::from(block))?;
        let checked = checked || check_all();
        self.with_spec(key, checked, source, &|| {}, |spec| {
            comm.backend
                .co_resident_grid(spec, block, shared_mem, &comm.launch_ctx())
        })
    }

    /// Compiles the instantiation `key` (checked or not) to CUBIN without a
    /// GPU (CI's check that every kernel compiles).
    pub fn compile_check(
        &self,
        key: &[&str],
        checked: bool,
        source: &dyn Fn(&str) -> String,
        arch: crate::jit::Arch,
    ) -> Result<()> {
        let entry = crate::backend::entry_name(self.name, fnv(key), checked);
        let src = self.instantiation(key, checked, source, &entry);
        let opts = crate::jit::check_options();
        let req = crate::jit::CompileRequest {
            kernel_name: &entry,
            source: &src,
            arch,
            options: &opts,
        };
        // One arch's files only: `check_kernels!` compiles the arches at
        // once, and the dump's names do not carry the arch.
        if arch == crate::jit::CHECK_ARCHES[0] {
            crate::jit::dump(&req);
        }
        crate::jit::JitEngine::global().compile(&req)?;
        Ok(())
    }
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

/// One kernel instantiation that a `check_kernels!` test compiles.
pub struct KernelCheck {
    /// The instantiation as the user wrote it (`ring::<f32>`).
    pub name: &'static str,
    /// Its `compile_for` (as `launch_unchecked` runs it).
    pub unchecked: fn(crate::jit::Arch) -> Result<()>,
    /// Its `compile_checked_for` (as `launch` runs it).
    pub checked: fn(crate::jit::Arch) -> Result<()>,
}

/// The body of a `check_kernels!` test: compiles every instantiation for
/// each of [`crate::jit::CHECK_ARCHES`], the first with bounds checks and
/// without, the others without (the bounds checks add only comparisons
/// and a call, the same on every arch, so what an older arch lacks shows
/// in the unchecked variant, at three compiles a kernel instead of four),
/// and panics with one message that names each one NVRTC rejected. Without
/// NVRTC it fails, or skips as [`crate::jit::require_nvrtc`] says; `test`
/// names the test in that message.
#[track_caller]
pub fn check_kernels(test: &str, kernels: &[KernelCheck]) {
    let what = match kernels {
        [k] => format!("kernel `{}` (test `{test}`)", k.name),
        _ => format!("{} kernel instantiations (test `{test}`)", kernels.len()),
    };
    if !crate::jit::require_nvrtc(&what) {
        return;
    }
    if let Some(report) = kernel_failures(kernels) {
        panic!("{report}");
    }
}

/// The report of every instantiation of `kernels` that fails to compile,
/// or `None` when all compile.
fn kernel_failures(kernels: &[KernelCheck]) -> Option<String> {
    // Every (kernel, arch, variant) compile, in report order.
    let first = crate::jit::CHECK_ARCHES[0];
    let jobs: Vec<(usize, crate::jit::Arch, bool)> = (0..kernels.len())
        .flat_map(|k| {
            crate::jit::CHECK_ARCHES.into_iter().flat_map(move |arch| {
                [(k, arch, false)]
                    .into_iter()
                    .chain((arch == first).then_some((k, arch, true)))
            })
        })
        .collect();
    let results = compile_all(kernels, &jobs);
    let mut failed = Vec::new();
    for (ki, k) in kernels.iter().enumerate() {
        // The first error in full; the other failing variants by name (their
        // logs differ only in the entry's name and the arch).
        let mut first: Option<(String, Error)> = None;
        let mut others = Vec::new();
        for (job, result) in jobs.iter().zip(&results) {
            let &(kj, arch, checked) = job;
            if kj != ki {
                continue;
            }
            if let Some(Err(e)) = result.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let variant = format!("{arch}, {}", variant_name(checked));
                match first {
                    None => first = Some((variant, e)),
                    Some(_) => others.push(variant),
                }
            }
        }
        if let Some((variant, e)) = first {
            let also = if others.is_empty() {
                String::new()
            } else {
                format!("; also {}", others.join(", "))
            };
            let log = e.to_string().replace('\n', "\n    ");
            failed.push(format!("`{}` ({variant}{also}):\n    {log}", k.name));
        }
    }
    if failed.is_empty() {
        return None;
    }
    let others: Vec<String> = crate::jit::CHECK_ARCHES[1..]
        .iter()
        .map(|a| a.to_string())
        .collect();
    Some(format!(
        "NVRTC rejected {} of {} kernel instantiation(s) (each compiled for {}, \
         bounds-checked and unchecked, and for {} unchecked):\n\n{}",
        failed.len(),
        kernels.len(),
        first,
        others.join(" and "),
        failed.join("\n\n")
    ))
}

/// Runs every compile of `jobs` on all the machine's cores (NVRTC takes
/// a fifth of a second or more per kernel, and a crate checks hundreds),
/// each result at its job's index.
fn compile_all(
    kernels: &[KernelCheck],
    jobs: &[(usize, crate::jit::Arch, bool)],
) -> Vec<std::sync::Mutex<Option<Result<()>>>> {
    let results: Vec<_> = jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(k, arch, checked)) = jobs.get(i) else {
                    break;
                };
                let k = &kernels[k];
                let r = if checked {
                    (k.checked)(arch)
                } else {
                    (k.unchecked)(arch)
                };
                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    results
}

fn variant_name(checked: bool) -> &'static str {
    if checked {
        "checked (launch)"
    } else {
        "unchecked (launch_unchecked)"
    }
}

#[cfg(test)]
mod version_tests {
    /// The module's name follows the crate's version, as the macro writes
    /// it: bumping the version means renaming the module too.
    #[test]
    fn the_private_module_is_named_after_the_version() {
        let want = format!(
            "__private_{}",
            env!("CARGO_PKG_VERSION").replace(['.', '-', '+'], "_")
        );
        assert_eq!(want, "__private_0_1_0");
        assert!(
            module_path!().contains(&format!("::{want}::")),
            "{}",
            module_path!()
        );
    }
}

#[cfg(test)]
mod check_kernels_tests {
    use super::*;
    use crate::jit::{Arch, JitError};

    fn ok(_: Arch) -> Result<()> {
        Ok(())
    }

    /// Fails for sm_80 only, as NVRTC would, naming the arch.
    fn sm80_fails(a: Arch) -> Result<()> {
        if a.major == 8 {
            return Err(Error::Jit(JitError::InvalidRequest(format!(
                "no {a}\nsecond line"
            ))));
        }
        Ok(())
    }

    /// The report names each failing instantiation once, with its first
    /// error in full (indented) and its other failing variants; a checked
    /// variant is compiled for the first arch only.
    #[test]
    fn the_report_names_each_rejected_instantiation() {
        let ks = [
            KernelCheck {
                name: "good",
                unchecked: ok,
                checked: ok,
            },
            KernelCheck {
                name: "bad::<f32>",
                unchecked: sm80_fails,
                checked: sm80_fails,
            },
            KernelCheck {
                name: "bad_checked",
                unchecked: ok,
                checked: sm80_fails,
            },
        ];
        assert_eq!(kernel_failures(&ks[..1]), None);
        assert_eq!(
            kernel_failures(&ks).as_deref(),
            Some(
                "NVRTC rejected 1 of 3 kernel instantiation(s) (each compiled for sm_90, \
                 bounds-checked and unchecked, and for sm_80 unchecked):\n\n\
                 `bad::<f32>` (sm_80, unchecked (launch_unchecked)):\n    \
                 invalid compile request: no sm_80\n    second line"
            )
        );
    }
}
