:: core :: compile_error!{
    "kernels cannot take `self`; write a free function"
}
#[allow (dead_code)]
fn scale (&self , x : &[f32] , y : &mut [f32]) {
    let i = (block_idx_x () * block_dim_x () + thread_idx_x ()) as usize ;
    if i < x . len () {
        y [i] = 2.0f32 * x [i] ;
    }
}
