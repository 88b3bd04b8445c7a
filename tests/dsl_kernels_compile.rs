//! Every built-in kernel compiles to CUBIN with NVRTC on the CPU (sm_90 and
//! sm_80), for every element type it is used with.

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

#[test]
fn builtin_kernels_compile() {
    if !nvrtc("kernels") {
        return;
    }
    for a in ARCHES {
        ping_pong::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        ring_all_gather::compile_for::<f32>(a).unwrap_or_else(|e| panic!("{e}"));
        ring_all_gather::compile_for::<symm::bf16>(a).unwrap_or_else(|e| panic!("{e}"));
        ring_all_gather::compile_for::<u64>(a).unwrap_or_else(|e| panic!("{e}"));
        broadcast::compile_for::<f32>(a).unwrap_or_else(|e| panic!("{e}"));
        broadcast::compile_for::<symm::f16>(a).unwrap_or_else(|e| panic!("{e}"));
        use symm::kernels::all_reduce::one_shot_ll as ll;
        for r in [
            ll::compile_for::<f32, 1, 2>,
            ll::compile_for::<f32, 1, 4>,
            ll::compile_for::<f32, 1, 8>,
            ll::compile_for::<f32, 1, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        for r in [
            ll::compile_for::<symm::bf16, 2, 2>,
            ll::compile_for::<symm::bf16, 2, 4>,
            ll::compile_for::<symm::f16, 2, 8>,
            ll::compile_for::<symm::f16, 2, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        use symm::kernels::all_reduce::two_shot_all_reduce as ts;
        for r in [
            ts::compile_for::<f32, 4, 2>,
            ts::compile_for::<f32, 4, 4>,
            ts::compile_for::<f32, 4, 8>,
            ts::compile_for::<f32, 4, 0>,
            ts::compile_for::<symm::bf16, 8, 2>,
            ts::compile_for::<symm::bf16, 8, 4>,
            ts::compile_for::<symm::f16, 8, 8>,
            ts::compile_for::<symm::f16, 8, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        use symm::kernels::all_reduce::one_shot_push as op;
        for r in [
            op::compile_for::<f32, 4, 2>,
            op::compile_for::<f32, 4, 4>,
            op::compile_for::<f32, 4, 8>,
            op::compile_for::<f32, 4, 0>,
            op::compile_for::<symm::bf16, 8, 2>,
            op::compile_for::<symm::bf16, 8, 4>,
            op::compile_for::<symm::f16, 8, 8>,
            op::compile_for::<symm::f16, 8, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        use symm::kernels::all_reduce::two_shot_lamport as tl;
        for r in [
            tl::compile_for::<f32, 4, 2>,
            tl::compile_for::<f32, 4, 4>,
            tl::compile_for::<f32, 4, 8>,
            tl::compile_for::<f32, 4, 0>,
            tl::compile_for::<symm::bf16, 8, 2>,
            tl::compile_for::<symm::bf16, 8, 4>,
            tl::compile_for::<symm::f16, 8, 8>,
            tl::compile_for::<symm::f16, 8, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        use symm::kernels::all_reduce::one_shot_lamport as lp;
        for r in [
            lp::compile_for::<f32, 4, 2>,
            lp::compile_for::<f32, 4, 4>,
            lp::compile_for::<f32, 4, 8>,
            lp::compile_for::<f32, 4, 0>,
            lp::compile_for::<symm::bf16, 8, 2>,
            lp::compile_for::<symm::bf16, 8, 4>,
            lp::compile_for::<symm::f16, 8, 8>,
            lp::compile_for::<symm::f16, 8, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        use symm::kernels::tutorial::{naive_all_reduce as na, vectorized_all_reduce as va};
        na::compile_for::<f32>(a).unwrap_or_else(|e| panic!("{e}"));
        na::compile_for::<symm::bf16>(a).unwrap_or_else(|e| panic!("{e}"));
        va::compile_for::<f32, 4>(a).unwrap_or_else(|e| panic!("{e}"));
        va::compile_for::<symm::bf16, 8>(a).unwrap_or_else(|e| panic!("{e}"));
        use symm::kernels::one_shot_all_reduce_kernel as osar;
        for r in [
            osar::compile_for::<f32, 4, 2>,
            osar::compile_for::<f32, 4, 4>,
            osar::compile_for::<f32, 4, 8>,
            osar::compile_for::<f32, 4, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        for r in [
            osar::compile_for::<symm::bf16, 8, 2>,
            osar::compile_for::<symm::bf16, 8, 4>,
            osar::compile_for::<symm::bf16, 8, 8>,
            osar::compile_for::<symm::bf16, 8, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
        for r in [
            osar::compile_for::<symm::f16, 8, 2>,
            osar::compile_for::<symm::f16, 8, 4>,
            osar::compile_for::<symm::f16, 8, 8>,
            osar::compile_for::<symm::f16, 8, 0>,
        ] {
            r(a).unwrap_or_else(|e| panic!("{e}"));
        }
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
    for a in ARCHES {
        arith::compile_for::<f32>(a).unwrap_or_else(|e| panic!("{e}"));
        arith::compile_for::<f64>(a).unwrap_or_else(|e| panic!("{e}"));
        arith::compile_for::<symm::bf16>(a).unwrap_or_else(|e| panic!("{e}"));
        arith::compile_for::<symm::f16>(a).unwrap_or_else(|e| panic!("{e}"));
        int_ops::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        control::compile_for::<8>(a).unwrap_or_else(|e| panic!("{e}"));
        atomics::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        vectors::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        shared_reduce::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        shared_scopes::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        lanes::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        shuffles::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        warp_moves::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        message_passing::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        copy_n::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        wait_on::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        all_arrive::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        gather_vectors::compile_for::<f32, 4>(a).unwrap_or_else(|e| panic!("{e}"));
        gather_vectors::compile_for::<symm::bf16, 8>(a).unwrap_or_else(|e| panic!("{e}"));
        gather_packets::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
        foundation_suite::write_slots::compile_for(a).unwrap_or_else(|e| panic!("{e}"));
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
