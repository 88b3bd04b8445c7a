:: core :: compile_error!{
    "references are not supported in kernel bodies; pass values or slices"
}
#[allow (dead_code)]
mod copy {
}
