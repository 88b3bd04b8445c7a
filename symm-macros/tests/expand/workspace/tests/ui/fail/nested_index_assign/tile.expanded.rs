:: core :: compile_error!{
    "assigning to a nested index (`a[i][j] = v`) is not supported in kernels; use a flat array"
}
#[allow (dead_code)]
mod tile {
}
