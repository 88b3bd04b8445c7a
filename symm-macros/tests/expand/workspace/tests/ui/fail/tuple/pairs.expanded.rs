:: core :: compile_error!{
    "tuples are not supported in kernels; use separate variables or an array"
}
#[allow (dead_code)]
mod pairs {
}
