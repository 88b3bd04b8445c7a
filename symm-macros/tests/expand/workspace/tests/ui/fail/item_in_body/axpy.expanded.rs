:: core :: compile_error!{
    "items (fn, struct, use, const, ...) cannot be declared inside a kernel; move them outside"
}
#[allow (dead_code)]
mod axpy {
}
