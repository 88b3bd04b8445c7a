//! Runtime compilation of CUDA C to CUBIN with NVRTC, behind a memory cache
//! and a content-addressed disk cache.
//!
//! NVRTC is loaded dynamically (through cudarc) on first use, so a machine
//! without it can still run everything that does not compile kernels; every
//! entry point reports a missing library as [`JitError::NvrtcMissing`].
//!
//! Kernels are compiled to a CUBIN for the exact architecture of the device
//! rather than to PTX: the driver then has nothing left to JIT at load time,
//! and ptxas errors (for example in inline PTX) surface here, with the
//! kernel's name, instead of as an opaque module load failure.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use cudarc::nvrtc::sys;
use sha2::{Digest, Sha256};

/// Environment variable that selects the disk cache directory of
/// [`JitEngine::global`]; the value `off` disables the disk cache.
pub const CACHE_DIR_ENV: &str = "SYMM_CACHE_DIR";

/// Version of the disk entry layout and of the cache key derivation; bumping
/// it orphans every existing entry.
pub const CACHE_FORMAT_VERSION: u32 = 1;

const ENTRY_MAGIC: [u8; 8] = *b"SYMMJIT\0";
/// magic, format version (u32), payload length (u64), sha256 of the payload.
const ENTRY_HEADER_LEN: usize = 8 + 4 + 8 + 32;
const ENTRY_EXTENSION: &str = "symmjit";

/// Caps the source excerpts in a compile error: a single typo in generated
/// code can cascade into dozens of errors, and the first few locate it.
const MAX_ERROR_EXCERPTS: usize = 8;
const EXCERPT_CONTEXT_LINES: usize = 2;

/// GPU architecture, e.g. sm_90.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arch {
    /// Compute capability major version.
    pub major: u32,
    /// Compute capability minor version.
    pub minor: u32,
}

impl Arch {
    /// Architecture with the given compute capability.
    pub const fn new(major: u32, minor: u32) -> Arch {
        Arch { major, minor }
    }

    /// Architecture from a compute capability as the CUDA driver reports it.
    ///
    /// Negative values (never reported by a real device) map to 0, which
    /// NVRTC then rejects with an error rather than this function panicking.
    pub fn from_compute_capability(major: i32, minor: i32) -> Arch {
        Arch {
            major: u32::try_from(major).unwrap_or(0),
            minor: u32::try_from(minor).unwrap_or(0),
        }
    }

    /// Name of the real architecture, e.g. `sm_90`.
    pub fn sm_name(&self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }

    /// Name of the matching virtual architecture, e.g. `compute_90`.
    pub fn compute_name(&self) -> String {
        format!("compute_{}{}", self.major, self.minor)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.major, self.minor)
    }
}

/// One kernel to compile.
#[derive(Clone, Copy, Debug)]
pub struct CompileRequest<'a> {
    /// Name of the kernel; also names the NVRTC program (`<kernel_name>.cu`),
    /// so compiler diagnostics point at it.
    pub kernel_name: &'a str,
    /// Complete CUDA C source, prelude included.
    pub source: &'a str,
    /// Architecture to generate code for.
    pub arch: Arch,
    /// Extra NVRTC options, passed after [`base_options`]; they may not set
    /// the architecture (`--gpu-architecture`, `-arch`).
    pub options: &'a [String],
}

/// Where a compiled kernel came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheHit {
    /// Already compiled by this engine in this process.
    Memory,
    /// Read from the disk cache.
    Disk,
    /// Compiled by NVRTC just now.
    Compiled,
}

/// A kernel compiled to a CUBIN.
pub struct Compiled {
    /// Name of the kernel, as in the request.
    pub kernel_name: String,
    /// Architecture the CUBIN targets.
    pub arch: Arch,
    /// The CUBIN (an ELF image), ready for `cuModuleLoadData`.
    pub cubin: Vec<u8>,
    /// NVRTC's warnings, possibly empty. Empty for disk cache hits: the
    /// warnings were reported when the entry was first compiled.
    pub log: String,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The CUBIN itself is thousands of bytes of noise in a debug dump.
        f.debug_struct("Compiled")
            .field("kernel_name", &self.kernel_name)
            .field("arch", &self.arch)
            .field("cubin_len", &self.cubin.len())
            .field("log", &self.log)
            .finish()
    }
}

