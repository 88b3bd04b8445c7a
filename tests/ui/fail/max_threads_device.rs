use symm::symm_kernel;

#[symm_kernel(device, max_threads = 256)]
fn twice(v: f32) -> f32 {
    v * 2.0f32
}

fn main() {}
