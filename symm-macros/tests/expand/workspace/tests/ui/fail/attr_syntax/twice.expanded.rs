:: core :: compile_error!{
    "expected `#[symm_kernel]` or `#[symm_kernel(device)]`"
}
#[allow (dead_code)]
fn twice (v : f32) -> f32 {
    v * 2.0f32
}
