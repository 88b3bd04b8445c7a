:: core :: compile_error!{
    "the ordering must be written out as a constant, such as `LoadOrder::Relaxed`"
}
#[allow (dead_code)]
mod read_flag {
}
