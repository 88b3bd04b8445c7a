//! Every built-in kernel compiles to CUBIN with NVRTC on the CPU (sm_90 and
//! sm_80), for every element type it is used with, with bounds checks (as
//! `launch` runs it) and without (as `launch_unchecked` does).

use symm::dsl::*;
use symm::kernels::{broadcast, ping_pong, ring_all_gather};

#[path = "support/targets.rs"]
mod targets;
use targets::{nvrtc, ARCHES};

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

/// [`store_vec_values`] compiles with bounds checks and without.
#[test]
fn stored_vectors_of_any_expression_compile_checked() {
    if !nvrtc("store_vec_values") {
        return;
    }
    for a in ARCHES {
        store_vec_values::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        store_vec_values::compile_checked_for(a).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The shuffles compile for every element type (1, 2, 4 and 8 bytes).
#[test]
fn warp_shuffles_compile_for_every_element_type() {
    if !nvrtc("shuffles") {
        return;
    }
    for a in ARCHES {
        for r in [
            all_shuffles::compile_for::<u8>,
            all_shuffles::compile_for::<u32>,
            all_shuffles::compile_for::<u64>,
            all_shuffles::compile_for::<i32>,
            all_shuffles::compile_for::<i64>,
            all_shuffles::compile_for::<f32>,
            all_shuffles::compile_for::<f64>,
            all_shuffles::compile_for::<symm::bf16>,
            all_shuffles::compile_for::<symm::f16>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// Compiles the instantiation `$k::<$args>` for `$a`, with bounds checks
/// (as `launch` runs it) or without (as `launch_unchecked` does).
macro_rules! compile {
    ($checked:expr, $a:expr, $($k:ident)::+ [$($t:tt)*]) => {{
        let r = if $checked {
            $($k)::+::compile_checked_for::<$($t)*>($a)
        } else {
            $($k)::+::compile_for::<$($t)*>($a)
        };
        r.unwrap_or_else(|e| panic!("{e}"))
    }};
}

#[test]
fn builtin_kernels_compile() {
    if !nvrtc("kernels") {
        return;
    }
    for (a, checked) in ARCHES.into_iter().flat_map(|a| [(a, false), (a, true)]) {
        compile!(checked, a, ping_pong[]);
        compile!(checked, a, ring_all_gather[f32]);
        compile!(checked, a, ring_all_gather[symm::bf16]);
        compile!(checked, a, ring_all_gather[u64]);
        compile!(checked, a, broadcast[f32]);
        compile!(checked, a, broadcast[symm::f16]);
        use symm::kernels::all_reduce::one_shot_ll as ll;
        compile!(checked, a, ll[f32, 1, 2]);
        compile!(checked, a, ll[f32, 1, 4]);
        compile!(checked, a, ll[f32, 1, 8]);
        compile!(checked, a, ll[f32, 1, 0]);
        compile!(checked, a, ll[symm::bf16, 2, 2]);
        compile!(checked, a, ll[symm::bf16, 2, 4]);
        compile!(checked, a, ll[symm::f16, 2, 8]);
        compile!(checked, a, ll[symm::f16, 2, 0]);
        use symm::kernels::all_reduce::two_shot_all_reduce as ts;
        compile!(checked, a, ts[f32, 4, 2]);
        compile!(checked, a, ts[f32, 4, 4]);
        compile!(checked, a, ts[f32, 4, 8]);
        compile!(checked, a, ts[f32, 4, 0]);
        compile!(checked, a, ts[symm::bf16, 8, 2]);
        compile!(checked, a, ts[symm::bf16, 8, 4]);
        compile!(checked, a, ts[symm::f16, 8, 8]);
        compile!(checked, a, ts[symm::f16, 8, 0]);
        use symm::kernels::all_reduce::one_shot_push as op;
        compile!(checked, a, op[f32, 4, 2]);
        compile!(checked, a, op[f32, 4, 4]);
        compile!(checked, a, op[f32, 4, 8]);
        compile!(checked, a, op[f32, 4, 0]);
        compile!(checked, a, op[symm::bf16, 8, 2]);
        compile!(checked, a, op[symm::bf16, 8, 4]);
        compile!(checked, a, op[symm::f16, 8, 8]);
        compile!(checked, a, op[symm::f16, 8, 0]);
        use symm::kernels::all_reduce::two_shot_lamport as tl;
        compile!(checked, a, tl[f32, 4, 2]);
        compile!(checked, a, tl[f32, 4, 4]);
        compile!(checked, a, tl[f32, 4, 8]);
        compile!(checked, a, tl[f32, 4, 0]);
        compile!(checked, a, tl[symm::bf16, 8, 2]);
        compile!(checked, a, tl[symm::bf16, 8, 4]);
        compile!(checked, a, tl[symm::f16, 8, 8]);
        compile!(checked, a, tl[symm::f16, 8, 0]);
        use symm::kernels::all_reduce::one_shot_lamport as lp;
        compile!(checked, a, lp[f32, 4, 2]);
        compile!(checked, a, lp[f32, 4, 4]);
        compile!(checked, a, lp[f32, 4, 8]);
        compile!(checked, a, lp[f32, 4, 0]);
        compile!(checked, a, lp[symm::bf16, 8, 2]);
        compile!(checked, a, lp[symm::bf16, 8, 4]);
        compile!(checked, a, lp[symm::f16, 8, 8]);
        compile!(checked, a, lp[symm::f16, 8, 0]);
        use symm::kernels::tutorial::{naive_all_reduce as na, vectorized_all_reduce as va};
        compile!(checked, a, na[f32]);
        compile!(checked, a, na[symm::bf16]);
        compile!(checked, a, va[f32, 4]);
        compile!(checked, a, va[symm::bf16, 8]);
        use symm::kernels::one_shot_all_reduce_kernel as osar;
        compile!(checked, a, osar[f32, 4, 2]);
        compile!(checked, a, osar[f32, 4, 4]);
        compile!(checked, a, osar[f32, 4, 8]);
        compile!(checked, a, osar[f32, 4, 0]);
        compile!(checked, a, osar[symm::bf16, 8, 2]);
        compile!(checked, a, osar[symm::bf16, 8, 4]);
        compile!(checked, a, osar[symm::bf16, 8, 8]);
        compile!(checked, a, osar[symm::bf16, 8, 0]);
        compile!(checked, a, osar[symm::f16, 8, 2]);
        compile!(checked, a, osar[symm::f16, 8, 4]);
        compile!(checked, a, osar[symm::f16, 8, 8]);
        compile!(checked, a, osar[symm::f16, 8, 0]);
    }
}

#[path = "dsl_suite/mod.rs"]
mod dsl_suite;
#[path = "foundation_suite/mod.rs"]
mod foundation_suite;

#[test]
fn test_suite_kernels_compile() {
    use dsl_suite::*;
    if !nvrtc("kernels") {
        return;
    }
    for (a, checked) in ARCHES.into_iter().flat_map(|a| [(a, false), (a, true)]) {
        compile!(checked, a, arith[f32]);
        compile!(checked, a, arith[f64]);
        compile!(checked, a, arith[symm::bf16]);
        compile!(checked, a, arith[symm::f16]);
        compile!(checked, a, int_ops[]);
        compile!(checked, a, control[8]);
        compile!(checked, a, atomics[]);
        compile!(checked, a, vectors[]);
        compile!(checked, a, shared_reduce[]);
        compile!(checked, a, shared_scopes[]);
        compile!(checked, a, lanes[]);
        compile!(checked, a, shuffles[]);
        compile!(checked, a, warp_moves[]);
        compile!(checked, a, message_passing[]);
        compile!(checked, a, copy_n[]);
        compile!(checked, a, wait_on[]);
        compile!(checked, a, all_arrive[]);
        compile!(checked, a, gather_vectors[f32, 4]);
        compile!(checked, a, gather_vectors[symm::bf16, 8]);
        compile!(checked, a, gather_packets[]);
        compile!(checked, a, reduce_scatter_w[4]);
        compile!(checked, a, all_to_all_one[]);
        compile!(checked, a, one_thread_asserts[]);
        compile!(checked, a, receive64[f64, 1]);
        compile!(checked, a, receive64[u64, 8]);
        compile!(checked, a, receive64[i64, 3]);
        compile!(checked, a, torn_packet[]);
        compile!(checked, a, compound[f32]);
        compile!(checked, a, compound[f64]);
        compile!(checked, a, compound[symm::bf16]);
        compile!(checked, a, compound[symm::f16]);
        compile!(checked, a, compound[u8]);
        compile!(checked, a, compound[u32]);
        compile!(checked, a, compound[u64]);
        compile!(checked, a, compound[i32]);
        compile!(checked, a, compound[i64]);
        compile!(checked, a, bit_compound[u8]);
        compile!(checked, a, bit_compound[u32]);
        compile!(checked, a, bit_compound[u64]);
        compile!(checked, a, foundation_suite::write_slots[]);
    }
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
    use dsl_suite::{gather_packets, gather_vectors};
    use symm::jit::{Arch, CompileRequest, JitEngine};
    use symm::kernels::all_reduce::{one_shot_lamport, one_shot_ll, two_shot_lamport};
    if !nvrtc("kernels") {
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
