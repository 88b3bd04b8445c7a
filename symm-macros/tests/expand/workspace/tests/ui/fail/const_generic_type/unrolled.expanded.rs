:: core :: compile_error!{
    "const generics of kernels must be `usize`, `u32`, `u64`, `i32` or `bool`"
}
#[allow (dead_code)]
fn unrolled < const W : u8 > (x : &[f32] , y : &mut [f32]) {
    let i = (block_idx_x () * block_dim_x () + thread_idx_x ()) as usize ;
    if i < x . len () {
        y [i] = x [i] * (W as f32) ;
    }
}
