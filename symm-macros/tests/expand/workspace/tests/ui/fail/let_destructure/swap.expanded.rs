:: core :: compile_error!{
    "`let` must bind a plain name; destructuring is not supported in kernels"
}
#[allow (dead_code)]
mod swap {
}
