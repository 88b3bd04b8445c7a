use symm::dsl::*;
use symm::symm_kernel;

const ORDER: LoadOrder = LoadOrder::Acquire;

#[symm_kernel]
fn read_flag(buf: SymmBuf<u32>, out: &mut [u32]) {
    if thread_idx_x() == 0 && block_idx_x() == 0 {
        out[0] = buf.local().load(0, ORDER, Scope::System);
    }
}

fn main() {}
