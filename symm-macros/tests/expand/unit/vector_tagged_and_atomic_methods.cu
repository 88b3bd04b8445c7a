// CUDA C of #[symm_kernel] on the unit case `vector_tagged_and_atomic_methods`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_buf<symm_u64> v_b, symm_slice<symm_u64> v_x) {
auto v_p = symm_peer(v_b, ((symm_u32)1ULL));
auto v_v = symm_dsl_load_vec_volatile<2ULL>(v_p, ((symm_u64)0ULL));
auto v_w = symm_dsl_load_vec_ready<4ULL>(__ctx, v_p, ((symm_u64)8ULL), ((symm_u64)0ULL), ((symm_u32)1ULL));
auto v_t = symm_dsl_load_tagged(__ctx, v_p, ((symm_u64)0ULL), ((symm_u32)7ULL), ((symm_u32)1ULL));
auto v_t2 = symm_dsl_load_tagged2(__ctx, v_p, ((symm_u64)0ULL), ((symm_u32)7ULL), ((symm_u32)1ULL));
symm_dsl_store_vec(symm_local(v_b), ((symm_u64)0ULL), v_v);
auto v_a = (symm_dsl_max<SYMM_ACQ_REL, SYMM_GPU>(v_p, ((symm_u64)3ULL), 1) + symm_dsl_min<SYMM_RELAXED, SYMM_CTA>(v_p, ((symm_u64)3ULL), 1));
symm_dsl_put_signal(__ctx, v_b, ((symm_u32)1ULL), ((symm_u32)0ULL));
symm_dsl_wait_signal(__ctx, v_b, ((symm_u32)1ULL), ((symm_u32)0ULL));
auto v_q = symm_pad(v_b, ((symm_u32)1ULL));
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 11) = (((((v_a + SYMM_AT(__ctx, v_w, ((symm_u64)0ULL), 11)) + v_t) + SYMM_AT(__ctx, v_t2, ((symm_u64)1ULL), 11)) + symm_len(v_q)) + symm_wrapping_add(symm_wrapping_sub(symm_max(symm_min(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11), ((SYMM_TY(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11)))3ULL)), ((SYMM_TY(symm_min(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11), ((SYMM_TY(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11)))3ULL))))1ULL)), ((SYMM_TY(symm_max(symm_min(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11), ((SYMM_TY(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11)))3ULL)), ((SYMM_TY(symm_min(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11), ((SYMM_TY(SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 11)))3ULL))))1ULL))))2ULL)), SYMM_AT(__ctx, v_x, ((symm_u64)2ULL), 11)));
SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 12) = (((symm_cast<symm_u64>(symm_fma(1.0f, 2.0f, 3.0f)) + symm_max(SYMM_AT(__ctx, v_x, ((symm_u64)3ULL), 12), ((SYMM_TY(SYMM_AT(__ctx, v_x, ((symm_u64)3ULL), 12)))1ULL))) + symm_cast<symm_u64>(symm_abs(((symm_i64)1ULL)))) + f_globaltimer(__ctx));
auto v_l = f_ballot(__ctx, (f_lane_id(__ctx) < ((SYMM_TY(f_lane_id(__ctx)))4ULL)));
SYMM_AT(__ctx, v_x, ((symm_u64)2ULL), 14) = ((symm_cast<symm_u64>(v_l)) << 3);
f_grid_dependency_wait(__ctx);
f_launch_dependents(__ctx);
symm_fence<SYMM_SYS>();
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_b_ptrs, const symm_u64* v_b_pads, symm_u32 v_b_rank, symm_u32 v_b_world, symm_u64 v_b_len, symm_u64 v_b_local, symm_u64 v_b_lpad, void* v_x_ptr, symm_u64 v_x_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_buf<symm_u64>{v_b_ptrs, v_b_pads, v_b_rank, v_b_world, v_b_len, v_b_local, v_b_lpad}, symm_slice<symm_u64>{(symm_u64*)v_x_ptr, v_x_len});
}
