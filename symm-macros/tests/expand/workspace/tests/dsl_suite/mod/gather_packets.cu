// CUDA C of #[symm_kernel] on `gather_packets` in tests/dsl_suite/mod.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_gather_packets(const symm_kctx& __ctx, symm_buf<symm_u64> v_stage, symm_slice<symm_u64> v_out, symm_u32 v_tag, symm_u32 v_seed) {
if (((f_thread_idx_x(__ctx) != ((SYMM_TY(f_thread_idx_x(__ctx)))0ULL)) || (f_block_idx_x(__ctx) != ((SYMM_TY(f_block_idx_x(__ctx)))0ULL)))) {
return;
}
auto v_rank = symm_rank(v_stage);
auto v_world = symm_world(v_stage);
auto v_hi = ((symm_cast<symm_u64>(v_tag)) << 32);
symm_array<symm_u64, 2ULL> v_pkt = symm_array<symm_u64, 2ULL>{{(v_hi | (symm_cast<symm_u64>(((v_seed ^ v_rank))))), (v_hi | (symm_cast<symm_u64>((((v_seed ^ v_rank) ^ ((symm_u32)1ULL))))))}};
{
const symm_u32 t_end1 = v_world;
for (symm_u32 v_r = ((symm_u32)0ULL); v_r < t_end1; v_r += 1) {
symm_dsl_store_vec_volatile(symm_peer(v_stage, v_r), (v_rank * ((symm_u32)2ULL)), v_pkt);
}
}
symm_array<symm_array<symm_u64, 2ULL>, 8ULL> v_got = symm_dsl_gather_tagged2(__ctx, symm_local(v_stage), ((symm_u32)0ULL), ((symm_u32)2ULL), (((((symm_u32)1ULL) << v_world)) - ((symm_u32)1ULL)), v_tag);
{
const symm_u32 t_end2 = v_world;
for (symm_u32 v_r_2 = ((symm_u32)0ULL); v_r_2 < t_end2; v_r_2 += 1) {
auto v_g = SYMM_AT(__ctx, v_got, v_r_2, 15);
SYMM_AT(__ctx, v_out, (v_r_2 * ((symm_u32)2ULL)), 16) = SYMM_AT(__ctx, v_g, ((symm_u64)0ULL), 16);
SYMM_AT(__ctx, v_out, ((v_r_2 * ((symm_u32)2ULL)) + ((symm_u32)1ULL)), 17) = SYMM_AT(__ctx, v_g, ((symm_u64)1ULL), 17);
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, const symm_u64* v_stage_ptrs, const symm_u64* v_stage_pads, symm_u32 v_stage_rank, symm_u32 v_stage_world, symm_u64 v_stage_len, symm_u64 v_stage_local, symm_u64 v_stage_lpad, void* v_out_ptr, symm_u64 v_out_len, symm_u32 v_tag, symm_u32 v_seed) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_gather_packets(__ctx, symm_buf<symm_u64>{v_stage_ptrs, v_stage_pads, v_stage_rank, v_stage_world, v_stage_len, v_stage_local, v_stage_lpad}, symm_slice<symm_u64>{(symm_u64*)v_out_ptr, v_out_len}, v_tag, v_seed);
}
