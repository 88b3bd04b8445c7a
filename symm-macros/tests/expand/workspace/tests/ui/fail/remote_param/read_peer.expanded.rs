:: core :: compile_error!{
    "`Remote` is not a kernel parameter type; kernels take `&[T]`, `&mut [T]`, `SymmBuf<T>` or scalars"
}
#[allow (dead_code)]
fn read_peer (src : Remote < f32 > , y : &mut [f32]) {
    let i = (block_idx_x () * block_dim_x () + thread_idx_x ()) as usize ;
    if i < y . len () {
        y [i] = src . load (i , LoadOrder :: Relaxed , Scope :: System) ;
    }
}