/// Errors of the JIT engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JitError {
    /// The NVRTC shared library could not be loaded.
    #[error(
        "NVRTC is not available ({detail}). Install the `nvidia-cuda-nvrtc` 13.x \
         package from PyPI (`pip install \"nvidia-cuda-nvrtc>=13,<14\"`) and put its \
         `nvidia/cu13/lib` directory on LD_LIBRARY_PATH, or install the CUDA toolkit"
    )]
    NvrtcMissing {
        /// What went wrong while loading the library.
        detail: String,
    },
    /// NVRTC rejected the source.
    #[error("NVRTC failed to compile kernel `{kernel_name}` for {arch}:\n{log}\n{excerpt}")]
    Compile {
        /// Name of the kernel.
        kernel_name: String,
        /// Architecture it was compiled for.
        arch: Arch,
        /// NVRTC's full log.
        log: String,
        /// Source lines around each error of the log, numbered, with the
        /// offending line marked by `>`.
        excerpt: String,
    },
    /// An NVRTC call failed for a reason other than a compile error, e.g. an
    /// invalid option.
    #[error("NVRTC call {call} failed with {code:?}{context}")]
    Nvrtc {
        /// The failing NVRTC function.
        call: &'static str,
        /// Its status code.
        code: sys::nvrtcResult,
        /// Kernel, architecture and NVRTC's log, when there are any.
        context: String,
    },
    /// NVRTC succeeded but produced no CUBIN, which happens when the options
    /// ask for LTO IR (`-dlto`) instead of machine code.
    #[error("NVRTC produced no CUBIN for kernel `{kernel_name}` ({arch}); do the options request LTO IR (-dlto)?")]
    NoCubin {
        /// Name of the kernel.
        kernel_name: String,
        /// Architecture requested.
        arch: Arch,
    },
    /// The request cannot be passed to NVRTC, e.g. it contains a NUL byte.
    #[error("invalid compile request: {0}")]
    InvalidRequest(String),
}

/// Options passed to NVRTC before the caller's.
///
/// `-default-device` is deliberately absent: the prelude and generated code
/// annotate every function, so a function that lacks `__device__` is a bug
/// that NVRTC should report ("calling a __host__ function from a __global__
/// function") rather than silently compile. `--use_fast_math` is absent
/// because reductions must match a reference implementation bit for bit
/// where possible; callers opt in through their own options.
pub fn base_options(target: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={target}"),
        // C++20: the macro writes `SYMM_TY(e)` of block and `if` values,
        // lambdas, which C++17 forbids in `decltype`.
        "--std=c++20".to_string(),
    ]
}

/// Whether the NVRTC shared library can be loaded. Never panics.
pub fn nvrtc_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // SAFETY: is_culib_present only tries to dlopen the candidate NVRTC
        // library names, which is what any later NVRTC call would do anyway.
        panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
    })
}

/// Environment variable: `1` lets [`require_nvrtc`] (the tests that
/// `check_kernels!` writes, and symm's own NVRTC tests) skip, with a
/// `SKIPPED` line, where NVRTC cannot be loaded, instead of failing.
pub const SKIP_NVRTC_ENV: &str = "SYMM_SKIP_NVRTC";

/// Environment variable: `1` makes a missing NVRTC fail [`require_nvrtc`]
/// even where [`SKIP_NVRTC_ENV`] is set (CI sets it, so nothing there can
/// skip by accident).
pub const REQUIRE_NVRTC_ENV: &str = "SYMM_REQUIRE_NVRTC";

/// The architectures `check_kernels!` compiles every kernel for: sm_90
/// (Hopper), bounds-checked and unchecked, and sm_80 (Ampere, the oldest
/// that symm's device code targets), unchecked.
pub const CHECK_ARCHES: [Arch; 2] = [Arch::new(9, 0), Arch::new(8, 0)];

/// For tests that need NVRTC: whether `what` (the things the test
/// compiles, named in the messages) can be compiled here.
///
/// Returns `true` when NVRTC loads. When it does not, and `SYMM_SKIP_NVRTC=1`
/// is set (and `SYMM_REQUIRE_NVRTC=1` is not), writes a `SKIPPED` line
/// straight to the process's stderr, which the test harness does not
/// capture, so it shows even when the test passes, and returns `false`.
///
/// # Panics
///
/// When NVRTC cannot be loaded and skipping was not asked for, with a
/// message that says how to install NVRTC or skip.
#[track_caller]
pub fn require_nvrtc(what: &str) -> bool {
    let available = nvrtc_available();
    let flag = |name| std::env::var(name).is_ok_and(|v| v == "1");
    match nvrtc_decision(
        available,
        flag(SKIP_NVRTC_ENV),
        flag(REQUIRE_NVRTC_ENV),
        what,
        || {
            ensure_nvrtc()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        },
    ) {
        Ok(None) => true,
        Ok(Some(skipped)) => {
            // Past libtest's capture of `eprint!`, so a passing test shows it.
            let _ = io::stderr().lock().write_all(skipped.as_bytes());
            false
        }
        Err(msg) => panic!("{msg}"),
    }
}

