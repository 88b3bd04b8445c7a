:: core :: compile_error!{
    "`if let` is not supported in kernels; use a condition"
}
#[allow (dead_code)]
mod mark {
}
