//! The differential tester: every kernel of the generated corpus runs on
//! the emulator and, as its generated CUDA C compiled by the host C++
//! compiler under a single-thread shim, on the host; the two must agree bit
//! for bit on fresh random inputs. Every kernel also compiles with NVRTC
//! (when NVRTC is here), and on a GPU (the GPU tier: `--ignored`) the same
//! launches run through the CUDA backend and are compared with the emulator
//! the same way. Each step is a test of its own, sharing the emulator's
//! outputs.
//!
//! NaN rule: a slot whose kernel writes a float type matches when both
//! sides hold a NaN of that type, whatever its sign and payload. Rust does
//! not specify the payload or sign of a NaN that arithmetic makes, PTX
//! gives the canonical NaN where the CPU propagates an operand's payload,
//! and the DSL reference says NaN payloads may differ. Every other bit
//! (signed zeros included) must be equal.
//!
//! Environment: `SYMM_DIFFTEST_INPUT_SEED` fixes the inputs (printed each
//! run), `CXX` picks the host compiler (default `g++`),
//! `SYMM_DIFFTEST_KEEP=dir` keeps the host program there. The corpus's
//! own switches are in `build.rs`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use symm::jit::Arch;
use symm::{CommOptions, Ranks};
use symm_difftest::{Kernel, Ty, CLASSES_ON, KERNELS, OUT_SLOTS, SEED};

/// Input sets per kernel.
const CASES: usize = 4;
/// What every `out` slot holds before a launch: a slot the kernel leaves
/// alone must still hold it on both sides.
const POISON: u64 = 0x5a5a_5a5a_a5a5_a5a5;

/// The host's result for a kernel its compiler rejects (reported apart).
const REJECTED: &str = "rejected by the host compiler";

#[path = "../common.rs"]
#[allow(dead_code)]
mod common;
use common::Rng;
#[path = "../../tests/support/targets.rs"]
mod targets;

/// Raw bits for a value of `ty`: special values (zeros, extremes, NaNs
/// with payloads, infinities, subnormals) often, random bits otherwise.
fn draw(rng: &mut Rng, ty: Ty) -> u64 {
    let special = rng.next().is_multiple_of(3);
    let r = rng.next();
    match ty {
        Ty::Bool => r & 1,
        Ty::F32 if special => *rng.pick(&[
            0,
            0x8000_0000,
            0x7fc0_0000,
            0xffc0_1234,
            0x7f80_0001,
            0x7f80_0000,
            0xff80_0000,
            0x0000_0001,
            0x807f_ffff,
            0x3f80_0000,
            0xbf80_0000,
            0x7f7f_ffff,
            0x4b00_0001,
        ]),
        Ty::F32 if r.is_multiple_of(2) => {
            u64::from((((r >> 8) as i32 % 2000) as f32 / 8.0f32).to_bits())
        }
        Ty::F32 => r & 0xffff_ffff,
        Ty::F64 if special => *rng.pick(&[
            0,
            1 << 63,
            0x7ff8_0000_0000_0000,
            0xfff8_0000_dead_beef,
            0x7ff0_0000_0000_0001,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            1,
            0x3ff0_0000_0000_0000,
            0x7fef_ffff_ffff_ffff,
            0x43e0_0000_0000_0000,
        ]),
        Ty::F64 if r.is_multiple_of(2) => (((r >> 8) as i64 % 100_000) as f64 / 16.0).to_bits(),
        Ty::F64 => r,
        Ty::Bf16 | Ty::F16 if special => *rng.pick(&[
            0, 0x8000, 0x7fc0, 0x7e00, 0xffc1, 0x7f81, 0x7f80, 0x7c00, 0xfc00, 0x0001, 0x3f80,
            0x3c00, 0x7bff, 0x7f7f,
        ]),
        Ty::Bf16 | Ty::F16 => r & 0xffff,
        _ if special => {
            let bits = match ty {
                Ty::U8 => 8,
                Ty::U16 => 16,
                Ty::U32 | Ty::I32 => 32,
                _ => 64,
            };
            let max = if bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            let smax = max >> 1;
            *rng.pick(&[0, 1, max, smax, smax + 1, 2, max - 1])
                | if matches!(ty, Ty::I32) && r.is_multiple_of(2) {
                    0xffff_ffff_0000_0000
                } else {
                    0
                }
        }
        _ if r.is_multiple_of(2) => (r >> 40) % 300,
        _ => r,
    }
}

/// One launch: a kernel's inputs and scalars.
#[derive(Clone)]
struct Case {
    kernel: usize,
    case: usize,
    inputs: Vec<u64>,
    scalars: Vec<u64>,
}

type Outputs = Result<Vec<u64>, String>;

/// Runs every case on `ranks` (one rank), in order.
fn run_cases(ranks: Ranks, cases: &[Case]) -> Result<Vec<Outputs>, String> {
    let out = symm::run(ranks, CommOptions::default(), |comm| {
        let mut res = Vec::with_capacity(cases.len());
        for c in cases {
            let k = &KERNELS[c.kernel];
            let one = (|| {
                let inp = comm.device_buffer_from(&c.inputs)?;
                let mut out = comm.device_buffer_from(&[POISON; OUT_SLOTS])?;
                (k.launch)(comm, &inp, &mut out, &c.scalars)?;
                comm.synchronize()?;
                out.to_host()
            })();
            res.push(one.map_err(|e| e.to_string()));
        }
        Ok(res)
    })
    .map_err(|e| e.to_string())?;
    Ok(out.into_iter().next().unwrap_or_default())
}

