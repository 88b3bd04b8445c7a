:: core :: compile_error!{
    "method `powi` with 1 argument(s) is not supported in kernels; see the symm::dsl docs for the supported methods"
}
#[allow (dead_code)]
mod square {
}
