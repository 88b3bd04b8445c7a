:: core :: compile_error!{
    "struct literals are not supported in kernels; pass the fields as separate parameters or variables"
}
#[allow (dead_code)]
mod pairs {
}