/// Whether two slots of type `ty` agree (see the NaN rule above).
fn same(ty: Ty, a: u64, b: u64) -> bool {
    if a == b {
        return true;
    }
    let nan = |x: u64| match ty {
        Ty::F32 => x >> 32 == 0 && f32::from_bits(x as u32).is_nan(),
        Ty::F64 => f64::from_bits(x).is_nan(),
        Ty::Bf16 => x >> 16 == 0 && x & 0x7f80 == 0x7f80 && x & 0x7f != 0,
        Ty::F16 => x >> 16 == 0 && x & 0x7c00 == 0x7c00 && x & 0x3ff != 0,
        _ => false,
    };
    nan(a) && nan(b)
}

/// A divergence, written as a repro.
fn repro(
    k: &Kernel,
    c: &Case,
    what: &str,
    a_name: &str,
    a: &Outputs,
    b_name: &str,
    b: &Outputs,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "=== DIVERGENCE in `{}` (case {}): {what}",
        k.name, c.case
    );
    let _ = writeln!(s, "classes used: {:?}", k.classes);
    let _ = writeln!(s, "kernel source:\n{}", k.source);
    let tys: Vec<String> = k
        .inputs
        .iter()
        .zip(&c.inputs)
        .map(|(t, v)| format!("{:?}={v:#x}", Ty::from_code(*t)))
        .collect();
    let _ = writeln!(s, "inp: [{}]", tys.join(", "));
    let sc: Vec<String> = k
        .scalars
        .iter()
        .zip(&c.scalars)
        .map(|(t, v)| format!("{:?}={v:#x}", Ty::from_code(*t)))
        .collect();
    let _ = writeln!(s, "scalars: [{}]", sc.join(", "));
    let fmt = |o: &Outputs| match o {
        Ok(v) => v
            .iter()
            .zip(k.outputs)
            .map(|(x, t)| format!("{:?}:{x:#x}", Ty::from_code(*t)))
            .collect::<Vec<_>>()
            .join(" "),
        Err(e) => format!("ERROR {e}"),
    };
    let _ = writeln!(s, "{a_name:>8}: {}", fmt(a));
    let _ = writeln!(s, "{b_name:>8}: {}", fmt(b));
    s
}

/// Compares two runs' outputs case by case; returns the divergent kernels
/// and their repros.
fn compare(
    cases: &[Case],
    a_name: &str,
    a: &[Outputs],
    b_name: &str,
    b: &[Outputs],
) -> (Vec<usize>, String) {
    let mut bad = Vec::new();
    let mut report = String::new();
    for (i, c) in cases.iter().enumerate() {
        if bad.contains(&c.kernel) {
            continue;
        }
        let k = &KERNELS[c.kernel];
        let what = match (&a[i], &b[i]) {
            (Ok(x), Ok(y)) => {
                let slots: Vec<usize> = (0..OUT_SLOTS)
                    .filter(|&s| !same(Ty::from_code(k.outputs[s]), x[s], y[s]))
                    .collect();
                if slots.is_empty() {
                    continue;
                }
                format!("out slots {slots:?} differ")
            }
            (_, Err(e)) if e == REJECTED => continue,
            (Err(_), Err(_)) => "both failed".to_string(),
            _ => "one side failed".to_string(),
        };
        bad.push(c.kernel);
        report.push_str(&repro(k, c, &what, a_name, &a[i], b_name, &b[i]));
    }
    (bad, report)
}

/// The single-thread shim that lets the host C++ compiler take the CUDA C
/// the runtime hands NVRTC: CUDA's keywords and thread geometry for one
/// thread of one block, and the `symm_host_*` functions that replace the
/// prelude's inline PTX (see [`rewrite_asm`]), each with the PTX
/// instruction's semantics (canonical NaNs, -0 below +0 in min/max).
const SHIM: &str = r#"
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
extern "C" int printf(const char*, ...);
extern "C" int scanf(const char*, ...);
extern "C" int fflush(void*);
extern "C" void abort(void);
extern "C" float fmodf(float, float);
extern "C" double fmod(double, double);
extern "C" float expf(float);
struct symm_host_dim3 { unsigned x, y, z; };
static const symm_host_dim3 threadIdx = {0, 0, 0};
static const symm_host_dim3 blockIdx = {0, 0, 0};
static const symm_host_dim3 blockDim = {1, 1, 1};
static const symm_host_dim3 gridDim = {1, 1, 1};
static const int warpSize = 32;
[[noreturn]] static void symm_host_unsupported(const char* what) {
    printf("UNSUPPORTED on the host shim: %s\n", what);
    fflush(0);
    abort();
}
#define __syncthreads() symm_host_unsupported("__syncthreads")
#define __syncwarp(...) symm_host_unsupported("__syncwarp")
#define __threadfence() symm_host_unsupported("__threadfence")
#define __threadfence_system() symm_host_unsupported("__threadfence_system")
#define __nanosleep(...) symm_host_unsupported("__nanosleep")
template<class T> static T symm_host_die(const char* what) { symm_host_unsupported(what); }
#define __shfl_xor_sync(m, v, ...) symm_host_die<decltype(v)>("__shfl_xor_sync")
#define __shfl_down_sync(m, v, ...) symm_host_die<decltype(v)>("__shfl_down_sync")
#define __shfl_up_sync(m, v, ...) symm_host_die<decltype(v)>("__shfl_up_sync")
#define __shfl_sync(m, v, ...) symm_host_die<decltype(v)>("__shfl_sync")
#define __ballot_sync(...) symm_host_die<unsigned>("__ballot_sync")
#define __activemask() symm_host_die<unsigned>("__activemask")
#define __trap() symm_host_unsupported("__trap")

