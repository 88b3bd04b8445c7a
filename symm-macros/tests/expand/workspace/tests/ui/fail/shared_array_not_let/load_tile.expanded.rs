:: core :: compile_error!{
    "`shared_array` must be the whole initialiser of a `let`: `let s = shared_array::<f32, 256>();`"
}
#[allow (dead_code)]
mod load_tile {
}
