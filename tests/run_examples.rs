//! The examples as tests: each runs to completion on the emulator (they
//! check their own results and exit non-zero when wrong), and the kernels
//! they define compile to CUBIN with NVRTC (sm_90 and sm_80).

// Each example brings `examples/support` in as its own module, as its own
// binary does, so here it is compiled once per example.
#![allow(clippy::duplicate_mod)]

#[path = "support/tier.rs"]
mod tier;

#[path = "../examples/all_reduce.rs"]
#[allow(dead_code)]
mod all_reduce;
#[path = "../examples/custom_all_gather.rs"]
#[allow(dead_code)]
mod custom_all_gather;
#[path = "../examples/peer_exchange.rs"]
#[allow(dead_code)]
mod peer_exchange;
#[path = "../examples/ping_pong.rs"]
#[allow(dead_code)]
mod ping_pong;

#[path = "../examples/mesh.rs"]
#[allow(dead_code)]
mod mesh;

#[path = "../examples/tp_decode/main.rs"]
#[allow(dead_code)]
mod tp_decode;

#[test]
fn the_main_job_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    all_reduce::main();
}

#[test]
fn ping_pong_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    ping_pong::main();
}

#[test]
fn custom_all_gather_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    custom_all_gather::main();
}

#[test]
fn peer_exchange_runs() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    peer_exchange::main();
}

/// The tensor-parallel decode step on the emulator at toy sizes (hidden
/// 256, 2 layers, batch 2, context 16) at worlds 2 and 4, every variant
/// checked against the world-1 reference and across ranks.
#[test]
fn tp_decode_matches_its_world_one_reference() {
    if !tier::quick() {
        return; // (the quick tier's)
    }
    let args = tp_decode::Args {
        shape: "toy".into(),
        layers: 2,
        batch: 2,
        ctx: 16,
        worlds: vec![2, 4],
        emulator: true,
        replays: 0,
    };
    assert_eq!(tp_decode::run_main(args), 0, "tp_decode's checks failed");
}

/// The 2-D mesh (TP in each simulated node's domain, DP hierarchically
/// across them) on the emulator at 2 × 2 and, in the full tier, 2 × 4 and
/// 4 × 2: every rank against the world-1 reference and every other rank.
#[test]
fn mesh_matches_its_world_one_reference() {
    for (world, nodes) in tier::split([(4, 2), (8, 2), (8, 4)], |&(w, _)| w == 4) {
        let args = mesh::Args {
            world: Some(world),
            nodes,
            grad_mib: 0,
            buckets: 4,
            work: 4,
            emulator: true,
        };
        assert_eq!(
            mesh::run_main(args),
            0,
            "mesh at {world} ranks in {nodes} nodes"
        );
    }
}

symm::check_kernels!(
    fn example_kernels_compile_with_nvrtc;
    tp_decode::kernels::fill::<symm::bf16>,
    tp_decode::kernels::rms_norm::<symm::bf16>,
    tp_decode::kernels::add::<symm::bf16>,
    tp_decode::kernels::kv_write::<symm::bf16>,
    tp_decode::kernels::attention_split::<symm::bf16>,
    tp_decode::kernels::attention_combine::<symm::bf16>,
    tp_decode::kernels::swiglu::<symm::bf16>,
    tp_decode::kernels::gemm_xwt::<symm::bf16>,
    ping_pong::ping_pong,
    mesh::gradient,
    custom_all_gather::push_all_gather::<f32>,
);
