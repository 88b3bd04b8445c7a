// CUDA C of #[symm_kernel] on `shared_scopes` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_shared_scopes(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_slice<symm_u32> v_out) {
__shared__ symm_array<symm_u32, 32ULL> v_s;
auto v_t = f_thread_idx_x(__ctx);
SYMM_AT(__ctx, v_s, v_t, 3) = SYMM_AT(__ctx, v_x, v_t, 3);
f_sync_threads(__ctx);
auto v_other = f_stash_reversed(__ctx, ((SYMM_AT(__ctx, v_x, v_t, 5) * ((SYMM_TY(SYMM_AT(__ctx, v_x, v_t, 5)))3ULL)) + ((SYMM_TY((SYMM_AT(__ctx, v_x, v_t, 5) * ((SYMM_TY(SYMM_AT(__ctx, v_x, v_t, 5)))3ULL))))1ULL)));
f_sync_threads(__ctx);
SYMM_AT(__ctx, v_out, v_t, 7) = (SYMM_AT(__ctx, v_s, v_t, 7) + v_other);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_out_ptr, symm_u64 v_out_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_shared_scopes(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, symm_slice<symm_u32>{(symm_u32*)v_out_ptr, v_out_len});
}
