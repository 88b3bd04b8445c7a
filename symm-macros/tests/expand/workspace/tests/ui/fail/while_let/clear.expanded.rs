:: core :: compile_error!{
    "`while let` is not supported in kernels; use `while` with a condition"
}
#[allow (dead_code)]
mod clear {
}
