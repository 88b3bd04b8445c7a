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
