//! Compile-only tests of the CUDA prelude's DSL support: every template is
//! instantiated with every supported type, memory order and scope, compiled
//! to CUBIN for sm_90 and sm_80 (so that a malformed inline-PTX string fails
//! ptxas) and its PTX inspected.
//!
//! They need libnvrtc (no GPU): without it they fail, saying how to install
//! it, or skip loudly under SYMM_SKIP_NVRTC=1 (which CI's
//! SYMM_REQUIRE_NVRTC=1 overrides, so that CI cannot skip them).

use symm_runtime::cuda_prelude::PRELUDE;
use symm_runtime::jit::{Arch, CompileRequest, JitEngine, JitError};

const SM_90: Arch = Arch::new(9, 0);
const SM_80: Arch = Arch::new(8, 0);

mod common;
use common::nvrtc_or_skip;

fn request<'a>(name: &'a str, source: &'a str, arch: Arch) -> CompileRequest<'a> {
    CompileRequest {
        kernel_name: name,
        source,
        arch,
        options: &[],
    }
}

/// Compiles `body` after the prelude to a CUBIN for `arch` and asserts that
/// NVRTC printed nothing.
fn compile_clean(name: &str, body: &str, arch: Arch) {
    let source = format!("{PRELUDE}\n{body}");
    let (compiled, _) = JitEngine::new(None)
        .compile(&request(name, &source, arch))
        .unwrap_or_else(|e| panic!("{name} for {arch} failed: {e}"));
    assert!(
        compiled.cubin.starts_with(b"\x7fELF"),
        "{name}: not an ELF CUBIN for {arch}"
    );
    assert!(
        compiled.log.trim().is_empty(),
        "{name}: NVRTC warnings for {arch}:\n{}",
        compiled.log
    );
}

fn ptx(name: &str, body: &str, arch: Arch) -> String {
    let source = format!("{PRELUDE}\n{body}");
    JitEngine::new(None)
        .compile_ptx(&request(name, &source, arch))
        .unwrap_or_else(|e| panic!("PTX of {name} for {arch} failed: {e}"))
}

/// Instantiates every template of the prelude with every type, memory order
/// and scope it supports.
const EXERCISE_ALL: &str = r#"
#define SYMM_ALL_TYPES bool, symm_u8, symm_u16, symm_u32, symm_u64, symm_i8, symm_i16, symm_i32, \
    symm_i64, float, double, symm_bf16, symm_f16, symm_f8e4m3, symm_f8e5m2

/* Stores symm_cast<To>(From) for every From of the list, 16 bytes apart. */
template<typename To, typename... Froms>
__device__ __forceinline__ void cast_row(const unsigned char* src, unsigned char* dst) {
    int k = 0;
    ((*(To*)(dst + 16 * k) = symm_cast<To, Froms>(*(const Froms*)(src + 16 * k)), ++k), ...);
}

template<typename... Ts>
__device__ __forceinline__ void from_to_f32(const unsigned char* src, unsigned char* dst) {
    int k = 0;
    ((*(float*)(dst + 16 * k) = symm_to_f32(*(const Ts*)(src + 16 * k)),
      *(Ts*)(dst + 16 * k + 8) = symm_from_f32<Ts>(*(const float*)(src + 16 * k + 4)), ++k), ...);
}

template<typename T> __device__ __forceinline__ void half_ops(T* h) {
    T a = h[0], b = h[1];
    T r = a + b;
    r = r - a * b / b;
    r = -r;
    r += a;
    r -= b;
    r *= a;
    r /= b;
    bool c = (a == b) | (a != b) | (a < b) | (a <= b) | (a > b) | (a >= b);
    h[2] = c ? r : symm_fma(a, b, r);
    h[3] = symm_min(a, b);
    h[4] = symm_max(a, b);
    h[5] = symm_abs(a);
    h[6] = symm_bf16_from_bits(symm_to_bits(a)).bits == 0 ? a : b;
}

template<typename T> __device__ __forceinline__ void int_math(T* p) {
    p[2] = symm_min(p[0], p[1]);
    p[3] = symm_max(p[0], p[1]);
}

template<typename T> __device__ __forceinline__ void float_math(T* p) {
    p[2] = symm_min(p[0], p[1]);
    p[3] = symm_max(p[0], p[1]);
    p[4] = symm_abs(p[0]);
    p[5] = symm_fma(p[0], p[1], p[2]);
    p[6] = symm_sqrt(p[1]);
}

