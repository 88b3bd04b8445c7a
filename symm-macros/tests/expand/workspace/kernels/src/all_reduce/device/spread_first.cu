// CUDA C of #[symm_kernel] on `spread_first` in kernels/src/all_reduce/device.rs.
// Checked by `cargo test -p symm-macros`; SYMM_BLESS=1 rewrites it.

static __device__ __forceinline__ __attribute__((unused)) symm_u32 f_spread_first(const symm_kctx& __ctx) {
auto v_t = ((symm_u32)threadIdx.x);
return (((((((v_t / ((symm_u32)32ULL))) * ((symm_u32)gridDim.x)) + ((symm_u32)blockIdx.x))) * ((symm_u32)32ULL)) + symm_rem(v_t, ((symm_u32)32ULL)));
}
