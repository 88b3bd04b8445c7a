//! Device functions as kernels' sources list them: what a
//! `#[symm_kernel(device)]` function leaves behind, and what each intrinsic
//! defines beside its Rust stub (see [`intrinsic!`](super::intrinsics)).

/// What a `#[symm_kernel(device)]` function leaves for kernels that call it.
#[derive(Debug)]
pub struct DeviceFn {
    /// The function's name (for diagnostics and de-duplication).
    pub name: &'static str,
    /// Its CUDA C definition.
    pub source: &'static str,
    /// Device functions it calls.
    pub deps: &'static [&'static DeviceFn],
    /// The file that defines it.
    pub file: &'static str,
    /// The line of its name: the lines of its indexing sites are relative
    /// to it, so that a checked launch can report where an index was out of
    /// bounds.
    pub line: u32,
    /// Its `kernel_assert!`s, in the order its CUDA C numbers them.
    pub asserts: &'static [crate::status::AssertSite],
}

/// `direct` and everything they call, callees first, once each: the order
/// of their definitions in a kernel's source.
pub(crate) fn device_fns(direct: &[&'static DeviceFn]) -> Vec<&'static DeviceFn> {
    fn visit(f: &'static DeviceFn, out: &mut Vec<&'static DeviceFn>) {
        if out.iter().any(|g| std::ptr::eq(*g, f)) {
            return;
        }
        for d in f.deps {
            visit(d, out);
        }
        out.push(f);
    }
    let mut out = Vec::new();
    for f in direct {
        visit(f, &mut out);
    }
    out
}

/// Definitions of `direct` and everything they call, callees first, once
/// each (as `device_fns` orders them). Each is preceded by `SYMM_SITE_FN`, its position
/// in that order counted from 1 (0 is the kernel), which its indexing sites
/// record when they fail a bounds check, and its assertions when they fail.
pub fn device_sources(direct: &[&'static DeviceFn]) -> String {
    let mut out = String::new();
    for (k, f) in device_fns(direct).iter().enumerate() {
        out.push_str(&format!(
            "#undef SYMM_SITE_FN\n#define SYMM_SITE_FN {}u\n{}\n",
            k + 1,
            f.source
        ));
    }
    out
}
