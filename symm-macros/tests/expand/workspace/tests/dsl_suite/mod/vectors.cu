// CUDA C of #[symm_kernel] on `vectors` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_vectors(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<float> v_out, symm_slice<symm_bf16> v_h, symm_slice<symm_bf16> v_hout, symm_u32 v_groups) {
auto v_g = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_g < v_groups)) {
auto v_v = symm_dsl_load_vec<4ULL>(v_x, (v_g * ((SYMM_TY(v_g))4ULL)));
symm_array<float, 4ULL> v_r = symm_array<float, 4ULL>{{SYMM_AT(__ctx, v_v, ((symm_u64)3ULL), 4), SYMM_AT(__ctx, v_v, ((symm_u64)2ULL), 4), SYMM_AT(__ctx, v_v, ((symm_u64)1ULL), 4), SYMM_AT(__ctx, v_v, ((symm_u64)0ULL), 4)}};
symm_dsl_store_vec(v_out, (v_g * ((SYMM_TY(v_g))4ULL)), v_r);
auto v_w = symm_dsl_load_vec<8ULL>(v_h, (v_g * ((SYMM_TY(v_g))8ULL)));
symm_array<symm_bf16, 8ULL> v_q = v_w;
{
const symm_u32 t_end1 = ((symm_u32)8ULL);
#pragma unroll
for (symm_u32 v_k = ((symm_u32)0ULL); v_k < t_end1; v_k += 1) {
SYMM_AT(__ctx, v_q, v_k, 9) = SYMM_AT(__ctx, v_w, (((symm_u32)7ULL) - v_k), 9);
}
}
symm_dsl_store_vec(v_hout, (v_g * ((SYMM_TY(v_g))8ULL)), v_q);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_out_ptr, symm_u64 v_out_len, void* v_h_ptr, symm_u64 v_h_len, void* v_hout_ptr, symm_u64 v_hout_len, symm_u32 v_groups) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_vectors(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<float>{(float*)v_out_ptr, v_out_len}, symm_slice<symm_bf16>{(symm_bf16*)v_h_ptr, v_h_len}, symm_slice<symm_bf16>{(symm_bf16*)v_hout_ptr, v_hout_len}, v_groups);
}