static inline unsigned short symm_host_f32_to_bf16(float x) {
    unsigned u = __builtin_bit_cast(unsigned, x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline unsigned short symm_host_f32_to_f16(float x) {
    if (x != x) return 0x7fff;
    return __builtin_bit_cast(unsigned short, (_Float16)x);
}
static inline float symm_host_f16_to_f32(unsigned short b) {
    return (float)__builtin_bit_cast(_Float16, b);
}
static inline float symm_host_pack_f32(unsigned short lo, unsigned short hi) {
    return __builtin_bit_cast(float, (unsigned)lo | ((unsigned)hi << 16));
}
template<class F> static inline F symm_host_canonical_nan();
template<> inline float symm_host_canonical_nan<float>() { return __builtin_bit_cast(float, 0x7fffffffu); }
template<> inline double symm_host_canonical_nan<double>() { return __builtin_bit_cast(double, 0xfff8000000000000ull); }
template<class F> static inline F symm_host_min(F a, F b) {
    if (a != a && b != b) return symm_host_canonical_nan<F>();
    if (a != a) return b;
    if (b != b) return a;
    if (a == 0 && b == 0) return __builtin_signbit(a) ? a : b;
    return a < b ? a : b;
}
template<class F> static inline F symm_host_max(F a, F b) {
    if (a != a && b != b) return symm_host_canonical_nan<F>();
    if (a != a) return b;
    if (b != b) return a;
    if (a == 0 && b == 0) return __builtin_signbit(a) ? b : a;
    return a > b ? a : b;
}
template<class T, class F> static inline T symm_host_f2i(F x) {
    if (x != x) return 0;
    constexpr bool sig = (T)(-1) < (T)0;
    constexpr int bits = 8 * sizeof(T);
    const F hi = sig ? (F)(1ull << (bits - 1)) : (F)2 * (F)(1ull << (bits - 1));
    const F lo = sig ? -hi : (F)0;
    const F t = __builtin_trunc(x);
    if (t >= hi) return sig ? (T)((1ull << (bits - 1)) - 1) : (T)~0ull;
    if (t < lo) return sig ? (T)(1ull << (bits - 1)) : (T)0;
    return (T)t;
}
"#;

/// Splits the preprocessed source at every `asm` statement and writes the
/// host's version of each: the inline-PTX leaves of the prelude's scalar
/// code (IEEE arithmetic, conversions, min/max, fma, sqrt) become calls of
/// the shim's `symm_host_*`, everything else (memory order, fences, timers,
/// warp votes) an abort that names it (a corpus kernel never reaches one).
fn rewrite_asm(src: &str) -> Result<String, String> {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut last = 0;
    while let Some(off) = src[i..].find("asm") {
        let at = i + off;
        i = at + 3;
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        if (at > 0 && word(b[at - 1])) || (i < b.len() && word(b[i])) {
            continue;
        }
        // Skip `volatile`/`__volatile__` and blanks up to `(`.
        let mut j = i;
        loop {
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if src[j..].starts_with("volatile") {
                j += 8;
            } else if src[j..].starts_with("__volatile__") {
                j += 12;
            } else {
                break;
            }
        }
        if j >= b.len() || b[j] != b'(' {
            continue;
        }
        // The balanced parenthesis, strings skipped.
        let open = j;
        let mut depth = 0;
        let mut k = j;
        let mut in_str = false;
        while k < b.len() {
            let c = b[k];
            if in_str {
                if c == b'\\' {
                    k += 1;
                } else if c == b'"' {
                    in_str = false;
                }
            } else if c == b'"' {
                in_str = true;
            } else if c == b'(' {
                depth += 1;
            } else if c == b')' {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            k += 1;
        }
        if k >= b.len() {
            return Err(format!("unbalanced asm at byte {at}"));
        }
        let inner = &src[open + 1..k];
        out.push_str(&src[last..at]);
        out.push_str(&host_asm(inner));
        last = k + 1;
        i = k + 1;
    }
    out.push_str(&src[last..]);
    Ok(out)
}

/// Top-level pieces of `s` split at `sep`, strings and brackets respected.
fn split_top(s: &str, sep: u8) -> Vec<String> {
    let b = s.as_bytes();
    let (mut parts, mut depth, mut in_str, mut start) = (Vec::new(), 0i32, false, 0);
    let mut k = 0;
    while k < b.len() {
        let c = b[k];
        if in_str {
            if c == b'\\' {
                k += 1;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
        } else if c == b'(' || c == b'{' || c == b'[' {
            depth += 1;
        } else if c == b')' || c == b'}' || c == b']' {
            depth -= 1;
        } else if c == sep && depth == 0 {
            parts.push(s[start..k].to_string());
            start = k + 1;
        }
        k += 1;
    }
    parts.push(s[start..].to_string());
    parts
}

/// The concatenated string literals at the start of `s`, and the rest.
fn literals(s: &str) -> (String, &str) {
    let mut text = String::new();
    let mut rest = s.trim_start();
    while let Some(r) = rest.strip_prefix('"') {
        let b = r.as_bytes();
        let mut k = 0;
        while k < b.len() && b[k] != b'"' {
            if b[k] == b'\\' {
                k += 1;
            }
            k += 1;
        }
        text.push_str(&r[..k.min(r.len())]);
        rest = r[(k + 1).min(r.len())..].trim_start();
    }
    (text, rest)
}

/// The operand expressions of an asm operand list (`"=f"(r), "f"(a)`).
fn operands(list: Option<&String>) -> Vec<String> {
    let Some(list) = list else { return Vec::new() };
    split_top(list, b',')
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (_, rest) = literals(p);
            rest.trim().to_string()
        })
        .collect()
}

/// The host's statement for one asm statement's inside.
fn host_asm(inner: &str) -> String {
    let parts = split_top(inner, b':');
    let (template, _) = literals(&parts[0]);
    let t: String = template
        .replace("\\n", " ")
        .replace("\\t", " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let o = operands(parts.get(1));
    let i = operands(parts.get(2));
    let op = |n: usize, v: &[String]| v.get(n).cloned().unwrap_or_default();
    let (o0, i0, i1, i2) = (op(0, &o), op(0, &i), op(1, &i), op(2, &i));
    let first = t.split([' ', ';']).next().unwrap_or("");
    let body = match first {
        "add.rn.f32" => format!("{o0} = (float){i0} + (float){i1}"),
        "sub.rn.f32" => format!("{o0} = (float){i0} - (float){i1}"),
        "mul.rn.f32" => format!("{o0} = (float){i0} * (float){i1}"),
        "div.rn.f32" => format!("{o0} = (float){i0} / (float){i1}"),
        "min.f32" | "min.f64" => format!("{o0} = symm_host_min({i0}, {i1})"),
        "max.f32" | "max.f64" => format!("{o0} = symm_host_max({i0}, {i1})"),
        "fma.rn.f32" => format!("{o0} = __builtin_fmaf({i0}, {i1}, {i2})"),
        "fma.rn.f64" => format!("{o0} = __builtin_fma({i0}, {i1}, {i2})"),
        "sqrt.rn.f32" => format!("{o0} = __builtin_sqrtf({i0})"),
        "sqrt.rn.f64" => format!("{o0} = __builtin_sqrt({i0})"),
        "cvt.rn.bf16.f32" => format!("{o0} = symm_host_f32_to_bf16({i0})"),
        "cvt.rn.f16.f32" => format!("{o0} = symm_host_f32_to_f16({i0})"),
        "cvt.f32.f16" => format!("{o0} = symm_host_f16_to_f32({i0})"),
        "mov.b32" if t.contains('{') => format!("{o0} = symm_host_pack_f32({i0}, {i1})"),
        "mov.u32" if t.contains("%laneid") => format!("{o0} = 0"),
        _ if t.contains("setp.nan") && t.contains("cvt.rzi.") => {
            let ty = t
                .split("cvt.rzi.")
                .nth(1)
                .and_then(|r| r.split('.').next())
                .unwrap_or("");
            let c = match ty {
                "s32" => "int",
                "u32" => "unsigned",
                "s64" => "long long",
                _ => "unsigned long long",
            };
            format!("{o0} = symm_host_f2i<{c}>({i0})")
        }
        _ => format!(
            "symm_host_unsupported(\"{}\")",
            t.replace('"', "'").replace('\\', "/")
        ),
    };
    format!("do {{ {body}; }} while (0)")
}

/// The line that ends the runtime's support code in every kernel's source;
/// what follows is the kernel's own (device functions, body, entry).
const SUPPORT_END: &str = "#endif /* SYMM_IMPL_RECEIVE_CUH */";

/// The support code once, then each kernel's own code in a namespace of
/// its own (device functions of one name differ between kernels), so that
/// one compilation takes every kernel; with the line where each kernel's
/// namespace starts.
fn batch(kernels: &[usize]) -> Result<(String, Vec<(usize, usize)>), String> {
    let mut common: Option<String> = None;
    let mut parts = String::new();
    let mut starts = Vec::new();
    let mut line = 0;
    for &ki in kernels {
        let k = &KERNELS[ki];
        let src = (k.cuda)();
        let Some(at) = src.rfind(SUPPORT_END) else {
            return Err(format!("`{}`: no `{SUPPORT_END}` in its CUDA C", k.name));
        };
        let (head, tail) = src.split_at(at + SUPPORT_END.len());
        match &common {
            None => {
                common = Some(format!("{head}\n"));
                line = head.lines().count();
            }
            Some(c) if c.trim_end() != head.trim_end() => {
                return Err(format!(
                    "`{}`: its support code differs from the first kernel's",
                    k.name
                ))
            }
            Some(_) => {}
        }
        let part = format!("namespace ns_{} {{\n{tail}\n}}\n", k.name);
        starts.push((line + 1, ki));
        line += part.lines().count();
        parts.push_str(&part);
    }
    Ok((common.unwrap_or_default() + &parts, starts))
}

/// The host program: the shim, the [`batch`], and a `main` that runs the
/// cases read from stdin.
fn host_program(kernels: &[usize]) -> Result<String, String> {
    let (code, _) = batch(kernels)?;
    let mut dispatch = String::new();
    for &ki in kernels {
        let k = &KERNELS[ki];
        let mut args = String::new();
        for (i, t) in k.scalars.iter().enumerate() {
            let _ = match Ty::from_code(*t) {
                Ty::F32 => write!(args, ", __builtin_bit_cast(float, (unsigned)sc[{i}])"),
                t => write!(args, ", ({})sc[{i}]", t.c_name()),
            };
        }
        let _ = writeln!(
            dispatch,
            "    case {ki}: ns_{n}::{n}(status, 0, 0, (void*)in, nin, (void*)out, {OUT_SLOTS}{args}); break;",
            n = k.name
        );
    }
    let mut prog = String::new();
    prog.push_str(SHIM);
    prog.push_str(&code);
    let _ = write!(
        prog,
        r#"
int main() {{
    int ki, ci, nin, nsc;
    while (scanf("%d %d %d", &ki, &ci, &nin) == 3) {{
        unsigned long long in[64], sc[8], out[{OUT_SLOTS}];
        for (int i = 0; i < nin; ++i) scanf("%llx", &in[i]);
        scanf("%d", &nsc);
        for (int i = 0; i < nsc; ++i) scanf("%llx", &sc[i]);
        for (int i = 0; i < {OUT_SLOTS}; ++i) out[i] = {POISON}ull;
        symm_u32 status[64] = {{0}};
        printf("B %d %d\n", ki, ci);
        fflush(0);
        switch (ki) {{
{dispatch}    default: printf("unknown kernel %d\n", ki); return 2;
        }}
        printf("R %d %d", ki, ci);
        for (int i = 0; i < {OUT_SLOTS}; ++i) printf(" %llx", out[i]);
        printf("\n");
        fflush(0);
    }}
    return 0;
}}
"#
    );
    Ok(prog)
}

fn cxx() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "g++".into())
}

fn run_cmd(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().take(60).collect();
        Err(format!("{what} failed:\n{}", lines.join("\n")))
    }
}

