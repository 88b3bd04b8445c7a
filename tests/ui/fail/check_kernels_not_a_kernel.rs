use symm::symm_kernel;

#[symm_kernel(device)]
fn twice(x: f32) -> f32 {
    x + x
}

// A device function is compiled with the kernels that call it.
symm::check_kernels!(twice);

fn main() {}