/// [`require_nvrtc`]'s decision: `Ok(None)` to run, `Ok(Some(line))` to
/// skip saying `line`, or the failure message; `missing` describes the load
/// failure.
fn nvrtc_decision(
    available: bool,
    skip: bool,
    require: bool,
    what: &str,
    missing: impl FnOnce() -> String,
) -> Result<Option<String>, String> {
    if available {
        return Ok(None);
    }
    if skip && !require {
        return Ok(Some(format!(
            "SKIPPED: NVRTC not found ({SKIP_NVRTC_ENV}=1); {what} not compiled with NVRTC\n"
        )));
    }
    let why = if skip {
        format!(" ({REQUIRE_NVRTC_ENV}=1 overrides {SKIP_NVRTC_ENV}=1)")
    } else {
        format!("; set {SKIP_NVRTC_ENV}=1 to skip these tests instead")
    };
    Err(format!("{what} cannot be compiled: {}{why}", missing()))
}

/// NVRTC's version as (major, minor). Never panics.
pub fn nvrtc_version() -> Result<(i32, i32), JitError> {
    static VERSION: OnceLock<(i32, i32)> = OnceLock::new();
    if let Some(version) = VERSION.get() {
        return Ok(*version);
    }
    ensure_nvrtc()?;
    let version = guard_panics(|| {
        let mut major: c_int = 0;
        let mut minor: c_int = 0;
        // SAFETY: both pointers refer to live, writable c_ints.
        let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
        check(status, "nvrtcVersion", String::new)?;
        Ok((major, minor))
    })?;
    Ok(*VERSION.get_or_init(|| version))
}

/// Disk cache directory of [`JitEngine::global`]: `$SYMM_CACHE_DIR` if set
/// (`off` disables the disk cache), else `<user cache dir>/symm/jit`.
pub fn default_disk_dir() -> Option<PathBuf> {
    match std::env::var_os(CACHE_DIR_ENV) {
        Some(value) if value.eq_ignore_ascii_case("off") => None,
        Some(value) if !value.is_empty() => Some(PathBuf::from(value)),
        _ => dirs::cache_dir().map(|dir| dir.join("symm").join("jit")),
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct MemoryKey {
    source_sha256: [u8; 32],
    options: Vec<String>,
    arch: Arch,
    kernel_name: String,
}

impl MemoryKey {
    fn new(req: &CompileRequest) -> MemoryKey {
        MemoryKey {
            source_sha256: Sha256::digest(req.source.as_bytes()).into(),
            options: req.options.to_vec(),
            arch: req.arch,
            kernel_name: req.kernel_name.to_string(),
        }
    }
}

/// Compiles kernels with NVRTC and caches the CUBINs in memory and on disk.
///
/// The disk cache needs no invalidation: an entry's name is a hash of
/// everything that determines its content (source, options, architecture,
/// NVRTC version, entry format), and entries are never evicted.
pub struct JitEngine {
    disk_dir: Option<PathBuf>,
    memory: Mutex<HashMap<MemoryKey, Arc<Compiled>>>,
}

impl fmt::Debug for JitEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JitEngine")
            .field("disk_dir", &self.disk_dir)
            .field("memory_entries", &self.lock_memory().len())
            .finish()
    }
}

