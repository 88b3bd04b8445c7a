// CUDA C of #[symm_kernel] on the unit case `const_generic_loops_unroll_and_arrays_are_symm_arrays`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<symm_u64 G_W>
__device__ __forceinline__ void k_k(const symm_kctx& __ctx, symm_slice<float> v_x) {
symm_array<float, G_W> v_acc = symm_array_fill<float, G_W>(0.0f);
{
const symm_u64 t_end1 = G_W;
#pragma unroll
for (symm_u64 v_j = ((symm_u64)0ULL); v_j < t_end1; v_j += 1) {
SYMM_AT(__ctx, v_acc, v_j, 0) = ((SYMM_TY(SYMM_AT(__ctx, v_acc, v_j, 0)))1.0);
}
}
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 0) = SYMM_AT(__ctx, v_acc, ((symm_u64)0ULL), 0);
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k<$G_W$>(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len});
}
