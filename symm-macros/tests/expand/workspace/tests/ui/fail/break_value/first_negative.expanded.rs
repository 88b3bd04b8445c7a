:: core :: compile_error!{
    "`break` with a label or value is not supported in kernels; set a variable and `break` from the innermost loop"
}
#[allow (dead_code)]
mod first_negative {
}