impl JitEngine {
    /// Process-wide engine; its disk cache directory is [`default_disk_dir`]
    /// as of the first call.
    pub fn global() -> &'static JitEngine {
        static GLOBAL: OnceLock<JitEngine> = OnceLock::new();
        GLOBAL.get_or_init(|| JitEngine::new(default_disk_dir()))
    }

    /// Engine caching on disk under `disk_dir`, or only in memory if `None`.
    /// The directory is created on the first write.
    pub fn new(disk_dir: Option<PathBuf>) -> JitEngine {
        JitEngine {
            disk_dir,
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// The disk cache directory, if any.
    pub fn disk_dir(&self) -> Option<&Path> {
        self.disk_dir.as_deref()
    }

    /// Forgets every kernel compiled or loaded so far; the disk cache stays.
    pub fn clear_memory_cache(&self) {
        self.lock_memory().clear();
    }

    /// Path of the disk cache entry for `req`, or `None` without a disk
    /// cache. Needs NVRTC, whose version is part of the entry's name.
    pub fn disk_entry_path(&self, req: &CompileRequest) -> Result<Option<PathBuf>, JitError> {
        let Some(dir) = &self.disk_dir else {
            return Ok(None);
        };
        validate(req)?;
        let options = full_options(&req.arch.sm_name(), req.options);
        let name = disk_entry_name(req, &options, nvrtc_version()?);
        Ok(Some(dir.join(name)))
    }

    /// Compiles `req` to a CUBIN, or returns the cached one.
    ///
    /// Identical requests to one engine return the same `Arc`. Two threads
    /// racing on a new request may both compile it; the disk entry stays
    /// valid because each writes a private temporary file and renames it.
    pub fn compile(&self, req: &CompileRequest) -> Result<(Arc<Compiled>, CacheHit), JitError> {
        validate(req)?;
        let key = MemoryKey::new(req);
        if let Some(hit) = self.lock_memory().get(&key) {
            return Ok((Arc::clone(hit), CacheHit::Memory));
        }

        let options = full_options(&req.arch.sm_name(), req.options);
        let entry_path = match &self.disk_dir {
            Some(dir) => Some(dir.join(disk_entry_name(req, &options, nvrtc_version()?))),
            None => None,
        };

        if let Some(path) = &entry_path {
            if let Some(cubin) = read_entry(path) {
                tracing::debug!(
                    kernel = req.kernel_name,
                    arch = %req.arch,
                    path = %path.display(),
                    "JIT disk cache hit"
                );
                let compiled = Compiled {
                    kernel_name: req.kernel_name.to_string(),
                    arch: req.arch,
                    cubin,
                    log: String::new(),
                };
                return Ok((self.insert(key, compiled), CacheHit::Disk));
            }
        }

        let start = Instant::now();
        let output = run_nvrtc(req, &options, Output::Cubin)?;
        tracing::debug!(
            kernel = req.kernel_name,
            arch = %req.arch,
            elapsed_ms = start.elapsed().as_secs_f64() * 1e3,
            cubin_bytes = output.code.len(),
            "NVRTC compiled kernel"
        );
        if output.code.is_empty() {
            return Err(JitError::NoCubin {
                kernel_name: req.kernel_name.to_string(),
                arch: req.arch,
            });
        }

        if let (Some(dir), Some(path)) = (&self.disk_dir, &entry_path) {
            if let Err(err) = write_entry(dir, path, &output.code) {
                tracing::warn!(
                    path = %path.display(),
                    error = %err,
                    "could not write JIT disk cache entry; continuing without it"
                );
            }
        }

        let compiled = Compiled {
            kernel_name: req.kernel_name.to_string(),
            arch: req.arch,
            cubin: output.code,
            log: output.log,
        };
        Ok((self.insert(key, compiled), CacheHit::Compiled))
    }

    /// Compiles `req` to PTX for the virtual architecture `compute_XY`, for
    /// inspection (e.g. dumps). Nothing is cached.
    pub fn compile_ptx(&self, req: &CompileRequest) -> Result<String, JitError> {
        validate(req)?;
        let options = full_options(&req.arch.compute_name(), req.options);
        let start = Instant::now();
        let output = run_nvrtc(req, &options, Output::Ptx)?;
        tracing::debug!(
            kernel = req.kernel_name,
            arch = %req.arch,
            elapsed_ms = start.elapsed().as_secs_f64() * 1e3,
            "NVRTC generated PTX"
        );
        // NVRTC counts the terminating NUL in the PTX size.
        let end = output
            .code
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(output.code.len());
        Ok(String::from_utf8_lossy(&output.code[..end]).into_owned())
    }

    fn lock_memory(&self) -> MutexGuard<'_, HashMap<MemoryKey, Arc<Compiled>>> {
        // A panic while holding the lock cannot leave the map half-updated
        // (only whole inserts and lookups happen under it), so poisoning is
        // safe to ignore.
        self.memory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps the first entry if another thread got there meanwhile, so that
    /// every caller shares one `Arc` per key.
    fn insert(&self, key: MemoryKey, compiled: Compiled) -> Arc<Compiled> {
        Arc::clone(
            self.lock_memory()
                .entry(key)
                .or_insert_with(|| Arc::new(compiled)),
        )
    }
}

/// Options every `#[symm_kernel]` is compiled with. `--fmad=false` because
/// Rust never contracts `a * b + c` into an FMA, and the GPU must compute
/// what the emulator computes.
pub const KERNEL_OPTIONS: &[&str] = &["--fmad=false"];

/// [`KERNEL_OPTIONS`] as a [`CompileRequest`] takes them.
pub(crate) fn kernel_options() -> Vec<String> {
    KERNEL_OPTIONS.iter().map(|s| s.to_string()).collect()
}

/// The options of a compile check (`check_kernels!`), whose CUBIN is never
/// launched: [`KERNEL_OPTIONS`] with NVRTC's fast-compile level at its
/// maximum where NVRTC has it (13.0 on), which lightens the optimiser's
/// work (about 40% less time per kernel). Every stage still runs (the C++
/// front end, NVVM and ptxas), so what the check exists for, C++ that NVRTC
/// rejects or an instruction the arch lacks, is found as before; a limit
/// that depends on the optimisation level (registers, local memory) may
/// come out differently than at launch.
pub(crate) fn check_options() -> Vec<String> {
    let mut opts = kernel_options();
    if nvrtc_version().is_ok_and(|(major, _)| major >= 13) {
        opts.push("--Ofast-compile=max".to_string());
    }
    opts
}

/// Writes `req`'s CUDA C and PTX under `$SYMM_DUMP`, if it is set (for
/// reading what a kernel became; failures only warn).
pub(crate) fn dump(req: &CompileRequest) {
    let Some(dir) = std::env::var_os("SYMM_DUMP") else {
        return;
    };
    let dir = PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        tracing::warn!("SYMM_DUMP: cannot create {}: {e}", dir.display());
        return;
    }
    let entry = req.kernel_name;
    if let Err(e) = std::fs::write(dir.join(format!("{entry}.cu")), req.source) {
        tracing::warn!("SYMM_DUMP: {e}");
    }
    match JitEngine::global().compile_ptx(req) {
        Ok(ptx) => {
            if let Err(e) = std::fs::write(dir.join(format!("{entry}.ptx")), ptx) {
                tracing::warn!("SYMM_DUMP: {e}");
            }
        }
        Err(e) => tracing::warn!("SYMM_DUMP: PTX for {entry}: {e}"),
    }
}

