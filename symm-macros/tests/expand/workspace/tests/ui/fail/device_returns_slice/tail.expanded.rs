:: core :: compile_error!{
    "device functions return values, `Remote<T>` or arrays, not slices or buffers"
}
#[allow (dead_code)]
fn tail (x : &[f32]) -> &[f32] {
    x
}
