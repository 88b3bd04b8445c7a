// CUDA C of #[symm_kernel] on `lanes` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_lanes(const symm_kctx& __ctx, symm_slice<symm_u32> v_lanes) {
SYMM_AT(__ctx, v_lanes, ((f_thread_idx_y(__ctx) * ((SYMM_TY(f_thread_idx_y(__ctx)))16ULL)) + f_thread_idx_x(__ctx)), 1) = f_lane_id(__ctx);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_lanes_ptr, symm_u64 v_lanes_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_lanes(__ctx, symm_slice<symm_u32>{(symm_u32*)v_lanes_ptr, v_lanes_len});
}
