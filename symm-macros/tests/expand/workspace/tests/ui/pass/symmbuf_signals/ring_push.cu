// CUDA C of #[symm_kernel] on `ring_push` in tests/ui/pass/symmbuf_signals.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_ring_push(const symm_kctx& __ctx, symm_buf<float> v_buf, symm_buf<symm_u64> v_sums, symm_u32 v_n, symm_u32 v_channel) {
auto v_rank = symm_rank(v_buf);
auto v_world = symm_world(v_buf);
auto v_next = symm_rem(((v_rank + ((symm_u32)1ULL))), v_world);
auto v_prev = symm_rem((((v_rank + v_world) - ((symm_u32)1ULL))), v_world);
auto v_src = symm_local(v_buf);
auto v_dst = symm_peer(v_buf, v_next);
auto v_i = ((f_block_idx_x(__ctx) * f_block_dim_x(__ctx)) + f_thread_idx_x(__ctx));
while ((v_i < v_n)) {
symm_dsl_store<SYMM_RELAXED, SYMM_SYS>(v_dst, (v_n + v_i), SYMM_AT(__ctx, v_src, v_i, 9));
v_i += (f_grid_dim_x(__ctx) * f_block_dim_x(__ctx));
}
symm_fence<SYMM_SYS>();
f_sync_threads(__ctx);
if ((f_thread_idx_x(__ctx) == ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL))) {
symm_dsl_put_signal(__ctx, v_buf, v_next, v_channel);
symm_dsl_wait_signal(__ctx, v_buf, v_prev, v_channel);
symm_u64 v_acc = ((symm_u64)0ULL);
{
const symm_u32 t_end1 = v_n;
for (symm_u32 v_k = ((symm_u32)0ULL); v_k < t_end1; v_k += 1) {
auto v_v = symm_dsl_load<SYMM_ACQUIRE, SYMM_SYS>(v_src, (v_n + v_k));
v_acc = symm_wrapping_add(v_acc, symm_cast<symm_u64>(symm_to_bits(v_v)));
}
}
symm_dsl_add<SYMM_RELAXED, SYMM_SYS>(symm_local(v_sums), ((symm_u64)0ULL), v_acc);
auto v_pad = symm_pad(v_buf, v_rank);
auto v_slot = f_signal_slot(__ctx, v_channel, f_block_idx_x(__ctx), v_prev);
symm_dsl_store<SYMM_RELEASE, SYMM_SYS>(symm_local(v_sums), ((symm_u64)1ULL), symm_cast<symm_u64>(symm_dsl_load<SYMM_VOLATILE, SYMM_SYS>(v_pad, v_slot)));
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, const symm_u64* v_sums_ptrs, const symm_u64* v_sums_pads, symm_u32 v_sums_rank, symm_u32 v_sums_world, symm_u64 v_sums_len, symm_u64 v_sums_local, symm_u64 v_sums_lpad, symm_u32 v_n, symm_u32 v_channel) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_ring_push(__ctx, symm_buf<float>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, symm_buf<symm_u64>{v_sums_ptrs, v_sums_pads, v_sums_rank, v_sums_world, v_sums_len, v_sums_local, v_sums_lpad}, v_n, v_channel);
}
