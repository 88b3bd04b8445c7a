//! The examples as tests: each runs to completion on the emulator (they
//! check their own results and exit non-zero when wrong), and the kernels
//! they define compile to CUBIN with NVRTC (sm_90 and sm_80).

// Each example brings `examples/support` in as its own module, as its own
// binary does, so here it is compiled once per example.
#![allow(clippy::duplicate_mod)]

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

#[test]
fn the_main_job_runs() {
    all_reduce::main();
}

#[test]
fn ping_pong_runs() {
    ping_pong::main();
}

#[test]
fn custom_all_gather_runs() {
    custom_all_gather::main();
}

#[test]
fn peer_exchange_runs() {
    peer_exchange::main();
}

symm::check_kernels!(
    fn example_kernels_compile_with_nvrtc;
    ping_pong::ping_pong,
    custom_all_gather::push_all_gather::<f32>,
);
