:: core :: compile_error!{
    "`SCALE` is not a local variable, parameter or const generic; kernels can only read those (pass other values as parameters)"
}
#[allow (dead_code)]
mod scale {
}
