:: core :: compile_error!{
    "macros are not supported in kernels (no println!, assert!, ...); write the code out"
}
#[allow (dead_code)]
mod copy {
}
