//! Integration tests of the NVRTC JIT engine and the CUDA prelude.
//!
//! They need libnvrtc (no GPU): without it they fail, saying how to install
//! it, or skip loudly under SYMM_SKIP_NVRTC=1 (which CI's
//! SYMM_REQUIRE_NVRTC=1 overrides, so that CI cannot skip them).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use symm_runtime::cuda_prelude::PRELUDE;
use symm_runtime::jit::{
    nvrtc_available, nvrtc_version, Arch, CacheHit, CompileRequest, JitEngine, JitError,
};

const SM_90: Arch = Arch::new(9, 0);
const SM_80: Arch = Arch::new(8, 0);

mod common;
use common::nvrtc_or_skip;

/// A kernel exercising every kind of prelude helper; `tag` varies the source
/// so that tests do not share cache entries.
fn prelude_kernel(name: &str, tag: u32) -> String {
    format!(
        r#"{PRELUDE}
extern "C" __global__ void {name}(symm_u32* flag, symm_bf16* b, symm_f16* h, float* out, symm_u64* t) {{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = symm_bf16_to_f32(b[i]) + symm_f16_to_f32(h[i]) + {tag}.0f;
    b[i] = symm_f32_to_bf16(x);
    h[i] = symm_f32_to_f16(x);
    out[i] = x;
    symm_u32 seen = symm_ld_acquire_sys_u32(flag) + symm_ld_relaxed_sys_u32(flag) + symm_ld_volatile_u32(flag);
    symm_st_release_sys_u32(flag, seen);
    symm_st_relaxed_sys_u32(flag, seen);
    symm_st_volatile_u32(flag, seen);
    seen += symm_atom_cas_acq_rel_sys_u32(flag, 0u, 1u);
    seen += symm_atom_cas_release_sys_u32(flag, 1u, 2u);
    seen += symm_atom_cas_acquire_sys_u32(flag, 2u, 3u);
    seen += symm_atom_add_release_sys_u32(flag, 1u);
    seen += symm_atom_add_relaxed_gpu_u32(flag, 1u);
    symm_fence_acq_rel_sys();
    symm_fence_acq_rel_gpu();
    symm_fence_acq_rel_cta();
    t[i] = symm_globaltimer() + seen;
}}
"#
    )
}

fn request<'a>(
    name: &'a str,
    source: &'a str,
    arch: Arch,
    options: &'a [String],
) -> CompileRequest<'a> {
    CompileRequest {
        kernel_name: name,
        source,
        arch,
        options,
    }
}

/// The single cache entry in `dir`.
fn only_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = fs::read_dir(dir)
        .expect("cache dir exists")
        .map(|e| e.expect("dir entry").path())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "expected one cache entry, found {entries:?}"
    );
    entries.into_iter().next().expect("one entry")
}

#[test]
fn prelude_has_no_includes() {
    assert!(!PRELUDE.contains("#include"));
}

#[test]
fn compiles_prelude_kernel_to_cubin_for_sm90_and_sm80() {
    if !nvrtc_or_skip("compiles_prelude_kernel_to_cubin_for_sm90_and_sm80") {
        return;
    }
    let engine = JitEngine::new(None);
    let source = prelude_kernel("prelude_kernel", 0);
    for arch in [SM_90, SM_80] {
        let (compiled, hit) = engine
            .compile(&request("prelude_kernel", &source, arch, &[]))
            .unwrap_or_else(|e| panic!("compile for {arch} failed: {e}"));
        assert_eq!(hit, CacheHit::Compiled);
        assert_eq!(compiled.arch, arch);
        assert_eq!(compiled.kernel_name, "prelude_kernel");
        assert!(
            compiled.cubin.starts_with(b"\x7fELF"),
            "not an ELF CUBIN for {arch}"
        );
        assert!(
            compiled.log.is_empty(),
            "unexpected NVRTC warnings for {arch}: {}",
            compiled.log
        );
    }
}

