:: core :: compile_error!{
    "kernels return nothing; write results into a `&mut [T]` or `SymmBuf<T>`"
}
#[allow (dead_code)]
fn first (x : &[f32]) -> f32 {
    x [(thread_idx_x () as usize) % x . len ()]
}