fn full_options(target: &str, extra: &[String]) -> Vec<String> {
    let mut options = base_options(target);
    options.extend(extra.iter().cloned());
    options
}

fn validate(req: &CompileRequest) -> Result<(), JitError> {
    if req.kernel_name.is_empty() {
        return Err(JitError::InvalidRequest("empty kernel name".into()));
    }
    if req.kernel_name.contains('\0') {
        return Err(JitError::InvalidRequest(format!(
            "kernel name {:?} contains a NUL byte",
            req.kernel_name
        )));
    }
    if req.source.contains('\0') {
        return Err(JitError::InvalidRequest(format!(
            "source of kernel `{}` contains a NUL byte",
            req.kernel_name
        )));
    }
    // NVRTC lets the last architecture option win, which would silently
    // produce code for an arch other than `req.arch` (and cache it under
    // the wrong key).
    if let Some(option) = req
        .options
        .iter()
        .find(|o| o.starts_with("--gpu-architecture") || o.starts_with("-arch"))
    {
        return Err(JitError::InvalidRequest(format!(
            "option {option:?} of kernel `{}` sets the architecture; use CompileRequest::arch",
            req.kernel_name
        )));
    }
    if let Some(option) = req.options.iter().find(|o| o.contains('\0')) {
        return Err(JitError::InvalidRequest(format!(
            "option {option:?} of kernel `{}` contains a NUL byte",
            req.kernel_name
        )));
    }
    Ok(())
}

fn ensure_nvrtc() -> Result<(), JitError> {
    if nvrtc_available() {
        return Ok(());
    }
    let search_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    Err(JitError::NvrtcMissing {
        detail: format!("could not load libnvrtc; LD_LIBRARY_PATH={search_path:?}"),
    })
}

/// cudarc panics when a symbol cannot be resolved (e.g. an NVRTC too old
/// for a function); that must become an error, not unwind into the caller.
fn guard_panics<T>(f: impl FnOnce() -> Result<T, JitError>) -> Result<T, JitError> {
    panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let detail = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "NVRTC binding panicked".to_string());
        Err(JitError::NvrtcMissing { detail })
    })
}

fn check(
    status: sys::nvrtcResult,
    call: &'static str,
    context: impl FnOnce() -> String,
) -> Result<(), JitError> {
    if status == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(JitError::Nvrtc {
            call,
            code: status,
            context: context(),
        })
    }
}

#[derive(Clone, Copy)]
enum Output {
    Cubin,
    Ptx,
}