#[test]
fn ptx_targets_the_virtual_arch() {
    if !nvrtc_or_skip("ptx_targets_the_virtual_arch") {
        return;
    }
    let engine = JitEngine::new(None);
    let source = prelude_kernel("ptx_kernel", 1);
    let ptx = engine
        .compile_ptx(&request("ptx_kernel", &source, SM_90, &[]))
        .unwrap_or_else(|e| panic!("PTX generation failed: {e}"));
    assert!(ptx.contains(".target sm_90"), "{ptx}");
    assert!(ptx.contains(".entry ptx_kernel"), "{ptx}");
    assert!(ptx.contains("ld.acquire.sys.global.u32"), "{ptx}");
    assert!(!ptx.contains('\0'));
}

#[test]
fn memory_cache_returns_the_same_arc() {
    if !nvrtc_or_skip("memory_cache_returns_the_same_arc") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = JitEngine::new(Some(dir.path().to_path_buf()));
    let source = prelude_kernel("mem_kernel", 2);
    let req = request("mem_kernel", &source, SM_90, &[]);
    let (first, hit) = engine.compile(&req).expect("compile");
    assert_eq!(hit, CacheHit::Compiled);
    let (second, hit) = engine.compile(&req).expect("compile again");
    assert_eq!(hit, CacheHit::Memory);
    assert!(Arc::ptr_eq(&first, &second));

    engine.clear_memory_cache();
    let (third, hit) = engine.compile(&req).expect("compile after clear");
    assert_eq!(hit, CacheHit::Disk);
    assert!(!Arc::ptr_eq(&first, &third));
}

#[test]
fn disk_cache_hit_in_a_fresh_engine() {
    if !nvrtc_or_skip("disk_cache_hit_in_a_fresh_engine") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let source = prelude_kernel("disk_kernel", 3);
    let req = request("disk_kernel", &source, SM_90, &[]);

    let cold = Instant::now();
    let (compiled, hit) = JitEngine::new(Some(dir.path().to_path_buf()))
        .compile(&req)
        .expect("cold compile");
    let cold = cold.elapsed();
    assert_eq!(hit, CacheHit::Compiled);

    let engine = JitEngine::new(Some(dir.path().to_path_buf()));
    assert_eq!(engine.disk_dir(), Some(dir.path()));
    let warm = Instant::now();
    let (cached, hit) = engine.compile(&req).expect("disk hit");
    let warm = warm.elapsed();
    assert_eq!(hit, CacheHit::Disk);
    assert_eq!(cached.cubin, compiled.cubin);
    eprintln!(
        "JIT timing: cold NVRTC compile {:.1} ms, disk cache hit {:.3} ms ({} byte CUBIN)",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3,
        compiled.cubin.len()
    );

    let (again, hit) = engine.compile(&req).expect("memory hit");
    assert_eq!(hit, CacheHit::Memory);
    assert!(Arc::ptr_eq(&cached, &again));
}

#[test]
fn corrupt_or_truncated_entries_are_rebuilt() {
    if !nvrtc_or_skip("corrupt_or_truncated_entries_are_rebuilt") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let source = prelude_kernel("corrupt_kernel", 4);
    let req = request("corrupt_kernel", &source, SM_90, &[]);
    let fresh = || JitEngine::new(Some(dir.path().to_path_buf()));

    let (original, hit) = fresh().compile(&req).expect("initial compile");
    assert_eq!(hit, CacheHit::Compiled);
    let entry = only_entry(dir.path());
    assert_eq!(
        fresh().disk_entry_path(&req).expect("entry path"),
        Some(entry.clone())
    );
    let good = fs::read(&entry).expect("read entry");

    let damaged: [(&str, Vec<u8>); 4] = [
        ("garbage", b"this is not a cache entry at all".repeat(100)),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("header only", good[..20].to_vec()),
        ("empty", Vec::new()),
    ];
    for (what, bytes) in damaged {
        fs::write(&entry, &bytes).expect("damage entry");
        let (rebuilt, hit) = fresh().compile(&req).expect("recompile");
        assert_eq!(hit, CacheHit::Compiled, "{what} entry was not rebuilt");
        assert_eq!(rebuilt.cubin, original.cubin);
        let (reloaded, hit) = fresh().compile(&req).expect("reload");
        assert_eq!(hit, CacheHit::Disk, "{what} entry was not rewritten");
        assert_eq!(reloaded.cubin, original.cubin);
        assert_eq!(fs::read(&entry).expect("read entry"), good);
    }
    assert_eq!(
        only_entry(dir.path()),
        entry,
        "temporary files were left behind"
    );
}