/// Builds the host program for `kernels` in `dir`; returns its path, or
/// the compiler's errors (first lines) and the kernels they are in.
fn build_host(dir: &Path, kernels: &[usize]) -> Result<PathBuf, (String, Vec<usize>)> {
    let plain = |e: String| (e, Vec::new());
    let prog = host_program(kernels).map_err(plain)?;
    let cpp = dir.join("difftest.cpp");
    let ii = dir.join("difftest.ii");
    let host = dir.join("difftest_host.cpp");
    let exe = dir.join("difftest_host");
    std::fs::write(&cpp, prog).map_err(|e| plain(e.to_string()))?;
    run_cmd(
        Command::new(cxx())
            .args(["-std=c++20", "-E", "-P", "-x", "c++"])
            .arg(&cpp)
            .arg("-o")
            .arg(&ii),
        "preprocessing the host program",
    )
    .map_err(plain)?;
    let pre = std::fs::read_to_string(&ii).map_err(|e| plain(e.to_string()))?;
    let text = rewrite_asm(&pre).map_err(plain)?;
    // Where each kernel's namespace starts, to blame errors by line.
    let starts: Vec<(usize, usize)> = text
        .lines()
        .enumerate()
        .filter_map(|(n, l)| {
            let name = l.strip_prefix("namespace ns_")?.strip_suffix(" {")?;
            let ki = KERNELS.iter().position(|k| k.name == name)?;
            Some((n + 1, ki))
        })
        .collect();
    std::fs::write(&host, &text).map_err(|e| plain(e.to_string()))?;
    // C++20 where NVRTC takes C++17: g++ 12 rejects a lambda in `decltype`
    // before C++20 (NVRTC accepts the ones the macro writes).
    // -ffp-contract=off: as NVRTC's --fmad=false, a * b + c rounds twice.
    let out = Command::new(cxx())
        .args([
            "-std=c++20",
            "-O1",
            "-w",
            "-ffp-contract=off",
            "-fno-fast-math",
            "-x",
            "c++",
        ])
        .arg(&host)
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .output()
        .map_err(|e| plain(format!("{}: {e}", cxx())))?;
    if out.status.success() {
        return Ok(exe);
    }
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let mut blamed = Vec::new();
    for line in err.lines() {
        let Some(rest) = line.split("difftest_host.cpp:").nth(1) else {
            continue;
        };
        let Some(n) = rest.split(':').next().and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        if let Some((_, ki)) = starts.iter().rev().find(|(s, _)| *s <= n) {
            if !blamed.contains(ki) {
                blamed.push(*ki);
            }
        }
    }
    let first: Vec<&str> = err.lines().take(40).collect();
    Err((first.join("\n"), blamed))
}

