//! Tests written once and instantiated per world size (in the manner of
//! cubecl's `testgen_all!`): `per_world!` turns a function of the world size
//! into one `#[test]` per listed size, `NAME::world_W`, so that each size is
//! its own test (run in parallel on the emulator, named when it fails).
//!
//! The function picks its target through `targets::ranks(world)`: the
//! emulator by default, GPU ranks under `SYMM_KERNEL_TESTS_ON=gpu`, where
//! `scripts/gpu-validate.sh` runs only the `::world_W` tests of the world
//! size it is validating.
//!
//! Every listed world size runs in every tier, or, in a `per_world! {
//! sampled; … }`, the quick tier runs only its own world sizes
//! (`tier::world_is_quick`; the including file declares `tier.rs` as `mod
//! tier` at its root), and `SYMM_TESTS=rest` the others.

// A file includes this for one macro or both.
#![allow(unused_macros)]

/// `per_world! { NAME: F => [world_2, world_4]; … }` defines a module `NAME`
/// with a test `world_W` per listed size, each calling `F(W)`; `F` (any
/// expression of a `Fn(usize)`) is resolved in the calling module. With
/// `sampled;` first, the quick tier runs only its world sizes, each test
/// of another saying that it did not run, and `SYMM_TESTS=rest` only the
/// others.
macro_rules! per_world {
    (sampled; $($(#[$attr:meta])* $name:ident: $f:expr => [$($world:ident),+ $(,)?];)+) => {$(
        $(#[$attr])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            /// The world sizes this test is listed at.
            const LISTED: &[usize] = &[$(world_size!($world)),+];
            $(
                #[test]
                fn $world() {
                    let w = world_size!($world);
                    if $crate::tier::world_runs(stringify!($name), w, LISTED) {
                        ($f)(w)
                    }
                }
            )+
        }
    )+};
    ($($(#[$attr:meta])* $name:ident: $f:expr => [$($world:ident),+ $(,)?];)+) => {$(
        $(#[$attr])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $world() {
                    ($f)(world_size!($world))
                }
            )+
        }
    )+};
}

/// `gpu_per_world! { RUN; NAME: F => [world_1, world_2]; … }`: as
/// `per_world!`, for the GPU tier (`harness.rs`). Each `NAME::world_W` is
/// ignored unless asked for (`--ignored`), and calls `RUN(name, W, F)`
/// (`harness::gpu_test` or `harness::gpu_case`), which fails without a GPU.
macro_rules! gpu_per_world {
    ($run:path; $($(#[$attr:meta])* $name:ident: $f:expr => [$($world:ident),+ $(,)?];)+) => {$(
        $(#[$attr])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                #[ignore = "GPU tier: needs a CUDA GPU; run with --ignored"]
                fn $world() {
                    $run(
                        concat!(stringify!($name), "::", stringify!($world)),
                        world_size!($world),
                        $f,
                    )
                }
            )+
        }
    )+};
}

/// The size a `world_W` name stands for.
macro_rules! world_size {
    (world_1) => {
        1
    };
    (world_2) => {
        2
    };
    (world_3) => {
        3
    };
    (world_4) => {
        4
    };
    (world_5) => {
        5
    };
    (world_6) => {
        6
    };
    (world_7) => {
        7
    };
    (world_8) => {
        8
    };
}
