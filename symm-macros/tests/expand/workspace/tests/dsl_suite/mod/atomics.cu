// CUDA C of #[symm_kernel] on `atomics` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_atomics(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_slice<symm_u32> v_counters, symm_slice<float> v_fsum, symm_u32 v_n) {
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
if ((v_i < v_n)) {
auto v_v = SYMM_AT(__ctx, v_x, v_i, 3);
symm_dsl_add<SYMM_RELAXED, SYMM_GPU>(v_counters, symm_rem(v_i, ((SYMM_TY(v_i))8ULL)), 1);
symm_dsl_max<SYMM_RELAXED, SYMM_GPU>(v_counters, (((SYMM_TY(symm_rem(v_i, ((SYMM_TY(v_i))4ULL))))8ULL) + symm_rem(v_i, ((SYMM_TY(v_i))4ULL))), v_v);
symm_dsl_min<SYMM_RELAXED, SYMM_GPU>(v_counters, (((SYMM_TY(symm_rem(v_i, ((SYMM_TY(v_i))4ULL))))12ULL) + symm_rem(v_i, ((SYMM_TY(v_i))4ULL))), v_v);
auto v_cur = symm_dsl_load<SYMM_RELAXED, SYMM_GPU>(v_counters, ((symm_u64)16ULL));
while ((v_cur < v_v)) {
auto v_seen = symm_dsl_cas<SYMM_ACQ_REL, SYMM_GPU>(v_counters, ((symm_u64)16ULL), v_cur, v_v);
if ((v_seen == v_cur)) {
break;
}
v_cur = v_seen;
}
auto v_old = symm_dsl_exch<SYMM_RELAXED, SYMM_GPU>(v_counters, ((symm_u64)18ULL), v_v);
if ((v_old != ((symm_u32)4294967295ULL))) {
symm_dsl_add<SYMM_RELAXED, SYMM_GPU>(v_counters, ((symm_u64)17ULL), 1);
}
symm_dsl_add<SYMM_RELAXED, SYMM_GPU>(v_fsum, symm_rem(v_i, ((SYMM_TY(v_i))2ULL)), symm_cast<float>((symm_rem(v_v, ((SYMM_TY(v_v))1024ULL)))));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_counters_ptr, symm_u64 v_counters_len, void* v_fsum_ptr, symm_u64 v_fsum_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_atomics(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, symm_slice<symm_u32>{(symm_u32*)v_counters_ptr, v_counters_len}, symm_slice<float>{(float*)v_fsum_ptr, v_fsum_len}, v_n);
}
