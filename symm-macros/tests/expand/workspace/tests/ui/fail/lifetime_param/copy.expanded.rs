:: core :: compile_error!{
    "kernels cannot have lifetime parameters"
}
#[allow (dead_code)]
fn copy < 'a > (x : &'a [f32] , y : &mut [f32]) {
    let i = (block_idx_x () * block_dim_x () + thread_idx_x ()) as usize ;
    if i < x . len () {
        y [i] = x [i] ;
    }
}
