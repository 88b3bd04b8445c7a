// CUDA C of #[symm_kernel] on `message_passing` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_message_passing(const symm_kctx& __ctx, symm_buf<symm_u32> v_buf, symm_u32 v_iters, symm_u32 v_seed) {
if (((f_thread_idx_x(__ctx) != ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL)) || (f_block_idx_x(__ctx) != ((SYMM_TY(f_block_idx_x(__ctx)))0ULL)))) {
return;
}
auto v_rank = symm_rank(v_buf);
auto v_world = symm_world(v_buf);
auto v_next = symm_peer(v_buf, symm_rem(((v_rank + ((symm_u32)1ULL))), v_world));
auto v_prev_rank = symm_rem((((v_rank + v_world) - ((symm_u32)1ULL))), v_world);
auto v_prev = symm_peer(v_buf, v_prev_rank);
auto v_me = symm_local(v_buf);
{
const symm_u32 t_end1 = (v_iters + ((symm_u32)1ULL));
for (symm_u32 v_k = ((symm_u32)1ULL); v_k < t_end1; v_k += 1) {
auto v_t0 = f_globaltimer(__ctx);
while ((symm_dsl_load<SYMM_ACQUIRE, SYMM_SYS>(v_me, ((symm_u64)1ULL)) < (v_k - ((symm_u32)1ULL)))) {
if (((f_globaltimer(__ctx) - v_t0) > ((symm_u64)2000000000ULL))) {
symm_dsl_add<SYMM_RELAXED, SYMM_SYS>(v_me, ((symm_u64)3ULL), 1);
return;
}
}
{
const symm_u32 t_end2 = ((symm_u32)16ULL);
#pragma unroll
for (symm_u32 v_j = ((symm_u32)0ULL); v_j < t_end2; v_j += 1) {
symm_dsl_store<SYMM_RELAXED, SYMM_SYS>(v_next, (((symm_u32)8ULL) + v_j), ((v_seed ^ (((v_k * ((symm_u32)16ULL)) + v_j))) ^ v_rank));
}
}
symm_dsl_store<SYMM_RELEASE, SYMM_SYS>(v_next, ((symm_u64)0ULL), v_k);
auto v_t1 = f_globaltimer(__ctx);
while ((symm_dsl_load<SYMM_ACQUIRE, SYMM_SYS>(v_me, ((symm_u64)0ULL)) < v_k)) {
if (((f_globaltimer(__ctx) - v_t1) > ((symm_u64)2000000000ULL))) {
symm_dsl_add<SYMM_RELAXED, SYMM_SYS>(v_me, ((symm_u64)3ULL), 1);
return;
}
}
{
const symm_u32 t_end3 = ((symm_u32)16ULL);
#pragma unroll
for (symm_u32 v_j_2 = ((symm_u32)0ULL); v_j_2 < t_end3; v_j_2 += 1) {
if ((symm_dsl_load<SYMM_RELAXED, SYMM_SYS>(v_me, (((symm_u32)8ULL) + v_j_2)) != ((v_seed ^ (((v_k * ((symm_u32)16ULL)) + v_j_2))) ^ v_prev_rank))) {
symm_dsl_add<SYMM_RELAXED, SYMM_SYS>(v_me, ((symm_u64)2ULL), 1);
}
}
}
symm_dsl_store<SYMM_RELEASE, SYMM_SYS>(v_prev, ((symm_u64)1ULL), v_k);
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_buf_ptrs, const symm_u64* v_buf_pads, symm_u32 v_buf_rank, symm_u32 v_buf_world, symm_u64 v_buf_len, symm_u64 v_buf_local, symm_u64 v_buf_lpad, symm_u32 v_iters, symm_u32 v_seed) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_message_passing(__ctx, symm_buf<symm_u32>{v_buf_ptrs, v_buf_pads, v_buf_rank, v_buf_world, v_buf_len, v_buf_local, v_buf_lpad}, v_iters, v_seed);
}
