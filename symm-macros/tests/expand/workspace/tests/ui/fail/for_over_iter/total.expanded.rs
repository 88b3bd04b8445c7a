:: core :: compile_error!{
    "kernels loop only over ranges: `for i in a..b`, `a..=b` or `(a..b).step_by(s)`"
}
#[allow (dead_code)]
mod total {
}
