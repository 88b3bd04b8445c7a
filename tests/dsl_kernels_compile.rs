//! Every built-in kernel, and every kernel of the DSL's test suite, compiles
//! to CUBIN with NVRTC on the CPU (sm_90 and sm_80), for every element type
//! it is used with, with bounds checks (as `launch` runs it) and without (as
//! `launch_unchecked` does): `symm::check_kernels!`, as users run it.
//!
//! The quick tier compiles a sample (NVRTC takes a second or more per
//! kernel on CI's two cores, with a cold cache); the rest tier every other
//! kernel. The emulator tests run every kernel family in both. Each `check_kernels!` test is made inside a test of this file's,
//! which asks the tier whether it runs (`check_kernels!`'s own test cannot).

use symm::dsl::*;
use symm::kernels::all_reduce::{
    one_shot_all_reduce, one_shot_lamport, one_shot_ll, one_shot_push, two_shot_all_reduce,
    two_shot_lamport,
};
use symm::kernels::p2p::{p2p_prime, p2p_recv, p2p_recv_ll, p2p_send, p2p_send_ll};
use symm::kernels::tutorial::{naive_all_reduce, vectorized_all_reduce};
use symm::kernels::{broadcast, ping_pong, ring_all_gather};

#[path = "dsl_suite/mod.rs"]
mod dsl_suite;
#[path = "foundation_suite/mod.rs"]
mod foundation_suite;
use dsl_suite::*;

#[path = "support/targets.rs"]
mod targets;
use targets::nvrtc;
#[path = "support/tier.rs"]
mod tier;

/// Every warp shuffle in a chain, for a type: each is an intrinsic with its
/// own CUDA C, and literal lane arguments stay bare `u32`s.
#[symm::symm_kernel]
fn all_shuffles<T: Scalar>(x: &[T], y: &mut [T]) {
    let i = thread_idx_x();
    let a = shfl_xor(x[i], 1);
    let b = shfl_down(a, 2);
    let c = shfl_up(b, 3);
    y[i] = shfl_idx(c, 4);
}

/// A stored vector given as an `if` and as a block (C++ lambdas), which the
/// bounds check must not copy into an unevaluated context.
#[symm::symm_kernel]
fn store_vec_values(y: &mut [f32], n: u32) {
    let i = thread_idx_x() * 4;
    y.store_vec(
        i,
        if n > 1 {
            let t = [1.0f32; 4];
            t
        } else {
            [0.0f32; 4]
        },
    );
    y.store_vec(i, {
        let t = [2.0f32; 4];
        t
    });
}

/// The fp8 types written out (not as a generic `T`): parameters, slices,
/// `from_bits`, arithmetic, negation, min/max/abs, bits and vectors.
#[symm::symm_kernel]
fn fp8_concrete(x: &mut [f8e4m3], y: &[f8e5m2], a: f8e4m3, b: &mut [u32], f: &mut [f32]) {
    let p = f8e4m3::from_bits(0x38u8);
    let q = f8e5m2::from_bits(b[0] as u8);
    x[0] = p + a * x[1];
    x[2] = -max(x[3], abs(x[4]));
    f[0] = q.to_f32() + y[1].to_f32() + x[5].to_f32();
    b[1] = x[6].to_bits() as u32 + y[2].to_bits32();
    x[7] = f8e4m3::from_f32(f[1]);
    let v = y.load_vec::<16>(16u32);
    let w: [f8e4m3; 16] = x.load_vec::<16>(32u32);
    x.store_vec(48u32, w);
    f[2] = v[15].to_f32() + f8e5m2::from_f32(f[3]).to_f32();
}

/// A sample of the DSL suite's kernels: a generic one, and fp8 written
/// out.
// `check_kernels!` makes a test; here it is an inner function that the
// tier-aware test calls.
#[allow(unnameable_test_items)]
#[test]
fn test_kernels_sample_compile() {
    if !tier::quick_test() {
        return;
    }
    symm::check_kernels!(
        fn test_kernels_sample;
        arith::<f32>,
        fp8_concrete,
    );
    test_kernels_sample();
}