struct NvrtcOutput {
    code: Vec<u8>,
    log: String,
}

/// Destroys the NVRTC program on every exit path, including errors.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: self.0 came from a successful nvrtcCreateProgram and is
        // destroyed only here, once.
        let status = unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            tracing::warn!(?status, "nvrtcDestroyProgram failed");
        }
    }
}

fn run_nvrtc(
    req: &CompileRequest,
    options: &[String],
    output: Output,
) -> Result<NvrtcOutput, JitError> {
    ensure_nvrtc()?;
    let program_name = format!("{}.cu", req.kernel_name);
    let to_cstring = |what: &str, s: &str| {
        CString::new(s).map_err(|_| {
            JitError::InvalidRequest(format!(
                "{what} of kernel `{}` contains a NUL byte",
                req.kernel_name
            ))
        })
    };
    let c_source = to_cstring("source", req.source)?;
    let c_name = to_cstring("program name", &program_name)?;
    let c_options = options
        .iter()
        .map(|o| to_cstring("an option", o))
        .collect::<Result<Vec<_>, _>>()?;
    let option_ptrs: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
    let num_options = c_int::try_from(option_ptrs.len())
        .map_err(|_| JitError::InvalidRequest("too many NVRTC options".into()))?;
    let context = |log: &str| {
        let mut context = format!(" (kernel `{}`, {})", req.kernel_name, req.arch);
        if !log.is_empty() {
            context.push_str(":\n");
            context.push_str(log);
        }
        context
    };

    // NVRTC's front end recurses once per level of an expression, and the
    // DSL's bodies may nest hundreds deep: on a test thread's 2 MiB stack a
    // 500-link chain overflowed it. It runs on a stack of its own, reserved
    // and touched only as deep as it goes.
    stacker::grow(NVRTC_STACK_BYTES, || {
        guard_panics(|| {
            let mut raw: sys::nvrtcProgram = std::ptr::null_mut();
            // SAFETY: source and name are NUL-terminated and outlive the program
            // (they live until the end of this function, after `program` drops);
            // zero headers are passed, so the header arrays may be null.
            let status = unsafe {
                sys::nvrtcCreateProgram(
                    &mut raw,
                    c_source.as_ptr(),
                    c_name.as_ptr(),
                    0,
                    std::ptr::null(),
                    std::ptr::null(),
                )
            };
            check(status, "nvrtcCreateProgram", || context(""))?;
            let program = Program(raw);

            // SAFETY: program is live; option_ptrs holds num_options pointers to
            // NUL-terminated strings owned by c_options, alive for this call.
            let status =
                unsafe { sys::nvrtcCompileProgram(program.0, num_options, option_ptrs.as_ptr()) };
            let log = program_log(&program);
            if status == sys::nvrtcResult::NVRTC_ERROR_COMPILATION {
                return Err(JitError::Compile {
                    kernel_name: req.kernel_name.to_string(),
                    arch: req.arch,
                    excerpt: error_excerpt(&program_name, req.source, &log),
                    log,
                });
            }
            check(status, "nvrtcCompileProgram", || context(&log))?;

            let code = match output {
                Output::Cubin => read_program_output(
                    &program,
                    "nvrtcGetCUBIN",
                    sys::nvrtcGetCUBINSize,
                    sys::nvrtcGetCUBIN,
                ),
                Output::Ptx => read_program_output(
                    &program,
                    "nvrtcGetPTX",
                    sys::nvrtcGetPTXSize,
                    sys::nvrtcGetPTX,
                ),
            }
            .map_err(|err| match err {
                JitError::Nvrtc { call, code, .. } => JitError::Nvrtc {
                    call,
                    code,
                    context: context(&log),
                },
                other => other,
            })?;
            if !log.is_empty() {
                tracing::debug!(kernel = req.kernel_name, arch = %req.arch, %log, "NVRTC log");
            }
            Ok(NvrtcOutput { code, log })
        })
    })
}

/// The stack NVRTC compiles on (see `run_nvrtc`).
const NVRTC_STACK_BYTES: usize = 256 << 20;

type SizeFn = unsafe fn(sys::nvrtcProgram, *mut usize) -> sys::nvrtcResult;
type ReadFn = unsafe fn(sys::nvrtcProgram, *mut c_char) -> sys::nvrtcResult;