/// Runs `cases` through the host program; a case that crashes it is an
/// error of that case, and the rest run again without it.
fn run_host(exe: &Path, cases: &[Case]) -> Vec<Outputs> {
    let mut res: Vec<Option<Outputs>> = vec![None; cases.len()];
    let mut start = 0;
    while start < cases.len() {
        let mut input = String::new();
        for c in &cases[start..] {
            let _ = write!(input, "{} {} {}", c.kernel, c.case, c.inputs.len());
            for v in &c.inputs {
                let _ = write!(input, " {v:x}");
            }
            let _ = write!(input, " {}", c.scalars.len());
            for v in &c.scalars {
                let _ = write!(input, " {v:x}");
            }
            input.push('\n');
        }
        let child = Command::new(exe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                for r in res.iter_mut().skip(start) {
                    *r = Some(Err(format!("host program: {e}")));
                }
                break;
            }
        };
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        let out = child.wait_with_output().expect("host program output");
        let _ = writer.join();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut done = start;
        let mut crashed_msg = String::new();
        for line in text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.first() == Some(&"R") && w.len() == 3 + OUT_SLOTS {
                let v: Vec<u64> = w[3..]
                    .iter()
                    .map(|x| u64::from_str_radix(x, 16).unwrap_or(0))
                    .collect();
                res[done] = Some(Ok(v));
                done += 1;
            } else if w.first() != Some(&"B") {
                crashed_msg.push_str(line);
                crashed_msg.push('\n');
            }
        }
        if done < cases.len() {
            let err = String::from_utf8_lossy(&out.stderr);
            res[done] = Some(Err(format!(
                "the host program died ({}) in this case: {}{}",
                out.status,
                crashed_msg.trim(),
                err.trim()
            )));
            done += 1;
        }
        start = done;
    }
    res.into_iter()
        .map(|r| r.unwrap_or_else(|| Err("not run".into())))
        .collect()
}