/* Loads, stores and exchanges of every 4/8-byte type for one (SEM, SCOPE). */
template<int LD, int ST, int SCOPE, typename T> __device__ __forceinline__ void ld_st(T* p) {
    T v = symm_ld<LD, SCOPE>(p);
    symm_st<ST, SCOPE>(p + 1, v);
}

template<int LD, int ST, int SCOPE>
__device__ __forceinline__ void ld_st_all(symm_u32* u32, symm_i32* i32, symm_u64* u64, symm_i64* i64,
                                          float* f32, double* f64) {
    ld_st<LD, ST, SCOPE>(u32);
    ld_st<LD, ST, SCOPE>(i32);
    ld_st<LD, ST, SCOPE>(u64);
    ld_st<LD, ST, SCOPE>(i64);
    ld_st<LD, ST, SCOPE>(f32);
    ld_st<LD, ST, SCOPE>(f64);
}

template<int SEM, int SCOPE, typename T> __device__ __forceinline__ void exch_cas(T* p) {
    T a = symm_atom_exch<SEM, SCOPE>(p, p[1]);
    p[2] = symm_atom_cas<SEM, SCOPE>(p, a, p[3]);
}

template<int SEM, int SCOPE, typename T> __device__ __forceinline__ void add(T* p) {
    p[4] = symm_atom_add<SEM, SCOPE>(p, p[5]);
}

template<int SEM, int SCOPE, typename T> __device__ __forceinline__ void minmax(T* p) {
    p[6] = symm_atom_max<SEM, SCOPE>(p, p[7]);
    p[8] = symm_atom_min<SEM, SCOPE>(p, p[9]);
}

template<int SEM, int SCOPE>
__device__ __forceinline__ void atomics(symm_u32* u32, symm_i32* i32, symm_u64* u64, symm_i64* i64,
                                        float* f32, double* f64) {
    exch_cas<SEM, SCOPE>(u32);
    exch_cas<SEM, SCOPE>(i32);
    exch_cas<SEM, SCOPE>(u64);
    exch_cas<SEM, SCOPE>(i64);
    exch_cas<SEM, SCOPE>(f32);
    exch_cas<SEM, SCOPE>(f64);
    add<SEM, SCOPE>(u32);
    add<SEM, SCOPE>(i32);
    add<SEM, SCOPE>(u64);
    add<SEM, SCOPE>(i64);
    add<SEM, SCOPE>(f32);
    add<SEM, SCOPE>(f64);
    minmax<SEM, SCOPE>(u32);
    minmax<SEM, SCOPE>(i32);
    minmax<SEM, SCOPE>(u64);
    minmax<SEM, SCOPE>(i64);
}

template<int SCOPE>
__device__ __forceinline__ void per_scope(symm_u32* u32, symm_i32* i32, symm_u64* u64, symm_i64* i64,
                                          float* f32, double* f64) {
    ld_st_all<SYMM_RELAXED, SYMM_RELAXED, SCOPE>(u32, i32, u64, i64, f32, f64);
    ld_st_all<SYMM_ACQUIRE, SYMM_RELEASE, SCOPE>(u32, i32, u64, i64, f32, f64);
    ld_st_all<SYMM_VOLATILE, SYMM_VOLATILE, SCOPE>(u32, i32, u64, i64, f32, f64);
    atomics<SYMM_RELAXED, SCOPE>(u32, i32, u64, i64, f32, f64);
    atomics<SYMM_ACQUIRE, SCOPE>(u32, i32, u64, i64, f32, f64);
    atomics<SYMM_RELEASE, SCOPE>(u32, i32, u64, i64, f32, f64);
    atomics<SYMM_ACQ_REL, SCOPE>(u32, i32, u64, i64, f32, f64);
    symm_fence<SCOPE>();
    symm_fence_sc<SCOPE>();
}

template<typename T, symm_u64 N> __device__ __forceinline__ void vec(T* p) {
    symm_array<T, N> v = symm_ld_vec<T, N>(p);
    symm_st_vec<T, N>(p + N, v);
    symm_array<T, N> w = symm_ld_vec_volatile<T, N>(p + 2 * N);
    symm_st_vec_volatile<T, N>(p + 3 * N, w);
}


