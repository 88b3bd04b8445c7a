:: core :: compile_error!{
    "`unsafe` blocks are not supported in kernels; the DSL has no unsafe operations, so write the code without `unsafe`"
}
#[allow (dead_code)]
mod copy {
}