/// Compiles every kernel with NVRTC for sm_90, with the options the
/// runtime uses, as one program (the [`batch`]: one NVRTC run for the
/// corpus); the kernels it blames are compiled again alone, through their
/// own `compile_for` (the runtime's compile-only path, as
/// `check_kernels!`), whose errors are the report. Returns the kernels
/// compiled and the failures, as text.
fn nvrtc_all() -> (usize, Vec<String>) {
    use symm::jit::{CompileRequest, JitEngine, KERNEL_OPTIONS};
    let all: Vec<usize> = (0..KERNELS.len()).collect();
    let (source, starts) = match batch(&all) {
        Ok(b) => b,
        Err(e) => return (0, vec![e]),
    };
    let options: Vec<String> = KERNEL_OPTIONS.iter().map(|s| s.to_string()).collect();
    let req = CompileRequest {
        kernel_name: "difftest_corpus",
        source: &source,
        arch: Arch::new(9, 0),
        options: &options,
    };
    let blamed: Vec<usize> = match JitEngine::new(None).compile(&req) {
        Ok(_) => return (KERNELS.len(), Vec::new()),
        Err(e) => {
            let text = e.to_string();
            let mut b = Vec::new();
            for l in text.lines().filter(|l| l.contains(": error")) {
                let n = l
                    .split_once(".cu(")
                    .and_then(|(_, r)| r.split(')').next())
                    .and_then(|n| n.parse::<usize>().ok());
                if let Some((_, ki)) = n.and_then(|n| starts.iter().rev().find(|(s, _)| *s <= n)) {
                    if !b.contains(ki) {
                        b.push(*ki);
                    }
                }
            }
            if b.is_empty() {
                return (
                    KERNELS.len(),
                    vec![format!(
                        "NVRTC rejects the corpus, no kernel blamed:\n{text}"
                    )],
                );
            }
            b
        }
    };
    let mut fails = Vec::new();
    for ki in blamed {
        let k = &KERNELS[ki];
        match (k.compile)(Arch::new(9, 0)) {
            // The errors, not NVRTC's notes on every candidate.
            Err(e) => {
                let text = e.to_string();
                let e: Vec<&str> = text
                    .lines()
                    .filter(|l| l.contains("error") || l.starts_with('>'))
                    .take(8)
                    .collect();
                fails.push(format!(
                    "=== NVRTC rejects `{}` (classes {:?}):\n{}\nkernel source:\n{}",
                    k.name,
                    k.classes,
                    e.join("\n"),
                    k.source
                ));
            }
            Ok(()) => fails.push(format!(
                "=== NVRTC rejects `{}` in the batch but compiles it alone (a tester bug?)",
                k.name
            )),
        }
    }
    (KERNELS.len(), fails)
}