fn read_program_output(
    program: &Program,
    call: &'static str,
    size_fn: SizeFn,
    read_fn: ReadFn,
) -> Result<Vec<u8>, JitError> {
    let mut size: usize = 0;
    // SAFETY: program is live and compiled; size is a writable usize.
    let status = unsafe { size_fn(program.0, &mut size) };
    check(status, call, String::new)?;
    if size == 0 {
        return Ok(Vec::new());
    }
    let mut buffer = vec![0u8; size];
    // SAFETY: buffer holds exactly the `size` bytes NVRTC just asked for.
    let status = unsafe { read_fn(program.0, buffer.as_mut_ptr().cast::<c_char>()) };
    check(status, call, String::new)?;
    Ok(buffer)
}

/// NVRTC's log, NUL and trailing blank lines removed. A failure to fetch it
/// only loses diagnostics, so it yields an empty log.
fn program_log(program: &Program) -> String {
    let mut size: usize = 0;
    // SAFETY: program is live; size is a writable usize.
    let status = unsafe { sys::nvrtcGetProgramLogSize(program.0, &mut size) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return String::new();
    }
    let mut buffer = vec![0u8; size];
    // SAFETY: buffer holds exactly the `size` bytes NVRTC just asked for.
    let status =
        unsafe { sys::nvrtcGetProgramLog(program.0, buffer.as_mut_ptr().cast::<c_char>()) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return String::new();
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end])
        .trim_end()
        .to_string()
}

/// Line number of an error diagnostic such as
/// `my_kernel.cu(12): error: identifier "x" is undefined`. Warnings and
/// remarks yield `None`.
fn error_line(program_name: &str, log_line: &str) -> Option<usize> {
    let rest = log_line.strip_prefix(program_name)?.strip_prefix('(')?;
    let (number, rest) = rest.split_once(')')?;
    let line = number.parse::<usize>().ok()?;
    let severity = rest.strip_prefix(": ")?.split(':').next()?;
    // Covers "error", "catastrophic error" and "fatal error".
    severity.ends_with("error").then_some(line)
}

/// Source lines around every error in `log`, numbered, error line marked.
fn error_excerpt(program_name: &str, source: &str, log: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut shown: Vec<usize> = Vec::new();
    let mut excerpt = String::new();
    for log_line in log.lines() {
        let Some(line) = error_line(program_name, log_line) else {
            continue;
        };
        if shown.contains(&line) {
            continue;
        }
        if shown.len() == MAX_ERROR_EXCERPTS {
            excerpt.push_str("... further errors omitted, see the log above\n");
            break;
        }
        shown.push(line);
        excerpt.push_str(&format!("--> {program_name}:{line}\n"));
        if line == 0 || line > lines.len() {
            continue;
        }
        let first = line.saturating_sub(EXCERPT_CONTEXT_LINES).max(1);
        let last = (line + EXCERPT_CONTEXT_LINES).min(lines.len());
        for number in first..=last {
            let marker = if number == line { '>' } else { ' ' };
            excerpt.push_str(&format!("{marker} {number:>5} | {}\n", lines[number - 1]));
        }
    }
    excerpt
}

