// CUDA C of #[symm_kernel] on `histogram_and_reverse` in tests/ui/pass/atomics_vectors_shared.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_histogram_and_reverse(const symm_kctx& __ctx, symm_slice<float> v_x, symm_slice<float> v_out, symm_slice<symm_u32> v_bins, symm_slice<float> v_total, symm_slice<symm_u32> v_votes) {
auto v_t = f_thread_idx_x(__ctx);
auto v_g = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + v_t);
__shared__ symm_array<float, 1024ULL> v_tile;
auto v_v = symm_dsl_load_vec<4ULL>(v_x, (v_g * ((SYMM_TY(v_g))4ULL)));
{
const symm_u32 t_end1 = ((symm_u32)4ULL);
#pragma unroll
for (symm_u32 v_k = ((symm_u32)0ULL); v_k < t_end1; v_k += 1) {
SYMM_AT(__ctx, v_tile, ((v_t * ((SYMM_TY(v_t))4ULL)) + v_k), 14) = SYMM_AT(__ctx, v_v, v_k, 14);
}
}
f_sync_threads(__ctx);
auto v_last = ((f_block_dim_x(__ctx) * ((SYMM_TY(f_block_dim_x(__ctx)))4ULL)) - ((SYMM_TY((f_block_dim_x(__ctx) * ((SYMM_TY(f_block_dim_x(__ctx)))4ULL))))1ULL));
symm_array<float, 4ULL> v_r = symm_array<float, 4ULL>{{SYMM_AT(__ctx, v_tile, (v_last - (v_t * ((SYMM_TY(v_t))4ULL))), 21), SYMM_AT(__ctx, v_tile, ((v_last - (v_t * ((SYMM_TY(v_t))4ULL))) - ((SYMM_TY((v_last - (v_t * ((SYMM_TY(v_t))4ULL)))))1ULL)), 22), SYMM_AT(__ctx, v_tile, ((v_last - (v_t * ((SYMM_TY(v_t))4ULL))) - ((SYMM_TY((v_last - (v_t * ((SYMM_TY(v_t))4ULL)))))2ULL)), 23), SYMM_AT(__ctx, v_tile, ((v_last - (v_t * ((SYMM_TY(v_t))4ULL))) - ((SYMM_TY((v_last - (v_t * ((SYMM_TY(v_t))4ULL)))))3ULL)), 24)}};
symm_dsl_store_vec(v_out, (v_g * ((SYMM_TY(v_g))4ULL)), v_r);
auto v_bin = symm_min(symm_rem((symm_cast<symm_u32>(symm_abs(SYMM_AT(__ctx, v_v, ((symm_u64)0ULL), 29)))), ((symm_u32)16ULL)), ((symm_u32)15ULL));
symm_dsl_add<SYMM_RELAXED, SYMM_GPU>(v_bins, v_bin, 1);
symm_dsl_add<SYMM_RELAXED, SYMM_GPU>(v_total, ((symm_u64)0ULL), (((SYMM_AT(__ctx, v_v, ((symm_u64)0ULL), 31) + SYMM_AT(__ctx, v_v, ((symm_u64)1ULL), 31)) + SYMM_AT(__ctx, v_v, ((symm_u64)2ULL), 31)) + SYMM_AT(__ctx, v_v, ((symm_u64)3ULL), 31)));
auto v_cur = symm_dsl_load<SYMM_RELAXED, SYMM_GPU>(v_bins, ((symm_u64)16ULL));
while ((v_cur < v_g)) {
auto v_seen = symm_dsl_cas<SYMM_ACQ_REL, SYMM_GPU>(v_bins, ((symm_u64)16ULL), v_cur, v_g);
if ((v_seen == v_cur)) {
break;
}
v_cur = v_seen;
}
auto v_s = v_g;
symm_u32 v_m = ((symm_u32)16ULL);
while ((v_m > ((symm_u32)0ULL))) {
v_s = symm_wrapping_add(v_s, f_shfl_xor(__ctx, v_s, v_m));
v_m /= ((symm_u32)2ULL);
}
auto v_b = f_ballot(__ctx, (SYMM_AT(__ctx, v_v, ((symm_u64)0ULL), 48) > 0.0f));
if ((f_lane_id(__ctx) == ((SYMM_TY(f_lane_id(__ctx)))0ULL))) {
SYMM_AT(__ctx, v_votes, (v_g / ((SYMM_TY(v_g))32ULL)), 50) = (v_b ^ v_s);
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, void* v_out_ptr, symm_u64 v_out_len, void* v_bins_ptr, symm_u64 v_bins_len, void* v_total_ptr, symm_u64 v_total_len, void* v_votes_ptr, symm_u64 v_votes_len) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_histogram_and_reverse(__ctx, symm_slice<float>{(float*)v_x_ptr, v_x_len}, symm_slice<float>{(float*)v_out_ptr, v_out_len}, symm_slice<symm_u32>{(symm_u32*)v_bins_ptr, v_bins_len}, symm_slice<float>{(float*)v_total_ptr, v_total_len}, symm_slice<symm_u32>{(symm_u32*)v_votes_ptr, v_votes_len});
}
