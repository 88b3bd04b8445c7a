//! Free-function intrinsics. Each doc line ends with its CUDA translation.
//!
//! An intrinsic defined with [`intrinsic!`] is defined once: its Rust stub
//! (what the emulator runs) and, in a module of the same name beside it, its
//! CUDA C (what the GPU runs), the same shape a `#[symm_kernel(device)]`
//! function leaves. A kernel's call resolves to both by path, so adding one
//! touches only this file.

use std::panic::Location;

use super::device_fn::DeviceFn;
use super::scalar::{Num, Scalar};
use super::thread::current;
use super::Scope;

/// Defines an intrinsic: `pub fn name[generics](args) -> ret { stub }`,
/// then `cuda: "..."` (its C++ definition, named `f_<name>` and taking the
/// kernel context first, as every device function does) and optionally
/// `deps: [...]` (the device functions its C++ calls).
macro_rules! intrinsic {
    (
        $(#[$attr:meta])*
        pub fn $name:ident $([$($gen:tt)*])? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
        cuda: $cuda:expr $(, deps: [$($dep:expr),* $(,)?])? ;
    ) => {
        $(#[$attr])*
        pub fn $name $(<$($gen)*>)? ($($arg: $ty),*) $(-> $ret)? $body

        #[doc(hidden)]
        pub mod $name {
            /// The intrinsic's CUDA C.
            pub static DEVICE: $crate::dsl::DeviceFn = $crate::dsl::DeviceFn {
                name: stringify!($name),
                source: $cuda,
                deps: &[$($($dep),*)?],
                file: file!(),
                line: line!(),
                asserts: &[],
            };
        }
    };
}

pub(crate) use intrinsic;

/// Moves a payload of 1, 2, 4 or 8 bytes through a 32-bit warp shuffle
/// (narrow values travel widened, 8 bytes as two halves), for every shuffle
/// intrinsic.
pub(crate) static SHUFFLE_PAYLOAD: DeviceFn = DeviceFn {
    name: "symm_shfl_payload",
    source: r#"
template<typename T, typename F> __device__ __forceinline__ T symm_shfl_payload(T v, F shfl32) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "warp shuffles move values of 1, 2, 4 or 8 bytes");
    if constexpr (sizeof(T) == 8) {
        symm_array<symm_u32, 2> w = symm_bitcast<symm_array<symm_u32, 2>>(v);
        w.v[0] = shfl32(w.v[0]);
        w.v[1] = shfl32(w.v[1]);
        return symm_bitcast<T>(w);
    } else if constexpr (sizeof(T) == 4) {
        return symm_bitcast<T>(shfl32(symm_bitcast<symm_u32>(v)));
    } else if constexpr (sizeof(T) == 2) {
        return symm_bitcast<T>((symm_u16)shfl32((symm_u32)symm_bitcast<symm_u16>(v)));
    } else {
        return symm_bitcast<T>((symm_u8)shfl32((symm_u32)symm_bitcast<symm_u8>(v)));
    }
}
"#,
    deps: &[],
    file: file!(),
    line: line!(),
    asserts: &[],
};

/// The emulator's side of every warp shuffle: this lane offers `v` and gets
/// the value of lane `src(lane_id())` (its own where that lane has exited).
#[track_caller]
fn shuffle<T: Scalar>(v: T, src: impl FnOnce(u32) -> u32, what: &'static str) -> T {
    let loc = Location::caller();
    let from = src(lane_id());
    T::__from_bits64(current(what, |t| t.shfl(v.__to_bits64(), from, what, loc)))
}

/// The thread-geometry intrinsics: `name()` is `$cuda` on the GPU and the
/// simulated thread's index `[$slot][$axis]` on the emulator.
macro_rules! index_fns {
    ($($name:ident, $slot:expr, $axis:expr, $cuda:literal);* $(;)?) => {$(
        intrinsic! {
            #[doc = concat!("`", $cuda, "`.")]
            pub fn $name() -> u32 {
                current(stringify!($name), |t| t.indices()[$slot][$axis])
            }
            cuda: concat!(
                "static __device__ __forceinline__ __attribute__((unused)) symm_u32 f_",
                stringify!($name), "(const symm_kctx&) { return (symm_u32)", $cuda, "; }\n"
            );
        }
    )*};
}

index_fns! {
    thread_idx_x, 0, 0, "threadIdx.x"; thread_idx_y, 0, 1, "threadIdx.y"; thread_idx_z, 0, 2, "threadIdx.z";
    block_idx_x, 1, 0, "blockIdx.x"; block_idx_y, 1, 1, "blockIdx.y"; block_idx_z, 1, 2, "blockIdx.z";
    block_dim_x, 2, 0, "blockDim.x"; block_dim_y, 2, 1, "blockDim.y"; block_dim_z, 2, 2, "blockDim.z";
    grid_dim_x, 3, 0, "gridDim.x"; grid_dim_y, 3, 1, "gridDim.y"; grid_dim_z, 3, 2, "gridDim.z";
}