fn disk_entry_name(req: &CompileRequest, options: &[String], nvrtc: (i32, i32)) -> String {
    // Every field is length-prefixed so that no two different requests can
    // concatenate to the same byte stream.
    fn field(hasher: &mut Sha256, bytes: &[u8]) {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    let mut hasher = Sha256::new();
    field(&mut hasher, &CACHE_FORMAT_VERSION.to_le_bytes());
    field(
        &mut hasher,
        format!("nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes(),
    );
    field(&mut hasher, req.arch.sm_name().as_bytes());
    // The program name ends up in diagnostics and debug info.
    field(&mut hasher, req.kernel_name.as_bytes());
    field(&mut hasher, &(options.len() as u64).to_le_bytes());
    for option in options {
        field(&mut hasher, option.as_bytes());
    }
    field(&mut hasher, req.source.as_bytes());
    format!("{}.{ENTRY_EXTENSION}", hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn encode_entry(payload: &[u8]) -> Vec<u8> {
    let mut entry = Vec::with_capacity(ENTRY_HEADER_LEN + payload.len());
    entry.extend_from_slice(&ENTRY_MAGIC);
    entry.extend_from_slice(&CACHE_FORMAT_VERSION.to_le_bytes());
    entry.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    entry.extend_from_slice(&Sha256::digest(payload));
    entry.extend_from_slice(payload);
    entry
}

fn decode_entry(entry: &[u8]) -> Result<&[u8], &'static str> {
    if entry.len() < ENTRY_HEADER_LEN {
        return Err("shorter than its header");
    }
    let (header, payload) = entry.split_at(ENTRY_HEADER_LEN);
    if header[..8] != ENTRY_MAGIC {
        return Err("bad magic bytes");
    }
    let mut version = [0u8; 4];
    version.copy_from_slice(&header[8..12]);
    if u32::from_le_bytes(version) != CACHE_FORMAT_VERSION {
        return Err("unknown format version");
    }
    let mut length = [0u8; 8];
    length.copy_from_slice(&header[12..20]);
    if u64::from_le_bytes(length) != payload.len() as u64 {
        return Err("payload length does not match the header (truncated?)");
    }
    if Sha256::digest(payload).as_slice() != &header[20..52] {
        return Err("payload checksum mismatch");
    }
    Ok(payload)
}

/// The cached CUBIN, or `None` if absent or unusable (then it is rebuilt).
fn read_entry(path: &Path) -> Option<Vec<u8>> {
    let entry = match fs::read(path) {
        Ok(entry) => entry,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return None,
        Err(err) => {
            tracing::warn!(path = %path.display(), error = %err, "could not read JIT disk cache entry; recompiling");
            return None;
        }
    };
    match decode_entry(&entry) {
        Ok(payload) => Some(payload.to_vec()),
        Err(reason) => {
            tracing::warn!(path = %path.display(), reason, "ignoring corrupt JIT disk cache entry; recompiling");
            None
        }
    }
}

/// Writes through a temporary file in the same directory and renames it into
/// place, so readers see either no entry or a complete one. No fsync: an
/// entry torn by a crash fails its checksum and is rebuilt.
fn write_entry(dir: &Path, path: &Path, payload: &[u8]) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(&encode_entry(payload))?;
    file.flush()?;
    file.persist(path).map_err(|err| err.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing NVRTC fails unless skipping was asked for, and CI's
    /// `SYMM_REQUIRE_NVRTC=1` wins over a skip.
    #[test]
    fn a_missing_nvrtc_fails_unless_skipped() {
        let missing = || "NVRTC is not available (…)".to_string();
        assert_eq!(nvrtc_decision(true, false, false, "k", missing), Ok(None));
        assert_eq!(nvrtc_decision(true, true, true, "k", missing), Ok(None));
        let e = nvrtc_decision(false, false, false, "3 kernels", missing).unwrap_err();
        assert_eq!(
            e,
            "3 kernels cannot be compiled: NVRTC is not available (…); \
             set SYMM_SKIP_NVRTC=1 to skip these tests instead"
        );
        assert_eq!(
            nvrtc_decision(false, true, false, "kernel `k`", missing),
            Ok(Some(
                "SKIPPED: NVRTC not found (SYMM_SKIP_NVRTC=1); kernel `k` not compiled with NVRTC\n"
                    .to_string()
            ))
        );
        let e = nvrtc_decision(false, true, true, "k", missing).unwrap_err();
        assert!(
            e.ends_with("(SYMM_REQUIRE_NVRTC=1 overrides SYMM_SKIP_NVRTC=1)"),
            "{e}"
        );
        assert!(nvrtc_decision(false, false, true, "k", missing).is_err());
    }

    #[test]
    fn entry_round_trip_and_corruption() {
        let entry = encode_entry(b"\x7fELF payload");
        assert_eq!(decode_entry(&entry), Ok(&b"\x7fELF payload"[..]));
        assert!(decode_entry(&entry[..entry.len() - 1]).is_err());
        assert!(decode_entry(&entry[..10]).is_err());
        let mut flipped = entry.clone();
        if let Some(last) = flipped.last_mut() {
            *last ^= 1;
        }
        assert!(decode_entry(&flipped).is_err());
    }

    #[test]
    fn error_lines_are_parsed() {
        assert_eq!(
            error_line("k.cu", "k.cu(12): error: identifier \"x\" is undefined"),
            Some(12)
        );
        assert_eq!(
            error_line(
                "k.cu",
                "k.cu(3): catastrophic error: cannot open source file"
            ),
            Some(3)
        );
        assert_eq!(error_line("k.cu", "k.cu(7): warning #177-D: unused"), None);
        assert_eq!(error_line("k.cu", "other.cu(7): error: x"), None);
    }

    #[test]
    fn excerpt_marks_the_error_line() {
        let source = "a\nb\nc\nd\ne\nf";
        let excerpt = error_excerpt("k.cu", source, "k.cu(1): error: x\nk.cu(4): error: y");
        assert!(excerpt.contains(">     1 | a\n      2 | b\n      3 | c\n"));
        assert!(
            excerpt.contains("      2 | b\n      3 | c\n>     4 | d\n      5 | e\n      6 | f\n")
        );
    }
}