extern "C" __global__ void prelude_all(unsigned char* bytes, symm_u32* u32, symm_i32* i32, symm_u64* u64,
                                       symm_i64* i64, float* f32, double* f64, symm_bf16* bf, symm_f16* hf,
                                       symm_u8* u8, symm_u16* u16, symm_i8* i8, symm_i16* i16, bool* b,
                                       symm_f8e4m3* f8a, symm_f8e5m2* f8b) {
    /* Conversions: every (To, From) pair Rust allows. */
    cast_row<bool, bool>(bytes, bytes + 4096);
    cast_row<symm_u8, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 1);
    cast_row<symm_u16, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 2);
    cast_row<symm_u32, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 3);
    cast_row<symm_u64, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 4);
    cast_row<symm_i8, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 5);
    cast_row<symm_i16, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 6);
    cast_row<symm_i32, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 7);
    cast_row<symm_i64, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 8);
    cast_row<float, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 9);
    cast_row<double, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 10);
    cast_row<symm_bf16, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 11);
    cast_row<symm_f16, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 12);
    cast_row<symm_u64, unsigned long, long, char>(bytes, bytes + 4096 + 256 * 13);
    cast_row<symm_f8e4m3, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 14);
    cast_row<symm_f8e5m2, SYMM_ALL_TYPES>(bytes, bytes + 4096 + 256 * 15);
    from_to_f32<symm_u8, symm_u16, symm_u32, symm_u64, symm_i8, symm_i16, symm_i32, symm_i64, float, double,
                symm_bf16, symm_f16, symm_f8e4m3, symm_f8e5m2>(bytes, bytes + 8192);
    f32[100] = symm_to_f32(b[0]);

    /* bf16 / f16 / fp8 arithmetic and math. */
    half_ops(bf);
    half_ops(hf);
    half_ops(f8a);
    half_ops(f8b);
    float_math(f32 + 16);
    float_math(f64 + 16);
    int_math(u8);
    int_math(u16);
    int_math(u32 + 16);
    int_math(u64 + 16);
    int_math(i8);
    int_math(i16);
    int_math(i32 + 16);
    int_math(i64 + 16);
    i8[4] = symm_abs(i8[0]);
    i16[4] = symm_abs(i16[0]);
    i32[20] = symm_abs(i32[16]);
    i64[20] = symm_abs(i64[16]);

    /* Bit casts. */
    u32[30] = symm_to_bits(f32[30]);
    u64[30] = symm_to_bits(f64[30]);
    u16[10] = symm_to_bits(bf[10]) ^ symm_to_bits(hf[10]);
    f32[31] = symm_f32_from_bits(u32[31]);
    f64[31] = symm_f64_from_bits(u64[31]);
    bf[11] = symm_bf16_from_bits(u16[11]);
    hf[11] = symm_f16_from_bits(u16[12]);
    u8[10] = symm_to_bits(f8a[10]) ^ symm_to_bits(f8b[10]);
    f8a[11] = symm_f8e4m3_from_bits(u8[11]);
    f8b[11] = symm_f8e5m2_from_bits(u8[12]);

    /* Arrays. */
    __shared__ symm_array<float, 64> tile;
    tile[threadIdx.x % 64] = f32[40];
    __syncthreads();
    symm_array<float, 3> abc = symm_array<float, 3>{{f32[41], f32[42], f32[43]}};
    const symm_array<float, 3>& cabc = abc;
    symm_array<symm_bf16, 4> filled = symm_array_fill<symm_bf16, 4>(bf[12]);
    f32[44] = cabc[0] + cabc[1] + cabc[2] + tile[(threadIdx.x + 1) % 64];
    bf[13] = filled[0] + filled[3];

    /* Ordered memory operations at every scope. */
    per_scope<SYMM_CTA>(u32 + 64, i32 + 64, u64 + 64, i64 + 64, f32 + 64, f64 + 64);
    per_scope<SYMM_GPU>(u32 + 64, i32 + 64, u64 + 64, i64 + 64, f32 + 64, f64 + 64);
    per_scope<SYMM_SYS>(u32 + 64, i32 + 64, u64 + 64, i64 + 64, f32 + 64, f64 + 64);

    /* 16-byte vectors. */
    vec<float, 4>(f32 + 128);
    vec<symm_bf16, 8>(bf + 128);
    vec<symm_f16, 8>(hf + 128);
    vec<symm_u32, 4>(u32 + 128);
    vec<symm_i32, 4>(i32 + 128);
    vec<symm_u64, 2>(u64 + 128);
    vec<symm_i64, 2>(i64 + 128);
    vec<double, 2>(f64 + 128);
    vec<symm_u8, 16>(u8 + 128);
    vec<symm_u16, 8>(u16 + 128);
    vec<symm_f8e4m3, 16>(f8a + 128);
    vec<symm_f8e5m2, 16>(f8b + 128);

    /* Warp (the shuffles are intrinsics: tests/dsl_kernels_compile.rs). */
    u32[210] = symm_ballot(f32[210] > 0.0f) + symm_lane_id();
}
"#;