intrinsic! {
    /// Lane of this thread in its warp, `0..32`. `%laneid`.
    pub fn lane_id() -> u32 {
        // Warps are cut from the linear thread index (x fastest), as on the GPU.
        current("lane_id", |t| {
            let [tid, _, dim, _] = t.indices();
            (tid[0] + dim[0] * (tid[1] + dim[1] * tid[2])) % 32
        })
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) symm_u32 f_lane_id(const symm_kctx&) { return symm_lane_id(); }\n";
}

intrinsic! {
    /// Barrier for every thread of the block. `__syncthreads()`.
    #[track_caller]
    pub fn sync_threads() {
        let loc = std::panic::Location::caller();
        current("sync_threads", |t| t.sync_threads(loc))
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) void f_sync_threads(const symm_kctx&) { __syncthreads(); }\n";
}

/// A warp shuffle intrinsic: `name(v, arg)` gets the `v` of the lane that
/// `|lane| src` names (emulator), through `shfl.sync.<mode>` with clamp
/// value `clamp` (GPU).
macro_rules! shuffle_intrinsic {
    ($(#[$attr:meta])* $name:ident($arg:ident), $mode:literal, $clamp:literal, |$l:ident| $src:expr) => {
        intrinsic! {
            $(#[$attr])*
            #[track_caller]
            pub fn $name[T: Scalar](v: T, $arg: u32) -> T {
                shuffle(v, |$l| $src, stringify!($name))
            }
            cuda: concat!(
                "template<typename T> __device__ __forceinline__ T f_", stringify!($name),
                "(const symm_kctx&, T v, symm_u32 b) {\n",
                "    return symm_shfl_payload(v, [b](symm_u32 w) {\n",
                "        symm_u32 r;\n",
                "        asm volatile(\"shfl.sync.", $mode, ".b32 %0, %1, %2, ", $clamp,
                ", 0xffffffff;\" : \"=r\"(r) : \"r\"(w), \"r\"(b));\n",
                "        return r;\n",
                "    });\n",
                "}\n"
            ),
            deps: [&super::SHUFFLE_PAYLOAD];
        }
    };
}

shuffle_intrinsic! {
    /// The value of `v` held by lane `lane_id() ^ lane_mask`, across the
    /// full warp; every lane must call it. Only the mask's low 5 bits count,
    /// as in PTX. `shfl.sync.bfly`.
    shfl_xor(lane_mask), "bfly", "0x1f", |l| l ^ (lane_mask & 31)
}

shuffle_intrinsic! {
    /// The value of `v` held by lane `lane_id() + delta`, or this lane's own
    /// where that is past lane 31, across the full warp; every lane must
    /// call it. Only `delta`'s low 5 bits count, as in PTX. `shfl.sync.down`.
    shfl_down(delta), "down", "0x1f", |l| if l + (delta & 31) < 32 { l + (delta & 31) } else { l }
}

shuffle_intrinsic! {
    /// The value of `v` held by lane `lane_id() - delta`, or this lane's own
    /// where that is below lane 0, across the full warp; every lane must
    /// call it. Only `delta`'s low 5 bits count, as in PTX. `shfl.sync.up`.
    shfl_up(delta), "up", "0x0", |l| if l >= (delta & 31) { l - (delta & 31) } else { l }
}

shuffle_intrinsic! {
    /// The value of `v` held by lane `lane % 32`, across the full warp (a
    /// broadcast when every lane names the same one); every lane must call
    /// it. `shfl.sync.idx`.
    shfl_idx(lane), "idx", "0x1f", |_l| lane % 32
}

intrinsic! {
    /// Bit `i` set when lane `i`'s `pred` is true. `vote.sync.ballot`.
    #[track_caller]
    pub fn ballot(pred: bool) -> u32 {
        let loc = std::panic::Location::caller();
        current("ballot", |t| t.ballot(pred, loc))
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) symm_u32 f_ballot(const symm_kctx&, bool pred) { return symm_ballot(pred); }\n";
}

/// Orders this thread's memory accesses for observers in `scope`.
/// `fence.acq_rel.{cta,gpu,sys}`.
pub fn fence(scope: Scope) {
    let _ = scope;
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

intrinsic! {
    /// Waits until the kernel launched before this one on the stream has
    /// finished and its writes are visible. Call it before touching memory that
    /// kernel may use, in every kernel launched with
    /// [`LaunchConfig::pdl`](crate::LaunchConfig::pdl); it returns at once
    /// otherwise. The emulator runs launches in stream order, so there it only
    /// checks it is called from a kernel. `griddepcontrol.wait` (sm_90+).
    pub fn grid_dependency_wait() {
        current("grid_dependency_wait", |_| ())
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) void f_grid_dependency_wait(const symm_kctx&) { symm_grid_dependency_wait(); }\n";
}

intrinsic! {
    /// Lets the next kernel on the stream, if launched with
    /// [`LaunchConfig::pdl`](crate::LaunchConfig::pdl), start launching now
    /// rather than when this one exits; it still waits in
    /// [`grid_dependency_wait`] for this one to finish.
    /// `griddepcontrol.launch_dependents` (sm_90+).
    pub fn launch_dependents() {
        current("launch_dependents", |_| ())
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) void f_launch_dependents(const symm_kctx&) { symm_launch_dependents(); }\n";
}

intrinsic! {
    /// Nanoseconds of the GPU's global timer, for timeouts. `%globaltimer`.
    pub fn globaltimer() -> u64 {
        current("globaltimer", |t| t.globaltimer())
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) symm_u64 f_globaltimer(const symm_kctx&) { return symm_globaltimer(); }\n";
}

/// Smaller of two (IEEE minNum for floats). `symm_min`.
pub fn min<T: Num>(a: T, b: T) -> T {
    a.min(b)
}

/// Larger of two (IEEE maxNum for floats). `symm_max`.
pub fn max<T: Num>(a: T, b: T) -> T {
    a.max(b)
}

/// Absolute value. `symm_abs`.
pub fn abs<T: Num>(a: T) -> T {
    a.abs()
}

/// `a * b + c` with one rounding for floats. `symm_fma`.
pub fn fma<T: Num>(a: T, b: T, c: T) -> T {
    a.fma(b, c)
}

intrinsic! {
    /// How many elements of `T` the first element of `s` lies past a
    /// 16-byte boundary: 0 where `s` starts 16-byte aligned. Element `i`
    /// starts a 16-byte vector exactly when `(i + vector_lag(s)) × size_of::<T>()`
    /// is a multiple of 16, which lets a kernel load vectors where a view
    /// at any element offset allows and single elements elsewhere.
    /// `(ptr % 16) / sizeof(T)`.
    pub fn vector_lag[T: Scalar, H: super::memory::Located<T>](s: H) -> u32 {
        ((s.__address() % 16) / std::mem::size_of::<T>() as u64) as u32
    }
    cuda: "template<typename T> static __device__ __forceinline__ __attribute__((unused)) symm_u32 f_vector_lag(const symm_kctx&, symm_slice<T> s) { return (symm_u32)(((symm_u64)s.ptr % 16) / sizeof(T)); }\n";
}

intrinsic! {
    /// `e` to the power `x`, in f32 (softmax, SiLU). Not correctly
    /// rounded: the emulator's is Rust's `f32::exp` and the GPU's CUDA's
    /// `expf` (within 2 ulp), so the two may differ in the last bits. `expf`.
    pub fn exp(x: f32) -> f32 {
        x.exp()
    }
    cuda: "static __device__ __forceinline__ __attribute__((unused)) float f_exp(const symm_kctx&, float x) { return expf(x); }\n";
}

#[cfg(test)]
mod tests {
    use crate::jit::{Arch, CompileRequest, JitEngine};

    /// Each shuffle intrinsic's CUDA C is the PTX shuffle of its mode, with
    /// its clamp value, for 4- and 8-byte payloads.
    #[test]
    fn shuffles_compile_to_their_ptx_modes() {
        if !crate::jit::require_nvrtc("the shuffles") {
            return;
        }
        let fns = [
            &super::shfl_xor::DEVICE,
            &super::shfl_down::DEVICE,
            &super::shfl_up::DEVICE,
            &super::shfl_idx::DEVICE,
        ];
        let source = format!(
            "{}\n{}\n{}",
            &*crate::dsl::support::DSL_SUPPORT,
            crate::dsl::device_fn::device_sources(&fns),
            r#"extern "C" __global__ void shuffles(symm_u32* s, double* d, symm_u32* status) {
    symm_kctx c = {status, 0, 0};
    symm_u32 i = threadIdx.x;
    s[i] = d0(c, d1(c, d2(c, d3(c, s[i], 7u), 3u), 2u), 1u);
    d[i] = d0(c, d1(c, d2(c, d3(c, d[i], 7u), 3u), 2u), 1u);
}
"#
        );
        let ptx = JitEngine::new(None)
            .compile_ptx(&CompileRequest {
                kernel_name: "shuffles",
                source: &source,
                arch: Arch::new(9, 0),
                options: &[],
            })
            .unwrap_or_else(|e| panic!("{e}"));
        for (mode, clamp, count) in [
            ("bfly", "0x1f", 3),
            ("down", "0x1f", 3),
            ("up", "0x0", 3),
            ("idx", "0x1f", 3),
        ] {
            let lines: Vec<&str> = ptx
                .lines()
                .filter(|l| l.contains(&format!("shfl.sync.{mode}.b32")))
                .collect();
            // One for the u32, two for the double's halves.
            assert_eq!(lines.len(), count, "{mode}: {lines:?}");
            assert!(
                lines
                    .iter()
                    .all(|l| l.contains(&format!(", {clamp}, 0xffffffff;"))),
                "{mode} with clamp {clamp}: {lines:?}"
            );
        }
    }
}
