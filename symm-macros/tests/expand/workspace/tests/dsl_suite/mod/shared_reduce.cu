// CUDA C of #[symm_kernel] on `shared_reduce` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_shared_reduce(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<float> v_sums, symm_slice<float> v_rev) {
__shared__ symm_array<float, 256ULL> v_s;
auto v_t = f_thread_idx_x(__ctx);
auto v_base = (f_block_idx_x(__ctx) * ((SYMM_TY(f_block_idx_x(__ctx)))256ULL));
SYMM_AT(__ctx, v_s, v_t, 4) = SYMM_AT(__ctx, v_x, (v_base + v_t), 4);
f_sync_threads(__ctx);
SYMM_AT(__ctx, v_rev, (v_base + v_t), 6) = SYMM_AT(__ctx, v_s, (((SYMM_TY(v_t))255ULL) - v_t), 6);
f_sync_threads(__ctx);
symm_u32 v_width = ((symm_u32)128ULL);
while ((v_width > ((symm_u32)0ULL))) {
if ((v_t < v_width)) {
SYMM_AT(__ctx, v_s, v_t, 11) = (SYMM_AT(__ctx, v_s, v_t, 11) + SYMM_AT(__ctx, v_s, (v_t + v_width), 11));
}
f_sync_threads(__ctx);
v_width /= ((symm_u32)2ULL);
}
if ((v_t == ((SYMM_TY(v_t))0ULL))) {
SYMM_AT(__ctx, v_sums, f_block_idx_x(__ctx), 17) = SYMM_AT(__ctx, v_s, ((symm_u64)0ULL), 17);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_sums_ptr, symm_u64 v_sums_len, void* v_rev_ptr, symm_u64 v_rev_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_shared_reduce(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<float>{(float*)v_sums_ptr, v_sums_len}, symm_slice<float>{(float*)v_rev_ptr, v_rev_len});
}
