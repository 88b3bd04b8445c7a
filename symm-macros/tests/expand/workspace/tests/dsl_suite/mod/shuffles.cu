// CUDA C of #[symm_kernel] on `shuffles` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_shuffles(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_slice<symm_u32> v_sums, symm_slice<symm_u32> v_votes) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
auto v_v = SYMM_AT(__ctx, v_x, v_i, 2);
symm_u32 v_m = ((symm_u32)16ULL);
while ((v_m > ((symm_u32)0ULL))) {
v_v = symm_wrapping_add(v_v, f_shfl_xor(__ctx, v_v, v_m));
v_m /= ((symm_u32)2ULL);
}
auto v_b = f_ballot(__ctx, (((SYMM_AT(__ctx, v_x, v_i, 8) & ((SYMM_TY(SYMM_AT(__ctx, v_x, v_i, 8)))1ULL))) == ((SYMM_TY(((SYMM_AT(__ctx, v_x, v_i, 8) & ((SYMM_TY(SYMM_AT(__ctx, v_x, v_i, 8)))1ULL)))))1ULL)));
SYMM_AT(__ctx, v_sums, v_i, 9) = v_v;
if ((f_lane_id(__ctx) == ((SYMM_TY(f_lane_id(__ctx)))0ULL))) {
SYMM_AT(__ctx, v_votes, (v_i / ((SYMM_TY(v_i))32ULL)), 11) = v_b;
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_sums_ptr, symm_u64 v_sums_len, void* v_votes_ptr, symm_u64 v_votes_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_shuffles(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, symm_slice<symm_u32>{(symm_u32*)v_sums_ptr, v_sums_len}, symm_slice<symm_u32>{(symm_u32*)v_votes_ptr, v_votes_len});
}