#[test]
fn options_and_arch_select_different_entries() {
    if !nvrtc_or_skip("options_and_arch_select_different_entries") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = JitEngine::new(Some(dir.path().to_path_buf()));
    let source = prelude_kernel("variant_kernel", 5);
    let lineinfo = vec!["-lineinfo".to_string()];
    let define = vec!["-DSYMM_VARIANT=1".to_string()];
    let variants = [
        request("variant_kernel", &source, SM_90, &[]),
        request("variant_kernel", &source, SM_80, &[]),
        request("variant_kernel", &source, SM_90, &lineinfo),
        request("variant_kernel", &source, SM_90, &define),
    ];
    let mut compiled = Vec::new();
    for req in &variants {
        let (kernel, hit) = engine.compile(req).expect("compile variant");
        assert_eq!(
            hit,
            CacheHit::Compiled,
            "{:?} hit an earlier entry",
            req.options
        );
        compiled.push(kernel);
    }
    assert_eq!(
        fs::read_dir(dir.path()).expect("cache dir").count(),
        variants.len()
    );
    assert_ne!(
        compiled[0].cubin, compiled[1].cubin,
        "sm_90 and sm_80 CUBINs are identical"
    );
    for (req, kernel) in variants.iter().zip(&compiled) {
        let (again, hit) = engine.compile(req).expect("recompile variant");
        assert_eq!(hit, CacheHit::Memory);
        assert!(Arc::ptr_eq(kernel, &again));
    }
}

#[test]
fn compile_error_shows_the_offending_source_line() {
    if !nvrtc_or_skip("compile_error_shows_the_offending_source_line") {
        return;
    }
    let source = "\
extern \"C\" __global__ void broken_kernel(float* out) {
    unsigned i = threadIdx.x;
    float scale = 2.0f;
    out[i] = scale * not_declared_anywhere;
    out[i] += 1.0f;
}
";
    let engine = JitEngine::new(None);
    let err = engine
        .compile(&request("broken_kernel", source, SM_90, &[]))
        .expect_err("the kernel must not compile");
    assert!(matches!(err, JitError::Compile { .. }), "{err:?}");
    let message = err.to_string();
    eprintln!("{message}");
    assert!(message.contains("broken_kernel"), "{message}");
    assert!(message.contains("sm_90"), "{message}");
    assert!(message.contains("broken_kernel.cu(4): error"), "{message}");
    assert!(message.contains("not_declared_anywhere"), "{message}");
    assert!(
        message.contains(">     4 |     out[i] = scale * not_declared_anywhere;"),
        "{message}"
    );
    assert!(
        message.contains("      2 |     unsigned i = threadIdx.x;"),
        "{message}"
    );
    assert!(message.contains("      6 | }"), "{message}");
}

#[test]
fn ptx_errors_from_inline_asm_are_compile_errors() {
    if !nvrtc_or_skip("ptx_errors_from_inline_asm_are_compile_errors") {
        return;
    }
    let source = r#"
extern "C" __global__ void bad_asm_kernel(unsigned* p) {
    asm volatile("ld.bogus.sys.global.u32 %0, [%0];" : : "l"(p) : "memory");
}
"#;
    let err = JitEngine::new(None)
        .compile(&request("bad_asm_kernel", source, SM_90, &[]))
        .expect_err("ptxas must reject the instruction");
    let message = err.to_string();
    eprintln!("{message}");
    assert!(
        message.contains("bad_asm_kernel") && message.contains("sm_90"),
        "{message}"
    );
}

