:: core :: compile_error!{
    "kernels cannot be `async`; write a plain `fn` (launches are already asynchronous)"
}
#[allow (dead_code)]
async fn copy (x : &[f32] , y : &mut [f32]) {
    let i = (block_idx_x () * block_dim_x () + thread_idx_x ()) as usize ;
    if i < x . len () {
        y [i] = x [i] ;
    }
}
