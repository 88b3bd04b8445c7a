:: core :: compile_error!{
    "loop labels are not supported in kernels; use a flag variable to leave outer loops"
}
#[allow (dead_code)]
mod grid_copy {
}