/// One 16-byte load and store each of 4 floats and of 8 bf16.
const VECTORS: &str = r#"
extern "C" __global__ void vec_kernel(float* f, symm_bf16* b) {
    symm_array<float, 4> x = symm_ld_vec<float, 4>(f);
    x[0] = x[0] + x[3];
    symm_st_vec<float, 4>(f + 4, x);
    symm_array<symm_bf16, 8> y = symm_ld_vec<symm_bf16, 8>(b);
    y[1] = y[1] * y[6];
    symm_st_vec<symm_bf16, 8>(b + 8, y);
}
"#;

const SEMS: [&str; 4] = ["relaxed", "acquire", "release", "acq_rel"];
const SCOPES: [&str; 3] = ["cta", "gpu", "sys"];

#[test]
fn prelude_has_no_includes() {
    assert!(!PRELUDE.contains("#include"));
    assert!(!PRELUDE.contains("# include"));
    assert!(!EXERCISE_ALL.contains("#include"));
}

#[test]
fn unused_prelude_raises_no_warning() {
    if !nvrtc_or_skip("unused_prelude_raises_no_warning") {
        return;
    }
    let body =
        r#"extern "C" __global__ void empty_kernel(float* out) { out[threadIdx.x] = 1.0f; }"#;
    for arch in [SM_90, SM_80] {
        compile_clean("empty_kernel", body, arch);
    }
}

#[test]
fn every_template_compiles_warning_free_for_sm90_and_sm80() {
    if !nvrtc_or_skip("every_template_compiles_warning_free_for_sm90_and_sm80") {
        return;
    }
    for arch in [SM_90, SM_80] {
        compile_clean("prelude_all", EXERCISE_ALL, arch);
    }
}

