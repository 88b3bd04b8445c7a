use symm::dsl::*;
use symm::symm_kernel;

#[symm_kernel]
fn widths(x: &[f32], y: &mut [f32], buf: SymmBuf<f64>) {
    let i = thread_idx_x() * 4;
    let v = x.load_vec::<8>(i);
    y.store_vec(i, [v[0], v[1]]);
    let w = buf.local().load_vec_ready::<4>(0u32, 0.0f64, 0u32);
    y[i] = w[0] as f32;
}

fn main() {}
