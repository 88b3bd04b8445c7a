:: core :: compile_error!{
    "#[symm_kernel] goes on a function"
}
#[allow (dead_code)]
struct Scale {
    factor : f32 ,
}
