:: core :: compile_error!{
    "unsupported type `String` in a kernel; kernel values are f32, f64, u8, u16, u32, u64, usize, i32, i64, bool, bf16, f16, a generic type parameter, or arrays [T; N] of those"
}
#[allow (dead_code)]
fn tag (label : String , y : &mut [f32]) {
    let i = (block_idx_x () * block_dim_x () + thread_idx_x ()) as usize ;
    if i < y . len () {
        y [i] = label . len () as f32 ;
    }
}
