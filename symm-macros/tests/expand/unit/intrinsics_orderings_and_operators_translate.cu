// CUDA C of #[symm_kernel] on the unit case `intrinsics_orderings_and_operators_translate`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_buf<symm_u32> v_b, symm_slice<symm_u32> v_x) {
__shared__ symm_array<symm_u32, 64ULL> v_s;
auto v_v = symm_dsl_load<SYMM_ACQUIRE, SYMM_SYS>(symm_peer(v_b, ((symm_u32)1ULL)), ((symm_u64)3ULL));
symm_dsl_store<SYMM_RELEASE, SYMM_GPU>(symm_local(v_b), ((symm_u64)0ULL), v_v);
SYMM_AT(__ctx, v_s, f_thread_idx_x(__ctx), 4) = symm_rem(symm_not(v_v), ((SYMM_TY(symm_not(v_v)))7ULL));
f_sync_threads(__ctx);
symm_fence<SYMM_CTA>();
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 7) = f_shfl_xor(__ctx, SYMM_AT(__ctx, v_s, ((symm_u64)0ULL), 7), 1);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_b_ptrs, const symm_u64* v_b_pads, symm_u32 v_b_rank, symm_u32 v_b_world, symm_u64 v_b_len, symm_u64 v_b_local, symm_u64 v_b_lpad, void* v_x_ptr, symm_u64 v_x_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_buf<symm_u32>{v_b_ptrs, v_b_pads, v_b_rank, v_b_world, v_b_len, v_b_local, v_b_lpad}, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len});
}
