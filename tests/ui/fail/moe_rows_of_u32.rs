// An MoE layer's combine sums in f32: rows of u32 are refused at compile
// time, not at the first call.
use symm::kernels::moe::{Moe, MoeConfig};

fn plan(c: &symm::Comm) -> symm::Result<Moe<u32>> {
    Moe::<u32>::new(c, MoeConfig::new(16, 4, 2, 4))
}

fn main() {}
