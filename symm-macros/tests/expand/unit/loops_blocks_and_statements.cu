// CUDA C of #[symm_kernel] on the unit case `loops_blocks_and_statements`.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) void k_k(const symm_kctx& __ctx, symm_slice<symm_u32> v_x, symm_u32 v_n, symm_u64 v_m) {
{
const symm_u32 t_end1 = v_n;
for (symm_u32 v_i = ((symm_u32)0ULL); v_i <= t_end1; v_i += 1) {
SYMM_AT(__ctx, v_x, symm_cast<symm_u64>(v_i), 1) = v_i;
}
}
{
const symm_u32 t_end2 = v_n;
for (symm_u32 t_i3 = ((symm_u32)0ULL); t_i3 < t_end2; t_i3 += ((symm_u32)2ULL)) {
SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 2) += ((SYMM_TY(SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 2)))1ULL);
}
}
{
const symm_u64 t_end4 = symm_cast<symm_u64>(symm_len(v_x));
for (symm_u64 v_j = v_m; v_j < t_end4; v_j += ((symm_u64)32ULL)) {
SYMM_AT(__ctx, v_x, symm_cast<symm_u64>(v_j), 3) <<= 1;
}
}
{
const symm_u64 t_end5 = symm_len(v_x);
for (symm_u64 v_k = ((symm_u64)1ULL); v_k < t_end5; v_k += 1) {
SYMM_AT(__ctx, v_x, v_k, 4) >>= ((symm_u32)2ULL);
}
}
auto v_c = ((symm_u32)0ULL);
while ((v_c < v_n)) {
v_c += ((symm_u32)1ULL);
if ((v_c == ((symm_u32)3ULL))) {
continue;
}
}
while (true) {
v_c -= ((symm_u32)1ULL);
if ((v_c == ((symm_u32)0ULL))) {
break;
}
}
auto v_v = ([&]() {
auto v_t = SYMM_AT(__ctx, v_x, ((symm_u64)0ULL), 8);
return v_t;
}());
symm_u32 v_w = ([&]() -> symm_u32 {
auto v_t_2 = SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 9);
return (v_t_2 * ((SYMM_TY(v_t_2))2ULL));
}());
(void)(symm_len(v_x));
symm_u32 v_z;
auto v_a = symm_array<symm_u32, 3ULL>{{((symm_u32)1ULL), ((symm_u32)2ULL), ((symm_u32)3ULL)}};
symm_array<symm_array<float, 2ULL>, 3ULL> v_g = symm_array_fill<symm_array<float, 2ULL>, 3ULL>(symm_array_fill<float, 2ULL>(0.0f));
auto v_e = symm_array_fill<symm_u64, 4ULL>(((symm_u64)0ULL));
if ((symm_len(v_x) == 0)) {
return;
}
else if ((v_n > ((symm_u32)4ULL))) {
SYMM_AT(__ctx, v_x, ((symm_u64)1ULL), 15) = v_v;
}
else {
SYMM_AT(__ctx, v_x, ((symm_u64)2ULL), 15) = v_w;
}
SYMM_AT(__ctx, v_x, ((symm_u64)3ULL), 16) = ((SYMM_AT(__ctx, v_a, ((symm_u64)1ULL), 16) + (symm_cast<symm_u32>(SYMM_AT(__ctx, v_e, ((symm_u64)2ULL), 16)))) + (symm_cast<symm_u32>(SYMM_AT(__ctx, SYMM_AT(__ctx, v_g, ((symm_u64)0ULL), 16), ((symm_u64)1ULL), 16))));
}

// The extern "C" entry ($...$ are filled at instantiation):
extern "C" __global__ void $ENTRY$(symm_u32* __status, symm_u64 __timeout, symm_u32 __rank, void* v_x_ptr, symm_u64 v_x_len, symm_u32 v_n, symm_u64 v_m) {
    symm_kctx __ctx = {__status, __timeout, __rank};
    k_k(__ctx, symm_slice<symm_u32>{(symm_u32*)v_x_ptr, v_x_len}, v_n, v_m);
}
