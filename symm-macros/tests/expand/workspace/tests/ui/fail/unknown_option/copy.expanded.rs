:: core :: compile_error!{
    "unknown option `global`; the only option is `device`"
}
#[allow (dead_code)]
fn copy (x : &[f32] , y : &mut [f32]) {
    let i = (block_idx_x () * block_dim_x () + thread_idx_x ()) as usize ;
    if i < x . len () {
        y [i] = x [i] ;
    }
}
