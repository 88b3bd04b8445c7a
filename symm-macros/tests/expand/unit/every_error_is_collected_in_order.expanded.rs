:: core :: compile_error!{
    "`match` is not supported in kernels; use `if`/`else`"
}
:: core :: compile_error!{
    "`let` must bind a plain name; destructuring is not supported in kernels"
}
:: core :: compile_error!{
    "cannot infer this literal's type in a kernel; add a suffix (`0u32`, `1.0f32`) or a type (`let x: u32 = 0;`)"
}
:: core :: compile_error!{
    "`y` is not a local variable, parameter or const generic; kernels can only read those (pass other values as parameters)"
}
:: core :: compile_error!{
    "method `frobnicate` with 1 argument(s) is not supported in kernels; see the symm::dsl docs for the supported methods"
}
:: core :: compile_error!{
    "loop labels are not supported in kernels; use a flag variable to leave outer loops"
}
:: core :: compile_error!{
    "`break` with a label or value is not supported in kernels; set a variable and `break` from the innermost loop"
}
:: core :: compile_error!{
    "array lengths must be integer literals or const generic parameters"
}
:: core :: compile_error!{
    "array lengths must be integer literals or const generic parameters"
}
:: core :: compile_error!{
    "sub-slicing is not supported in kernels; pass offsets as integers"
}
:: core :: compile_error!{
    "closures are not supported in kernels; write a `#[symm_kernel(device)]` function"
}
:: core :: compile_error!{
    "unsupported path in a kernel; kernels read locals, parameters, const generics and `u32::MAX`-style constants"
}
:: core :: compile_error!{
    "the ordering must be written out as a constant, such as `LoadOrder::Relaxed`"
}
:: core :: compile_error!{
    "the scope must be written out as a constant: `Scope::Block`, `Scope::Gpu` or `Scope::System`"
}
:: core :: compile_error!{
    "unsupported type `[u8 ; 2]` in a kernel; kernel values are f32, f64, u8, u16, u32, u64, usize, i32, i64, bool, bf16, f16, a generic type parameter, or arrays [T; N] of those"
}
:: core :: compile_error!{
    "field access is not supported in kernels; pass the field as its own parameter (DSL handles offer methods such as `len()` and `rank()`)"
}
#[allow (dead_code)]
mod k {
}
