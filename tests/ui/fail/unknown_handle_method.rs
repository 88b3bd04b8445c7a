use symm::dsl::*;
use symm::symm_kernel;

// A handle method the DSL does not define: rustc says so, at the name,
// for the CPU body and for the method's device definition (handle
// methods outside the macro's table resolve by path, in
// `symm::dsl::methods`).
#[symm_kernel]
fn shift(buf: SymmBuf<f32>, out: &mut [u32]) {
    out[0] = buf.next_rank(1);
}

fn main() {}
