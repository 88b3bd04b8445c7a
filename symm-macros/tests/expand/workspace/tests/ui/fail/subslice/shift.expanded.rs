:: core :: compile_error!{
    "sub-slicing is not supported in kernels; pass offsets as integers"
}
#[allow (dead_code)]
mod shift {
}