/// Every other kernel of the DSL suite, and every instantiation.
#[allow(unnameable_test_items)]
#[test]
fn test_kernels_compile() {
    if !tier::full_test("NVRTC compiles of the DSL suite's kernels beyond the sample") {
        return;
    }
    symm::check_kernels!(
        fn test_kernels;
        // Stored vectors of any expression: the bounds check must not copy
        // them into an unevaluated context.
        store_vec_values,
        foundation_suite::write_slots,
        // The shuffles for every element type (1, 2, 4 and 8 bytes).
        all_shuffles::<u8>,
        all_shuffles::<u32>,
        all_shuffles::<u64>,
        all_shuffles::<i32>,
        all_shuffles::<i64>,
        all_shuffles::<f32>,
        all_shuffles::<f64>,
        all_shuffles::<symm::bf16>,
        all_shuffles::<symm::f16>,
        all_shuffles::<symm::f8e4m3>,
        all_shuffles::<symm::f8e5m2>,
        // The DSL's test suite.
        exps,
        arith::<f64>,
        arith::<symm::bf16>,
        arith::<symm::f16>,
        arith::<symm::f8e4m3>,
        arith::<symm::f8e5m2>,
        // The fp8 conversions both ways, and 16-element vectors of them.
        fp8_convert::<symm::f8e4m3>,
        fp8_convert::<symm::f8e5m2>,
        copy_vec16::<symm::f8e4m3>,
        copy_vec16::<symm::f8e5m2>,
        copy_vec16::<u8>,
        gather_vectors::<symm::f8e4m3, 16>,
        int_ops,
        names_and_narrow,
        same_names,
        control::<8>,
        vectors,
        shared_scopes,
        lanes,
        shuffles,
        warp_moves,
        atomics,
        shared_reduce,
        gather_vectors::<symm::bf16, 8>,
        message_passing,
        copy_n,
        copy_n_64,
        many_live_any,
        many_live_1024,
        wait_on,
        all_arrive,
        gather_vectors::<f32, 4>,
        gather_packets,
        reduce_scatter_w::<4>,
        all_to_all_one,
        ring_peers,
        one_thread_asserts,
        receive64::<f64, 1>,
        receive64::<u64, 8>,
        receive64::<i64, 3>,
        torn_packet,
        compound::<f32>,
        compound::<f64>,
        compound::<symm::bf16>,
        compound::<symm::f16>,
        compound::<symm::f8e4m3>,
        compound::<symm::f8e5m2>,
        compound::<u8>,
        compound::<u32>,
        compound::<u64>,
        compound::<i32>,
        compound::<i64>,
        bit_compound::<u8>,
        bit_compound::<u32>,
        bit_compound::<u64>,
    );
    test_kernels();
}

/// A sample of the built-in kernels: two of the book's samples, an
/// all-reduce kernel at an unrolled world and one at the run-time world,
/// and the point-to-point kernels (they have no type parameters).
#[allow(unnameable_test_items)]
#[test]
fn builtin_kernels_sample_compile() {
    if !tier::quick_test() {
        return;
    }
    symm::check_kernels!(
        fn builtin_kernels_sample;
        ping_pong,
        ring_all_gather::<f32>,
        one_shot_ll::<f32, 1, 2>,
        two_shot_lamport::<f32, 4, 0>,
        p2p_send,
        p2p_recv,
        p2p_send_ll,
        p2p_recv_ll,
        p2p_prime,
    );
    builtin_kernels_sample();
}

