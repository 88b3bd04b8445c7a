:: core :: compile_error!{
    "field access is not supported in kernels; pass the field as its own parameter (DSL handles offer methods such as `len()` and `rank()`)"
}
#[allow (dead_code)]
mod scale {
}
