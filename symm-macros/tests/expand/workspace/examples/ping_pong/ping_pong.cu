// CUDA C of #[symm_kernel] on `ping_pong` in examples/ping_pong.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_ping_pong(const symm_kctx& __ctx, symm_buf<symm_u32> v_buf, symm_u32 v_rounds, symm_u32 v_channel) {
if (((f_block_idx_x(__ctx) != ((SYMM_TY(f_block_idx_x(__ctx)))0ULL)) || (f_thread_idx_x(__ctx) != ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL)))) {
return;
}
auto v_me = symm_rank(v_buf);
auto v_partner = (v_me ^ ((symm_u32)1ULL));
if ((v_partner >= symm_world(v_buf))) {
return;
}
{
const symm_u32 t_end1 = v_rounds;
for (symm_u32 t_i2 = ((symm_u32)0ULL); t_i2 < t_end1; t_i2 += 1) {
if ((symm_rem(v_me, ((symm_u32)2ULL)) == ((symm_u32)0ULL))) {
SYMM_AT(__ctx, symm_peer(v_buf, v_partner), ((symm_u64)0ULL), 13) = (SYMM_AT(__ctx, symm_local(v_buf), ((symm_u64)0ULL), 13) + ((SYMM_TY(SYMM_AT(__ctx, symm_local(v_buf), ((symm_u64)0ULL), 13)))1ULL));
symm_dsl_put_signal(__ctx, v_buf, v_partner, v_channel);
symm_dsl_wait_signal(__ctx, v_buf, v_partner, v_channel);
}
else {
symm_dsl_wait_signal(__ctx, v_buf, v_partner, v_channel);
SYMM_AT(__ctx, symm_peer(v_buf, v_partner), ((symm_u64)0ULL), 18) = (SYMM_AT(__ctx, symm_local(v_buf), ((symm_u64)0ULL), 18) + ((SYMM_TY(SYMM_AT(__ctx, symm_local(v_buf), ((symm_u64)0ULL), 18)))1ULL));
symm_dsl_put_signal(__ctx, v_buf, v_partner, v_channel);
}
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_rounds, symm_u32 v_channel) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_ping_pong(__ctx, symm_buf<symm_u32>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_rounds, v_channel);
}
