// CUDA C of #[symm_kernel] on `control` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

template<symm_u64 G_W>
__device__ __forceinline__ void k_control(const symm_kctx& __ctx, symm_slice<symm_i32> v_x, symm_slice<symm_i32> v_out, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i >= v_n)) {
return;
}
auto v_v = SYMM_AT(__ctx, v_x, v_i, 5);
symm_array<symm_i32, G_W> v_acc = symm_array_fill<symm_i32, G_W>(((symm_i32)0ULL));
{
const symm_u64 t_end1 = G_W;
#pragma unroll
for (symm_u64 v_j = ((symm_u64)0ULL); v_j < t_end1; v_j += 1) {
SYMM_AT(__ctx, v_acc, v_j, 8) = symm_wrapping_mul(v_v, (symm_cast<symm_i32>(v_j) + ((symm_i32)1ULL)));
}
}
symm_i32 v_s = ((symm_i32)0ULL);
{
const symm_u64 t_end2 = G_W;
#pragma unroll
for (symm_u64 v_j_2 = ((symm_u64)0ULL); v_j_2 < t_end2; v_j_2 += ((symm_u64)2ULL)) {
v_s = symm_wrapping_add(v_s, SYMM_AT(__ctx, v_acc, v_j_2, 12));
}
}
symm_u32 v_k = ((symm_u32)0ULL);
while (true) {
v_k += ((symm_u32)1ULL);
if ((v_k > ((symm_u32)10ULL))) {
break;
}
if ((symm_rem(v_k, ((symm_u32)3ULL)) == ((symm_u32)0ULL))) {
continue;
}
v_s ^= symm_cast<symm_i32>(v_k);
}
auto v_w = v_v;
while ((v_w > ((SYMM_TY(v_w))100ULL))) {
v_w /= ((SYMM_TY(v_w))2ULL);
}
auto v_sign = (((v_v < ((SYMM_TY(v_v))0ULL))) ? ((-((symm_i32)1ULL))) : (((symm_i32)1ULL)));
SYMM_AT(__ctx, v_out, v_i, 30) = symm_wrapping_add(v_s, (v_w * v_sign));
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_control<$G_W$>(__ctx, symm_slice<symm_i32>{(symm_i32*)v_x_ptr, v_x_len}, symm_slice<symm_i32>{(symm_i32*)v_out_ptr, v_out_len}, v_n);
}
