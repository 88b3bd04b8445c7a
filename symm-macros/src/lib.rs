//! The `#[symm_kernel]` procedural macro of symm.
//!
//! Three steps: `parse` checks the attribute and the signature; `translate`
//! lowers the body to a typed IR, checking it, and emits CUDA C from that;
//! `generate` builds the expansion around the C (the `extern "C"` entry, the
//! CPU body, the typed launcher). Errors carry the user's spans (whole
//! nodes), one per problem; on error a body-less stand-in for the item is
//! emitted, so the rest of the crate still resolves its name.

use proc_macro::TokenStream;

mod check;
mod generate;
mod parse;
mod private;
mod translate;

#[cfg(test)]
mod tests;

/// Turns a Rust function into a GPU kernel (or, with `device`, a helper that
/// kernels call). See the `symm::dsl` module docs for the supported subset.
///
/// ```ignore
/// #[symm_kernel]
/// fn scale(x: &[f32], y: &mut [f32], a: f32) {
///     let i = (block_idx_x() * block_dim_x() + thread_idx_x()) as usize;
///     if i < x.len() {
///         y[i] = a * x[i];
///     }
/// }
/// // scale::launch(&comm, LaunchConfig::linear(4, 256), &x, &mut y, 2.0)?
/// ```
#[proc_macro_attribute]
pub fn symm_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    on_big_stack(|| generate::expand(attr.into(), item.into()).into())
}

/// Runs `f` on a stack of its own of `STACK` bytes. Every walk over a body (parsing, lowering, emitting, the CPU
/// rewrite, dropping the tree) recurses once per level of nesting, and a
/// long `+` chain or `else if` chain is that deep, so on rustc's own stack
/// a body that plain Rust compiles would crash the compiler. The new stack
/// is reserved, not touched, so shallow bodies cost nothing; bodies deeper
/// than [`translate::MAX_DEPTH`] get a spanned error instead.
pub(crate) fn on_big_stack<R>(f: impl FnOnce() -> R) -> R {
    const STACK: usize = 1 << 30;
    stacker::grow(STACK, f)
}

/// A test that compiles kernel instantiations with NVRTC, without a GPU,
/// for sm_90 and sm_80, each as `launch` runs it (bounds-checked) and as
/// `launch_unchecked` does, and fails with one message naming every one
/// NVRTC rejects. A missing NVRTC fails it too, saying how to install
/// NVRTC, unless `SYMM_SKIP_NVRTC=1` (then it prints `SKIPPED`).
///
/// ```ignore
/// symm::check_kernels!(scale, ring::<f32>, ring::<symm::bf16>, ar::<f32, 4, 2>);
/// ```
///
/// defines `#[test] fn kernels_compile_with_nvrtc()`. Name the test (to
/// have several in one module) and give it attributes with a prefix:
/// `symm::check_kernels!(#[ignore] fn slow_kernels_compile; big::<f64>);`.
/// Generic kernels are listed once per instantiation used; each entry is
/// the kernel's path, with its generic arguments as in a call.
///
/// Outside `cfg(test)` the function is still defined (not run), so the
/// list is type-checked by `cargo build` and a custom test harness can call
/// it.
#[proc_macro]
pub fn check_kernels(input: TokenStream) -> TokenStream {
    on_big_stack(|| check::expand(input.into()).into())
}