#[test]
fn ptx_has_every_order_scope_and_type() {
    if !nvrtc_or_skip("ptx_has_every_order_scope_and_type") {
        return;
    }
    let ptx = ptx("prelude_all", EXERCISE_ALL, SM_90);
    let mut expected: Vec<String> = [
        "ld.acquire.sys.global",
        "atom.acq_rel.gpu.global.add.f32",
        "fence.acq_rel.cta",
        "fence.acq_rel.gpu",
        "fence.acq_rel.sys",
        "fence.sc.cta",
        "fence.sc.gpu",
        "fence.sc.sys",
        "ld.global.v4.b32",
        "st.global.v4.b32",
        "ld.volatile.global.v4.b32",
        "st.volatile.global.v4.b32",
        "ld.volatile.global.b32",
        "ld.volatile.global.b64",
        "st.volatile.global.b32",
        "st.volatile.global.b64",
        "vote.sync.ballot.b32",
        "%laneid",
        "cvt.rzi.s32.f32",
        "cvt.rzi.u32.f32",
        "cvt.rzi.s64.f32",
        "cvt.rzi.u64.f32",
        "cvt.rzi.s32.f64",
        "cvt.rzi.u32.f64",
        "cvt.rzi.s64.f64",
        "cvt.rzi.u64.f64",
        "setp.nan.f32",
        "setp.nan.f64",
        "cvt.rn.bf16.f32",
        "cvt.rn.f16.f32",
        "add.rn.f32",
        "sub.rn.f32",
        "mul.rn.f32",
        "div.rn.f32",
        "fma.rn.f32",
        "fma.rn.f64",
        "sqrt.rn.f32",
        "sqrt.rn.f64",
        "min.f32",
        "max.f32",
        "min.f64",
        "max.f64",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for scope in SCOPES {
        for sem in ["relaxed", "acquire"] {
            expected.push(format!("ld.{sem}.{scope}.global.b32"));
            expected.push(format!("ld.{sem}.{scope}.global.b64"));
        }
        for sem in ["relaxed", "release"] {
            expected.push(format!("st.{sem}.{scope}.global.b32"));
            expected.push(format!("st.{sem}.{scope}.global.b64"));
        }
        for sem in SEMS {
            for op in [
                "add.u32", "add.s32", "add.u64", "add.f32", "add.f64", "exch.b32", "exch.b64",
                "cas.b32", "cas.b64", "max.u32", "max.s32", "max.u64", "max.s64", "min.u32",
                "min.s32", "min.u64", "min.s64",
            ] {
                expected.push(format!("atom.{sem}.{scope}.global.{op} "));
            }
        }
    }
    let missing: Vec<&String> = expected
        .iter()
        .filter(|s| !ptx.contains(s.as_str()))
        .collect();
    assert!(missing.is_empty(), "PTX lacks {missing:?}");
    assert!(
        !ptx.contains(".local"),
        "bit casts or arrays went through local memory"
    );
}

/// One kernel per (order, scope) pair using every operation that accepts the
/// order, so that the PTX of each kernel shows which qualifiers it selected.
fn order_kernels() -> String {
    let mut source = String::new();
    let orders = [
        ("SYMM_RELAXED", "relaxed"),
        ("SYMM_ACQUIRE", "acquire"),
        ("SYMM_RELEASE", "release"),
        ("SYMM_ACQ_REL", "acq_rel"),
        ("SYMM_VOLATILE", "volatile"),
    ];
    for (sem, sem_name) in orders {
        for (scope, scope_name) in [
            ("SYMM_CTA", "cta"),
            ("SYMM_GPU", "gpu"),
            ("SYMM_SYS", "sys"),
        ] {
            let mut body = String::new();
            if matches!(sem_name, "relaxed" | "acquire" | "volatile") {
                body += &format!(
                    "u[1] = symm_ld<{sem}, {scope}>(u); l[1] = symm_ld<{sem}, {scope}>(l);\n"
                );
            }
            if matches!(sem_name, "relaxed" | "release" | "volatile") {
                body += &format!(
                    "symm_st<{sem}, {scope}>(u + 2, 5u); symm_st<{sem}, {scope}>(l + 2, 5);\n"
                );
            }
            if sem_name != "volatile" {
                body += &format!(
                    "u[3] = symm_atom_add<{sem}, {scope}>(u, 1u);\n\
                     f[3] = symm_atom_add<{sem}, {scope}>(f, 1.0f);\n\
                     d[3] = symm_atom_add<{sem}, {scope}>(d, 1.0);\n\
                     l[3] = symm_atom_add<{sem}, {scope}>(l, 1);\n\
                     u[4] = symm_atom_exch<{sem}, {scope}>(u, 2u);\n\
                     u[5] = symm_atom_cas<{sem}, {scope}>(u, 2u, 3u);\n\
                     u[6] = symm_atom_max<{sem}, {scope}>(u, 4u);\n\
                     l[6] = symm_atom_min<{sem}, {scope}>(l, 4);\n"
                );
            }
            source += &format!(
                "extern \"C\" __global__ void order_{sem_name}_{scope_name}(symm_u32* u, symm_i64* l, \
                 float* f, double* d) {{\n{body}}}\n"
            );
        }
    }
    for scope_name in ["cta", "gpu", "sys"] {
        let scope = format!("SYMM_{}", scope_name.to_uppercase());
        source += &format!(
            "extern \"C\" __global__ void fence_{scope_name}() {{ symm_fence<{scope}>(); \
             symm_fence_sc<{scope}>(); }}\n"
        );
    }
    source
}

#[test]
fn each_order_and_scope_selects_its_own_qualifiers() {
    if !nvrtc_or_skip("each_order_and_scope_selects_its_own_qualifiers") {
        return;
    }
    let source = order_kernels();
    for arch in [SM_90, SM_80] {
        compile_clean("order_kernels", &source, arch);
    }
    let ptx = ptx("order_kernels", &source, SM_90);
    let mut kernels = 0;
    for entry in ptx.split(".entry ").skip(1) {
        kernels += 1;
        let name = entry.split('(').next().expect("kernel name");
        let ops: Vec<&str> = entry
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("ld.") || l.starts_with("st.") || l.starts_with("atom."))
            .filter(|l| {
                !l.starts_with("ld.param")
                    && !l.starts_with("st.global.u")
                    && !l.starts_with("st.global.f")
            })
            .collect();
        if let Some(scope) = name.strip_prefix("fence_") {
            assert!(
                entry.contains(&format!("fence.acq_rel.{scope};")),
                "{entry}"
            );
            assert!(entry.contains(&format!("fence.sc.{scope};")), "{entry}");
            assert_eq!(entry.matches("fence.").count(), 2, "{entry}");
            continue;
        }
        let rest = name.strip_prefix("order_").expect("order kernel");
        let (sem, scope) = rest.rsplit_once('_').expect("sem_scope");
        let qualifier = if sem == "volatile" {
            ".volatile.global.".to_string()
        } else {
            format!(".{sem}.{scope}.global.")
        };
        let expected = match sem {
            "relaxed" => 12,
            "acquire" | "release" => 10,
            "acq_rel" => 8,
            _ => 4,
        };
        assert_eq!(ops.len(), expected, "{name}: {ops:#?}");
        for op in ops {
            assert!(op.contains(&qualifier), "{name}: {op} lacks {qualifier}");
        }
    }
    assert_eq!(kernels, 18);
}