#[test]
fn invalid_option_and_invalid_input_are_errors() {
    if !nvrtc_or_skip("invalid_option_and_invalid_input_are_errors") {
        return;
    }
    let engine = JitEngine::new(None);
    let source = "extern \"C\" __global__ void k(int* p) { *p = 1; }";
    let bad_option = vec!["--no-such-option".to_string()];
    let err = engine
        .compile(&request("k", source, SM_90, &bad_option))
        .expect_err("invalid option");
    assert!(matches!(err, JitError::Nvrtc { .. }), "{err:?}");
    eprintln!("{err}");

    let err = engine
        .compile(&request(
            "k",
            source,
            Arch::from_compute_capability(-1, 0),
            &[],
        ))
        .expect_err("invalid arch");
    assert!(err.to_string().contains("sm_00"), "{err}");

    let err = engine
        .compile(&request("k\0", source, SM_90, &[]))
        .expect_err("NUL in name");
    assert!(matches!(err, JitError::InvalidRequest(_)), "{err:?}");

    for arch_option in [
        "--gpu-architecture=sm_80",
        "-arch=sm_80",
        "--gpu-architecture",
    ] {
        let options = vec![arch_option.to_string()];
        let err = engine
            .compile(&request("k", source, SM_90, &options))
            .expect_err("arch override");
        assert!(matches!(err, JitError::InvalidRequest(_)), "{err:?}");
    }

    let lto = vec!["-dlto".to_string()];
    let err = engine
        .compile(&request("k", source, SM_90, &lto))
        .expect_err("-dlto yields LTO IR, not a CUBIN");
    assert!(matches!(err, JitError::NoCubin { .. }), "{err:?}");
}

#[test]
fn unwritable_cache_dir_is_not_an_error() {
    if !nvrtc_or_skip("unwritable_cache_dir_is_not_an_error") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let blocker = dir.path().join("a_file");
    fs::write(&blocker, b"not a directory").expect("write file");
    let engine = JitEngine::new(Some(blocker.join("jit")));
    let source = prelude_kernel("nodir_kernel", 6);
    let (compiled, hit) = engine
        .compile(&request("nodir_kernel", &source, SM_90, &[]))
        .expect("compile despite the unusable cache dir");
    assert_eq!(hit, CacheHit::Compiled);
    assert!(compiled.cubin.starts_with(b"\x7fELF"));
}

#[test]
fn concurrent_compiles_share_a_valid_entry() {
    if !nvrtc_or_skip("concurrent_compiles_share_a_valid_entry") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let source = prelude_kernel("race_kernel", 7);
    let engine = JitEngine::new(Some(dir.path().to_path_buf()));
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    // Separate engines race on the disk entry; the shared one
                    // races on its memory cache.
                    let own = JitEngine::new(Some(dir.path().to_path_buf()));
                    let req = request("race_kernel", &source, SM_90, &[]);
                    let (a, _) = own.compile(&req).expect("own engine");
                    let (b, _) = engine.compile(&req).expect("shared engine");
                    (a, b)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let shared = &results[0].1;
    for (own, from_shared) in &results {
        assert_eq!(own.cubin, shared.cubin);
        assert!(Arc::ptr_eq(from_shared, shared));
    }
    only_entry(dir.path());
    let (_, hit) = JitEngine::new(Some(dir.path().to_path_buf()))
        .compile(&request("race_kernel", &source, SM_90, &[]))
        .expect("fresh engine");
    assert_eq!(hit, CacheHit::Disk);
}

#[test]
fn nvrtc_version_is_recent() {
    if !nvrtc_or_skip("nvrtc_version_is_recent") {
        return;
    }
    let (major, minor) = nvrtc_version().expect("nvrtc_version");
    eprintln!("NVRTC version {major}.{minor}");
    assert!(major >= 12, "NVRTC {major}.{minor} is too old");
}

#[test]
fn engine_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<JitEngine>();
    assert_eq!(SM_90.to_string(), "sm_90");
    assert_eq!(Arch::from_compute_capability(10, 0).to_string(), "sm_100");
}

#[test]
fn missing_nvrtc_is_an_error_not_a_panic() {
    if nvrtc_available() {
        return;
    }
    let source = "extern \"C\" __global__ void k(int* p) { *p = 1; }";
    let err = JitEngine::new(None)
        .compile(&request("k", source, SM_90, &[]))
        .expect_err("no NVRTC");
    assert!(matches!(err, JitError::NvrtcMissing { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("nvidia-cuda-nvrtc") && message.contains("nvidia/cu13/lib"),
        "{message}"
    );
    assert!(matches!(
        nvrtc_version(),
        Err(JitError::NvrtcMissing { .. })
    ));
}
