//! `SYMM_DUMP=<dir>` writes each compiled kernel's CUDA C and PTX.

use symm::jit::{nvrtc_available, Arch};
use symm::kernels::broadcast;

#[test]
fn symm_dump_writes_cuda_and_ptx() {
    if !nvrtc_available() {
        assert!(
            std::env::var("SYMM_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "NVRTC required but not found"
        );
        eprintln!("SKIPPED: NVRTC not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // This test binary has no other test, so the variable affects nothing else.
    std::env::set_var("SYMM_DUMP", dir.path());
    broadcast::compile_for::<f32>(Arch { major: 9, minor: 0 }).unwrap();
    let cu = std::fs::read_to_string(dir.path().join("broadcast.cu")).unwrap();
    let ptx = std::fs::read_to_string(dir.path().join("broadcast.ptx")).unwrap();
    assert!(
        cu.contains("extern \"C\" __global__ void broadcast(") && cu.contains("k_broadcast<float>"),
        "{cu}"
    );
    assert!(
        ptx.contains(".entry broadcast(") && ptx.contains(".target sm_90"),
        "{}",
        &ptx[..ptx.len().min(400)]
    );
}
