//! Tests written once and instantiated per world size (in the manner of
//! cubecl's `testgen_all!`): `per_world!` turns a function of the world size
//! into one `#[test]` per listed size, `NAME::world_W`, so that each size is
//! its own test (run in parallel on the emulator, named when it fails).
//!
//! The function picks its target through `targets::ranks(world)`: the
//! emulator by default, GPU ranks under `SYMM_KERNEL_TESTS_ON=gpu`, where
//! `scripts/gpu-validate.sh` runs only the `::world_W` tests of the world
//! size it is validating.

/// `per_world! { NAME: F => [world_2, world_4]; … }` defines a module `NAME`
/// with a test `world_W` per listed size, each calling `F(W)`; `F` (any
/// expression of a `Fn(usize)`) is resolved in the calling module.
macro_rules! per_world {
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
