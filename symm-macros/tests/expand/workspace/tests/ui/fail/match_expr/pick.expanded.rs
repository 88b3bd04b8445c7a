:: core :: compile_error!{
    "`match` is not supported in kernels; use `if`/`else`"
}
#[allow (dead_code)]
mod pick {
}