#[test]
fn vector_accesses_are_single_v4_instructions() {
    if !nvrtc_or_skip("vector_accesses_are_single_v4_instructions") {
        return;
    }
    for arch in [SM_90, SM_80] {
        compile_clean("vec_kernel", VECTORS, arch);
        let ptx = ptx("vec_kernel", VECTORS, arch);
        let body = &ptx[ptx.find(".entry vec_kernel").expect("kernel entry")..];
        assert_eq!(body.matches("ld.global.v4.b32").count(), 2, "{body}");
        assert_eq!(body.matches("st.global.v4.b32").count(), 2, "{body}");
        assert_eq!(body.matches("ld.global").count(), 2, "{body}");
        assert_eq!(body.matches("st.global").count(), 2, "{body}");
        assert!(!body.contains(".local"), "{body}");
    }
}

#[test]
fn misuse_is_a_compile_error() {
    if !nvrtc_or_skip("misuse_is_a_compile_error") {
        return;
    }
    let cases = [
        (
            "symm_u32 x = symm_ld<SYMM_RELEASE, SYMM_GPU>(u); (void)x;",
            "symm_ld: memory order not supported",
        ),
        (
            "symm_st<SYMM_ACQUIRE, SYMM_GPU>(u, 1u);",
            "symm_st: memory order not supported",
        ),
        (
            "symm_u32 x = symm_ld<SYMM_ACQUIRE, 7>(u); (void)x;",
            "symm_ld: SCOPE must be",
        ),
        (
            "symm_atom_add<SYMM_VOLATILE, SYMM_SYS>(u, 1u);",
            "symm_atom_add: memory order not supported",
        ),
        (
            "symm_atom_add<SYMM_RELAXED, SYMM_SYS>(b, b[1]);",
            "symm_atom_add: T must be",
        ),
        (
            "symm_atom_max<SYMM_RELAXED, SYMM_SYS>(f, 1.0f);",
            "symm_atom_max: T must be",
        ),
        ("symm_fence<5>();", "symm_fence: SCOPE must be"),
        (
            "bool x = symm_cast<bool>(u[0]); (void)x;",
            "Rust has no cast to bool",
        ),
        (
            "symm_array<float, 3> x = symm_ld_vec<float, 3>(f); (void)x;",
            "symm_ld_vec: sizeof(T) * N must be 16",
        ),
    ];
    for (i, (statement, message)) in cases.iter().enumerate() {
        let name = format!("misuse_{i}");
        let source = format!(
            "{PRELUDE}\nextern \"C\" __global__ void {name}(symm_u32* u, float* f, symm_bf16* b) {{ {statement} }}\n"
        );
        let err = JitEngine::new(None)
            .compile(&request(&name, &source, SM_90))
            .expect_err(statement);
        assert!(matches!(err, JitError::Compile { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(message),
            "{statement}: expected {message:?} in\n{text}"
        );
    }
}
