//! The bf16 GEMM through cuBLAS that `tp_decode` and `bench_overlap` run
//! where a GPU is.

/// `y = x · wᵀ` in bf16 through cuBLAS (`x` m × k, `w` n × k, `y` m × n,
/// row-major; f32 accumulation) on the handle's stream: the GEMM of
/// `tp_decode` and `bench_overlap`.
///
/// # Safety
/// `x`, `w` and `y` are device addresses of this rank's memory holding at
/// least m × k, n × k and m × n bf16 elements, alive until the GEMM has
/// run on `blas`'s stream.
pub(crate) unsafe fn gemm_bf16_xwt(
    blas: &symm::cudarc::cublas::CudaBlas,
    (x, w, y): (u64, u64, u64),
    (m, n, k): (usize, usize, usize),
) -> Result<(), symm::cudarc::cublas::result::CublasError> {
    use symm::cudarc::cublas::{result, sys};
    let (alpha, beta) = (1.0f32, 0.0f32);
    // SAFETY: the caller's promise for the three buffers; alpha and beta
    // are f32, as CUBLAS_COMPUTE_32F takes them.
    unsafe {
        result::gemm_ex(
            *blas.handle(),
            sys::cublasOperation_t::CUBLAS_OP_T,
            sys::cublasOperation_t::CUBLAS_OP_N,
            n as i32,
            m as i32,
            k as i32,
            (&alpha) as *const f32 as *const _,
            w as *const _,
            sys::cudaDataType::CUDA_R_16BF,
            k as i32,
            x as *const _,
            sys::cudaDataType::CUDA_R_16BF,
            k as i32,
            (&beta) as *const f32 as *const _,
            y as *mut _,
            sys::cudaDataType::CUDA_R_16BF,
            n as i32,
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    }
}
