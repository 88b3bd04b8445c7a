use symm::dsl::*;
use symm::symm_kernel;

const SCOPE: Scope = Scope::System;

#[symm_kernel]
fn publish(buf: SymmBuf<u32>, v: u32) {
    if thread_idx_x() == 0 && block_idx_x() == 0 {
        buf.local().store(1, v, StoreOrder::Relaxed, Scope::System);
        fence(SCOPE);
    }
}

fn main() {}