/// Checks that the comparison can fail at all: a flipped bit in a written
/// slot, a NaN against a number, and a poisoned slot against a written one
/// must each be a divergence, and some kernel must have written its slots.
fn self_check(cases: &[Case], emu: &[Outputs]) {
    let written = emu
        .iter()
        .flatten()
        .flat_map(|v| v.iter())
        .filter(|x| **x != POISON)
        .count();
    assert!(
        written > cases.len(),
        "the kernels wrote only {written} slots"
    );
    let Some(i) = emu.iter().position(|r| r.is_ok()) else {
        panic!("every emulator launch failed")
    };
    let one = std::slice::from_ref(&cases[i]);
    let base = emu[i].clone().unwrap();
    for slot in 0..OUT_SLOTS {
        let ty = Ty::from_code(KERNELS[cases[i].kernel].outputs[slot]);
        // An exponent bit for floats (a NaN stays no NaN), the low bit else.
        let bit = match ty {
            Ty::F32 => 30,
            Ty::F64 => 62,
            Ty::Bf16 | Ty::F16 => 14,
            _ => 0,
        };
        let mut flipped = base.clone();
        flipped[slot] ^= 1 << bit;
        let nan = match ty {
            Ty::F32 => 0x7fc0_0000,
            Ty::F64 => 0x7ff8_0000_0000_0000,
            _ => 0x7fc0,
        };
        let mut poisoned = base.clone();
        poisoned[slot] = if base[slot] == POISON { 0 } else { POISON };
        for other in [flipped, poisoned] {
            let (bad, _) = compare(one, "a", &[Ok(base.clone())], "b", &[Ok(other)]);
            assert_eq!(
                bad.len(),
                1,
                "the comparison misses a change in slot {slot}"
            );
        }
        if matches!(ty, Ty::F32 | Ty::F64 | Ty::Bf16 | Ty::F16) && !same(ty, base[slot], nan) {
            let mut n = base.clone();
            n[slot] = nan;
            let (bad, _) = compare(one, "a", &[Ok(base.clone())], "b", &[Ok(n)]);
            assert_eq!(
                bad.len(),
                1,
                "the comparison takes a NaN for {:#x}",
                base[slot]
            );
        }
    }
}

/// The corpus's launches and the emulator's outputs for them: the
/// reference every other side is compared with, made once per process.
struct Reference {
    input_seed: u64,
    cases: Vec<Case>,
    emu: Vec<Outputs>,
}

fn reference() -> &'static Reference {
    static REFERENCE: std::sync::OnceLock<Reference> = std::sync::OnceLock::new();
    REFERENCE.get_or_init(|| {
        let input_seed = match std::env::var("SYMM_DIFFTEST_INPUT_SEED") {
            Ok(s) => s
                .trim()
                .parse()
                .expect("SYMM_DIFFTEST_INPUT_SEED: an integer"),
            Err(_) => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64),
        };
        println!(
            "difftest: {} kernels from corpus seed {SEED} (SYMM_DIFFTEST_SEED), inputs seed {input_seed} \
             (SYMM_DIFFTEST_INPUT_SEED), classes on: {CLASSES_ON:?}",
            KERNELS.len()
        );
        let mut rng = Rng(input_seed);
        let mut cases = Vec::new();
        for (ki, k) in KERNELS.iter().enumerate() {
            for case in 0..CASES {
                let inputs = k
                    .inputs
                    .iter()
                    .map(|t| draw(&mut rng, Ty::from_code(*t)))
                    .collect();
                let scalars = k
                    .scalars
                    .iter()
                    .map(|t| draw(&mut rng, Ty::from_code(*t)))
                    .collect();
                cases.push(Case {
                    kernel: ki,
                    case,
                    inputs,
                    scalars,
                });
            }
        }
        let t = Instant::now();
        let emu = match run_cases(Ranks::Emulator(1), &cases) {
            Ok(v) => v,
            Err(e) => panic!("the emulator run failed: {e}"),
        };
        println!(
            "emulator: {} launches in {:.1?} ({} failed)",
            cases.len(),
            t.elapsed(),
            emu.iter().filter(|r| r.is_err()).count()
        );
        Reference {
            input_seed,
            cases,
            emu,
        }
    })
}

/// How to run the corpus of a failure again.
fn rerun(r: &Reference) -> String {
    format!(
        "rerun: SYMM_DIFFTEST_SEED={SEED} SYMM_DIFFTEST_INPUT_SEED={}, and the same \
         SYMM_DIFFTEST_KERNELS/SYMM_DIFFTEST_INCLUDE",
        r.input_seed
    )
}

/// Says, for `scripts/gpu-summary.py`, that `test` ran (at world size 1).
fn ran(test: &str) {
    targets::say_case(test, 1, None);
}

/// How many kernels of the corpus use each class of construct.
fn census() -> String {
    let mut by_class: Vec<(&str, usize)> = Vec::new();
    for k in KERNELS {
        for c in k.classes {
            match by_class.iter_mut().find(|(n, _)| n == c) {
                Some(e) => e.1 += 1,
                None => by_class.push((c, 1)),
            }
        }
    }
    format!("kernels per class: {by_class:?}")
}

