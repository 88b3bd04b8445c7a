:: core :: compile_error!{
    "cannot infer this literal's type in a kernel; add a suffix (`0u32`, `1.0f32`) or a type (`let x: u32 = 0;`)"
}
#[allow (dead_code)]
mod scale {
}