/// The built-in kernels' other instantiations: every family, for each
/// element type.
#[allow(unnameable_test_items)]
#[test]
fn builtin_kernels_compile() {
    if !tier::full_test("NVRTC compiles of the built-in kernels beyond the sample") {
        return;
    }
    symm::check_kernels!(
        fn builtin_kernels;
        broadcast::<symm::f8e5m2>,
        two_shot_all_reduce::<symm::bf16, 8, 4>,
        one_shot_push::<symm::f8e4m3, 16, 2>,
        one_shot_lamport::<symm::f16, 8, 8>,
        one_shot_all_reduce::<f32, 4, 2>,
        naive_all_reduce::<f32>,
        vectorized_all_reduce::<symm::bf16, 8>,
        ring_all_gather::<symm::bf16>,
        ring_all_gather::<u64>,
        ring_all_gather::<symm::f8e4m3>,
        broadcast::<f32>,
        broadcast::<symm::f16>,
        // Each all-reduce kernel for f32, bf16 and f16 and for every unrolled
        // world (2, 4, 8) and the run-time one (0), each at least once, not
        // every combination: NVRTC takes most of a second per kernel, three
        // times over (sm_90 checked and not, sm_80 unchecked). fp8 follows below.
        one_shot_ll::<symm::bf16, 2, 4>,
        one_shot_ll::<symm::f16, 2, 8>,
        one_shot_ll::<f32, 1, 0>,
        two_shot_all_reduce::<f32, 4, 2>,
        two_shot_all_reduce::<symm::f16, 8, 8>,
        two_shot_all_reduce::<f32, 4, 0>,
        one_shot_push::<f32, 4, 2>,
        one_shot_push::<symm::bf16, 8, 4>,
        one_shot_push::<symm::f16, 8, 8>,
        one_shot_push::<f32, 4, 0>,
        two_shot_lamport::<f32, 4, 2>,
        two_shot_lamport::<symm::bf16, 8, 4>,
        two_shot_lamport::<symm::f16, 8, 8>,
        one_shot_lamport::<f32, 4, 2>,
        one_shot_lamport::<symm::bf16, 8, 4>,
        one_shot_lamport::<f32, 4, 0>,
        one_shot_ll::<symm::f8e4m3, 4, 4>,
        one_shot_all_reduce::<symm::f8e5m2, 16, 8>,
        one_shot_lamport::<symm::f8e4m3, 16, 4>,
        one_shot_lamport::<symm::f8e5m2, 16, 2>,
        two_shot_lamport::<symm::f8e4m3, 16, 4>,
        two_shot_all_reduce::<symm::f8e4m3, 16, 4>,
        naive_all_reduce::<symm::bf16>,
        vectorized_all_reduce::<f32, 4>,
        one_shot_all_reduce::<symm::bf16, 8, 4>,
        one_shot_all_reduce::<symm::f16, 8, 8>,
        one_shot_all_reduce::<symm::bf16, 8, 0>,
    );
    builtin_kernels();
}

/// The parameters of `entry` in `ptx` (its `.param` declarations).
fn ptx_params(ptx: &str, entry: &str) -> usize {
    let start = ptx
        .find(&format!(".entry {entry}("))
        .unwrap_or_else(|| panic!("no entry {entry} in the PTX"));
    let list = &ptx[start..start + ptx[start..].find(')').expect("a closing parenthesis")];
    list.matches(".param").count()
}

#[test]
fn launchers_fill_every_parameter_of_their_entries() {
    if !tier::quick_test() {
        return;
    }
    use symm::jit::{Arch, CompileRequest, JitEngine};
    if !nvrtc("the kernels whose entries' parameters are counted") {
        return;
    }
    let cases = [
        (
            one_shot_ll::cuda_source_for::<f32, 1, 4>(),
            one_shot_ll::NAME,
            one_shot_ll::PARAM_SLOTS,
        ),
        (
            one_shot_lamport::cuda_source_for::<symm::bf16, 8, 0>(),
            one_shot_lamport::NAME,
            one_shot_lamport::PARAM_SLOTS,
        ),
        (
            two_shot_lamport::cuda_source_for::<f32, 4, 2>(),
            two_shot_lamport::NAME,
            two_shot_lamport::PARAM_SLOTS,
        ),
        (
            gather_vectors::cuda_source_for::<f32, 4>(),
            gather_vectors::NAME,
            gather_vectors::PARAM_SLOTS,
        ),
        (
            gather_packets::cuda_source_for(),
            gather_packets::NAME,
            gather_packets::PARAM_SLOTS,
        ),
    ];
    for (src, name, slots) in cases {
        let ptx = JitEngine::new(None)
            .compile_ptx(&CompileRequest {
                kernel_name: name,
                source: &src,
                arch: Arch { major: 9, minor: 0 },
                options: &[],
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ptx_params(&ptx, name), slots, "{name}");
    }
}

/// The 8-byte receives poll whole 8-byte words: a sentinel receive of
/// 8-byte elements as 4-byte words could take an element of which only one
/// half had arrived (it differs from `empty` already).
#[test]
fn eight_byte_receives_poll_whole_elements() {
    if !tier::quick_test() {
        return;
    }
    use dsl_suite::receive64;
    use symm::jit::{Arch, CompileRequest, JitEngine};
    if !nvrtc("receive64") {
        return;
    }
    for src in [
        receive64::cuda_source_for::<f64, 4>(),
        receive64::cuda_source_for::<i64, 2>(),
    ] {
        let ptx = JitEngine::new(None)
            .compile_ptx(&CompileRequest {
                kernel_name: receive64::NAME,
                source: &src,
                arch: Arch { major: 9, minor: 0 },
                options: &[],
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(ptx.contains("ld.volatile.global.v2.b64"), "no 8-byte polls");
        assert!(
            !ptx.contains("ld.volatile.global.v4.b32"),
            "8-byte elements polled as 4-byte words"
        );
    }
}