/// The generator writes only defined operations: an emulator failure is a
/// bug of the emulator or of the generator. And the comparison can fail.
#[test]
fn the_emulator_runs_every_kernel() {
    let r = reference();
    println!("{}", census());
    let failures: Vec<String> = r
        .cases
        .iter()
        .zip(&r.emu)
        .filter_map(|(c, o)| {
            let e = o.as_ref().err()?;
            Some(format!(
                "=== the emulator fails `{}` (case {}): {e}\n{}",
                KERNELS[c.kernel].name, c.case, KERNELS[c.kernel].source
            ))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{}\n{} launches failed on the emulator ({})",
        failures.join("\n"),
        failures.len(),
        rerun(r)
    );
    self_check(&r.cases, &r.emu);
    ran("the_emulator_runs_every_kernel");
}

/// The generated CUDA C, compiled by the host's C++ compiler under the
/// shim, equals the emulator bit for bit.
#[test]
fn host_cxx_matches_the_emulator() {
    if Command::new(cxx()).arg("--version").output().is_err() {
        // CI has g++; only a GPU machine may lack it: say so loudly there,
        // fail everywhere else.
        let gpus = symm::cuda_device_count();
        assert!(
            gpus > 0,
            "no C++ compiler `{}` (set CXX): the host step cannot run",
            cxx()
        );
        // Past libtest's capture, which hides a passing test's `eprintln!`.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr().lock(),
            format!(
                "SKIPPED: difftest host step: no C++ compiler `{}` (set CXX) on this GPU machine\n",
                cxx()
            )
            .as_bytes(),
        );
        return;
    }
    let r = reference();
    let (cases, emu) = (&r.cases, &r.emu);
    let t = Instant::now();
    let keep = std::env::var_os("SYMM_DIFFTEST_KEEP").map(PathBuf::from);
    let tmp = std::env::temp_dir().join(format!("symm-difftest-{}", std::process::id()));
    let dir = keep.clone().unwrap_or(tmp);
    std::fs::create_dir_all(&dir).expect("host program directory");
    // Kernels the host compiler rejects are divergences too (the NVRTC
    // test says whether NVRTC rejects them as well); the program is built
    // again without them.
    let mut kernels: Vec<usize> = (0..KERNELS.len()).collect();
    let mut rejected: Vec<(usize, String)> = Vec::new();
    let exe = loop {
        match build_host(&dir, &kernels) {
            Ok(e) => break e,
            Err((e, blamed)) if !blamed.is_empty() && rejected.len() < KERNELS.len() => {
                for ki in &blamed {
                    let errs: Vec<&str> =
                        e.lines().filter(|l| l.contains("error")).take(3).collect();
                    rejected.push((*ki, errs.join("\n")));
                }
                kernels.retain(|k| !blamed.contains(k));
            }
            Err((e, _)) => panic!("{e}\n(the program is in {})", dir.display()),
        }
    };
    for (ki, e) in &rejected {
        let k = &KERNELS[*ki];
        println!(
            "=== DIVERGENCE in `{}`: the host compiler rejects its CUDA C\nclasses used: {:?}\n{e}\nkernel source:\n{}",
            k.name, k.classes, k.source
        );
    }
    let built = t.elapsed();
    let host_cases: Vec<Case> = cases
        .iter()
        .filter(|c| kernels.contains(&c.kernel))
        .cloned()
        .collect();
    let mut it = run_host(&exe, &host_cases).into_iter();
    let host: Vec<Outputs> = cases
        .iter()
        .map(|c| {
            if kernels.contains(&c.kernel) {
                it.next().unwrap_or_else(|| Err("not run".into()))
            } else {
                Err(REJECTED.into())
            }
        })
        .collect();
    println!(
        "host C++: built in {built:.1?}, ran in {:.1?}",
        t.elapsed() - built
    );
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (bad, report) = compare(cases, "emulator", emu, "host", &host);
    println!("{report}");
    let summary = format!(
        "emulator vs host C++: {} of {} kernels diverge ({} of them rejected by the host compiler)",
        bad.len() + rejected.len(),
        KERNELS.len(),
        rejected.len()
    );
    println!("{summary}");
    assert!(
        bad.is_empty() && rejected.is_empty(),
        "{summary} (the report is above; {})",
        rerun(r)
    );
    ran("host_cxx_matches_the_emulator");
}

/// Every kernel of the corpus compiles with NVRTC (sm_90).
#[test]
fn nvrtc_compiles_every_kernel() {
    if !symm::jit::require_nvrtc("the difftest corpus") {
        return;
    }
    let t = Instant::now();
    let (n, fails) = nvrtc_all();
    for f in &fails {
        println!("{f}");
    }
    let summary = format!(
        "NVRTC (sm_90): {} of {n} kernels compile, in {:.1?}",
        n - fails.len(),
        t.elapsed()
    );
    println!("{summary}");
    assert!(
        fails.is_empty(),
        "{summary}:\n{}\n(corpus seed {SEED})",
        fails.join("\n")
    );
    ran("nvrtc_compiles_every_kernel");
}

/// The same launches through the CUDA backend (GPU 0) equal the emulator
/// bit for bit. The GPU tier: run with `--ignored` on a GPU machine.
#[test]
#[ignore = "GPU tier: needs a CUDA GPU; run with --ignored"]
fn gpu_matches_the_emulator() {
    assert!(
        symm::cuda_device_count() > 0,
        "no CUDA GPU: `gpu_matches_the_emulator` is a test of the GPU tier, which needs one \
         (run it on a GPU machine; a plain `cargo test` leaves it out)"
    );
    let r = reference();
    let t = Instant::now();
    let gpu = run_cases(Ranks::Cuda(vec![0]), &r.cases)
        .unwrap_or_else(|e| panic!("the GPU run failed: {e}"));
    let (bad, report) = compare(&r.cases, "emulator", &r.emu, "gpu", &gpu);
    println!("{report}");
    let summary = format!(
        "emulator vs GPU: {} of {} kernels diverge ({} launches in {:.1?})",
        bad.len(),
        KERNELS.len(),
        r.cases.len(),
        t.elapsed()
    );
    println!("{summary}");
    assert!(
        bad.is_empty(),
        "{summary} (the report is above; {})",
        rerun(r)
    );
    ran("gpu_matches_the_emulator");
}
