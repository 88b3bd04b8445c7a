// CUDA C of #[symm_kernel] on `shared_reduce` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_shared_reduce(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<float> v_sums, symm_slice<float> v_rev) {
__shared__ symm_array<float, 256ULL> v_s;
auto v_t = f_thread_idx_x(__ctx);
auto v_base = (f_block_idx_x(__ctx) * ((SYMM_TY(f_block_idx_x(__ctx)))256ULL));
v_s[v_t] = v_x[(v_base + v_t)];
f_sync_threads(__ctx);
v_rev[(v_base + v_t)] = v_s[(((SYMM_TY(v_t))255ULL) - v_t)];
f_sync_threads(__ctx);
symm_u32 v_width = ((symm_u32)128ULL);
while ((v_width > ((symm_u32)0ULL))) {
if ((v_t < v_width)) {
v_s[v_t] = (v_s[v_t] + v_s[(v_t + v_width)]);
}
f_sync_threads(__ctx);
v_width /= ((symm_u32)2ULL);
}
if ((v_t == ((SYMM_TY(v_t))0ULL))) {
v_sums[f_block_idx_x(__ctx)] = v_s[((symm_u64)0ULL)];
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_sums_ptr, symm_u64 v_sums_len, void* v_rev_ptr, symm_u64 v_rev_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_shared_reduce(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<float>{(float*)v_sums_ptr, v_sums_len}, symm_slice<float>{(float*)v_rev_ptr, v_rev_len});
}
