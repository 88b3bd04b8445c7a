:: core :: compile_error!{
    "the scope must be written out as a constant: `Scope::Block`, `Scope::Gpu` or `Scope::System`"
}
#[allow (dead_code)]
mod publish {
}
