// CUDA C of #[symm_kernel] on `shared_reduce` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_shared_reduce(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<float> v_sums, symm_slice<float> v_rev) {
__shared__ symm_array<float, 256ULL> v_s;
auto v_t = ((symm_u32)threadIdx.x);
auto v_base = (((symm_u32)blockIdx.x) * ((symm_u32)256ULL));
SYMM_AT(__ctx, v_s, v_t, 4) = SYMM_AT(__ctx, v_x, (v_base + v_t), 4);
__syncthreads();
SYMM_AT(__ctx, v_rev, (v_base + v_t), 6) = SYMM_AT(__ctx, v_s, (((symm_u32)255ULL) - v_t), 6);
__syncthreads();
symm_u32 v_width = ((symm_u32)128ULL);
while ((v_width > ((symm_u32)0ULL))) {
if ((v_t < v_width)) {
SYMM_AT(__ctx, v_s, v_t, 11) = (SYMM_AT(__ctx, v_s, v_t, 11) + SYMM_AT(__ctx, v_s, (v_t + v_width), 11));
}
__syncthreads();
v_width /= ((symm_u32)2ULL);
}
if ((v_t == ((symm_u32)0ULL))) {
SYMM_AT(__ctx, v_sums, ((symm_u32)blockIdx.x), 17) = SYMM_AT(__ctx, v_s, ((symm_u64)0ULL), 17);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_sums_ptr, symm_u64 v_sums_len, void* v_rev_ptr, symm_u64 v_rev_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_shared_reduce(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<float>{(float*)v_sums_ptr, v_sums_len}, symm_slice<float>{(float*)v_rev_ptr, v_rev_len});
}
