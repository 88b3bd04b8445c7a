//! Header-free CUDA C prelude prepended to generated kernels.
//!
//! The device code lives in real headers under `symm-runtime/cuda/`, laid
//! out like NCCL's device API: `symm_core.cuh` and `symm.cuh` are the
//! contracts (types and one commented declaration per function), and
//! `symm_impl/*.cuh` the implementations. NVRTC installed from PyPI ships
//! without the CUDA toolkit headers and gets no include path, so the files
//! include nothing: this module concatenates them (with `include_str!`)
//! into one self-contained string, and implements what kernels need
//! (fixed-width integers, bf16/f16 storage types, scoped memory operations)
//! directly with inline PTX, and the fp8 storage types' conversions as
//! integer code. Every operation used exists on sm_80 and later.
//!
//! Values that the device code shares with Rust (the signal-pad layout, the
//! signal kinds) are never written in the headers: this module generates
//! their `#define`s from the Rust items ([`crate::layout`],
//! [`crate::signal::SignalKind`]) and prepends them.

use crate::layout::{MAX_DOMAIN_SIZE, PAD_GROUP_SLOTS, PAD_PEER_GROUP, SIGNAL_BLOCKS};
use crate::status::{SignalKind, ASSERT_KIND, OUT_OF_BOUNDS_KIND};

/// CUDA C source that every kernel symm compiles starts with: the core
/// device API declared in `cuda/symm_core.cuh` (integer typedefs,
/// `symm_bf16`/`symm_f16`/`symm_f8e4m3`/`symm_f8e5m2` with conversions,
/// casts and arithmetic that round as Rust does on the CPU, memory
/// operations with explicit order and scope, timers, warp primitives), then
/// its implementations from
/// `cuda/symm_impl/`. Hand-written kernels may use all of it. It contains no
/// `#include`.
///
/// Functions are declared `SYMM_DEVICE_FN` (`static __device__
/// __forceinline__`, marked unused so that helpers a kernel skips raise no
/// warning), which generated code also uses for its own helpers; function
/// templates are `__device__ __forceinline__`. Internal helpers live in
/// `namespace symm_detail`.
pub const PRELUDE: &str = concat!(
    "\n#ifndef SYMM_PRELUDE_INCLUDED\n#define SYMM_PRELUDE_INCLUDED\n\n",
    include_str!("../../cuda/symm_core.cuh"),
    "\n",
    include_str!("../../cuda/symm_impl/types.cuh"),
    "\n",
    include_str!("../../cuda/symm_impl/convert.cuh"),
    "\n",
    include_str!("../../cuda/symm_impl/math.cuh"),
    "\n",
    include_str!("../../cuda/symm_impl/memory.cuh"),
    "\n",
    include_str!("../../cuda/symm_impl/control.cuh"),
    "\n#endif /* SYMM_PRELUDE_INCLUDED */\n",
);

/// `cuda/symm.cuh`: the contract of the DSL layer (handle types, the
/// signal protocol, what DSL methods translate to), whose implementations
/// [`crate::dsl::support`] appends.
pub(crate) const DSL_CONTRACT: &str = include_str!("../../cuda/symm.cuh");

/// Every value the device headers take from Rust, as (`#define` name,
/// value): the signal-pad layout of [`crate::layout`], the codes of
/// [`SignalKind`] and the status record's kinds of an index out of bounds
/// and a failed `kernel_assert!`.
/// The headers use these names and never define them.
pub(crate) fn device_constants() -> Vec<(&'static str, u64)> {
    let mut v = vec![
        ("SYMM_SIGNAL_BLOCKS", SIGNAL_BLOCKS as u64),
        ("SYMM_MAX_DOMAIN", MAX_DOMAIN_SIZE as u64),
        ("SYMM_PAD_PEER_GROUP", PAD_PEER_GROUP as u64),
        ("SYMM_PAD_GROUP_SLOTS", PAD_GROUP_SLOTS as u64),
        (
            "SYMM_SIGNAL_CHANNELS",
            crate::layout::SIGNAL_CHANNELS as u64,
        ),
    ];
    v.extend(
        SignalKind::ALL
            .iter()
            .map(|k| (k.device_name(), u64::from(k.code()))),
    );
    v.push(("SYMM_KIND_OUT_OF_BOUNDS", u64::from(OUT_OF_BOUNDS_KIND)));
    v.push(("SYMM_KIND_ASSERT", u64::from(ASSERT_KIND)));
    v.push(("SYMM_KIND_ABORTED", u64::from(crate::status::ABORTED_KIND)));
    v.push((
        "SYMM_KIND_MISMATCH",
        u64::from(crate::status::MISMATCH_KIND),
    ));
    v.push(("SYMM_ABORT_WORD", crate::status::ABORT_WORD as u64));
    v.push(("SYMM_ABORT_POLL_NS", crate::status::ABORT_POLL_NS));
    v
}

