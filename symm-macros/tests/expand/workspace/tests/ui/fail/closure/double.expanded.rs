:: core :: compile_error!{
    "closures are not supported in kernels; write a `#[symm_kernel(device)]` function"
}
#[allow (dead_code)]
mod double {
}
