// CUDA C of #[symm_kernel] on `axpy_w` in tests/ui/pass/generic_const_helper.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<typename G_T, symm_u64 G_W>
__device__ __forceinline__ void k_axpy_w(const symm_kctx& __ctx, symm_slice<G_T> v_x, symm_slice<G_T> v_y, symm_slice<G_T> v_peaks, G_T v_a, symm_u32 v_n) {
auto v_t = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
auto v_base = (v_t * symm_cast<symm_u32>(G_W));
if (((v_base + (symm_cast<symm_u32>(G_W))) <= v_n)) {
symm_array<G_T, G_W> v_r = symm_array_fill<G_T, G_W>(symm_from_f32<G_T>(0.0f));
{
const symm_u64 t_end1 = G_W;
#pragma unroll
for (symm_u64 v_k = ((symm_u64)0ULL); v_k < t_end1; v_k += 1) {
auto v_j = (v_base + symm_cast<symm_u32>(v_k));
SYMM_AT(__ctx, v_r, v_k, 7) = f_axpy(__ctx, v_a, SYMM_AT(__ctx, v_x, v_j, 7), SYMM_AT(__ctx, v_y, v_j, 7));
SYMM_AT(__ctx, v_y, v_j, 8) = SYMM_AT(__ctx, v_r, v_k, 8);
}
}
SYMM_AT(__ctx, v_peaks, v_t, 10) = f_largest<G_T, G_W>(__ctx, v_r);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_y_ptr, symm_u64 v_y_len, void* v_peaks_ptr, symm_u64 v_peaks_len, $G_T$ v_a, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_axpy_w<$G_T$, $G_W$>(__ctx, symm_slice<$G_T$>{($G_T$*)v_x_ptr, v_x_len}, symm_slice<$G_T$>{($G_T$*)v_y_ptr, v_y_len}, symm_slice<$G_T$>{($G_T$*)v_peaks_ptr, v_peaks_len}, v_a, v_n);
}