/// [`device_constants`] as the `#define` block that precedes `symm.cuh`.
pub(crate) fn device_defines() -> String {
    let mut d: String = device_constants()
        .iter()
        .map(|(name, value)| format!("#define {name} {value}u\n"))
        .collect();
    // The kernel ABI's structs, as `symm.cuh` places them.
    d.push_str(&format!(
        "#define SYMM_ABI_STRUCTS {}\n",
        symm_abi::cuda_structs()
    ));
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::support::DSL_SUPPORT;
    use crate::layout::{MAX_DOMAIN_SIZE, PAD_GROUP_SLOTS, PAD_PEER_GROUP, SIGNAL_BLOCKS};

    /// Every file under `cuda/`, by name.
    const HEADERS: &[(&str, &str)] = &[
        ("symm_core.cuh", include_str!("../../cuda/symm_core.cuh")),
        ("symm.cuh", include_str!("../../cuda/symm.cuh")),
        ("types.cuh", include_str!("../../cuda/symm_impl/types.cuh")),
        (
            "convert.cuh",
            include_str!("../../cuda/symm_impl/convert.cuh"),
        ),
        ("math.cuh", include_str!("../../cuda/symm_impl/math.cuh")),
        (
            "memory.cuh",
            include_str!("../../cuda/symm_impl/memory.cuh"),
        ),
        (
            "control.cuh",
            include_str!("../../cuda/symm_impl/control.cuh"),
        ),
        (
            "signal.cuh",
            include_str!("../../cuda/symm_impl/signal.cuh"),
        ),
        (
            "support.cuh",
            include_str!("../../cuda/symm_impl/support.cuh"),
        ),
        (
            "receive.cuh",
            include_str!("../../cuda/symm_impl/receive.cuh"),
        ),
    ];

    /// `#define NAME VALUE` lines of `src` with a numeric value, as
    /// (name, value); a `u` suffix is allowed.
    fn numeric_defines(src: &str) -> Vec<(String, u64)> {
        src.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next()? == "#define").then_some(())?;
                let (name, value) = (w.next()?, w.next()?);
                let value = value.trim_end_matches('u').parse().ok()?;
                Some((name.to_string(), value))
            })
            .collect()
    }

    /// `src` without its `/* ... */` comments.
    fn without_comments(src: &str) -> String {
        let mut out = String::new();
        let mut rest = src;
        while let Some(open) = rest.find("/*") {
            out.push_str(&rest[..open]);
            rest = rest[open..]
                .find("*/")
                .map_or("", |close| &rest[open + close + 2..]);
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn assembled_sources_include_nothing() {
        for (name, text) in HEADERS {
            assert!(!text.contains("#include"), "{name} has an #include");
        }
        for src in [PRELUDE, DSL_SUPPORT.as_str()] {
            assert!(!src.contains("#include") && !src.contains("# include"));
        }
    }

    #[test]
    fn every_define_from_rust_equals_its_rust_constant() {
        let want: Vec<(&str, u64)> = vec![
            ("SYMM_SIGNAL_BLOCKS", SIGNAL_BLOCKS as u64),
            ("SYMM_MAX_DOMAIN", MAX_DOMAIN_SIZE as u64),
            ("SYMM_PAD_PEER_GROUP", PAD_PEER_GROUP as u64),
            ("SYMM_PAD_GROUP_SLOTS", PAD_GROUP_SLOTS as u64),
            (
                "SYMM_SIGNAL_CHANNELS",
                crate::layout::SIGNAL_CHANNELS as u64,
            ),
            ("SYMM_KIND_PUT", u64::from(SignalKind::Put.code())),
            ("SYMM_KIND_WAIT", u64::from(SignalKind::Wait.code())),
            (
                "SYMM_KIND_BARRIER_PUT",
                u64::from(SignalKind::BarrierPut.code()),
            ),
            (
                "SYMM_KIND_BARRIER_WAIT",
                u64::from(SignalKind::BarrierWait.code()),
            ),
            (
                "SYMM_KIND_OUT_OF_BOUNDS",
                u64::from(crate::status::OUT_OF_BOUNDS_KIND),
            ),
            ("SYMM_KIND_ASSERT", u64::from(crate::status::ASSERT_KIND)),
            ("SYMM_KIND_ABORTED", u64::from(crate::status::ABORTED_KIND)),
            (
                "SYMM_KIND_MISMATCH",
                u64::from(crate::status::MISMATCH_KIND),
            ),
            ("SYMM_ABORT_WORD", crate::status::ABORT_WORD as u64),
            ("SYMM_ABORT_POLL_NS", crate::status::ABORT_POLL_NS),
        ];
        let defined = numeric_defines(&DSL_SUPPORT);
        for (name, value) in &want {
            let got: Vec<u64> = defined
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(got, [*value], "{name} in the assembled source");
        }
        // Each reaches the device only from Rust: no header writes one.
        for (name, _) in device_constants() {
            assert!(want.iter().any(|(n, _)| *n == name), "{name} is untested");
            for (file, text) in HEADERS {
                assert!(
                    !text.contains(&format!("#define {name}")),
                    "{file} hard-codes {name}"
                );
            }
        }
        // And every SYMM_ name a header uses is defined by a header or by Rust.
        let all: String = HEADERS.iter().map(|(_, t)| *t).collect();
        let mut used: Vec<&str> = all
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("SYMM_") && w.len() > 5)
            .collect();
        used.sort_unstable();
        used.dedup();
        for w in used {
            assert!(
                all.contains(&format!("#define {w}"))
                    || device_constants().iter().any(|(n, _)| *n == w)
                    || device_defines().contains(&format!("#define {w} ")),
                "{w} is used by the headers but defined nowhere"
            );
        }
    }

    #[test]
    fn every_contract_function_is_implemented() {
        let (contracts, impls): (Vec<_>, Vec<_>) =
            HEADERS.iter().partition(|(n, _)| n.starts_with("symm"));
        let impl_text: String = impls.iter().map(|(_, t)| *t).collect();
        let mut declared = 0;
        for (file, text) in contracts {
            for line in without_comments(text).lines() {
                let Some(open) = line.find('(') else { continue };
                let Some(name) = line[..open].split_whitespace().last() else {
                    continue;
                };
                if !name.starts_with("symm_") || line.contains("#define") {
                    continue;
                }
                declared += 1;
                // Defined directly, or by a macro taking the name first.
                assert!(
                    impl_text.contains(&format!("{name}("))
                        || impl_text.contains(&format!("({name},")),
                    "{file} declares {name}, which no implementation defines"
                );
            }
        }
        assert!(declared > 100, "only {declared} declarations found");
    }
}
