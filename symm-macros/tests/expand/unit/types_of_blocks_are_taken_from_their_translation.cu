// CUDA C of #[symm_kernel] on the unit case `types_of_blocks_are_taken_from_their_translation`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_u32 v_n) {
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 1) = symm_min(([&]() -> SYMM_TY(([&]() {
auto v_t = v_n;
return v_t;
}())) {
auto v_t_2 = v_n;
return v_t_2;
}()), ((SYMM_TY(([&]() {
auto v_t = v_n;
return v_t;
}())))3ULL));
{
const SYMM_TY((([&]() {
auto v_u = v_n;
return v_u;
}()))) t_end1 = (([&]() -> SYMM_TY((([&]() {
auto v_u = v_n;
return v_u;
}()))) {
auto v_u_2 = v_n;
return v_u_2;
}()));
for (SYMM_TY((([&]() {
auto v_u = v_n;
return v_u;
}()))) v_i = ((SYMM_TY((([&]() {
auto v_u = v_n;
return v_u;
}()))))0ULL); v_i < t_end1; v_i += 1) {
SYMM_AT(__ctx, v_x, symm_cast<symm_u64>(v_i), 2) = (((v_i > ((SYMM_TY((([&]() {
auto v_u = v_n;
return v_u;
}()))))2ULL))) ? (([&]() -> SYMM_TY(SYMM_AT(__ctx, v_x, symm_cast<symm_u64>(v_i), 2)) {
auto v_s = v_i;
return v_s;
}())) : (((SYMM_TY(SYMM_AT(__ctx, v_x, symm_cast<symm_u64>(v_i), 2)))4ULL)));
}
}
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, symm_u32 v_n) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, v_n);
}
